"""Metal records from stand-ins for pyobjc's MTLDevice fed values seen on Apple silicon.

recommendedMaxWorkingSetSize values are the MiB figures llama.cpp's Metal init printed on those
machines in public issue logs, as bytes: M1 16 GB 10922.67 MiB (ise-uiuc/magicoder#19), M2 Max
32 GB 21845.34 MiB (ollama/ollama#434), 64 GB Max 49152.00 MiB (ggml-org/llama.cpp#1870). The
M2 Ultra 192 GB value is derived (0.75 x RAM, the rule for large machines), not a recording.
registryID values are illustrative.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable

import pytest

from gpuscout import Scout
from gpuscout.plugins.metal.enumeration import all_devices, device_info
from gpuscout.sizes import GIB, MIB
from gpuscout.testing import ScoutFactory


class FakeMetalDevice:
    """A stand-in for an MTLDevice: the pyobjc methods the plugin calls, fixed values."""

    def __init__(
        self,
        name: str,
        working_set: int,
        allocated: int = 0,
        registry_id: int = 0x100000A4C,
        unified: bool = True,
    ) -> None:
        self._name, self._working_set, self._allocated = name, working_set, allocated
        self._registry_id, self._unified = registry_id, unified

    def name(self) -> str:
        return self._name

    def registryID(self) -> int:
        return self._registry_id

    def hasUnifiedMemory(self) -> bool:
        return self._unified

    def recommendedMaxWorkingSetSize(self) -> int:
        return self._working_set

    def currentAllocatedSize(self) -> int:
        return self._allocated


def fake_metal_device_recorded_m1_16gb(allocated: int = 0) -> FakeMetalDevice:
    return FakeMetalDevice("Apple M1", 11453251584, allocated, 0x1000005E3)


def fake_metal_device_recorded_m2_max_32gb() -> FakeMetalDevice:
    return FakeMetalDevice("Apple M2 Max", 22906503168, 0, 0x100000A4C)


def fake_metal_device_recorded_m2_max_64gb() -> FakeMetalDevice:
    return FakeMetalDevice("Apple M2 Max", 49152 * MIB, 0, 0x100000A4C)


def fake_metal_device_derived_m2_ultra_192gb() -> FakeMetalDevice:
    return FakeMetalDevice("Apple M2 Ultra", 147456 * MIB, 0, 0x1000008F1)


class FakeMetalFramework(types.ModuleType):
    """A stand-in for pyobjc's ``Metal`` module with the two device functions."""

    def __init__(
        self, all_devices: list[FakeMetalDevice] | None, default: FakeMetalDevice | None = None
    ) -> None:
        super().__init__("Metal")
        self._all, self._default = all_devices, default

    def MTLCopyAllDevices(self) -> list[FakeMetalDevice] | None:
        return self._all

    def MTLCreateSystemDefaultDevice(self) -> FakeMetalDevice | None:
        return self._default


MacosScout = Callable[[types.ModuleType | None], Scout]


@pytest.fixture
def macos_scout(monkeypatch: pytest.MonkeyPatch, gpuscout_scout: ScoutFactory) -> MacosScout:
    """``macos_scout(framework)``: the metal plugin alone on darwin, ``import Metal`` giving
    ``framework`` (None: the import fails)."""

    def make(framework: types.ModuleType | None) -> Scout:
        monkeypatch.setitem(sys.modules, "Metal", framework)
        return gpuscout_scout("metal", env={}, platform="darwin")

    return make


@pytest.mark.parametrize(
    ("fake", "total"),
    [
        (fake_metal_device_recorded_m1_16gb(), 11453251584),
        (fake_metal_device_recorded_m2_max_32gb(), 22906503168),
        (fake_metal_device_recorded_m2_max_64gb(), 51539607552),
        (fake_metal_device_derived_m2_ultra_192gb(), 154618822656),
    ],
    ids=["m1-16gb", "m2-max-32gb", "m2-max-64gb", "m2-ultra-192gb"],
)
def test_total_memory_is_the_recommended_working_set(fake: FakeMetalDevice, total: int) -> None:
    """total_memory is recommendedMaxWorkingSetSize, not the machine's RAM."""
    d = device_info(fake, 0)
    assert (d.total_memory, d.free_memory) == (total, total)


