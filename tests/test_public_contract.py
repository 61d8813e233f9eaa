"""The public API contract (DESIGN.md "Public API contract" and its added part), checked as a host does.

Every test imports through the documented path, calls with the documented keywords and checks the
documented types, values and exception classes; devices are injected through ``gpuscout.testing``
and machines replayed from tests/machines, so no real GPU answers. One promise per test.
"""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import gpuscout
from gpuscout import (
    BackendMemory,
    DeviceComparison,
    DeviceID,
    DeviceInfo,
    DeviceMemory,
    Discovery,
    FlashAttention,
    GPULayers,
    GPULayersList,
    GpuscoutError,
    InsufficientMemoryError,
    Scout,
    SystemInfo,
    by_library,
    by_performance,
    from_json,
    library_paths,
    rank,
    to_json,
)
from gpuscout.sizes import GIB, MIB
from gpuscout.testing import ScoutFactory, injected
from tests.test_rules_mutation_core import tiny_model

MACHINES = Path(__file__).parent / "machines"
SEED_FIELDS = (
    "id",
    "library",
    "name",
    "description",
    "filter_id",
    "integrated",
    "pci_id",
    "total_memory",
    "free_memory",
    "compute_major",
    "compute_minor",
    "driver_major",
    "driver_minor",
    "nvidia_driver_major",
    "gfx_target",
    "library_path",
    "runner_env_overrides",
)


def cuda_card(n: int, free: int = 8 * GIB, **fields: Any) -> DeviceInfo:
    """A discrete CUDA card with a UUID id, as the CUDA plugin reports one."""
    uuid = f"GPU-{n:08x}-0000-0000-0000-000000000000"
    values: dict[str, Any] = {
        "id": uuid,
        "filter_id": uuid,
        "library": "CUDA",
        "name": f"card {n}",
        "description": f"card {n}",
        "pci_id": f"0000:{n + 1:02x}:00.0",
        "total_memory": 16 * GIB,
        "free_memory": free,
        "compute_major": 9,
        "compute_minor": 0,
        "driver_major": 12,
        "driver_minor": 4,
    }
    values.update(fields)
    return DeviceInfo(**values)


def host_scout(gpuscout_scout: ScoutFactory, *devices: DeviceInfo, **options: Any) -> Scout:
    """A Scout with the built-in rules and ``devices`` injected as the only devices found."""
    return gpuscout_scout("cuda", "rocm", "metal", "vulkan", injected(devices), **options)


# -- Records -------------------------------------------------------------------------------------


def test_every_record_name_is_exported_from_the_package() -> None:
    """``gpuscout`` exports every record, enum, error and function the contract names."""
    names = (
        "DeviceID DeviceInfo SystemInfo DeviceMemory BackendMemory InsufficientMemoryError GPULayers "
        "GPULayersList DeviceComparison FlashAttention Scout Discovery GpuscoutError ModelError "
        "FitResult Allocation LoadOperation LoadResult hookimpl to_json from_json rank by_library "
        "by_performance library_paths"
    ).split()
    missing = [n for n in names if not hasattr(gpuscout, n)]
    assert missing == []


def test_device_id_takes_id_and_library_positionally() -> None:
    """``DeviceID(id, library)`` keeps both fields in that order."""
    device_id = DeviceID("GPU-1", "CUDA")
    assert (device_id.id, device_id.library) == ("GPU-1", "CUDA")


def test_device_info_takes_every_seed_field_by_keyword() -> None:
    """Every seed DeviceInfo field, snake_case, is a keyword of ``DeviceInfo``."""
    device = DeviceInfo(
        id="0",
        library="ROCm",
        name="gfx1100",
        description="Radeon",
        filter_id="0",
        integrated=True,
        pci_id="0000:03:00.0",
        total_memory=GIB,
        free_memory=MIB,
        compute_major=11,
        compute_minor=0,
        driver_major=6,
        driver_minor=2,
        nvidia_driver_major=0,
        gfx_target="gfx1100",
        library_path=["/opt/rocm/lib"],
        runner_env_overrides={"HSA_OVERRIDE_GFX_VERSION": "11.0.0"},
    )
    assert [getattr(device, f) is not None for f in SEED_FIELDS] == [True] * len(SEED_FIELDS)


def test_every_seed_field_defaults_to_the_go_zero_value() -> None:
    """A bare ``DeviceInfo()`` holds '' / 0 / False / empty in every seed field."""
    device = DeviceInfo()
    values = [getattr(device, f) for f in SEED_FIELDS]
    assert all(not v for v in values) and [type(v) for v in values[:9]] == [
        str,
        str,
        str,
        str,
        str,
        bool,
        str,
        int,
        int,
    ]


@pytest.mark.parametrize("library", ["", "acme npu", "CUDA'$(rm -rf /)", "\u00fcber"])
def test_any_string_is_accepted_as_library_and_id(library: str) -> None:
    """Record constructors accept any str for ``library`` and ``id`` (even empty, quotes, ``$()``)."""
    device = DeviceInfo(id=library, library=library)
    assert (device.id, device.library) == (library, library)


def test_library_path_accepts_any_sequence_of_str() -> None:
    """``library_path`` takes a tuple or a list of str alike."""
    assert list(DeviceInfo(library_path=("a", "b")).library_path) == list(
        DeviceInfo(library_path=["a", "b"]).library_path
    )


def test_runner_env_overrides_accepts_any_mapping() -> None:
    """``runner_env_overrides`` takes any mapping, a read-only one included."""
    import types

    device = DeviceInfo(runner_env_overrides=types.MappingProxyType({"A": "1"}))
    assert dict(device.runner_env_overrides) == {"A": "1"}


def test_compute_is_major_dot_minor_outside_rocm() -> None:
    """``.compute`` is the str ``major.minor`` for a library other than ROCm."""
    assert DeviceInfo(library="CUDA", compute_major=8, compute_minor=6).compute == "8.6"


@pytest.mark.parametrize("library", ["ROCm", "rocm", "ROCM"])
def test_compute_is_a_gfx_label_for_rocm_in_any_case(library: str) -> None:
    """``.compute`` is ``gfx%x%02x`` for library ROCm in any case (gfx90a from 9.10)."""
    assert DeviceInfo(library=library, compute_major=9, compute_minor=10).compute == "gfx90a"


def test_driver_is_major_dot_minor() -> None:
    """``.driver`` is the str ``major.minor``."""
    assert DeviceInfo(driver_major=12, driver_minor=4).driver == "12.4"


def test_compute_and_driver_are_read_only() -> None:
    """``.compute`` and ``.driver`` are properties, not settable fields."""
    device = DeviceInfo()
    with pytest.raises(AttributeError):
        device.compute = "1.0"  # type: ignore[misc]


def test_device_id_property_gives_the_device_id() -> None:
    """``DeviceInfo.device_id`` is ``DeviceID(id, library)``."""
    assert DeviceInfo(id="3", library="Vulkan").device_id == DeviceID("3", "Vulkan")


def test_a_pci_id_in_capitals_is_accepted() -> None:
    """Records accept a PCI id in any case (never rejected for its case)."""
    assert DeviceInfo(pci_id="0000:C4:00.0").pci_id.lower() == "0000:c4:00.0"


def test_system_info_takes_total_free_and_swap_positionally() -> None:
    """``SystemInfo(total_memory, free_memory, free_swap)``."""
    system = SystemInfo(3, 2, 1)
    assert (system.total_memory, system.free_memory, system.free_swap) == (3, 2, 1)


