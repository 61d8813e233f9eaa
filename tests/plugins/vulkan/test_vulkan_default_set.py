"""ggml-vulkan's default device set (GGML_VK_VISIBLE_DEVICES unset), and MoltenVK beside Metal.

Line numbers are those of ggml-org/ggml ``src/ggml-vulkan/ggml-vulkan.cpp`` at commit d99724f2
(``ggml_vk_instance_init``). The loader answers are constructed from each driver's documented
values (driver ids, vendor ids, a shared deviceUUID), not recordings.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import pytest

from gpuscout import DeviceComparison, DeviceInfo, Scout
from gpuscout._machine.context import Context
from gpuscout.plugins.vulkan import enumeration as vk_discover
from gpuscout.plugins.vulkan.default_set import ggml_default_set, reported_indices
from gpuscout.plugins.vulkan.loader import ProbeResult, RawDevice
from gpuscout.sizes import GIB
from gpuscout.testing import ScoutFactory

AMD, NVIDIA, APPLE, MESA = 0x1002, 0x10DE, 0x106B, 0x10005
AMDVLK, RADV, NVIDIA_DRIVER, LLVMPIPE, MOLTENVK = 2, 3, 4, 13, 14
DISCRETE, INTEGRATED, VIRTUAL, CPU = 2, 1, 3, 4
W7900 = "ab" * 16


def gpu(index: int, **kw: Any) -> RawDevice:
    """A Vulkan 1.3 GPU with 16-bit storage and one device-local heap."""
    base: dict[str, Any] = dict(
        index=index,
        name="AMD Radeon PRO W7900",
        device_type=DISCRETE,
        vendor_id=AMD,
        device_id=0x7448,
        api_version=(1 << 22) | (3 << 12),
        driver_version=0,
        uuid=W7900,
        driver_id=RADV,
        driver_name="radv",
        storage_16bit=True,
        heaps=[[48 * GIB, 1]],
        pci=[0, 3, 0, 0],
    )
    return RawDevice(**{**base, **kw})


def amdvlk_and_radv() -> list[RawDevice]:
    """One W7900 through AMDVLK (raw index 0) and RADV (raw index 1)."""
    return [
        gpu(0, driver_id=AMDVLK, driver_name="AMD open-source driver", name="AMD Radeon PRO W7900"),
        gpu(1, name="AMD Radeon PRO W7900 (RADV NAVI31)"),
    ]


def lavapipe(index: int) -> RawDevice:
    return gpu(
        index,
        name="llvmpipe (LLVM 15.0.6, 256 bits)",
        device_type=CPU,
        vendor_id=MESA,
        driver_id=LLVMPIPE,
        driver_name="llvmpipe",
        uuid="6d657361" + "00" * 12,
        pci=None,
    )


@pytest.fixture
def scout_on(
    monkeypatch: pytest.MonkeyPatch, gpuscout_scout: ScoutFactory
) -> Callable[[list[RawDevice]], Scout]:
    """A Scout with the Vulkan plugin alone whose loader answers ``raws``."""

    def make(raws: list[RawDevice]) -> Scout:
        def probe(context: Context) -> ProbeResult:
            return ProbeResult(devices=raws, library="fake")

        monkeypatch.setattr(vk_discover, "probe", probe)
        return gpuscout_scout("vulkan", platform=sys.platform)

    return make


def test_radv_is_preferred_to_amdvlk_for_the_same_gpu() -> None:
    """ggml-vulkan.cpp lines 7520-7523 and 7550-7554: the same deviceUUID through two drivers
    keeps one, RADV (priority 1) over AMDVLK (priority 2)."""
    chosen = ggml_default_set(amdvlk_and_radv())
    assert chosen.used == [1]
    assert "device 1" in chosen.left_out[0]


def test_a_better_twin_moves_to_the_end_of_ggmls_list() -> None:
    """ggml-vulkan.cpp lines 7550-7553: the replaced device is removed and its twin pushed
    back, so ggml's Vulkan0 is the other card."""
    other = gpu(
        1,
        name="NVIDIA RTX A6000",
        vendor_id=NVIDIA,
        driver_id=NVIDIA_DRIVER,
        uuid="cd" * 16,
        pci=[0, 4, 0, 0],
    )
    raws = [gpu(0, driver_id=AMDVLK), other, gpu(2)]
    assert ggml_default_set(raws).used == [1, 2]


def test_cpu_devices_and_gpus_without_16_bit_storage_are_left_out() -> None:
    """ggml-vulkan.cpp line 7474 with ggml_vk_device_is_supported (line 18901): only discrete
    and integrated GPUs with storageBuffer16BitAccess."""
    raws = [lavapipe(0), gpu(1, storage_16bit=False, uuid="01" * 16), gpu(2)]
    chosen = ggml_default_set(raws)
    assert chosen.used == [2]
    assert "CPU" in chosen.left_out[0] and "storageBuffer16BitAccess" in chosen.left_out[1]


def test_without_a_supported_gpu_the_first_non_cpu_device_is_used() -> None:
    """ggml-vulkan.cpp lines 7573-7581: no GPU found, the first device that is not CPU-type."""
    raws = [lavapipe(0), gpu(1, device_type=VIRTUAL)]
    assert ggml_default_set(raws).used == [1]
    assert ggml_default_set([lavapipe(0)]).used == []


def test_two_moltenvk_devices_sharing_a_uuid_are_both_kept() -> None:
    """ggml-vulkan.cpp lines 7478-7493: the UUID dedupe is skipped when both are MoltenVK
    (MoltenVK#2683: two GPUs of one card can share a UUID)."""
    raws = [gpu(i, vendor_id=AMD, driver_id=MOLTENVK, driver_name="MoltenVK") for i in (0, 1)]
    assert ggml_default_set(raws).used == [0, 1]