def test_free_memory_subtracts_this_process_allocations() -> None:
    """free = recommendedMaxWorkingSetSize - currentAllocatedSize."""
    d = device_info(fake_metal_device_recorded_m1_16gb(allocated=3 * GIB), 0)
    assert d.free_memory == 11453251584 - 3 * GIB


def test_free_memory_never_goes_negative() -> None:
    """Allocations beyond the working set leave zero free."""
    d = device_info(fake_metal_device_recorded_m1_16gb(allocated=16 * GIB), 0)
    assert d.free_memory == 0


def test_record_fields_follow_the_device() -> None:
    """Name, ordinal ids, library, unified memory as integrated and shared, registryID as hex uuid."""
    d = device_info(fake_metal_device_recorded_m2_max_32gb(), 1)
    assert (d.library, d.id, d.filter_id) == ("Metal", "1", "1")
    assert (d.name, d.description) == ("Apple M2 Max", "Apple M2 Max")
    assert d.integrated and d.shared_memory and not d.software
    assert d.uuid == "0x100000a4c"


def test_discrete_gpu_without_unified_memory_is_not_integrated() -> None:
    """An AMD GPU in an Intel Mac has its own memory, not the system's."""
    fake = FakeMetalDevice("AMD Radeon Pro 5500M", 4 * GIB, unified=False)
    assert not device_info(fake, 0).integrated
    assert not device_info(fake, 0).shared_memory


def test_all_devices_falls_back_to_the_default_device() -> None:
    """An empty MTLCopyAllDevices answer falls back to MTLCreateSystemDefaultDevice."""
    m1 = fake_metal_device_recorded_m1_16gb()
    assert all_devices(FakeMetalFramework([], default=m1)) == [m1]


def test_discover_on_macos_lists_every_device(macos_scout: MacosScout) -> None:
    """Through Scout on darwin, each MTLCopyAllDevices device is a ranked Metal device."""
    fakes = [fake_metal_device_recorded_m2_max_64gb()]
    found = macos_scout(FakeMetalFramework(fakes)).discover()
    assert [(d.library, d.name, d.total_memory) for d in found.devices] == [
        ("Metal", "Apple M2 Max", 51539607552)
    ]


def test_no_device_at_all_is_a_note(macos_scout: MacosScout) -> None:
    """Neither function finds a device: zero devices and a note naming both."""
    s = macos_scout(FakeMetalFramework(None, default=None))
    assert s.discover().devices == []
    assert "MTLCopyAllDevices" in next(r.note for r in s.reports if r.name == "metal")


def test_missing_pyobjc_is_a_note_not_an_error(macos_scout: MacosScout) -> None:
    """On macOS without pyobjc-framework-Metal: zero devices, status ok, a note."""
    s = macos_scout(None)  # a None entry makes `import Metal` raise ImportError
    assert s.discover().devices == []
    report = next(r for r in s.reports if r.name == "metal")
    assert report.status == "ok" and "pyobjc-framework-Metal" in report.note


def test_metal_device_holds_back_512_mib(macos_scout: MacosScout) -> None:
    """Scout's minimum memory for a discovered Metal device is the seed's 512 MiB."""
    s = macos_scout(FakeMetalFramework([fake_metal_device_recorded_m1_16gb()]))
    device = s.discover().devices[0]
    assert s.minimum_memory(device) == 512 * MIB


def test_metal_device_supports_flash_attention(macos_scout: MacosScout) -> None:
    """Scout says flash attention is safe on a discovered Metal device."""
    s = macos_scout(FakeMetalFramework([fake_metal_device_derived_m2_ultra_192gb()]))
    assert s.flash_attention_supported(s.discover().devices)


def test_rules_answer_for_metal_devices_on_any_platform(gpuscout_scout: ScoutFactory) -> None:
    """On linux the rule hooks still answer for a Metal record (512 MiB, flash attention)."""
    s = gpuscout_scout("metal", env={}, platform="linux")
    d = device_info(fake_metal_device_recorded_m2_max_32gb(), 0)
    assert s.minimum_memory(d) == 512 * MIB
    assert s.flash_attention_supported([d])


def test_a_metal_selection_needs_no_variable_and_the_kit_accepts_the_plugin(
    macos_scout: MacosScout,
) -> None:
    """ggml-metal always takes the system default device: selecting it sets nothing, and the
    plugin passes check_plugin with a device found (its devices can be selected)."""
    import gpuscout.plugins.metal as metal
    from gpuscout.testing import check_plugin

    framework = FakeMetalFramework([fake_metal_device_recorded_m1_16gb()])
    s = macos_scout(framework)
    devices = s.discover().devices
    assert len(devices) == 1
    assert s.visible_env(devices) == {}
    assert check_plugin(metal, name="metal", env={}, platform="darwin") == []