def test_system_info_wire_keys_are_omitted_when_zero() -> None:
    """A bare SystemInfo writes only its non-zero keys, as the seed's omitempty does."""
    assert json.loads(to_json(SystemInfo(total_memory=5))) == {"total_memory": 5}


def test_insufficient_memory_error_is_a_gpuscout_error_carrying_the_backend_memory() -> None:
    """``InsufficientMemoryError`` is a GpuscoutError and carries the BackendMemory."""
    memory = BackendMemory(input_weights=1)
    error = InsufficientMemoryError(memory)
    assert isinstance(error, GpuscoutError) and error.backend_memory == memory


def test_gpu_layers_takes_id_library_and_layers() -> None:
    """``GPULayers(id, library, layers)`` keeps its fields."""
    layers = GPULayers("GPU-1", "CUDA", [2, 3])
    assert (layers.id, layers.library, list(layers.layers)) == ("GPU-1", "CUDA", [2, 3])


def test_gpu_layers_list_is_a_list() -> None:
    """``GPULayersList(iterable)`` is a list of GPULayers."""
    assert isinstance(GPULayersList([GPULayers("a", "CUDA", [0])]), list)


def test_gpu_layers_prints_as_go_prints_a_contiguous_range() -> None:
    """``str(GPULayers)`` of consecutive layers is Go's ``ID:x Layers:n(first..last)``."""
    assert str(GPULayers("GPU-1", "CUDA", [3, 4, 5])) == "ID:GPU-1 Layers:3(3..5)"


def test_two_empty_entries_print_as_go_prints_them() -> None:
    """A list of two empty GPULayers prints ``[ ]``, byte for byte Go's fmt."""
    assert str(GPULayersList([GPULayers("a", "CUDA", []), GPULayers("b", "CUDA", [])])) == "[ ]"


def test_gpu_layers_list_sums_and_sorts_by_first_layer() -> None:
    """``sum()`` counts every layer and ``sort()`` orders by ``first_layer``."""
    layout = GPULayersList([GPULayers("b", "CUDA", [5, 6]), GPULayers("a", "CUDA", [0])])
    layout.sort()
    assert (layout.sum(), [g.first_layer for g in layout]) == (3, [0, 5])


def test_the_layout_hash_is_the_same_in_another_process() -> None:
    """``GPULayersList.hash()`` is stable across processes."""
    code = (
        "from gpuscout import GPULayers, GPULayersList;"
        "print(GPULayersList([GPULayers('GPU-1', 'CUDA', [0, 1])]).hash())"
    )
    other = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert int(other.stdout) == GPULayersList([GPULayers("GPU-1", "CUDA", [0, 1])]).hash()


def test_device_comparison_has_the_three_members() -> None:
    """``DeviceComparison`` has UNIQUE, SAME_BACKEND and DUPLICATE."""
    assert {m.name for m in DeviceComparison} >= {"UNIQUE", "SAME_BACKEND", "DUPLICATE"}


def test_flash_attention_values_and_names_are_the_seeds() -> None:
    """``FlashAttention`` is AUTO=-1, DISABLED=0, ENABLED=1 and prints Auto, Disabled, Enabled."""
    members = [FlashAttention.AUTO, FlashAttention.DISABLED, FlashAttention.ENABLED]
    assert [(m.value, str(m)) for m in members] == [(-1, "Auto"), (0, "Disabled"), (1, "Enabled")]


# -- Scout ---------------------------------------------------------------------------------------


def test_scout_signature_is_the_contracts() -> None:
    """``Scout``'s parameters and defaults are the contract's, in order."""
    expected = {
        "plugins": None,
        "disable": (),
        "extra": (),
        "entry_points": True,
        "env": None,
        "platform": None,
        "root": "/",
        "enumerate_timeout": 15.0,
        "hook_timeout": 1.0,
        "replay": None,
        "reserve": None,
        "cap": None,
        "prefer": None,
    }
    parameters = inspect.signature(Scout).parameters
    assert {n: parameters[n].default for n in list(parameters)[: len(expected)]} == expected


@pytest.mark.parametrize("timeout", [0, -1.0, float("inf"), float("nan")])
def test_a_timeout_that_is_not_finite_and_positive_is_a_gpuscout_error(timeout: float) -> None:
    """Timeouts must be finite and > 0: anything else raises GpuscoutError."""
    with pytest.raises(GpuscoutError):
        Scout(entry_points=False, enumerate_timeout=timeout)


@pytest.mark.parametrize("keyword", ["plugins", "disable"])
def test_a_bare_string_for_a_plugin_list_is_a_gpuscout_error(keyword: str) -> None:
    """``plugins``/``disable`` take lists, never a bare string."""
    with pytest.raises(GpuscoutError):
        Scout(entry_points=False, **{keyword: "cuda"})  # type: ignore[arg-type]


def test_an_unknown_plugin_in_the_allow_list_is_a_gpuscout_error() -> None:
    """An unknown allowed name raises ``UnknownPluginError``, a GpuscoutError."""
    from gpuscout.errors import UnknownPluginError

    with pytest.raises(UnknownPluginError) as caught:
        Scout(plugins=["no-such-plugin"], entry_points=False)
    assert isinstance(caught.value, GpuscoutError)


def test_gpuscout_plugins_env_is_an_allow_list() -> None:
    """``GPUSCOUT_PLUGINS`` in ``env`` allows only the plugins it names."""
    scout = Scout(entry_points=False, env={"GPUSCOUT_PLUGINS": "cuda"})
    loaded = {r.name for r in scout.reports if r.status.value != "disabled"}
    assert loaded == {"cuda"}


def test_gpuscout_disable_plugins_env_is_a_deny_list() -> None:
    """``GPUSCOUT_DISABLE_PLUGINS`` in ``env`` blocks the plugins it names."""
    scout = Scout(entry_points=False, env={"GPUSCOUT_DISABLE_PLUGINS": "rocm,metal"})
    statuses = {r.name: r.status.value for r in scout.reports}
    assert statuses["rocm"] == statuses["metal"] == "disabled" and statuses["cuda"] != "disabled"


def test_each_scout_has_its_own_plugin_manager() -> None:
    """Two Scouts never share a plugin manager (no global state)."""
    a, b = Scout(entry_points=False), Scout(entry_points=False)
    assert a.plugin_manager is not b.plugin_manager


def test_discover_returns_a_discovery_with_the_injected_devices_ranked(gpuscout_scout: ScoutFactory) -> None:
    """``discover()`` returns a Discovery whose ``.devices`` are ranked by free memory."""
    small, big = cuda_card(0, free=GIB), cuda_card(1, free=9 * GIB)
    found = host_scout(gpuscout_scout, small, big).discover()
    assert isinstance(found, Discovery) and [d.id for d in found.devices] == [big.id, small.id]


def test_discover_takes_the_documented_keywords(gpuscout_scout: ScoutFactory) -> None:
    """``discover(include_software=..., validate=..., isolated=...)`` are its keywords."""
    parameters = inspect.signature(Scout.discover).parameters
    assert [(n, parameters[n].default) for n in ("include_software", "validate", "isolated")] == [
        ("include_software", False),
        ("validate", False),
        ("isolated", False),
    ]


def test_a_dropped_duplicate_names_its_survivor_as_a_device_id(gpuscout_scout: ScoutFactory) -> None:
    """A Vulkan twin of a CUDA card (same PCI id, other case) is dropped with ``duplicate_of``."""
    card = cuda_card(0)
    twin = DeviceInfo(id="0", library="Vulkan", pci_id=card.pci_id.upper(), total_memory=card.total_memory)
    found = host_scout(gpuscout_scout, card, twin).discover()
    (dropped,) = found.dropped
    assert (dropped.device.library, dropped.reason != "", dropped.duplicate_of) == (
        "Vulkan",
        True,
        card.device_id,
    )


