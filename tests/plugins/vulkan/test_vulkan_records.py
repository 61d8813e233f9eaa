"""From a raw Vulkan device to a DeviceInfo: ids, type, memory heaps, driver version, UUID."""

from __future__ import annotations

from typing import Any

import pytest

from gpuscout.plugins.vulkan.devices import (
    device_memory,
    driver_version,
    format_uuid,
    max_allocation,
    pci_address,
    to_device_info,
)
from gpuscout.plugins.vulkan.loader import RawDevice
from gpuscout.sizes import GIB, MIB

DEVICE_LOCAL = 1


def raw(**kw: Any) -> RawDevice:
    base: dict[str, Any] = dict(
        index=0,
        name="GPU",
        device_type=2,
        vendor_id=0x10DE,
        device_id=0x2684,
        api_version=(1 << 22) | (3 << 12),
        driver_version=0,
    )
    return RawDevice(**{**base, **kw})


def test_uuid_is_written_8_4_4_4_12_in_lower_case() -> None:
    """32 hex digits become the canonical dashed spelling."""
    assert format_uuid("6D65736132322E332E36000000000000") == "6d657361-3232-2e33-2e36-000000000000"


def test_missing_uuid_stays_empty() -> None:
    """No VkPhysicalDeviceIDProperties: no UUID."""
    assert format_uuid("") == ""


def test_pci_address_is_domain_bus_device_function_in_lower_case_hex() -> None:
    """VK_EXT_pci_bus_info's four numbers print as %04x:%02x:%02x.%x."""
    assert pci_address([0, 0xC4, 0, 0]) == "0000:c4:00.0"
    assert pci_address([0x10, 3, 0x1F, 7]) == "0010:03:1f.7"


def test_pci_address_is_empty_without_pci_bus_info() -> None:
    """A device without VK_EXT_pci_bus_info has no PCI id."""
    assert pci_address(None) == ""


def test_a_discrete_gpu_sums_its_device_local_heaps() -> None:
    """ggml-vulkan.cpp ggml_backend_vk_get_device_memory (ggml d99724f2, line 17881): the sum of
    DEVICE_LOCAL heaps, NVIDIA's 256 MiB BAR window included; host heaps are left out."""
    heaps = [[24 * GIB, DEVICE_LOCAL], [64 * GIB, 0], [256 * MIB, DEVICE_LOCAL]]
    assert device_memory(raw(heaps=heaps)) == (24 * GIB + 256 * MIB, 24 * GIB + 256 * MIB, True)


def test_free_memory_sums_budget_minus_usage_over_the_counted_heaps() -> None:
    """ggml-vulkan.cpp ggml_backend_vk_get_device_memory (line 17901): free adds heapBudget -
    heapUsage of each counted heap."""
    heaps = [[24 * GIB, DEVICE_LOCAL], [64 * GIB, 0], [256 * MIB, DEVICE_LOCAL]]
    d = raw(heaps=heaps, heap_budget=[22 * GIB, 60 * GIB, 200 * MIB], heap_usage=[2 * GIB, 0, 0])
    assert device_memory(d) == (24 * GIB + 256 * MIB, 20 * GIB + 200 * MIB, False)


# A Ryzen APU on RADV (constructed from Mesa's radv_physical_device.c split, not a recording):
# 64 GiB RAM, 512 MiB carve-out; RADV exposes 2/3 of carve-out + GTT as a device-local heap and
# the rest as a host heap.
APU_HEAPS = [[22 * GIB, DEVICE_LOCAL], [11 * GIB, 0]]


def test_an_apu_on_radv_counts_every_heap() -> None:
    """ggml-vulkan.cpp ggml_backend_vk_get_device_memory (line 17898): an INTEGRATED_GPU
    counts all heaps, so RADV's host-visible third is part of the total."""
    d = raw(
        device_type=1,
        vendor_id=0x1002,
        driver_id=3,
        heaps=APU_HEAPS,
        heap_budget=[20 * GIB, 10 * GIB],
        heap_usage=[GIB, 0],
    )
    assert device_memory(d) == (33 * GIB, 29 * GIB, False)
    assert to_device_info(d, 0, "linux").total_memory == 33 * GIB


def test_an_apu_without_memory_budget_reports_its_heaps_as_free() -> None:
    """ggml-vulkan.cpp ggml_backend_vk_get_device_memory (line 17904): without
    VK_EXT_memory_budget each counted heap's size is its free memory (free unknown here)."""
    d = raw(device_type=1, heaps=APU_HEAPS)
    assert device_memory(d) == (33 * GIB, 33 * GIB, True)


def test_usage_above_budget_gives_zero_free_memory() -> None:
    """Free memory never goes negative."""
    d = raw(heaps=[[8 * GIB, DEVICE_LOCAL]], heap_budget=[GIB], heap_usage=[2 * GIB])
    assert device_memory(d) == (8 * GIB, 0, False)


