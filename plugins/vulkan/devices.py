"""From what the loader said about a physical device to a gpuscout DeviceInfo (pure functions)."""

from __future__ import annotations

import re

from gpuscout.plugin import DeviceInfo
from gpuscout.plugins.vulkan.loader import RawDevice
from gpuscout.plugins.vulkan.names import LIBRARY

#: VkPhysicalDeviceType values.
TYPE_OTHER, TYPE_INTEGRATED_GPU, TYPE_DISCRETE_GPU, TYPE_VIRTUAL_GPU, TYPE_CPU = range(5)
#: VK_MEMORY_HEAP_DEVICE_LOCAL_BIT.
HEAP_DEVICE_LOCAL = 0x1
VENDOR_NVIDIA, VENDOR_INTEL = 0x10DE, 0x8086
_MESA_VERSION = re.compile(r"\bMesa (\d+)\.(\d+)")


def format_uuid(hex32: str) -> str:
    """32 hex digits as 8-4-4-4-12 in lower case ("" stays ""; other lengths are kept as given)."""
    h = hex32.lower()
    if len(h) != 32:
        return h
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def pci_address(pci: list[int] | None) -> str:
    """``%04x:%02x:%02x.%x`` from VK_EXT_pci_bus_info's domain/bus/device/function; "" without."""
    if not pci or len(pci) != 4:
        return ""
    domain, bus, device, function = pci
    return f"{domain:04x}:{bus:02x}:{device:02x}.{function:x}"


def device_memory(raw: RawDevice) -> tuple[int, int, bool]:
    """(total, free, free_unknown) of the largest DEVICE_LOCAL heap.

    The largest heap, not the sum: NVIDIA lists its 256 MiB BAR window as a second device-local
    heap that is part of the same VRAM, so a sum would count it twice (AMD without resizable BAR
    splits VRAM the same way; the largest heap then misses 256 MiB, inside the duplicate
    heuristic's tolerance). Free is budget - usage of that heap with VK_EXT_memory_budget,
    otherwise unknown (reported as the total).
    """
    best = -1
    for i, (size, flags) in enumerate(raw.heaps):
        if flags & HEAP_DEVICE_LOCAL and (best < 0 or size > raw.heaps[best][0]):
            best = i
    if best < 0:
        return 0, 0, True
    total = raw.heaps[best][0]
    budget, usage = raw.heap_budget, raw.heap_usage
    if budget is None or usage is None or best >= len(budget) or best >= len(usage):
        return total, total, True
    if budget[best] == 0:  # a driver that lists the extension but fills nothing in
        return total, total, True
    return total, max(0, budget[best] - usage[best]), False


def driver_version(raw: RawDevice, platform: str) -> tuple[int, int]:
    """(major, minor) of the driver.

    Mesa drivers say "Mesa X.Y.Z" in driverInfo (their driverVersion is not Mesa's: lavapipe
    reports 0.0.1), so that wins. Otherwise driverVersion decoded as the vendors pack it:
    NVIDIA 10.8.8.6 bits, Intel on Windows 18.14, everyone else VK_MAKE_VERSION 10.10.12.
    """
    match = _MESA_VERSION.search(raw.driver_info)
    if match:
        return int(match.group(1)), int(match.group(2))
    v = raw.driver_version
    if raw.vendor_id == VENDOR_NVIDIA:
        return (v >> 22) & 0x3FF, (v >> 14) & 0xFF
    if raw.vendor_id == VENDOR_INTEL and platform == "win32":
        return v >> 14, v & 0x3FFF
    return (v >> 22) & 0x3FF, (v >> 12) & 0x3FF


def to_device_info(raw: RawDevice, ordinal: int, platform: str) -> DeviceInfo:
    """The record for ``raw``, reported as the ``ordinal``-th Vulkan device.

    ``id`` is the ordinal among reported devices and ``filter_id`` the raw enumeration index
    (what GGML_VK_VISIBLE_DEVICES counts). Vulkan has no compute capability: compute is -1.-1
    (unknown).
    """
    total, free, unknown = device_memory(raw)
    major, minor = driver_version(raw, platform)
    return DeviceInfo(
        id=str(ordinal),
        library=LIBRARY,
        name=raw.name or f"Vulkan{ordinal}",
        description=raw.name,
        filter_id=str(raw.index),
        integrated=raw.device_type == TYPE_INTEGRATED_GPU,
        pci_id=pci_address(raw.pci),
        total_memory=total,
        free_memory=free,
        compute_major=-1,
        compute_minor=-1,
        driver_major=major,
        driver_minor=minor,
        uuid=format_uuid(raw.uuid),
        free_memory_unknown=unknown,
        software=raw.device_type == TYPE_CPU,
    )