def test_a_plugin_report_carries_the_documented_fields(gpuscout_scout: ScoutFactory) -> None:
    """Each report has name, version, distribution, hooks, status, error, note, devices, elapsed."""
    found = host_scout(gpuscout_scout, cuda_card(0)).discover()
    report = found.report("injected")
    assert (report.status.value, report.devices, isinstance(report.elapsed, float), report.error) == (
        "ok",
        1,
        True,
        "",
    ) and all(hasattr(report, a) for a in ("name", "version", "distribution", "hooks", "note"))


def test_a_raising_plugin_is_reported_failed_and_the_rest_is_kept(gpuscout_scout: ScoutFactory) -> None:
    """A plugin whose enumerate raises is ``failed`` with an error; others' devices stay."""

    class FakeBrokenPlugin:
        @gpuscout.hookimpl
        def gpuscout_enumerate(self, context: Any) -> list[DeviceInfo]:
            raise RuntimeError("driver exploded")

    scout = gpuscout_scout(injected([cuda_card(0)]), ("broken", FakeBrokenPlugin()))
    found = scout.discover()
    report = found.report("broken")
    assert (report.status.value, "driver exploded" in report.error, len(found.devices)) == ("failed", True, 1)


def test_discover_reports_no_cpu_device_and_system_memory_apart(gpuscout_scout: ScoutFactory) -> None:
    """``discover()`` lists no ``cpu`` device; system memory is a SystemInfo in ``.system``."""
    found = host_scout(gpuscout_scout, cuda_card(0)).discover()
    assert isinstance(found.system, SystemInfo) and "cpu" not in {d.library for d in found.devices}


def test_compare_ignores_the_case_of_pci_ids(gpuscout_scout: ScoutFactory) -> None:
    """``compare`` of two libraries' records with one PCI id in two cases is DUPLICATE."""
    scout = host_scout(gpuscout_scout)
    a = DeviceInfo(id="a", library="CUDA", pci_id="0000:c4:00.0")
    b = DeviceInfo(id="0", library="Vulkan", pci_id="0000:C4:00.0")
    assert scout.compare(a, b) is DeviceComparison.DUPLICATE


def test_compare_of_one_id_and_library_without_pci_id_is_same_backend(gpuscout_scout: ScoutFactory) -> None:
    """Without PCI ids or a heuristic, equal DeviceIDs compare SAME_BACKEND, others UNIQUE."""
    scout = gpuscout_scout()
    a, b, c = (
        DeviceInfo(id="1", library="X"),
        DeviceInfo(id="1", library="X"),
        DeviceInfo(id="2", library="X"),
    )
    assert (scout.compare(a, b), scout.compare(a, c)) == (
        DeviceComparison.SAME_BACKEND,
        DeviceComparison.UNIQUE,
    )


@pytest.mark.parametrize(
    ("library", "expected"), [("CUDA", True), ("ROCm", True), ("Vulkan", False), ("Metal", False)]
)
def test_preferred_is_true_only_for_cuda_and_rocm(
    gpuscout_scout: ScoutFactory, library: str, expected: bool
) -> None:
    """``preferred(a, b)`` is a real bool, True iff ``a`` is CUDA or ROCm."""
    answer = host_scout(gpuscout_scout).preferred(DeviceInfo(library=library), DeviceInfo(library="Vulkan"))
    assert type(answer) is bool and answer is expected


@pytest.mark.parametrize(
    ("library", "expected"), [("CUDA", 457 * MIB), ("Metal", 512 * MIB), ("acme", 457 * MIB)]
)
def test_minimum_memory_is_457_mib_unless_metal(
    gpuscout_scout: ScoutFactory, library: str, expected: int
) -> None:
    """``minimum_memory`` is an int: 457 MiB, Metal's 512 MiB even on linux."""
    answer = host_scout(gpuscout_scout, platform="linux").minimum_memory(DeviceInfo(library=library))
    assert type(answer) is int and answer == expected


def test_flash_attention_of_no_devices_passes(gpuscout_scout: ScoutFactory) -> None:
    """``flash_attention_supported([])`` is True."""
    assert host_scout(gpuscout_scout).flash_attention_supported([]) is True


def test_flash_attention_passes_the_cpu_and_fails_an_unknown_library(gpuscout_scout: ScoutFactory) -> None:
    """With no plugin answering, library ``cpu`` passes and anything else fails."""
    scout = host_scout(gpuscout_scout)
    cpu, unknown = DeviceInfo(library="cpu"), DeviceInfo(library="acme")
    assert (scout.flash_attention_supported([cpu]), scout.flash_attention_supported([cpu, unknown])) == (
        True,
        False,
    )


def test_flash_attention_is_judged_for_metal_on_any_platform(gpuscout_scout: ScoutFactory) -> None:
    """A Metal device is flash-attention capable even when ``platform="linux"``."""
    scout = host_scout(gpuscout_scout, platform="linux")
    assert scout.flash_attention_supported([DeviceInfo(library="Metal", id="0")]) is True


def test_needs_init_validation_is_a_bool(gpuscout_scout: ScoutFactory) -> None:
    """``needs_init_validation`` answers a real bool: True for a CUDA card, False for Metal."""
    scout = host_scout(gpuscout_scout)
    answers = (
        scout.needs_init_validation(cuda_card(0)),
        scout.needs_init_validation(DeviceInfo(library="Metal")),
    )
    assert answers == (True, False) and all(type(a) is bool for a in answers)


def test_visible_env_of_no_devices_is_empty(gpuscout_scout: ScoutFactory) -> None:
    """``visible_env([])`` is ``{}``."""
    assert host_scout(gpuscout_scout).visible_env([]) == {}


def test_visible_env_lists_filter_ids_in_selection_order(gpuscout_scout: ScoutFactory) -> None:
    """``visible_env`` is a dict of str, values in selection order, FilterID over ID."""
    a, b = cuda_card(0), cuda_card(1, filter_id="1")
    env = host_scout(gpuscout_scout).visible_env([b, a])
    assert env == {"CUDA_VISIBLE_DEVICES": f"1,{a.filter_id}"}


def test_runner_env_overrides_win_after_the_devices_entry(gpuscout_scout: ScoutFactory) -> None:
    """A device's ``runner_env_overrides`` apply after its own entry, last one winning."""
    card = cuda_card(0, runner_env_overrides={"CUDA_VISIBLE_DEVICES": "override", "EXTRA": "1"})
    env = host_scout(gpuscout_scout).visible_env([card])
    assert env == {"CUDA_VISIBLE_DEVICES": "override", "EXTRA": "1"}


VULKAN_0 = DeviceInfo(id="0", filter_id="0", library="Vulkan", total_memory=GIB, pci_id="0000:20:00.0")
VULKAN_1 = DeviceInfo(id="1", filter_id="1", library="Vulkan", total_memory=GIB, pci_id="0000:21:00.0")
ROCM_0 = DeviceInfo(
    id="GPU-abc", filter_id="GPU-abc", library="ROCm", total_memory=GIB, pci_id="0000:30:00.0"
)


def test_cuda_filters_only_when_the_selection_is_one_device_or_all_cuda(gpuscout_scout: ScoutFactory) -> None:
    """A CUDA card with a Vulkan device selected sets no CUDA_VISIBLE_DEVICES (the seed's rule)."""
    scout = host_scout(gpuscout_scout)
    assert (
        scout.visible_env([cuda_card(0), cuda_card(1)]) != {},
        scout.visible_env([cuda_card(0), VULKAN_0]),
    ) == (
        True,
        {},
    )


