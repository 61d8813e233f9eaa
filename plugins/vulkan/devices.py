"""From what the loader said about a physical device to a gpuscout DeviceInfo (pure functions)."""

from __future__ import annotations

import re

from gpuscout.plugin import DeviceInfo, sizes_apart
from gpuscout.plugins.vulkan.loader import RawDevice
from gpuscout.plugins.vulkan.names import LIBRARY

#: VkPhysicalDeviceType values.
TYPE_OTHER, TYPE_INTEGRATED_GPU, TYPE_DISCRETE_GPU, TYPE_VIRTUAL_GPU, TYPE_CPU = range(5)
#: VK_MEMORY_HEAP_DEVICE_LOCAL_BIT.
HEAP_DEVICE_LOCAL = 0x1
VENDOR_NVIDIA, VENDOR_INTEL, VENDOR_AMD = 0x10DE, 0x8086, 0x1002
VENDOR_QUALCOMM, VENDOR_APPLE = 0x5143, 0x106B
#: VkDriverId of MoltenVK.
DRIVER_ID_MOLTENVK = 14
_MESA_VERSION = re.compile(r"\bMesa (\d+)\.(\d+)")


def format_uuid(hex32: str) -> str:
    """32 hex digits as 8-4-4-4-12 in lower case ("" stays ""; other lengths are kept as given)."""
    h = hex32.lower()
    if len(h) != 32:
        return h
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


#: What an integrated Vulkan device's note says about its memory.
SHARED_NOTE = (
    "integrated GPU: its heaps are (partly) system memory, all counted by ggml-vulkan (on an "
    "AMD APU the BIOS carve-out and GTT), so its free memory is partly the system's"
)


def pci_address(pci: list[int] | None) -> str:
    """``%04x:%02x:%02x.%x`` from VK_EXT_pci_bus_info's domain/bus/device/function; "" without."""
    if not pci or len(pci) != 4:
        return ""
    domain, bus, device, function = pci
    return f"{domain:04x}:{bus:02x}:{device:02x}.{function:x}"


def counted_heaps(raw: RawDevice) -> list[int]:
    """The heaps ggml-vulkan counts: every heap of an integrated GPU, else the DEVICE_LOCAL ones.

    ggml-org/ggml ``ggml-vulkan.cpp`` ``ggml_backend_vk_get_device_memory`` (commit d99724f2,
    line 17881): an INTEGRATED_GPU counts all heaps, since RADV on an APU marks only part of
    the shared memory (about 2/3 of carve-out plus GTT) device-local and the rest host-visible.
    """
    integrated = raw.device_type == TYPE_INTEGRATED_GPU
    return [i for i, (_size, flags) in enumerate(raw.heaps) if integrated or flags & HEAP_DEVICE_LOCAL]


def device_memory(raw: RawDevice) -> tuple[int, int, bool]:
    """(total, free, free_unknown) as ggml-vulkan sizes the device.

    Total is the *sum* of the counted heaps (``counted_heaps``). On NVIDIA without resizable BAR
    that includes the 256 MiB BAR window, a second device-local heap: ggml counts it, so it is
    counted here (the duplicate heuristic's 512 MiB floor absorbs it). Free is, per counted heap,
    heapBudget - heapUsage with VK_EXT_memory_budget (floored at 0 per heap, where ggml's size_t
    would wrap), else the heap's size; then ``free_unknown`` is True. A budget of 0 on every
    counted heap (a driver that lists the extension but fills nothing in) counts as unknown too.
    A budget above its heap's size is taken as the size (``over_budget``): the spec says it
    "must be less than or equal to" it, and an Intel driver on Windows reported 46.76 GiB on a
    36.20 GiB heap, so that free came out above total (ggml-org/llama.cpp#29277).
    """
    heaps = counted_heaps(raw)
    if not heaps:
        return 0, 0, True
    total = sum(raw.heaps[i][0] for i in heaps)
    budget, usage = raw.heap_budget, raw.heap_usage
    if (
        budget is None
        or usage is None
        or max(heaps) >= len(budget)
        or max(heaps) >= len(usage)
        or not any(budget[i] for i in heaps)
    ):
        return total, total, True
    return total, sum(max(0, min(budget[i], raw.heaps[i][0]) - usage[i]) for i in heaps), False


