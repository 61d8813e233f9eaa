"""Vulkan backend: any GPU through the system's Vulkan loader, duplicate heuristics,
GGML_VK_VISIBLE_DEVICES.

The loader is loaded only inside enumerate and refresh; importing this module costs nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gpuscout.plugin import Context, DeviceInfo, EnvEntry, GgmlOrder, devices_of, for_library, hookimpl
from gpuscout.plugins.vulkan.names import LIBRARY, VISIBLE_ENV

GPUSCOUT_API_VERSION = 1
#: Variables that change what this plugin finds, recorded by ``gpuscout record`` when set.
GPUSCOUT_RECORDED_ENV = ("GGML_VK_*", "VK_*", "MESA_*", "DRI_PRIME", "__GLX_*")
#: What keeps a test's Scout from the machine's real Vulkan drivers (the testing kit sets it
#: unless a test passes its own environment): a driver manifest that does not exist.
GPUSCOUT_TEST_ENV = {"VK_DRIVER_FILES": "/nonexistent/gpuscout-test-icd.json"}


@hookimpl
def gpuscout_enumerate(context: Context) -> list[DeviceInfo]:
    """Every physical device the loader lists; none, with a note, without a loader or driver."""
    from gpuscout.plugins.vulkan.enumeration import enumerate_devices

    return enumerate_devices(context)


@hookimpl
def gpuscout_is_duplicate(a: DeviceInfo, b: DeviceInfo) -> bool | None:
    """A Vulkan device and a CUDA/ROCm one are one card when their vendor UUIDs match;
    otherwise the seed's likelyVulkanDuplicate decides: the same normalized description and
    total memory within 5 % (at least 512 MiB). A Vulkan device and a Metal one with the same
    name, both integrated, are one GPU seen through MoltenVK and Metal. (Two PCI ids are
    compared by the core first.)"""
    from gpuscout.plugins.vulkan.rules import likely_duplicate, same_unified_gpu, same_uuid

    found = same_uuid(a, b) or likely_duplicate(a, b) or same_unified_gpu(a, b)
    return True if found else None


@hookimpl
def gpuscout_duplicate_key(device: DeviceInfo) -> frozenset[tuple[str, ...]]:
    """The keys a twin must share with ``device`` for ``gpuscout_is_duplicate`` to say True: its
    128-bit UUID, its normalized description with its memory size bucket, and for an integrated
    Metal or Vulkan device its normalized description alone. Answered for every library, since
    the other side of a twin pair is a CUDA, ROCm or Metal device; a device with none of these
    matches nothing."""
    from gpuscout.plugins.vulkan.rules import twin_keys

    return twin_keys(device)


@hookimpl
def gpuscout_isolate_env(
    selection: Sequence[DeviceInfo], env: Mapping[str, str], context: Context
) -> dict[str, str] | None:
    """Hide every Vulkan device when none is selected (ggml-vulkan reads "" as none)."""
    return None if devices_of(selection, LIBRARY) else {VISIBLE_ENV: ""}


@for_library(LIBRARY)
def gpuscout_flash_attention(device: DeviceInfo) -> bool | None:
    """Vulkan devices pass (the seed)."""
    return True


@for_library(LIBRARY)
def gpuscout_ggml_supports_op(device: DeviceInfo, op: str, params: Mapping[str, int]) -> bool | None:
    """ggml-vulkan's supports_op for the operations asked about (``rules.supports_op``)."""
    from gpuscout.plugins.vulkan.rules import supports_op

    return supports_op(op, params)


@hookimpl
def gpuscout_visible_env(selection: Sequence[DeviceInfo], context: Context) -> list[EnvEntry] | None:
    """GGML_VK_VISIBLE_DEVICES only for a single-device selection (the seed's mustFilter: one
    device, or all CUDA, which a Vulkan device never is). The value is the device's raw loader
    index (``filter_id``), the number ggml-vulkan reads, never the ordinal ``id``."""
    if len(selection) != 1 or selection[0].library != LIBRARY:
        return None
    d = selection[0]
    return [EnvEntry(0, VISIBLE_ENV, d.filter_id or d.id)]


#: ggml's registry lists the Vulkan backend after CUDA/HIP (0), Metal (10) and SYCL (20).
GGML_RANK = 30


@hookimpl
def gpuscout_ggml_devices(devices: Sequence[DeviceInfo], context: Context) -> GgmlOrder | None:
    """The Vulkan devices ggml-vulkan enumerates: those GGML_VK_VISIBLE_DEVICES names, in its
    order (an index named twice is two ggml devices), else the default set (the devices not
    marked unused), then any software device among ``devices`` (there only when the caller
    asked for software devices). Named ``Vulkan<n>`` in that order, with the variable that
    makes a child enumerate exactly those."""
    from gpuscout.plugins.vulkan.visibility import parse_indices

    mine = devices_of(devices, LIBRARY)
    if not mine:
        return None
    by_index = {(d.filter_id or d.id): i for i, d in mine}
    raw = context.env.get(VISIBLE_ENV)
    order: list[int] = []
    if raw:
        order = [by_index[str(k)] for k in parse_indices(raw) if str(k) in by_index]
    else:
        order = [i for i, d in mine if not d.unused_reason]
    order += [i for i, d in mine if d.software and i not in order]
    if not order:
        return None
    value = ",".join(devices[i].filter_id or devices[i].id for i in order)
    return GgmlOrder(GGML_RANK, tuple((i, f"Vulkan{n}") for n, i in enumerate(order)), {VISIBLE_ENV: value})


@for_library(LIBRARY)
def gpuscout_refresh(devices: Sequence[DeviceInfo], context: Context) -> list[DeviceInfo] | None:
    """Vulkan devices with free memory read again through VK_EXT_memory_budget (one loader
    probe, in-process or in a child as for enumerate); a device without the extension, or that
    the loader no longer lists, is left out with a note (the core marks it stale)."""
    from gpuscout.plugins.vulkan.refresh import refresh_devices

    return refresh_devices(devices, context)