def test_vulkan_filters_only_for_a_single_device(gpuscout_scout: ScoutFactory) -> None:
    """One Vulkan device gets GGML_VK_VISIBLE_DEVICES; two get nothing."""
    scout = host_scout(gpuscout_scout)
    assert (scout.visible_env([VULKAN_0]), scout.visible_env([VULKAN_0, VULKAN_1])) == (
        {"GGML_VK_VISIBLE_DEVICES": "0"},
        {},
    )


def test_rocm_always_filters(gpuscout_scout: ScoutFactory) -> None:
    """A ROCm device is made visible whatever else is selected with it."""
    scout = host_scout(gpuscout_scout)
    assert scout.visible_env([ROCM_0, VULKAN_0]) == scout.visible_env([ROCM_0]) != {}


@pytest.mark.parametrize(
    ("platform", "variable"), [("linux", "ROCR_VISIBLE_DEVICES"), ("win32", "HIP_VISIBLE_DEVICES")]
)
def test_the_platform_decides_rocms_visibility_variable(
    gpuscout_scout: ScoutFactory, platform: str, variable: str
) -> None:
    """``platform`` picks the variable a rule writes: ROCR_VISIBLE_DEVICES on linux, HIP_ elsewhere."""
    assert list(host_scout(gpuscout_scout, platform=platform).visible_env([ROCM_0])) == [variable]


@pytest.mark.parametrize("token", ["", "GPU-1,GPU-2"])
def test_visible_env_refuses_a_device_without_a_usable_token(
    gpuscout_scout: ScoutFactory, token: str
) -> None:
    """A device whose id is empty or holds ``,`` is refused with a GpuscoutError."""
    with pytest.raises(GpuscoutError):
        host_scout(gpuscout_scout).visible_env([DeviceInfo(id=token, library="CUDA")])


def test_a_plugin_device_with_a_comma_in_its_id_fails_that_plugin(gpuscout_scout: ScoutFactory) -> None:
    """An id holding ``,`` from a plugin fails that plugin at the border."""
    found = host_scout(gpuscout_scout, cuda_card(0, id="GPU-1,GPU-2", filter_id="")).discover()
    assert (found.report("injected").status.value, found.devices) == ("failed", [])


@pytest.mark.parametrize("method", ["compare", "preferred"])
def test_a_rule_handed_something_else_than_a_device_raises_a_gpuscout_error(
    gpuscout_scout: ScoutFactory, method: str
) -> None:
    """Bad input to a rule raises GpuscoutError, never a TypeError or AttributeError."""
    with pytest.raises(GpuscoutError):
        getattr(host_scout(gpuscout_scout), method)("cuda:0", None)


@pytest.mark.parametrize("method", ["minimum_memory", "needs_init_validation"])
def test_a_one_device_rule_handed_a_str_raises_a_gpuscout_error(
    gpuscout_scout: ScoutFactory, method: str
) -> None:
    """``minimum_memory``/``needs_init_validation`` of a non-device raise GpuscoutError."""
    with pytest.raises(GpuscoutError):
        getattr(host_scout(gpuscout_scout), method)("cuda:0")


@pytest.mark.parametrize("method", ["visible_env", "flash_attention_supported", "refresh"])
def test_a_list_rule_handed_a_bare_string_raises_a_gpuscout_error(
    gpuscout_scout: ScoutFactory, method: str
) -> None:
    """List rules refuse a str (or a list of str) with a GpuscoutError."""
    with pytest.raises(GpuscoutError):
        getattr(host_scout(gpuscout_scout), method)(["cuda:0"])


def test_select_returns_the_best_device(gpuscout_scout: ScoutFactory) -> None:
    """``select(["best"])`` is a list holding the first-ranked device."""
    small, big = cuda_card(0, free=GIB), cuda_card(1, free=9 * GIB)
    assert [d.id for d in host_scout(gpuscout_scout, small, big).select(["best"])] == [big.id]


def test_a_selector_matching_nothing_is_a_gpuscout_error(gpuscout_scout: ScoutFactory) -> None:
    """A well-formed selector that matches nothing raises ``NoMatchError``, a GpuscoutError."""
    from gpuscout._selection.selectors import NoMatchError

    with pytest.raises(NoMatchError) as caught:
        host_scout(gpuscout_scout, cuda_card(0)).select(["fits:1TiB"])
    assert isinstance(caught.value, GpuscoutError)


def test_a_word_that_is_no_selector_is_a_gpuscout_error(gpuscout_scout: ScoutFactory) -> None:
    """A malformed selector raises a GpuscoutError."""
    with pytest.raises(GpuscoutError):
        host_scout(gpuscout_scout, cuda_card(0)).select(["$(reboot)"])


def test_refresh_marks_a_device_no_plugin_refreshed_stale_never_zero(gpuscout_scout: ScoutFactory) -> None:
    """``refresh`` keeps a device's free memory and marks it stale when nobody refreshes it."""
    card = cuda_card(0, free=5 * GIB)
    (after,) = host_scout(gpuscout_scout, card).refresh([card])
    assert (after.free_memory, after.free_memory_stale) == (5 * GIB, True)


def test_plan_takes_the_documented_keywords_and_returns_a_layout(gpuscout_scout: ScoutFactory) -> None:
    """``plan(layers, devices, system, num_gpu=..., ...)`` returns a GPULayersList."""
    card = cuda_card(0, free=8 * GIB)
    layout = host_scout(gpuscout_scout).plan(
        [100 * MIB] * 4,
        [card],
        SystemInfo(64 * GIB, 64 * GIB),
        num_gpu=-1,
        require_full=False,
        spread=False,
        backoff=0.0,
        overhead=0,
        graphs=None,
    )
    assert isinstance(layout, GPULayersList) and layout.sum() == 4


def test_plan_raises_insufficient_memory_when_full_placement_is_required(
    gpuscout_scout: ScoutFactory,
) -> None:
    """``plan(require_full=True)`` of layers larger than every card raises InsufficientMemoryError."""
    card = cuda_card(0, free=GIB)
    with pytest.raises(InsufficientMemoryError):
        host_scout(gpuscout_scout).plan([4 * GIB] * 3, [card], SystemInfo(GIB, GIB), require_full=True)


# -- Functions -----------------------------------------------------------------------------------


def test_device_wire_keys_are_ollamas() -> None:
    """``to_json`` of a full device writes Ollama's /info keys, nothing else."""
    card = cuda_card(0, integrated=True, gfx_target="x", library_path=["/lib"])
    assert list(json.loads(to_json(card))) == [
        "id",
        "backend",
        "name",
        "description",
        "filter_id",
        "integration",
        "pci_id",
        "total_memory",
        "free_memory",
        "ComputeMajor",
        "ComputeMinor",
        "driver_major",
        "driver_minor",
        "gfx_target",
        "LibraryPath",
    ]


def test_optional_device_keys_are_omitted_when_empty_and_library_path_is_null() -> None:
    """Starred keys (``backend`` among them) are left out when empty; ``LibraryPath`` is null."""
    assert json.loads(to_json(DeviceInfo())) == {
        "id": "",
        "name": "",
        "description": "",
        "total_memory": 0,
        "ComputeMajor": 0,
        "ComputeMinor": 0,
        "LibraryPath": None,
    }


def test_runner_env_overrides_and_nvidia_driver_major_are_never_serialized() -> None:
    """Neither RunnerEnvOverrides nor NVIDIADriverMajor reach the wire."""
    text = to_json(DeviceInfo(runner_env_overrides={"A": "1"}, nvidia_driver_major=550))
    assert "550" not in text and '"A"' not in text


