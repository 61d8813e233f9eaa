"""Vulkan refresh: free memory read again through VK_EXT_memory_budget.

The enumerate path already takes free memory from the budget (``devices.device_memory``), so a
refresh is the same probe (``enumeration.probe``: in this process when the loader would see
``context.env``, else in a child) with each passed device found again among the loader's devices
and its memory figure taken anew. A probe of memory alone would save nothing worth having: almost
all of a probe's time is ``vkCreateInstance`` loading the drivers; the per-device property calls
that let a device be recognised cost microseconds.

Free memory follows ggml-vulkan's rule, as enumerate does (``devices.device_memory``): the sum of
budget - usage over the device-local heaps, over every heap for an integrated GPU.

A device is recognised by its raw enumeration index (``filter_id``, the number
GGML_VK_VISIBLE_DEVICES counts), checked against what the record says about the device (UUID,
PCI id, name); when the loader's order changed (Mesa's device-select layer, a hot-plugged GPU) the
one raw device that fits is taken instead. A device that is gone, ambiguous, or has no
VK_EXT_memory_budget is left out of the answer with a note and a log event, so the core keeps its
previous value and marks it stale.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from gpuscout.plugin import Context, DeviceInfo
from gpuscout.plugins.vulkan.default_set import reported_indices
from gpuscout.plugins.vulkan.devices import device_memory, format_uuid, pci_address
from gpuscout.plugins.vulkan.enumeration import probe
from gpuscout.plugins.vulkan.loader import RawDevice
from gpuscout.plugins.vulkan.names import LIBRARY, VISIBLE_ENV
from gpuscout.plugins.vulkan.vkstructs import EXT_MEMORY_BUDGET


def fits(device: DeviceInfo, raw: RawDevice) -> bool:
    """Whether ``raw`` can be the device ``device`` was built from: the same UUID and PCI id
    where the record has them, and the same name."""
    if device.uuid and format_uuid(raw.uuid) != device.uuid.lower():
        return False
    if device.pci_id and pci_address(raw.pci) != device.pci_id.lower():
        return False
    return raw.name == device.description


def raw_index(device: DeviceInfo, raws: Sequence[RawDevice], visible: str | None) -> int | None:
    """The raw enumeration index ``device`` was reported from: its ``filter_id``, else its
    ``id`` (the ordinal among reported devices) mapped through the order enumerate reports in
    (GGML_VK_VISIBLE_DEVICES, or ggml's default set first)."""
    token = device.filter_id or ""
    if token.isascii() and token.isdigit():
        return int(token)
    if device.id.isascii() and device.id.isdigit():
        indices, _, _ = reported_indices(raws, visible)
        ordinal = int(device.id)
        return indices[ordinal] if ordinal < len(indices) else None
    return None


def find_raw(device: DeviceInfo, raws: Sequence[RawDevice], visible: str | None) -> RawDevice | None:
    """The loader's device that ``device`` is now, or None when none or several fit."""
    index = raw_index(device, raws, visible)
    if index is not None and index < len(raws) and fits(device, raws[index]):
        return raws[index]
    candidates = [r for r in raws if fits(device, r)]
    return candidates[0] if len(candidates) == 1 else None


def refreshed(device: DeviceInfo, raw: RawDevice) -> tuple[DeviceInfo | None, str]:
    """(``device`` with the free memory ``raw`` reports, "") or (None, why it cannot be)."""
    if EXT_MEMORY_BUDGET not in raw.extensions:
        return None, f"the driver does not offer {EXT_MEMORY_BUDGET}"
    _total, free, unknown = device_memory(raw)
    if unknown:
        return None, f"{EXT_MEMORY_BUDGET} gave no budget for the heaps ggml counts"
    return device.evolve(free_memory=min(free, device.total_memory), free_memory_unknown=False), ""


def _skip(context: Context, device: DeviceInfo, reason: str) -> None:
    context.note(
        f"Vulkan device {device.id} ({device.description or device.name}): free memory "
        f"not refreshed: {reason}"
    )
    context.log.info("vulkan.refresh_skipped", device=device.id, reason=reason)


def refresh_devices(devices: Sequence[DeviceInfo], context: Context) -> list[DeviceInfo] | None:
    """The Vulkan devices among ``devices`` whose free memory could be read again; the others
    are left out (with a note), and None when the loader cannot be asked at all."""
    mine = [d for d in devices if d.library == LIBRARY]
    if not mine:
        return None
    if context.platform != sys.platform:
        context.note(
            f"Vulkan: platform {context.platform!r} is not the running one "
            f"({sys.platform!r}), so its loader cannot be asked"
        )
        return None
    result = probe(context)
    if result.error:
        for device in mine:
            _skip(context, device, result.error)
        return None
    visible = context.env.get(VISIBLE_ENV)
    out: list[DeviceInfo] = []
    for device in mine:
        raw = find_raw(device, result.devices, visible)
        if raw is None:
            _skip(context, device, "the loader no longer lists it (or lists several that fit)")
            continue
        fresh, why = refreshed(device, raw)
        if fresh is None:
            _skip(context, device, why)
        else:
            out.append(fresh)
    return out
