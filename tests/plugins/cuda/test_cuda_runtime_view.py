"""What the CUDA runtime in a child really sees: one MIG instance per process, runtime-sized
memory, the CUDA version libcuda reports, and "integrated" asked of the driver."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from gpuscout import Scout
from gpuscout._selection.verify import compare_views
from gpuscout.plugin import SelectionRefused
from gpuscout.plugins.cuda.visibility import GpuSlot, MigSlot, one_process
from gpuscout.sizes import GIB
from gpuscout.testing import RootFactory

if TYPE_CHECKING:
    from tests.plugins.cuda.conftest import CudaScout, FakeNvml, RecordedProbe, Recording

#: The A100 MIG box (recorded/a100_mig.json): GPU 0 at bus 7 in MIG mode, GPU 1 at bus 0x0f.
MIG_3G = "MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f"
MIG_2G = "MIG-2a7b9e4d-8c13-5f6e-a0d2-7e4b1c9f3a58"
WHOLE = "GPU-1b6f3d8e-2a4c-4e9b-9c5a-8d3f6b1e7a24"
MIG_PARENT = "GPU-9d4e6b2a-5c8f-4a1d-b3e7-6f2a8c1d4e95"
SLOTS = [GpuSlot(MIG_PARENT, True, (MigSlot(MIG_3G, 1, 0), MigSlot(MIG_2G, 5, 0))), GpuSlot(WHOLE)]
MEMINFO = (
    "MemTotal:       124908280 kB\nMemFree:         90000000 kB\n"
    "MemAvailable:   119000000 kB\nSwapFree:        16000000 kB\n"
)
#: The CUDA driver probe on a DGX Spark: domain 15, bus 1, device 0, INTEGRATED 1 (llama.cpp#17537).
GB10_PROBE = "15 1 0 1\n"


def _ids(scout: Scout) -> list[str]:
    return [d.id for d in scout.discover().devices]


def _note(scout: Scout) -> str:
    return scout.discover().report("cuda").note


# -- MIG: one instance per process ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("named", "expected", "why"),
    [
        ([MIG_3G, MIG_2G], [MIG_3G], "two MIG instances: the first in enumeration order"),
        ([MIG_2G, MIG_3G], [MIG_2G], "list order decides which MIG instance is first"),
        ([WHOLE, MIG_2G], [MIG_2G], "a whole GPU beside a MIG instance is not seen (assumption)"),
        ([WHOLE], [WHOLE], "without MIG instances nothing changes"),
        ([], [], "nothing stays nothing"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_one_process_sees_one_mig_instance(named: list[str], expected: list[str], why: str) -> None:
    """The MIG guide's rule: a CUDA 11/12 process "can only enumerate a single MIG instance"."""
    assert one_process(named, SLOTS) == expected


def test_unset_env_lists_every_mig_instance_and_says_which_one_a_process_sees(
    fake_nvml: FakeNvml, cuda_scout: CudaScout, no_probe: None
) -> None:
    """Unset: every instance is listed (one child each); the runtime would pick the first (MIG guide)."""
    fake_nvml("a100_mig")
    scout = cuda_scout()
    assert sorted(_ids(scout)) == sorted([MIG_3G, MIG_2G, WHOLE])
    assert f"sees only {MIG_3G}" in _note(scout)


def test_two_mig_uuids_in_visible_devices_show_only_the_first(
    fake_nvml: FakeNvml, cuda_scout: CudaScout, no_probe: None
) -> None:
    """Two MIG UUIDs give device_count() == 1, the first named (pytorch#92315, MIG guide)."""
    fake_nvml("a100_mig")
    scout = cuda_scout({"CUDA_VISIBLE_DEVICES": f"{MIG_2G},{MIG_3G}"})
    assert _ids(scout) == [MIG_2G]
    assert "one MIG instance per process" in _note(scout)


def test_index_of_a_gpu_in_mig_mode_shows_its_first_instance(
    fake_nvml: FakeNvml, cuda_scout: CudaScout, no_probe: None
) -> None:
    """An index naming a GPU in MIG mode makes the runtime pick its first instance (MIG guide)."""
    fake_nvml("a100_mig")
    assert _ids(cuda_scout({"CUDA_VISIBLE_DEVICES": "0"})) == [MIG_3G]