def test_missing_optional_keys_and_a_null_library_path_read_as_defaults() -> None:
    """``from_json`` reads missing optional keys as defaults and ``"LibraryPath": null`` as empty."""
    device = from_json('{"id": "1", "backend": "CUDA", "LibraryPath": null}', DeviceInfo)
    assert device == DeviceInfo(id="1", library="CUDA")


def test_from_json_reads_a_list_of_devices() -> None:
    """``from_json(text, list[DeviceInfo])`` reads what ``to_json`` of a list wrote."""
    devices = [cuda_card(0), cuda_card(1)]
    assert from_json(to_json(devices), list[DeviceInfo]) == devices


def test_bad_wire_input_raises_a_gpuscout_error_naming_the_path() -> None:
    """A wrongly typed key raises GpuscoutError whose message names ``[1].total_memory``."""
    text = '[{"id": "a"}, {"id": "b", "total_memory": "abc"}]'
    with pytest.raises(GpuscoutError, match=r"\[1\]\.total_memory"):
        from_json(text, list[DeviceInfo])


@pytest.mark.parametrize("text", ["", "{", "\udcff", "[1]", "null"])
def test_garbage_on_the_wire_is_a_gpuscout_error(text: str) -> None:
    """Whatever the text, ``from_json`` raises only GpuscoutError."""
    with pytest.raises(GpuscoutError):
        from_json(text, DeviceInfo)


def test_gpu_layers_wire_keys() -> None:
    """GPULayers is ``{"id", "backend", "Layers"}`` on the wire."""
    assert json.loads(to_json(GPULayers("a", "CUDA", [1]))) == {"id": "a", "backend": "CUDA", "Layers": [1]}


def test_device_memory_wire_keys() -> None:
    """DeviceMemory is ``{"id","backend","Name","Weights","Cache","Graph"}`` on the wire."""
    memory = DeviceMemory(id="a", library="CUDA", name="n", weights=(1,), cache=(2,), graph=3)
    assert list(json.loads(to_json(memory))) == ["id", "backend", "Name", "Weights", "Cache", "Graph"]


def test_backend_memory_wire_keys() -> None:
    """BackendMemory is ``{"InputWeights","CPU","GPUs"}`` on the wire."""
    assert list(json.loads(to_json(BackendMemory(input_weights=1)))) == ["InputWeights", "CPU", "GPUs"]


def test_rank_puts_discrete_first_then_most_free() -> None:
    """``rank`` orders discrete before integrated, then free memory descending, then library and id."""
    igpu = cuda_card(0, free=99 * GIB, integrated=True)
    less, more = cuda_card(1, free=GIB), cuda_card(2, free=2 * GIB)
    assert [d.id for d in rank([igpu, less, more])] == [more.id, less.id, igpu.id]


def test_by_library_groups_in_first_seen_order() -> None:
    """``by_library`` groups devices by library in the order libraries first appear."""
    vk, cu1, cu2 = DeviceInfo(id="0", library="Vulkan"), cuda_card(1), cuda_card(2)
    groups = by_library([vk, cu1, cu2])
    assert [[d.id for d in g] for g in groups] == [["0"], [cu1.id, cu2.id]]


def test_by_performance_returns_groups() -> None:
    """``by_performance`` returns a list of device groups covering every device once."""
    devices = [cuda_card(1), cuda_card(2, compute_major=8)]
    groups = by_performance(devices)
    assert sorted(d.id for g in groups for d in g) == sorted(d.id for d in devices)


def test_library_paths_joins_base_and_each_devices_paths() -> None:
    """``library_paths(devices, base=())`` holds the base and every device's library path."""
    paths = library_paths([DeviceInfo(library_path=["/a"]), DeviceInfo(library_path=["/b"])], base=("/base",))
    assert {"/a", "/b", "/base"} <= set(paths)


# -- Contract added for the current issues -------------------------------------------------------


def test_load_records_are_importable_from_the_package_and_from_load() -> None:
    """``Allocation``, ``LoadOperation``, ``LoadResult`` come from ``gpuscout`` and ``gpuscout.load``."""
    import gpuscout.load

    names = ("Allocation", "LoadOperation", "LoadResult")
    assert [getattr(gpuscout, n) is getattr(gpuscout.load, n) for n in names] == [True] * 3


def test_fit_signature_holds_the_documented_keywords() -> None:
    """``Scout.fit`` takes the contract's keywords with its defaults."""
    expected = {
        "devices": None,
        "system": None,
        "ctx": None,
        "flash_attn": None,
        "cache_type_k": "f16",
        "cache_type_v": "f16",
        "parallel": 1,
        "ubatch_size": 512,
        "swa_full": False,
        "mmproj": None,
        "num_gpu": -1,
        "spread": False,
    }
    parameters = inspect.signature(Scout.fit).parameters
    assert {n: parameters[n].default for n in expected if n in parameters} == expected


def test_fit_returns_a_fit_result_with_the_documented_types(
    gpuscout_scout: ScoutFactory, tmp_path: Path
) -> None:
    """``fit(path, devices=, system=, ctx=)``: ``.fits`` bool, BackendMemory, GPULayersList, str notes."""
    result = host_scout(gpuscout_scout).fit(
        tiny_model(tmp_path / "m.gguf"),
        devices=[cuda_card(0)],
        system=SystemInfo(64 * GIB, 64 * GIB),
        ctx=256,
    )
    assert (
        isinstance(result, gpuscout.FitResult),
        type(result.fits),
        isinstance(result.memory, BackendMemory),
        isinstance(result.placement, GPULayersList),
        all(isinstance(n, str) for n in result.notes),
    ) == (True, bool, True, True, True)


def test_fit_of_a_file_that_is_no_gguf_raises_model_error(
    gpuscout_scout: ScoutFactory, tmp_path: Path
) -> None:
    """A bad model file raises ``ModelError``, a GpuscoutError."""
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF\x09\x00\x00\x00" + b"\xff" * 32)
    with pytest.raises(gpuscout.ModelError) as caught:
        host_scout(gpuscout_scout).fit(bad, devices=[], system=SystemInfo(GIB, GIB))
    assert isinstance(caught.value, GpuscoutError)


def test_a_missing_model_file_raises_model_error(gpuscout_scout: ScoutFactory, tmp_path: Path) -> None:
    """A model path that does not exist raises ``ModelError``."""
    with pytest.raises(gpuscout.ModelError):
        host_scout(gpuscout_scout).fit(tmp_path / "none.gguf", devices=[], system=SystemInfo(GIB, GIB))


def test_a_replayed_recording_gives_its_expected_devices() -> None:
    """``Scout(replay=DIR)`` discovers the recorded machine's devices, as its expected.json says."""
    machine = MACHINES / "h200x8"
    expected = json.loads((machine / "expected.json").read_text())
    found = Scout(replay=machine, entry_points=False).discover()
    assert [d.id for d in found.devices] == [d["id"] for d in expected["devices"]]


def test_a_recording_without_recording_json_raises_recording_error(tmp_path: Path) -> None:
    """A malformed recording raises ``RecordingError``, a GpuscoutError."""
    from gpuscout.errors import RecordingError

    with pytest.raises(RecordingError) as caught:
        Scout(replay=tmp_path, entry_points=False)
    assert isinstance(caught.value, GpuscoutError)


