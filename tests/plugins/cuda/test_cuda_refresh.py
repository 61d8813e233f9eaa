"""CUDA refresh through the recorded NVML stand-in: fresh free memory, or stale (never 0)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuscout.sizes import GIB
from gpuscout.testing import RootFactory

if TYPE_CHECKING:
    from tests.plugins.cuda.conftest import CudaScout, FakeNvml, RecordedProbe, Recording

MEMINFO = (
    "MemTotal:       124908280 kB\nMemFree:         90000000 kB\n"
    "MemAvailable:   {available} kB\nSwapFree:        16000000 kB\n"
)


def test_refresh_answers_nvml_free_memory_and_not_stale(
    fake_nvml: FakeNvml, cuda_scout: CudaScout, recording: Recording, no_probe: None
) -> None:
    """A refresh reads NVML's free memory again; the device is not stale."""
    data = recording("h200")
    fake_nvml(data)
    scout = cuda_scout()
    (before,) = scout.discover().devices
    data["gpus"][0]["memory_v2"]["free"] = 90 * GIB
    (after,) = scout.refresh([before])
    assert after == before.evolve(free_memory=90 * GIB)
    assert after.free_memory_stale is False


def test_refresh_reads_each_mig_instance_by_its_uuid(
    fake_nvml: FakeNvml, cuda_scout: CudaScout, recording: Recording, no_probe: None
) -> None:
    """MIG instances are refreshed from their own memory info."""
    data = recording("a100_mig")
    fake_nvml(data)
    scout = cuda_scout()
    devices = scout.discover().devices
    data["gpus"][0]["mig"][1]["memory_v2"]["free"] = 1 * GIB
    fresh = {d.id: (d.free_memory, d.free_memory_stale) for d in scout.refresh(devices)}
    assert fresh["MIG-2a7b9e4d-8c13-5f6e-a0d2-7e4b1c9f3a58"] == (1 * GIB, False)
    assert fresh["GPU-1b6f3d8e-2a4c-4e9b-9c5a-8d3f6b1e7a24"] == (42491445248, False)


def test_a_gpu_nvml_no_longer_finds_is_stale(
    fake_nvml: FakeNvml, cuda_scout: CudaScout, recording: Recording, no_probe: None
) -> None:
    """A GPU that is gone (NotFound by UUID) keeps its value, stale; the other is refreshed."""
    data = recording("h100_sxm_x2")
    fake_nvml(data)
    scout = cuda_scout()
    devices = scout.discover().devices
    gone = data["gpus"][0]["uuid"]
    data["gpus"][0]["uuid"] = "GPU-00000000-0000-0000-0000-000000000000"
    fresh = {d.id: d for d in scout.refresh(devices)}
    old = {d.id: d for d in devices}
    assert fresh[gone] == old[gone].evolve(free_memory_stale=True)
    assert [d.free_memory_stale for i, d in fresh.items() if i != gone] == [False]


def test_a_lost_gpu_is_stale_not_zero(
    fake_nvml: FakeNvml, cuda_scout: CudaScout, recording: Recording, no_probe: None
) -> None:
    """GpuIsLost from memory info leaves the previous free memory, stale."""
    data = recording("h200")
    fake_nvml(data)
    scout = cuda_scout()
    (before,) = scout.discover().devices
    data["gpus"][0]["memory_v2"] = {"error": "GpuIsLost"}
    assert scout.refresh([before]) == [before.evolve(free_memory_stale=True)]


def test_nvml_failing_to_start_leaves_cuda_devices_stale(
    fake_nvml: FakeNvml, cuda_scout: CudaScout, recording: Recording, no_probe: None
) -> None:
    """nvmlInit failing at refresh time keeps every CUDA device as it was, stale."""
    data = recording("h200")
    fake_nvml(data)
    scout = cuda_scout()
    (before,) = scout.discover().devices
    data["init"] = "DriverNotLoaded"
    assert scout.refresh([before]) == [before.evolve(free_memory_stale=True)]


def test_unified_memory_gpu_refreshes_from_system_memory(
    fake_nvml: FakeNvml, cuda_scout: CudaScout, gpuscout_root: RootFactory, recorded_probe: RecordedProbe
) -> None:
    """A GB10 (no NVML memory info) is refreshed from MemAvailable read again."""
    recorded_probe(0, "15 1 0 1\n")
    fake_nvml("gb10")
    root = gpuscout_root({"/proc/meminfo": MEMINFO.format(available=119000000)})
    scout = cuda_scout(root=str(root))
    (before,) = scout.discover().devices
    (root / "proc" / "meminfo").write_text(MEMINFO.format(available=50000000))
    (after,) = scout.refresh([before])
    assert (after.free_memory, after.free_memory_stale) == (50000000 * 1024, False)


def test_unified_memory_gpu_without_system_memory_is_stale_not_zero(
    fake_nvml: FakeNvml, cuda_scout: CudaScout, gpuscout_root: RootFactory, recorded_probe: RecordedProbe
) -> None:
    """When /proc/meminfo cannot be read any more, the GB10 keeps its value, stale."""
    recorded_probe(0, "15 1 0 1\n")
    fake_nvml("gb10")
    root = gpuscout_root({"/proc/meminfo": MEMINFO.format(available=119000000)})
    scout = cuda_scout(root=str(root))
    (before,) = scout.discover().devices
    (root / "proc" / "meminfo").unlink()
    (after,) = scout.refresh([before])
    assert after == before.evolve(free_memory_stale=True)
    assert after.free_memory == 119000000 * 1024
