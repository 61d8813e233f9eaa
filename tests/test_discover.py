"""Discovery end to end with injected plugins: merge, software drop, rank, grouping."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from gpuscout import (
    DeviceID,
    DeviceInfo,
    GpuscoutError,
    Scout,
    by_library,
    by_performance,
    hookimpl,
    library_paths,
    rank,
)
from gpuscout.sizes import GIB
from gpuscout.testing import ScoutFactory, injected

# A mixed box: two NVIDIA cards seen by CUDA and by Vulkan, one AMD card seen by ROCm and by
# Vulkan, an AMD iGPU only Vulkan sees, and lavapipe.
H100 = DeviceInfo(
    id="GPU-11111111-2222-3333-4444-555555555555",
    library="CUDA",
    name="CUDA0",
    description="NVIDIA H100 80GB HBM3",
    pci_id="0000:19:00.0",
    total_memory=80 * GIB,
    free_memory=79 * GIB,
    compute_major=9,
)
RTX = DeviceInfo(
    id="GPU-aaaaaaaa-2222-3333-4444-555555555555",
    library="CUDA",
    name="CUDA1",
    description="NVIDIA GeForce RTX 4090",
    total_memory=24 * GIB,
    free_memory=23 * GIB,
    compute_major=8,
    compute_minor=9,
)
XTX = DeviceInfo(
    id="GPU-0123456789abcdef",
    library="ROCm",
    name="ROCm0",
    description="AMD Radeon RX 7900 XTX",
    pci_id="0000:C4:00.0",
    total_memory=24 * GIB,
    free_memory=20 * GIB,
    compute_major=0x11,
)
VK_H100 = DeviceInfo(
    id="0",
    filter_id="0",
    library="Vulkan",
    description="NVIDIA H100 80GB HBM3",
    pci_id="0000:19:00.0",
    total_memory=80 * GIB,
    free_memory=79 * GIB,
)
VK_RTX = DeviceInfo(
    id="1",
    filter_id="1",
    library="Vulkan",
    description="NVIDIA GeForce RTX 4090",
    total_memory=24 * GIB,
    free_memory=23 * GIB,
)
VK_XTX = DeviceInfo(
    id="2",
    filter_id="2",
    library="Vulkan",
    description="AMD Radeon RX 7900 XTX (RADV NAVI31)",
    pci_id="0000:c4:00.0",
    total_memory=24 * GIB,
    free_memory=21 * GIB,
)
VK_IGPU = DeviceInfo(
    id="3",
    filter_id="3",
    library="Vulkan",
    description="AMD Radeon Graphics (RADV GFX1103_R1)",
    integrated=True,
    total_memory=4 * GIB,
    free_memory=3 * GIB,
)
LAVAPIPE = DeviceInfo(
    id="4",
    filter_id="5",
    library="Vulkan",
    description="llvmpipe",
    software=True,
    total_memory=2 * GIB,
    free_memory=2 * GIB,
)
MIXED = [VK_H100, VK_RTX, H100, VK_XTX, VK_IGPU, LAVAPIPE, RTX, XTX]


def test_mixed_box_keeps_one_record_per_card_ranked(scout_with: Callable[..., Scout]) -> None:
    """Twins collapse to the preferred library; the result is ranked best first."""
    found = scout_with(MIXED).discover()
    assert found.devices == [H100, RTX, XTX, VK_IGPU]


def test_each_dropped_twin_names_its_survivor(scout_with: Callable[..., Scout]) -> None:
    """Dropped Vulkan twins carry reason duplicate and the id of the card that stayed."""
    found = scout_with(MIXED).discover()
    dropped = {(d.device.id, d.reason, d.duplicate_of) for d in found.dropped}
    assert dropped == {
        ("0", "duplicate", H100.device_id),
        ("1", "duplicate", RTX.device_id),
        ("2", "duplicate", XTX.device_id),
        ("4", "software device", None),
    }


def test_software_devices_are_kept_last_when_asked(scout_with: Callable[..., Scout]) -> None:
    """include_software ranks lavapipe, after every real device."""
    found = scout_with(MIXED).discover(include_software=True)
    assert found.devices[-1] == LAVAPIPE and len(found.devices) == 5
    assert all(d.reason == "duplicate" for d in found.dropped)


def test_discovery_order_does_not_change_the_result(scout_with: Callable[..., Scout]) -> None:
    """The same devices found in another order give the same ranked list."""
    assert scout_with(list(reversed(MIXED))).discover().devices == scout_with(MIXED).discover().devices


def test_nothing_but_twins_and_software_is_dropped(scout_with: Callable[..., Scout]) -> None:
    """Integrated devices and devices with less free memory than the reserve are reported."""
    tiny = DeviceInfo(id="GPU-t", library="CUDA", description="tiny", total_memory=GIB, free_memory=1024)
    found = scout_with([VK_IGPU, tiny]).discover()
    assert found.devices == [tiny, VK_IGPU] and found.dropped == []


def test_same_backend_keeps_the_newer_library_variant(scout_with: Callable[..., Scout]) -> None:
    """Versions compare as numbers: cuda_v12 beats cuda_v9 (the seed's string compare would not)."""
    old = H100.evolve(library_path=["/usr/lib/ollama", "/usr/lib/ollama/cuda_v9"])
    new = H100.evolve(library_path=["/usr/lib/ollama", "/usr/lib/ollama/cuda_v12"])
    for order in ([old, new], [new, old]):
        found = scout_with(order).discover()
        assert found.devices == [new]
        assert [(d.device, d.duplicate_of) for d in found.dropped] == [(old, new.device_id)]


def test_same_backend_without_a_newer_variant_keeps_the_first(scout_with: Callable[..., Scout]) -> None:
    """Different library prefixes, or none, keep the device found first."""
    a = H100.evolve(library_path=["/x/cuda_v12"])
    b = H100.evolve(library_path=["/x/rocm_v13"], name="second")
    assert scout_with([a, b]).discover().devices == [a]
    assert scout_with([H100, H100.evolve(name="second")]).discover().devices == [H100]


def test_no_cpu_device_is_listed_and_system_memory_is_reported(scout_with: Callable[..., Scout]) -> None:
    """discover() lists no CPU device; system memory is on .system."""
    found = scout_with([]).discover()
    assert found.devices == [] and found.system.total_memory > 0


def test_discovery_reports_every_plugin(scout_with: Callable[..., Scout]) -> None:
    """Discovery carries one report per plugin, the injected one included."""
    found = scout_with(MIXED).discover()
    assert [r.name for r in found.plugins] == ["cuda", "rocm", "metal", "vulkan", "injected"]
    assert found.report("injected").devices == len(MIXED)


def test_a_report_is_found_by_its_plugin_name_in_any_case(scout_with: Callable[..., Scout]) -> None:
    """``Discovery.report`` finds a plugin's report as allow lists compare names."""
    found = scout_with(MIXED).discover()
    assert found.report(" Injected ") is found.plugins[-1]


def test_asking_for_a_report_no_plugin_wrote_names_the_reports_there(
    scout_with: Callable[..., Scout],
) -> None:
    """An unknown name raises a GpuscoutError naming it and each plugin that has a report."""
    found = scout_with(MIXED).discover()
    with pytest.raises(GpuscoutError, match=r"'acme'.*'cuda', 'rocm', 'metal', 'vulkan', 'injected'"):
        found.report("acme")


# -- rank and grouping -------------------------------------------------------------------------


def test_rank_puts_discrete_first_then_free_memory_then_library_and_id() -> None:
    """rank() is deterministic: discrete, free memory descending, library, id."""
    a = DeviceInfo(id="1", library="CUDA", free_memory=8)
    b = DeviceInfo(id="0", library="CUDA", free_memory=8)
    c = DeviceInfo(id="0", library="ROCm", free_memory=8)
    d = DeviceInfo(id="9", library="CUDA", free_memory=100, integrated=True)
    e = DeviceInfo(id="5", library="Vulkan", free_memory=9)
    assert rank([d, c, a, b, e]) == [e, b, a, c, d]


def test_by_library_groups_in_first_seen_order() -> None:
    """by_library keeps the order libraries first appear in."""
    devices = [
        DeviceInfo(id="0", library="Vulkan"),
        DeviceInfo(id="0", library="CUDA"),
        DeviceInfo(id="1", library="Vulkan"),
    ]
    assert by_library(devices) == [[devices[0], devices[2]], [devices[1]]]


def test_by_performance_groups_integrated_apart() -> None:
    """by_performance groups by integrated-ness in first-seen order."""
    devices = [DeviceInfo(id="0", integrated=True), DeviceInfo(id="1"), DeviceInfo(id="2", integrated=True)]
    assert by_performance(devices) == [[devices[0], devices[2]], [devices[1]]]


def test_library_paths_start_with_base_and_drop_repeats() -> None:
    """library_paths lists base first, then each new path in device order."""
    devices = [DeviceInfo(library_path=["/o", "/o/cuda_v12"]), DeviceInfo(library_path=["/o", "/o/vulkan"])]
    assert library_paths(devices, base=["/o"]) == ["/o", "/o/cuda_v12", "/o/vulkan"]
    assert library_paths([]) == []


def test_device_ids_compare_by_value() -> None:
    """DeviceID equality is by id and library."""
    assert DeviceID("0", "CUDA") == DeviceID("0", "CUDA") != DeviceID("0", "ROCm")


class Partitions:
    """A backend that reports two MIG instances of one card, at the card's PCI address."""

    @hookimpl
    def gpuscout_enumerate(self, context: object) -> list[DeviceInfo]:
        return [
            DeviceInfo(
                id=f"MIG-{i}",
                library="CUDA",
                pci_id="0000:19:00.0",
                description="NVIDIA A100-SXM4-40GB MIG 3g.20gb",
                total_memory=20 * GIB,
                free_memory=19 * GIB,
            )
            for i in (1, 2)
        ]


def test_partitions_of_one_card_are_all_kept_and_its_twin_dropped(gpuscout_scout: ScoutFactory) -> None:
    """Same-library records of one PCI id from one plugin are partitions, not repeats."""
    twin = VK_H100.evolve(description="NVIDIA A100-SXM4-40GB")
    scout = gpuscout_scout("cuda", "vulkan", injected([twin]), ("mig", Partitions()))
    found = scout.discover()
    assert [d.id for d in found.devices] == ["MIG-1", "MIG-2"]
    assert [(d.device.id, d.duplicate_of) for d in found.dropped] == [("0", DeviceID("MIG-1", "CUDA"))]


def test_the_same_card_from_two_plugins_of_one_library_is_merged(gpuscout_scout: ScoutFactory) -> None:
    """Two sources reporting one CUDA card at one PCI id still give one device (the seed)."""
    scout = gpuscout_scout("cuda", injected([H100], "a"), injected([H100.evolve(id="GPU-other")], "b"))
    assert scout.discover().devices == [H100]