def test_topology_fields_default_to_unknown_and_stay_off_the_wire() -> None:
    """``numa_node`` is -1, ``local_cpus`` '' and no topology key is written when unknown."""
    device = DeviceInfo()
    keys = set(json.loads(to_json(device)))
    assert (device.numa_node, device.local_cpus, device.pcie_link, list(device.peers)) == (
        -1,
        "",
        None,
        [],
    ) and not (keys & {"numa_node", "local_cpus", "pcie_link", "peers"})


def test_topology_wire_keys_are_the_contracts() -> None:
    """Known topology is written as ``pcie_link`` {speed, width, max_*}, ``peers`` {id, backend, link}."""
    from gpuscout import PcieLink, PeerLink

    device = DeviceInfo(
        numa_node=1,
        local_cpus="0-3",
        pcie_link=PcieLink(speed=8.0, width=4, max_speed=16.0, max_width=16),
        peers=[PeerLink(id="GPU-2", library="CUDA", link="nvlink")],
    )
    wire = json.loads(to_json(device))
    assert (wire["numa_node"], wire["local_cpus"], wire["pcie_link"], wire["peers"]) == (
        1,
        "0-3",
        {"speed": 8.0, "width": 4, "max_speed": 16.0, "max_width": 16},
        [{"id": "GPU-2", "backend": "CUDA", "link": "nvlink"}],
    )


def test_a_cap_gives_usable_memory_and_keeps_the_total(gpuscout_scout: ScoutFactory) -> None:
    """``Scout(cap={"all": ...}, reserve={...})``: total stays, usable = min(total, cap) - reserve."""
    card = cuda_card(0)
    scout = host_scout(gpuscout_scout, card, cap={"all": 10 * GIB}, reserve={"all": GIB})
    (device,) = scout.discover().devices
    assert (device.total_memory, device.usable_memory) == (16 * GIB, 9 * GIB)


def test_the_budget_env_variables_are_read(gpuscout_scout: ScoutFactory) -> None:
    """``GPUSCOUT_CAP`` / ``GPUSCOUT_RESERVE`` in ``env`` apply when no argument is given."""
    card = cuda_card(0)
    scout = host_scout(gpuscout_scout, card, env={"GPUSCOUT_CAP": "all=8GiB", "GPUSCOUT_RESERVE": "all=1GiB"})
    (device,) = scout.discover().devices
    assert device.usable_memory == 7 * GIB


def test_a_cap_above_the_total_writes_no_usable_memory(gpuscout_scout: ScoutFactory) -> None:
    """A budget that leaves the whole total usable writes no ``usable_memory`` key."""
    scout = host_scout(gpuscout_scout, cuda_card(0), cap={"all": 100 * GIB})
    (device,) = json.loads(to_json(scout.discover().devices))  # one device object
    assert "usable_memory" not in device and device["total_memory"] == 16 * GIB


def test_a_cap_below_the_total_writes_usable_memory(gpuscout_scout: ScoutFactory) -> None:
    """A cap below the total writes ``usable_memory`` on the wire."""
    scout = host_scout(gpuscout_scout, cuda_card(0), cap={"cuda:0": 4 * GIB})
    (device,) = json.loads(to_json(scout.discover().devices))
    assert device["usable_memory"] == 4 * GIB


def test_a_malformed_budget_is_a_gpuscout_error() -> None:
    """A budget that cannot be read raises ``BudgetError``, a GpuscoutError."""
    with pytest.raises(GpuscoutError):
        Scout(entry_points=False, cap="all=lots")


def test_prefer_ranks_the_named_device_first(gpuscout_scout: ScoutFactory) -> None:
    """``Scout(prefer=[selector])`` puts that device first whatever its free memory."""
    small, big = cuda_card(0, free=GIB), cuda_card(1, free=9 * GIB)
    found = host_scout(gpuscout_scout, small, big, prefer=[small.id]).discover()
    assert found.devices[0].id == small.id


def test_discover_in_child_takes_the_documented_keywords() -> None:
    """``gpuscout.runner.discover_in_child(env, timeout=30.0, command=None)``."""
    from gpuscout.runner import discover_in_child

    parameters = inspect.signature(discover_in_child).parameters
    assert [(n, parameters[n].default) for n in ("timeout", "command")] == [
        ("timeout", 30.0),
        ("command", None),
    ] and (next(iter(parameters)) == "env")


def test_the_plugin_surface_exports_what_authors_use() -> None:
    """``gpuscout.plugin`` exports hookimpl, the records, EnvEntry, Context, a logger and API_VERSION."""
    import gpuscout.plugin as surface

    names = ("hookimpl", "DeviceInfo", "SystemInfo", "EnvEntry", "Context", "get_logger", "API_VERSION")
    assert [n for n in names if not hasattr(surface, n)] == [] and surface.hookimpl is gpuscout.hookimpl


# -- Only GpuscoutError leaves the public API for bad input -------------------------------------


@pytest.mark.parametrize("value", [object(), {1, 2}, {(1, 2): "tuple key"}])
def test_to_json_of_something_json_cannot_hold_is_a_gpuscout_error(value: object) -> None:
    """``to_json`` of a value that is no record and no JSON value raises GpuscoutError, not TypeError."""
    with pytest.raises(GpuscoutError, match="cannot write JSON"):
        to_json(value)


@pytest.mark.parametrize("function", [rank, by_library, by_performance, library_paths])
@pytest.mark.parametrize("devices", ["GPU-1", [1], None, [DeviceInfo(), "cuda:0"]])
def test_a_device_function_handed_no_device_list_is_a_gpuscout_error(function: Any, devices: Any) -> None:
    """``rank``, ``by_library``, ``by_performance``, ``library_paths`` refuse all but a list of DeviceInfo."""
    with pytest.raises(GpuscoutError):
        function(devices)


@pytest.mark.parametrize("base", ["/opt/lib", b"/opt/lib", [1], None])
def test_library_paths_refuses_a_base_that_is_no_list_of_str(base: Any) -> None:
    """``library_paths(devices, base=...)`` refuses a bare string (one path per character) or non-str."""
    with pytest.raises(GpuscoutError, match="base"):
        library_paths([DeviceInfo()], base=base)


def test_library_paths_keeps_the_base_first_and_each_path_once() -> None:
    """``library_paths`` gives ``base`` first, then each device's new paths in order, each once."""
    devices = [DeviceInfo(library_path=["/b", "/base"]), DeviceInfo(library_path=["/b", "/c"])]
    assert library_paths(devices, base=("/base",)) == ["/base", "/b", "/c"]


@pytest.mark.parametrize("memory", [5, None, DeviceMemory()])
def test_insufficient_memory_error_of_no_backend_memory_is_a_gpuscout_error(memory: Any) -> None:
    """``InsufficientMemoryError(x)`` of something else than a BackendMemory raises GpuscoutError."""
    with pytest.raises(GpuscoutError, match="BackendMemory"):
        InsufficientMemoryError(memory)


@pytest.mark.parametrize(
    "fields",
    [
        {"total_memory": -1},
        {"free_memory": 2**64},
        {"total_memory": "1"},
        {"library": None},
        {"library_path": [1]},
        {"runner_env_overrides": {"A": 1}},
        {"integrated": "yes"},
        {"numa_node": -2},
    ],
)
def test_a_device_field_of_the_wrong_kind_is_a_gpuscout_error(fields: dict[str, Any]) -> None:
    """Bad DeviceInfo field values raise a GpuscoutError naming the field."""
    (name,) = fields
    with pytest.raises(GpuscoutError, match=name):
        DeviceInfo(**fields)


@pytest.mark.parametrize(
    "make",
    [lambda: SystemInfo(-1), lambda: DeviceMemory(graph=-1), lambda: GPULayers(1)],  # type: ignore[arg-type]
)
def test_other_records_refuse_bad_values_with_a_gpuscout_error(make: Any) -> None:
    """SystemInfo, DeviceMemory and GPULayers raise GpuscoutError for a bad value."""
    with pytest.raises(GpuscoutError):
        make()