def over_budget(raw: RawDevice) -> list[str]:
    """One sentence per counted heap whose VK_EXT_memory_budget budget exceeds the heap's
    size (``device_memory`` clamps it there); [] when none does or there is no budget."""
    budget = raw.heap_budget or []
    found = []
    for i in counted_heaps(raw):
        size = raw.heaps[i][0]
        if i < len(budget) and budget[i] > size:
            over, heap = sizes_apart(budget[i], size)
            found.append(
                f"Vulkan: heap {i}'s memory budget {over} is above the heap's "
                f"{heap} (the driver breaks VK_EXT_memory_budget's rule, "
                "ggml-org/llama.cpp#29277); counted as the heap's size"
            )
    return found


def max_allocation(raw: RawDevice) -> int:
    """The largest single tensor or buffer ggml-vulkan keeps on the device, in bytes (0 unknown).

    ggml-vulkan checks tensor sizes against ``VkPhysicalDeviceLimits.maxStorageBufferRange``
    (a shader binds each tensor as one storage buffer), so a larger tensor stays on the CPU with
    the ops that use it. lavapipe reports 128 MiB. VkPhysicalDeviceMaintenance3Properties'
    maxMemoryAllocationSize is not read by the loader binding, so the range alone decides.
    """
    return raw.max_storage_buffer_range


def is_moltenvk(raw: RawDevice, platform: str) -> bool:
    """MoltenVK by its VkDriverId; without driver properties, Apple's vendor id on macOS."""
    if raw.driver_id:
        return raw.driver_id == DRIVER_ID_MOLTENVK
    return raw.vendor_id == VENDOR_APPLE and platform == "darwin"


def driver_version(raw: RawDevice, platform: str) -> tuple[int, int]:
    """(major, minor) of the driver.

    Mesa drivers say "Mesa X.Y.Z" in driverInfo (their driverVersion is not Mesa's: lavapipe
    reports 0.0.1), so that wins. Otherwise driverVersion decoded as the vendors pack it:
    NVIDIA 10.8.8.6 bits, Intel on Windows 18.14, MoltenVK decimal major*10000 + minor*100 +
    patch (``MVK_MAKE_VERSION`` in MoltenVK's ``mvk_private_api.h``/``vk_mvk_moltenvk.h``:
    10211 is 1.2.11), everyone else VK_MAKE_VERSION 10.10.12.
    """
    match = _MESA_VERSION.search(raw.driver_info)
    if match:
        return int(match.group(1)), int(match.group(2))
    v = raw.driver_version
    if is_moltenvk(raw, platform):
        return v // 10000, v // 100 % 100
    if raw.vendor_id == VENDOR_NVIDIA:
        return (v >> 22) & 0x3FF, (v >> 14) & 0xFF
    if raw.vendor_id == VENDOR_INTEL and platform == "win32":
        return v >> 14, v & 0x3FFF
    return (v >> 22) & 0x3FF, (v >> 12) & 0x3FF


def to_device_info(raw: RawDevice, ordinal: int, platform: str) -> DeviceInfo:
    """The record for ``raw``, reported as the ``ordinal``-th Vulkan device.

    ``id`` is the ordinal among reported devices and ``filter_id`` the raw enumeration index
    (what GGML_VK_VISIBLE_DEVICES counts). Vulkan has no compute capability: compute is -1.-1
    (unknown). ``max_allocation`` is the device's maxStorageBufferRange (``max_allocation``
    says why). An INTEGRATED_GPU is ``shared_memory``: its memory is the host's.
    """
    total, free, unknown = device_memory(raw)
    major, minor = driver_version(raw, platform)
    integrated = raw.device_type == TYPE_INTEGRATED_GPU
    return DeviceInfo(
        id=str(ordinal),
        library=LIBRARY,
        name=raw.name or f"Vulkan{ordinal}",
        description=raw.name,
        filter_id=str(raw.index),
        integrated=integrated,
        # VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: the device shares the host's memory (its
        # heaps are the carve-out and the GTT share of system RAM, all counted by ggml).
        shared_memory=integrated,
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
        max_allocation=max_allocation(raw),
        notes=((SHARED_NOTE,) if integrated else ()) + tuple(over_budget(raw)),
    )