def test_mig_instance_beside_a_whole_gpu_is_seen_alone(
    fake_nvml: FakeNvml, cuda_scout: CudaScout, no_probe: None
) -> None:
    """A MIG instance and a whole GPU: the instance alone (our reading of the MIG guide)."""
    fake_nvml("a100_mig")
    assert _ids(cuda_scout({"CUDA_VISIBLE_DEVICES": f"{MIG_3G},1"})) == [MIG_3G]


def test_visible_env_of_one_mig_instance_names_it(
    fake_nvml: FakeNvml, cuda_scout: CudaScout, no_probe: None
) -> None:
    """One MIG instance is selected by its MIG UUID (CUDA Programming Guide, MIG-<uuid>)."""
    fake_nvml("a100_mig")
    scout = cuda_scout()
    mig = next(d for d in scout.discover().devices if d.id == MIG_2G)
    assert scout.visible_env([mig]) == {"CUDA_VISIBLE_DEVICES": MIG_2G}


def test_visible_env_of_two_mig_instances_is_refused(
    fake_nvml: FakeNvml, cuda_scout: CudaScout, no_probe: None
) -> None:
    """Two MIG instances never share one variable: one process sees one (MIG guide), so the
    selection is refused with what to do instead, not written as a variable CUDA would cut."""
    fake_nvml("a100_mig")
    scout = cuda_scout()
    migs = [d for d in scout.discover().devices if d.id.startswith("MIG-")]
    with pytest.raises(SelectionRefused) as refused:
        scout.visible_env(migs)
    message = str(refused.value)
    assert message.startswith("cuda: a CUDA process sees one MIG instance")
    assert f"gpuscout exec --device {migs[0].filter_id or migs[0].id} -- ..." in message
    # The plugin is not at fault: it stays ok and is asked again.
    assert next(r for r in scout.reports if r.name == "cuda").status == "ok"
    assert scout.visible_env(migs[:1]) == {"CUDA_VISIBLE_DEVICES": migs[0].filter_id or migs[0].id}


def test_visible_env_of_a_mig_instance_and_a_whole_gpu_is_refused(
    fake_nvml: FakeNvml, cuda_scout: CudaScout, no_probe: None
) -> None:
    """A MIG instance hides every other device from its process (assumption, MIG guide)."""
    fake_nvml("a100_mig")
    scout = cuda_scout()
    chosen = [d for d in scout.discover().devices if d.id in (MIG_3G, WHOLE)]
    with pytest.raises(SelectionRefused):
        scout.visible_env(chosen)


def test_verify_of_one_mig_instance_is_ok(fake_nvml: FakeNvml, cuda_scout: CudaScout, no_probe: None) -> None:
    """The child started with one MIG UUID sees exactly that instance (the runtime's rule)."""
    fake_nvml("a100_mig")
    parent = cuda_scout()
    mig = next(d for d in parent.discover().devices if d.id == MIG_3G)
    child = cuda_scout(parent.visible_env([mig]))
    assert compare_views([mig], child.discover().devices).ok


# -- memory, driver version, integrated ----------------------------------------------------------


def test_h200_total_is_nvml_total_less_reserved(
    fake_nvml: FakeNvml, cuda_scout: CudaScout, no_probe: None
) -> None:
    """The H200's total is cuDeviceTotalMem's: NVML v2 total less reserved (ggml, ollama#18201)."""
    fake_nvml("h200")
    (device,) = cuda_scout().discover().devices
    assert device.total_memory == 150754820096 - 613416960
    assert 0.5 * GIB < 150754820096 - device.total_memory < 0.7 * GIB


def test_free_memory_never_exceeds_the_runtime_total(
    fake_nvml: FakeNvml, cuda_scout: CudaScout, recording: Recording, no_probe: None
) -> None:
    """Free is capped by the reserved-less total (v2: total = reserved + used + free)."""
    data = recording("h200")
    data["gpus"][0]["memory_v2"]["free"] = data["gpus"][0]["memory_v2"]["total"]
    fake_nvml(data)
    (device,) = cuda_scout().discover().devices
    assert device.free_memory == device.total_memory


def test_cuda_version_is_what_cu_driver_get_version_says(
    fake_nvml: FakeNvml, cuda_scout: CudaScout, recording: Recording, no_probe: None
) -> None:
    """Under cuda-compat the _v2 call (libcuda's cuDriverGetVersion) wins over v1 (NVML docs)."""
    data = recording("a100_mig")
    data["driver"]["cuda_v2"] = 12080
    fake_nvml(data)
    assert {d.driver for d in cuda_scout().discover().devices} == {"12.8"}