def test_a_missing_replay_directory_is_a_recording_error() -> None:
    """``Scout(replay=path)`` of a missing path raises ``gpuscout.RecordingError`` naming it."""
    with pytest.raises(gpuscout.RecordingError, match="no-such-recording"):
        Scout(replay="/no-such-recording", entry_points=False)


def test_bad_fit_model_argument_is_a_gpuscout_error(gpuscout_scout: ScoutFactory) -> None:
    """``fit(model)`` of something that is no path or model raises GpuscoutError."""
    with pytest.raises(GpuscoutError):
        host_scout(gpuscout_scout).fit(123, devices=[], system=SystemInfo(GIB, GIB))


def test_a_discovery_reads_back_from_its_own_json(gpuscout_scout: ScoutFactory) -> None:
    """``from_json(to_json(discovery), Discovery)`` gives back its devices and system memory."""
    found = host_scout(gpuscout_scout, cuda_card(0), cuda_card(1)).discover()
    again: Discovery = from_json(to_json(found), Discovery)
    assert (again.devices, again.system) == (found.devices, found.system)


# -- README's Python API ---------------------------------------------------------------------------


def test_an_unknown_name_in_a_deny_list_is_a_warning_sentence() -> None:
    """``Scout(disable=[unknown])`` does not raise; it adds a sentence naming it to ``scout.warnings``."""
    scout = Scout(disable=["no-such-plugin"], entry_points=False)
    assert any("no-such-plugin" in w for w in scout.warnings)


def test_a_discovery_read_back_has_zero_elapsed_and_plugin_times_in_seconds(
    gpuscout_scout: ScoutFactory,
) -> None:
    """Read from ``list --json``, ``Discovery.elapsed`` is 0.0 and each report's elapsed is seconds."""
    document = json.loads(to_json(host_scout(gpuscout_scout, cuda_card(0)).discover()))
    document["plugins"][0]["elapsed_ms"] = 1500.0
    again: Discovery = from_json(json.dumps(document), Discovery)
    assert (again.elapsed, again.plugins[0].elapsed) == (0.0, 1.5)


def test_an_unknown_report_name_raises_unknown_report_error(gpuscout_scout: ScoutFactory) -> None:
    """``Discovery.report(unknown)`` raises ``gpuscout.errors.UnknownReportError``, a
    GpuscoutError."""
    from gpuscout.errors import UnknownReportError

    found = host_scout(gpuscout_scout, cuda_card(0)).discover()
    with pytest.raises(UnknownReportError, match="nosuch"):
        found.report("nosuch")


def test_report_names_are_compared_as_allow_lists_compare_them(gpuscout_scout: ScoutFactory) -> None:
    """``Discovery.report(" CUDA ")`` finds the ``cuda`` report (case and spaces ignored)."""
    found = host_scout(gpuscout_scout, cuda_card(0)).discover()
    assert found.report(" CUDA ").name == "cuda"


def test_cpu_affinity_answers_cpus_and_a_note(gpuscout_scout: ScoutFactory) -> None:
    """``cpu_affinity(devices)`` has ``.cpus`` (None: unchanged) and a str ``.note``."""
    affinity = host_scout(gpuscout_scout, platform="darwin").cpu_affinity([cuda_card(0, local_cpus="0-1")])
    assert (affinity.cpus, isinstance(affinity.note, str) and affinity.note != "") == (None, True)


