"""Intel discrete GPUs: the VRAM size that Intel's kernel drivers publish in sysfs.

Vulkan (ANV) reports a device-local heap for an Intel card; the kernel drivers (xe, and i915 as
Intel ships it out of tree) say how much VRAM the card has, under the same PCI address, which
``gpuscout.plugin.drm_vram`` reads (its docstring names the files).

Where one is found it is the device's total and a note says so; free memory stays Vulkan's
(the budget less the usage), never above the total.
"""

from __future__ import annotations

from gpuscout.plugin import Context, DeviceInfo, drm_vram, sizes_apart

VENDOR_INTEL = 0x8086


def with_sysfs_vram(context: Context, device: DeviceInfo, vendor_id: int) -> DeviceInfo:
    """``device`` with its total from Intel's sysfs (``drm_vram``) when it is an Intel GPU
    with a PCI address and the driver publishes one, said in its notes; else unchanged."""
    if vendor_id != VENDOR_INTEL or not device.pci_id or device.software:
        return device
    if not context.platform.startswith("linux"):
        return device  # sysfs is Linux's (MoltenVK on an Intel Mac, Windows: nothing to read)
    found = drm_vram(context, device.pci_id.lower())
    if found is None:
        return device
    total, source = found
    sysfs, heap = sizes_apart(total, device.total_memory)
    note = (
        f"Intel: total {sysfs} from the kernel driver's sysfs ({source}) in place "
        f"of the Vulkan device-local heap's {heap}"
    )
    free = total if device.free_memory_unknown else min(device.free_memory, total)
    return device.evolve(total_memory=total, free_memory=free, notes=(*device.notes, note))
