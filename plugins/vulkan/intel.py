"""Intel discrete GPUs: the VRAM size that Intel's kernel drivers publish in sysfs.

Vulkan (ANV) reports a device-local heap for an Intel card; the kernel drivers say how much
VRAM the card has, under the same PCI address:

- ``xe``: ``/sys/bus/pci/devices/<addr>/tile<N>/physical_vram_size_bytes``, one per tile, the
  tile's VRAM in bytes (``%llu\\n``); created for discrete parts other than DG1 (Linux
  ``drivers/gpu/drm/xe/xe_tile_sysfs.c``, the kobject ``tile%d`` under the PCI device). It is
  the physical size, somewhat above what allocations can use (igt ``xe_sysfs_tile``).
- ``i915`` as Intel ships it out of tree (intel-gpu/intel-gpu-i915-backports,
  ``drivers/gpu/drm/i915/i915_sysfs.c``): ``lmem_total_bytes`` on the DRM card device,
  ``/sys/bus/pci/devices/<addr>/drm/card<N>/lmem_total_bytes``, the sum of the local memory
  regions, only where the GPU has local memory. Mainline i915 has no such file.

Where one is found it is the device's total and a note says so; free memory stays Vulkan's
(the budget less the usage), never above the total.
"""

from __future__ import annotations

import re

from gpuscout.plugin import PCI_DEVICES, Context, DeviceInfo

VENDOR_INTEL = 0x8086
GIB = 1 << 30
_TILE = re.compile(r"tile[0-9]{1,2}")
_CARD = re.compile(r"card[0-9]{1,3}")
#: The most tiles or cards looked at under one PCI device.
_MAX = 8


def _sum(context: Context, paths: list[str]) -> tuple[int, list[str]]:
    total, used = 0, []
    for path in paths:
        value = context.read_u64(path)
        if value:
            total += value
            used.append(path)
    return total, used


def sysfs_vram(context: Context, address: str) -> tuple[int, str] | None:
    """(bytes, the files read) of the VRAM Intel's driver publishes for PCI device
    ``address`` (``0000:03:00.0``), xe's tiles first, then i915's ``lmem_total_bytes``; None
    when neither is there (an iGPU, mainline i915, a tree without them)."""
    base = f"{PCI_DEVICES}/{address}"
    names = context.list_dir(base) or []
    tiles = [f"{base}/{n}/physical_vram_size_bytes" for n in names if _TILE.fullmatch(n)][:_MAX]
    total, used = _sum(context, tiles)
    if total:
        return total, ", ".join(used)
    cards = [n for n in context.list_dir(f"{base}/drm") or [] if _CARD.fullmatch(n)][:_MAX]
    total, used = _sum(context, [f"{base}/drm/{n}/lmem_total_bytes" for n in cards])
    if total:
        return total, ", ".join(used)
    return None


def with_sysfs_vram(context: Context, device: DeviceInfo, vendor_id: int) -> DeviceInfo:
    """``device`` with its total from Intel's sysfs (``sysfs_vram``) when it is an Intel GPU
    with a PCI address and the driver publishes one, said in its notes; else unchanged."""
    if vendor_id != VENDOR_INTEL or not device.pci_id or device.software:
        return device
    if not context.platform.startswith("linux"):
        return device  # sysfs is Linux's (MoltenVK on an Intel Mac, Windows: nothing to read)
    found = sysfs_vram(context, device.pci_id.lower())
    if found is None:
        return device
    total, source = found
    note = (
        f"Intel: total {total / GIB:.2f} GiB from the kernel driver's sysfs ({source}) in place "
        f"of the Vulkan device-local heap's {device.total_memory / GIB:.2f} GiB"
    )
    free = total if device.free_memory_unknown else min(device.free_memory, total)
    return device.evolve(total_memory=total, free_memory=free, notes=(*device.notes, note))
