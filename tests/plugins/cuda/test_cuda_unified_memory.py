"""Unified-memory NVIDIA parts (Jetson Orin on JetPack 6, GB10): their memory is the system's."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuscout.sizes import KIB

if TYPE_CHECKING:
    from gpuscout.testing import RootFactory
    from tests.plugins.cuda.conftest import CudaScout, FakeNvml, RecordedProbe, Recording

#: tegrastats on an AGX Orin 64GB prints RAM x/62841MB: MemTotal in the right shape.
ORIN_MEMINFO = "MemTotal:       64349184 kB\nMemFree:        50000000 kB\nMemAvailable:   58000000 kB\n"
#: The CUDA driver probe on a Jetson: no PCI address (0 0 0), INTEGRATED 1.
ORIN_PROBE = "0 0 0 1\n"


def test_orin_without_pci_figures_is_listed_not_skipped(
    fake_nvml: FakeNvml, cuda_scout: CudaScout, gpuscout_root: RootFactory, recorded_probe: RecordedProbe
) -> None:
    """NVML's NotSupported for the PCI info of "Orin (nvgpu)" leaves the GPU in, without a pci_id."""
    recorded_probe(0, ORIN_PROBE)
    fake_nvml("jetson_orin_jp6")
    root = gpuscout_root({"/proc/meminfo": ORIN_MEMINFO})
    (device,) = cuda_scout(root=str(root)).discover().devices
    assert (device.name, device.pci_id, device.compute) == ("Orin (nvgpu)", "", "8.7")


def test_orin_takes_total_and_free_from_the_system_and_says_it_is_shared(
    fake_nvml: FakeNvml, cuda_scout: CudaScout, gpuscout_root: RootFactory, recorded_probe: RecordedProbe
) -> None:
    """Memory Not Supported: total is MemTotal, free MemAvailable, the record shared, a note says why."""
    recorded_probe(0, ORIN_PROBE)
    fake_nvml("jetson_orin_jp6")
    root = gpuscout_root({"/proc/meminfo": ORIN_MEMINFO})
    (device,) = cuda_scout(root=str(root)).discover().devices
    assert (device.integrated, device.shared_memory) == (True, True)
    assert (device.total_memory, device.free_memory) == (64349184 * KIB, 58000000 * KIB)
    assert any("Not Supported" in n and "MemAvailable" in n for n in device.notes)


def test_a_pci_query_that_fails_otherwise_still_skips_the_gpu(
    fake_nvml: FakeNvml, cuda_scout: CudaScout, recording: Recording, no_probe: None
) -> None:
    """Only NotSupported means "no PCI address": NoPermission on the PCI query skips that GPU."""
    data = recording("h200")
    data["gpus"][0]["pci"] = {"error": "NoPermission"}
    fake_nvml(data)
    scout = cuda_scout()
    assert scout.discover().devices == []


def test_a_discrete_card_is_never_shared(fake_nvml: FakeNvml, cuda_scout: CudaScout, no_probe: None) -> None:
    """An H200 with its own memory figures is discrete and not shared."""
    fake_nvml("h200")
    (device,) = cuda_scout().discover().devices
    assert (device.integrated, device.shared_memory, device.notes) == (False, False, ())


def test_gb10_whose_nvml_reports_the_system_s_memory_is_asked_about_and_shared(
    fake_nvml: FakeNvml,
    cuda_scout: CudaScout,
    recording: Recording,
    gpuscout_root: RootFactory,
    recorded_probe: RecordedProbe,
) -> None:
    """An NVML total near MemTotal makes the driver say INTEGRATED 1: shared, free the system's."""
    data = recording("gb10")
    total = 128501256192  # leptonai/gpud#1170: NVML's total on a GB10 driver that answers
    data["gpus"][0]["memory_v2"] = {"total": total, "reserved": 0, "free": 7976902656, "used": 6910320640}
    fake_nvml(data)
    asked = recorded_probe(0, "15 1 0 1\n")
    meminfo = "MemTotal:       127600748 kB\nMemAvailable:   118566368 kB\n"  # XuehaiPan/nvitop#208
    root = gpuscout_root({"/proc/meminfo": meminfo})
    (device,) = cuda_scout(root=str(root)).discover().devices
    assert len(asked) == 1
    assert (device.integrated, device.shared_memory) == (True, True)
    assert (device.total_memory, device.free_memory) == (total, 118566368 * KIB)