def test_an_integrated_gpu_beside_a_discrete_one_is_noted_as_idle() -> None:
    """llama.cpp src/llama.cpp llama_model_load_from_file_impl ("add integrated GPUs only if no
    other devices were found"): the APU stays in ggml's set but gets a note."""
    raws = [gpu(0, name="AMD Radeon Graphics", device_type=INTEGRATED, uuid="02" * 16), gpu(1)]
    order, notes, unused = reported_indices(raws, None)
    assert order == [0, 1] and unused == {}
    assert len(notes) == 1 and "'AMD Radeon Graphics'" in notes[0]


def test_an_integrated_gpu_alone_or_beside_another_integrated_one_gets_no_idle_note() -> None:
    """The loader's rule puts integrated GPUs to work when no other GPU is found, so without a
    discrete GPU in ggml's set nothing is said to be idle (llama.cpp llama_model_load_from_file_impl)."""
    apu = gpu(0, name="AMD Radeon Graphics", device_type=INTEGRATED, uuid="02" * 16)
    other = gpu(1, name="Intel(R) Graphics", device_type=INTEGRATED, uuid="03" * 16)
    assert (reported_indices([apu], None)[1], reported_indices([apu, other], None)[1]) == ([], [])


def test_the_variable_set_reports_exactly_what_it_names() -> None:
    """ggml-vulkan.cpp lines 7442-7457: a set GGML_VK_VISIBLE_DEVICES skips the default set."""
    assert reported_indices(amdvlk_and_radv(), "0") == ([0], [], {})


def test_discovery_reports_radv_as_ggmls_vulkan0_and_selects_it_by_raw_index(
    scout_on: Callable[[list[RawDevice]], Scout],
) -> None:
    """ggml-vulkan.cpp lines 7550-7554: the RADV record is reported first (id 0, ggml's
    Vulkan0) and selecting it writes its raw index 1; the AMDVLK twin follows, noted."""
    scout = scout_on(amdvlk_and_radv())
    found = scout.discover()
    by_id = {d.id: d for d in found.devices}
    assert (by_id["0"].filter_id, by_id["1"].filter_id) == ("1", "0")
    assert scout.visible_env([by_id["0"]]) == {"GGML_VK_VISIBLE_DEVICES": "1"}
    (report,) = [p for p in found.plugins if p.name == "vulkan"]
    assert "id 1 'AMD Radeon PRO W7900' (raw index 0): the same GPU" in report.note
    assert "driver radv ggml prefers" in report.note
    # The AMDVLK twin says why a child would not use it, and ranks after the RADV record.
    assert by_id["0"].unused_reason == ""
    assert by_id["1"].unused_reason.startswith("not in ggml-vulkan's default device set: the same")
    assert [d.id for d in found.devices] == ["0", "1"]


def test_a_device_outside_the_default_set_is_reported_with_a_note(
    scout_on: Callable[[list[RawDevice]], Scout],
) -> None:
    """ggml-vulkan.cpp line 7474: lavapipe is never in ggml's default set; it is still
    reported (include_software), after ggml's devices, and named in the note."""
    found = scout_on([lavapipe(0), gpu(1)]).discover(include_software=True)
    assert sorted((d.id, d.filter_id) for d in found.devices) == [("0", "1"), ("1", "0")]
    (report,) = [p for p in found.plugins if p.name == "vulkan"]
    assert "id 1 'llvmpipe (LLVM 15.0.6, 256 bits)' (raw index 0): a CPU device" in report.note


# -- MoltenVK beside Metal ------------------------------------------------------------------------


def metal_m2_max() -> DeviceInfo:
    return DeviceInfo(
        id="0",
        library="Metal",
        name="Apple M2 Max",
        description="Apple M2 Max",
        filter_id="0",
        integrated=True,
        total_memory=22906503168,
        free_memory=22906503168,
        uuid="0x100000a4c",
    )


def moltenvk_m2_max() -> DeviceInfo:
    """MoltenVK names the device after its MTLDevice and reports it INTEGRATED_GPU; its heap
    need not equal Metal's recommendedMaxWorkingSetSize."""
    return DeviceInfo(
        id="0",
        library="Vulkan",
        name="Apple M2 Max",
        description="Apple M2 Max",
        filter_id="0",
        integrated=True,
        total_memory=32 * GIB,
        free_memory=32 * GIB,
        uuid="0000106b-0000-0000-0000-000000000000",
    )


def test_moltenvk_and_metal_views_of_one_apple_gpu_are_duplicates(gpuscout_scout: ScoutFactory) -> None:
    """Same name, both unified memory, Metal against Vulkan: one GPU (the core asks because the
    two share the duplicate key)."""
    scout = gpuscout_scout("vulkan")
    assert scout.compare(metal_m2_max(), moltenvk_m2_max()) is DeviceComparison.DUPLICATE


def test_a_discrete_gpu_is_not_matched_to_metal_by_name_alone(gpuscout_scout: ScoutFactory) -> None:
    """Without unified memory on both sides the name decides nothing."""
    scout = gpuscout_scout("vulkan")
    discrete = moltenvk_m2_max().evolve(integrated=False)
    assert scout.compare(metal_m2_max(), discrete) is DeviceComparison.UNIQUE


def test_the_metal_record_survives_its_moltenvk_twin(scout_with: Callable[..., Scout]) -> None:
    """Neither library is preferred, so the first found stays: Metal, merged before Vulkan."""
    found = scout_with([metal_m2_max(), moltenvk_m2_max()]).discover()
    assert [d.library for d in found.devices] == ["Metal"]
    assert [(x.device.library, x.reason) for x in found.dropped] == [("Vulkan", "duplicate")]