def test_the_cli_runs_in_process_with_the_hosts_scout(
    gpuscout_scout: ScoutFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    """``gpuscout.cli.main(argv, scout_factory=...)`` returns the exit code and uses that Scout."""
    from gpuscout.cli import main

    card = cuda_card(0)
    code = main(["list", "--json"], scout_factory=lambda args: host_scout(gpuscout_scout, card))
    assert (code, [d["id"] for d in json.loads(capsys.readouterr().out)["devices"]]) == (0, [card.id])


def test_hooks_facts_name_every_hook_of_the_contract() -> None:
    """``gpuscout._host.hookspecs.HOOKS`` holds the hooks DESIGN.md names."""
    from gpuscout._host.hookspecs import HOOKS

    names = {
        "gpuscout_enumerate",
        "gpuscout_validate_init",
        "gpuscout_visible_env",
        "gpuscout_preferred_library",
        "gpuscout_is_duplicate",
        "gpuscout_duplicate_key",
        "gpuscout_flash_attention",
        "gpuscout_minimum_memory",
        "gpuscout_refresh",
    }
    held = {getattr(h, "name", h) for h in HOOKS}
    assert names <= held


def test_check_plugin_of_a_well_behaved_plugin_is_an_empty_list() -> None:
    """``gpuscout.testing.check_plugin(module)`` returns a list of problems, empty when none."""
    from gpuscout.plugin import EnvEntry, devices_of
    from gpuscout.testing import check_plugin

    class FakeAcmePlugin:
        @gpuscout.hookimpl
        def gpuscout_enumerate(self, context: Any) -> list[DeviceInfo]:
            return [DeviceInfo(id="acme-0", filter_id="acme-0", library="Acme", total_memory=GIB)]

        @gpuscout.hookimpl
        def gpuscout_visible_env(self, selection: Any, context: Any) -> list[EnvEntry]:
            return [
                EnvEntry(i, "ACME_VISIBLE_DEVICES", d.filter_id) for i, d in devices_of(selection, "Acme")
            ]

    assert check_plugin(FakeAcmePlugin()) == []


def test_check_plugin_names_a_missing_visibility_hook() -> None:
    """``check_plugin`` of a plugin that reports devices but no ``gpuscout_visible_env`` says so."""
    from gpuscout.testing import check_plugin

    assert any("gpuscout_visible_env" in p for p in check_plugin(injected([cuda_card(0)])[1]))


def test_the_plugin_surface_has_for_library_and_devices_of() -> None:
    """``gpuscout.plugin`` exports ``for_library`` and ``devices_of`` as the README's plugin uses."""
    from gpuscout.plugin import devices_of, for_library

    assert callable(for_library) and [
        d for _, d in devices_of([cuda_card(0), DeviceInfo(library="X")], "CUDA")
    ] == [cuda_card(0)]


def test_validate_devices_takes_a_timeout_of_thirty_seconds() -> None:
    """``gpuscout.runner.validate_devices(checks, timeout=30.0)`` and ``validation_progress`` exist."""
    from gpuscout.runner import validate_devices, validation_progress

    parameters = inspect.signature(validate_devices).parameters
    assert (next(iter(parameters)), parameters["timeout"].default, callable(validation_progress)) == (
        "checks",
        30.0,
        True,
    )


def test_ray_inventory_takes_address_and_timeout() -> None:
    """``gpuscout.cluster.ray.inventory(address=None, timeout=60.0)``."""
    from gpuscout.cluster.ray import inventory

    parameters = inspect.signature(inventory).parameters
    assert [(n, parameters[n].default) for n in ("address", "timeout")] == [
        ("address", None),
        ("timeout", 60.0),
    ]


def test_load_takes_memory_devices_system_and_allocate() -> None:
    """``Scout.load(memory, devices, system, allocate)``."""
    assert list(inspect.signature(Scout.load).parameters)[1:5] == ["memory", "devices", "system", "allocate"]


# -- Plugins: containment ------------------------------------------------------------------------


class FakeSlowEnumerate:
    """Enumerates past any short deadline."""

    @gpuscout.hookimpl
    def gpuscout_enumerate(self, context: Any) -> list[DeviceInfo]:
        import time

        time.sleep(1.5)
        return []


class FakeExitingEnumerate:
    """Calls sys.exit inside its enumerate."""

    @gpuscout.hookimpl
    def gpuscout_enumerate(self, context: Any) -> list[DeviceInfo]:
        raise SystemExit(3)


class FakeWrongType:
    """Answers a str where a list of DeviceInfo is due."""

    @gpuscout.hookimpl
    def gpuscout_enumerate(self, context: Any) -> Any:
        return "GPU-1"


class FakeEnvWriter:
    """Tries to change the environment its context carries."""

    @gpuscout.hookimpl
    def gpuscout_enumerate(self, context: Any) -> list[DeviceInfo]:
        context.env["CUDA_VISIBLE_DEVICES"] = "1"
        return []


class FakeSlowRule:
    """Answers minimum_memory only after any short hook deadline."""

    @gpuscout.hookimpl
    def gpuscout_minimum_memory(self, device: DeviceInfo) -> int:
        import time

        time.sleep(1.0)
        return 1


def test_a_plugin_past_its_enumerate_deadline_is_reported_timeout(gpuscout_scout: ScoutFactory) -> None:
    """A plugin overrunning ``enumerate_timeout`` is ``timeout`` and the discovery returns in time."""
    import time

    scout = gpuscout_scout(("slow", FakeSlowEnumerate()), injected([cuda_card(0)]), enumerate_timeout=0.3)
    started = time.monotonic()
    found = scout.discover()
    assert (found.report("slow").status.value, len(found.devices), time.monotonic() - started < 1.2) == (
        "timeout",
        1,
        True,
    )


@pytest.mark.parametrize("plugin", [FakeExitingEnumerate(), FakeWrongType(), FakeEnvWriter()])
def test_a_plugin_that_exits_answers_wrongly_or_writes_env_fails_alone(
    gpuscout_scout: ScoutFactory, plugin: object
) -> None:
    """SystemExit, a wrong answer type or writing ``context.env`` fails that plugin only."""
    found = gpuscout_scout(("bad", plugin), injected([cuda_card(0)])).discover()
    report = found.report("bad")
    assert (report.status.value, report.error != "", len(found.devices)) == ("failed", True, 1)


def test_a_rule_hook_past_its_deadline_counts_as_not_answering(gpuscout_scout: ScoutFactory) -> None:
    """A rule hook overrunning ``hook_timeout`` is reported ``timeout`` and the default applies."""
    scout = gpuscout_scout(("slowrule", FakeSlowRule()), hook_timeout=0.2)
    answer = scout.minimum_memory(DeviceInfo(library="X"))
    statuses = {r.name: r.status.value for r in scout.reports}
    assert (answer, statuses["slowrule"]) == (457 * MIB, "timeout")


@pytest.mark.parametrize("device_id", ["", "GPU-1,GPU-2"])
def test_a_plugin_device_with_an_empty_or_listed_id_fails_that_plugin(
    gpuscout_scout: ScoutFactory, device_id: str
) -> None:
    """A plugin's device whose id is empty or holds ``,`` fails the plugin at the border."""
    found = host_scout(gpuscout_scout, cuda_card(0, id=device_id, filter_id="")).discover()
    assert found.report("injected").status.value == "failed"


def test_the_newer_library_variant_of_one_card_survives(gpuscout_scout: ScoutFactory) -> None:
    """Two records of one CUDA card: ``cuda_v12`` wins over ``cuda_v9`` (numbers, not strings)."""
    old = cuda_card(0, pci_id="", library_path=["/lib/ollama/cuda_v9"])
    new = cuda_card(0, pci_id="", library_path=["/lib/ollama/cuda_v12"])
    found = host_scout(gpuscout_scout, old, new).discover()
    assert ([list(d.library_path) for d in found.devices], [d.reason for d in found.dropped]) == (
        [["/lib/ollama/cuda_v12"]],
        ["duplicate"],
    )


def test_a_blocked_plugin_is_never_imported(tmp_path: Path) -> None:
    """``GPUSCOUT_DISABLE_PLUGINS`` blocks an entry-point plugin before its module is imported."""
    from tests.conftest import write_site

    marker = tmp_path / "imported"
    bomb = f"open({str(marker)!r}, 'w').close()\n"
    site = write_site(
        tmp_path / "site", "gpuscout-bomb", "1.0", {"gpuscout_bomb": bomb}, {"bomb": "gpuscout_bomb"}
    )
    code = (
        "from gpuscout import Scout;"
        "s = Scout(env={'GPUSCOUT_DISABLE_PLUGINS': 'bomb'});"
        "print([r.status.value for r in s.reports if r.name == 'bomb'])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"},
    )
    assert (out.stdout.strip(), marker.exists()) == ("['disabled']", False)


# -- plan: LAYOUT.md's examples from Ollama's own tests ----------------------------------------------


@pytest.mark.parametrize(
    ("layers", "num_gpu", "expected"),
    [([50 * MIB] * 3, -1, [0, 1, 2]), ([100 * MIB] * 4, -1, [1, 2]), ([50 * MIB] * 3, 1, [1])],
)
def test_plan_places_layers_as_ollamas_tests_do(
    gpuscout_scout: ScoutFactory, layers: list[int], num_gpu: int, expected: list[int]
) -> None:
    """On 256 MiB usable (free less 457 MiB): 3x50 MiB -> [0,1,2], 4x100 MiB -> [1,2], num_gpu=1 -> [1]."""
    card = cuda_card(0, free=(457 + 256) * MIB)
    layout = host_scout(gpuscout_scout).plan(layers, [card], SystemInfo(64 * GIB, 64 * GIB), num_gpu=num_gpu)
    assert [(g.id, sorted(g.layers)) for g in layout if g.layers] == [(card.id, expected)]


def test_plan_keeps_the_group_of_the_library_that_fits_more(gpuscout_scout: ScoutFactory) -> None:
    """Backends are never mixed: only the library group that places more layers is used."""
    small = cuda_card(0, free=(457 + 60) * MIB)
    big = DeviceInfo(
        id="GPU-r", library="ROCm", total_memory=GIB, free_memory=(457 + 256) * MIB, pci_id="0000:30:00.0"
    )
    layout = host_scout(gpuscout_scout).plan([50 * MIB] * 3, [small, big], SystemInfo(64 * GIB, 64 * GIB))
    assert {g.library for g in layout if g.layers} == {"ROCm"}


# -- NFD keys ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("library", ["memory", "integrated", "Devices"])
def test_a_library_named_like_a_node_wide_key_keeps_both_meanings(
    gpuscout_scout: ScoutFactory, library: str
) -> None:
    """A library named ``memory``/``integrated``/``Devices`` gets its own ``<lib>-<hash8>.count``;
    the node-wide ``devices``, ``integrated.count`` and ``memory.total-mib`` stay the node's."""
    from gpuscout.cluster import nfd

    devices = [
        DeviceInfo(id=str(n), library=library, total_memory=GIB, free_memory=GIB, pci_id=f"0000:4{n}:00.0")
        for n in range(2)
    ]
    scout = gpuscout_scout(injected(devices))
    labels = nfd.labels(scout.discover(), scout)
    own = [
        k
        for k in labels
        if k.startswith(f"{library.lower()}-") and k.endswith(".count") and k.count(".") == 1
    ]
    assert (
        len(own),
        labels[own[0]],
        labels["devices"],
        labels["integrated.count"],
        labels["memory.total-mib"],
    ) == (1, "2", "2", "0", "2048")