def test_cuda_version_falls_back_to_v1_without_the_v2_call(
    fake_nvml: FakeNvml, cuda_scout: CudaScout, recording: Recording, no_probe: None
) -> None:
    """A driver without nvmlSystemGetCudaDriverVersion_v2 (FunctionNotFound) answers by v1."""
    data = recording("h200")
    data["driver"]["cuda_v2"] = {"error": "FunctionNotFound"}
    fake_nvml(data)
    (device,) = cuda_scout().discover().devices
    assert device.driver == "12.8"


def test_gb10_free_memory_is_free_huge_pages_when_hugetlb_is_set_up(
    fake_nvml: FakeNvml, cuda_scout: CudaScout, gpuscout_root: RootFactory, recorded_probe: RecordedProbe
) -> None:
    """With HugePages_Total > 0 free is HugePages_Free x Hugepagesize (ggml's UMA rule)."""
    recorded_probe(0, GB10_PROBE)
    fake_nvml("gb10")
    meminfo = MEMINFO + "HugePages_Total:   50000\nHugePages_Free:    40000\nHugepagesize:    2048 kB\n"
    root = gpuscout_root({"/proc/meminfo": meminfo})
    (device,) = cuda_scout(root=str(root)).discover().devices
    assert (device.integrated, device.free_memory) == (True, 40000 * 2048 * 1024)


def test_gb10_free_memory_is_mem_available_without_hugetlb(
    fake_nvml: FakeNvml, cuda_scout: CudaScout, gpuscout_root: RootFactory, recorded_probe: RecordedProbe
) -> None:
    """HugePages_Total 0 leaves MemAvailable as the free figure (ggml's UMA rule)."""
    recorded_probe(0, GB10_PROBE)
    fake_nvml("gb10")
    meminfo = MEMINFO + "HugePages_Total:       0\nHugePages_Free:        0\nHugepagesize:    2048 kB\n"
    root = gpuscout_root({"/proc/meminfo": meminfo})
    (device,) = cuda_scout(root=str(root)).discover().devices
    assert device.free_memory == 119000000 * 1024


def test_gpu_the_driver_calls_discrete_is_not_integrated(
    fake_nvml: FakeNvml, cuda_scout: CudaScout, gpuscout_root: RootFactory, recorded_probe: RecordedProbe
) -> None:
    """CU_DEVICE_ATTRIBUTE_INTEGRATED 0 decides, whatever NVML's memory info refuses."""
    recorded_probe(0, "15 1 0 0\n")
    fake_nvml("gb10")
    root = gpuscout_root({"/proc/meminfo": MEMINFO})
    scout = cuda_scout(root=str(root))
    (device,) = scout.discover().devices
    assert (device.integrated, device.total_memory, device.free_memory_unknown) == (False, 0, True)
    assert "no memory figures for a discrete NVIDIA device" in _note(scout)


def test_integrated_is_guessed_with_a_note_when_the_driver_cannot_say(
    fake_nvml: FakeNvml, cuda_scout: CudaScout, gpuscout_root: RootFactory, recorded_probe: RecordedProbe
) -> None:
    """Without the driver's answer, unsupported NVML memory info still means integrated, noted."""
    recorded_probe(3, "error: cuInit returned 100\n")
    fake_nvml("gb10")
    root = gpuscout_root({"/proc/meminfo": MEMINFO})
    scout = cuda_scout(root=str(root))
    (device,) = scout.discover().devices
    assert (device.integrated, device.total_memory) == (True, 124908280 * 1024)
    assert "could not say whether it is integrated" in _note(scout)


def test_one_probe_child_answers_order_and_integrated(
    fake_nvml: FakeNvml,
    cuda_scout: CudaScout,
    recording: Recording,
    gpuscout_root: RootFactory,
    recorded_probe: RecordedProbe,
) -> None:
    """A mixed box with a unified-memory GPU starts the driver probe once, for both answers."""
    data = recording("rtx4090_h100_pcie")
    data["gpus"].append(recording("gb10")["gpus"][0])
    fake_nvml(data)
    timeouts = recorded_probe(0, "0 65 0 0\n0 1 0 0\n15 1 0 1\n")
    root = gpuscout_root({"/proc/meminfo": MEMINFO})
    devices = cuda_scout(root=str(root)).discover().devices
    assert len(timeouts) == 1
    assert [d.integrated for d in devices if "GB10" in d.name] == [True]