# A MacBook Pro 16" (2019) with two GPUs. Names as Metal gives them; the sizes are constructed
# (an 8 GB discrete card, a share of 16 GB RAM for the integrated one), not recordings.
def fake_metal_device_intel_uhd_630() -> FakeMetalDevice:
    return FakeMetalDevice("Intel(R) UHD Graphics 630", 1536 * MIB, 0, 0x1000004A7)


def fake_metal_device_radeon_pro_5500m() -> FakeMetalDevice:
    return FakeMetalDevice("AMD Radeon Pro 5500M", 8 * GIB, 0, 0x1000004B2, unified=False)


def two_gpu_intel_mac() -> FakeMetalFramework:
    """MTLCopyAllDevices lists the Intel GPU first; the system default is the Radeon (with
    automatic graphics switching the default device is the high-power GPU)."""
    return FakeMetalFramework(
        [fake_metal_device_intel_uhd_630(), fake_metal_device_radeon_pro_5500m()],
        default=fake_metal_device_radeon_pro_5500m(),
    )


def test_the_default_device_ggml_metal_uses_comes_first_as_id_0(macos_scout: MacosScout) -> None:
    """ggml-metal-device.m ggml_metal_device_init (ggml d99724f2, line 720) opens
    MTLCreateSystemDefaultDevice(): that device is id 0, the other follows as id 1."""
    found = macos_scout(two_gpu_intel_mac()).discover()
    by_id = {d.id: (d.name, d.filter_id, d.integrated) for d in found.devices}
    assert by_id == {"0": ("AMD Radeon Pro 5500M", "0", False), "1": ("Intel(R) UHD Graphics 630", "1", True)}


def test_the_note_names_the_devices_a_child_does_not_use(macos_scout: MacosScout) -> None:
    """ggml-metal-device.m line 720: only the default device is used, and no variable selects
    another, so the note names the Intel GPU as unused."""
    found = macos_scout(two_gpu_intel_mac()).discover()
    (report,) = [p for p in found.plugins if p.name == "metal"]
    assert "id 0 'AMD Radeon Pro 5500M'" in report.note
    assert "id 1 'Intel(R) UHD Graphics 630' not used by a child" in report.note


def test_an_unknown_default_device_keeps_the_order_and_says_so(macos_scout: MacosScout) -> None:
    """MTLCreateSystemDefaultDevice can answer None in a command-line process: the order stays
    MTLCopyAllDevices' and the note says the default is unknown."""
    framework = FakeMetalFramework(
        [fake_metal_device_intel_uhd_630(), fake_metal_device_radeon_pro_5500m()], default=None
    )
    found = macos_scout(framework).discover()
    assert {d.id: d.name for d in found.devices}["0"] == "Intel(R) UHD Graphics 630"
    (report,) = [p for p in found.plugins if p.name == "metal"]
    assert "unknown in this process" in report.note


def test_a_single_device_gets_no_note(macos_scout: MacosScout) -> None:
    """One device is the default one: nothing to say."""
    m1 = fake_metal_device_recorded_m1_16gb()
    found = macos_scout(FakeMetalFramework([m1], default=m1)).discover()
    (report,) = [p for p in found.plugins if p.name == "metal"]
    assert report.note == ""


def test_a_device_ggml_metal_does_not_open_ranks_after_the_default_one(macos_scout: MacosScout) -> None:
    """ggml-metal-device.m line 720 opens only the default device: with the integrated Intel GPU
    as default (graphics switching off), the discrete Radeon still ranks after it, with the
    reason, although discrete devices otherwise rank first."""
    framework = FakeMetalFramework(
        [fake_metal_device_intel_uhd_630(), fake_metal_device_radeon_pro_5500m()],
        default=fake_metal_device_intel_uhd_630(),
    )
    found = macos_scout(framework).discover()
    assert [(d.name, d.integrated) for d in found.devices] == [
        ("Intel(R) UHD Graphics 630", True),
        ("AMD Radeon Pro 5500M", False),
    ]
    assert found.devices[0].unused_reason == ""
    assert found.devices[1].unused_reason.startswith("ggml-metal opens only the system default")