def test_an_empty_budget_counts_as_unknown() -> None:
    """A driver that lists the extension but reports a zero budget leaves free unknown."""
    d = raw(heaps=[[8 * GIB, DEVICE_LOCAL]], heap_budget=[0], heap_usage=[0])
    assert device_memory(d) == (8 * GIB, 8 * GIB, True)


def test_no_device_local_heap_means_no_memory() -> None:
    """A device with only host heaps reports zero memory, free unknown."""
    assert device_memory(raw(heaps=[[16 * GIB, 0]])) == (0, 0, True)


@pytest.mark.parametrize(
    ("vendor", "packed", "info", "plat", "expected"),
    [
        (0x10DE, (535 << 22) | (104 << 14) | (5 << 6), "535.104.05", "linux", (535, 104)),
        (0x8086, (101 << 14) | 4502, "Intel driver", "win32", (101, 4502)),
        (0x1002, (2 << 22) | (0 << 12) | 279, "2023.Q3.1 (LLVM 15.0.3)", "linux", (2, 0)),
        (0x10005, 1, "Mesa 22.3.6 (LLVM 15.0.6)", "linux", (22, 3)),
        (0x1002, (22 << 22) | (3 << 12) | 6, "Mesa 22.3.6", "linux", (22, 3)),
    ],
    ids=["nvidia", "intel-windows", "amd-proprietary", "lavapipe", "radv"],
)
def test_driver_version_follows_each_vendors_packing(
    vendor: int, packed: int, info: str, plat: str, expected: tuple[int, int]
) -> None:
    """Mesa's version comes from driverInfo, others from driverVersion as the vendor packs it."""
    assert driver_version(raw(vendor_id=vendor, driver_version=packed, driver_info=info), plat) == expected


def test_record_ids_are_the_ordinal_and_the_raw_index() -> None:
    """id is the ordinal among reported devices, filter_id the raw enumeration index."""
    d = to_device_info(raw(index=3, heaps=[[8 * GIB, DEVICE_LOCAL]]), ordinal=1, platform="linux")
    assert (d.library, d.id, d.filter_id) == ("Vulkan", "1", "3")


def test_integrated_gpu_is_integrated_and_not_software() -> None:
    """deviceType INTEGRATED_GPU sets integrated only."""
    d = to_device_info(raw(device_type=1), 0, "linux")
    assert d.integrated and not d.software


def test_cpu_device_is_software() -> None:
    """deviceType CPU (lavapipe, SwiftShader) is a software device."""
    d = to_device_info(raw(device_type=4), 0, "linux")
    assert d.software and not d.integrated


def test_nameless_device_is_named_after_its_id() -> None:
    """An empty deviceName gives the name Vulkan<id>."""
    assert to_device_info(raw(name=""), 2, "linux").name == "Vulkan2"


def test_compute_capability_is_unknown() -> None:
    """Vulkan has no compute capability: -1.-1."""
    assert to_device_info(raw(), 0, "linux").compute == "-1.-1"


def test_record_carries_pci_id_and_uuid_when_the_driver_gives_them() -> None:
    """A discrete NVIDIA-like device keeps its PCI address and dashed UUID."""
    d = to_device_info(raw(pci=[0, 1, 0, 0], uuid="ab" * 16), 0, "linux")
    assert d.pci_id == "0000:01:00.0"
    assert d.uuid == "abababab-abab-abab-abab-abababababab"


def test_max_allocation_is_the_max_storage_buffer_range() -> None:
    """ggml-vulkan keeps a tensor on the device only up to maxStorageBufferRange, so that is
    the record's max_allocation (4 GiB - 1 on most desktop drivers)."""
    d = raw(max_storage_buffer_range=2**32 - 1)
    assert max_allocation(d) == 2**32 - 1
    assert to_device_info(d, 0, "linux").max_allocation == 2**32 - 1


def test_max_allocation_is_unknown_when_the_limit_was_not_read() -> None:
    """A raw device without the limit gives max_allocation 0, which the wire leaves out."""
    assert to_device_info(raw(), 0, "linux").max_allocation == 0


def test_moltenvk_driver_version_is_decimal_major_minor_patch() -> None:
    """MoltenVK packs driverVersion as major*10000 + minor*100 + patch (MVK_MAKE_VERSION in
    MoltenVK's public header): 10211 is MoltenVK 1.2.11, not VK_MAKE_VERSION's 0.2."""
    d = raw(
        vendor_id=0x106B, driver_id=14, driver_name="MoltenVK", driver_version=10211, driver_info="1.2.11"
    )
    assert driver_version(d, "darwin") == (1, 2)


def test_moltenvk_without_driver_properties_is_known_by_apple_vendor_on_macos() -> None:
    """Without VkPhysicalDeviceDriverProperties, vendor 0x106B on macOS is MoltenVK."""
    assert driver_version(raw(vendor_id=0x106B, driver_version=10300), "darwin") == (1, 3)
