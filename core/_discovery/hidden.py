"""Devices hidden by a visibility variable, set aside after the merge with their twins.

A plugin reports the devices its library's variable hides too, marked by ``hidden_by``
(``CUDA_VISIBLE_DEVICES=0``), so that the merge meets them: the Vulkan record of a card that CUDA
hides is matched to the hidden CUDA record (same PCI id, or the plugins' duplicate heuristics)
exactly as it would be to a visible one. Afterwards every hidden survivor leaves the list, and
so does every record the merge dropped as its duplicate, each with the reason ``hidden by
NAME=value`` and ``duplicate_of`` naming the hidden device. Without this the twin survived on
its own and a child could be handed the card the user hid (ollama#16508, ollama#17780).

Which view wins is the merge's rule: the preferred library (CUDA, ROCm) carries its mask over to
the card's other views, and a mask of the library that loses (Vulkan) hides only its own record,
never the card that another library shows (see ``merge.merge``).
"""

from __future__ import annotations

from collections.abc import Sequence

from gpuscout._records.device import DeviceID, DeviceInfo
from gpuscout._records.results import DUPLICATE_REASON, Dropped, hidden_reason


def _survivor_of(ref: DeviceID, kept: set[DeviceID], parents: dict[DeviceID, DeviceID]) -> DeviceID:
    """The survivor a chain of duplicates leads to (a record dropped as the duplicate of one
    that was itself replaced later)."""
    seen: set[DeviceID] = set()
    while ref not in kept and ref in parents and ref not in seen:
        seen.add(ref)
        ref = parents[ref]
    return ref


def set_aside(
    kept: Sequence[DeviceInfo], dropped: Sequence[Dropped]
) -> tuple[list[DeviceInfo], list[Dropped]]:
    """``kept`` without its hidden devices, and ``dropped`` with them (first) and their twins.

    A twin of a hidden device is re-pointed at a visible record of the same library and PCI id
    when there is one (another partition of the card: the card stays visible, the twin stays a
    plain duplicate).
    """
    hidden = {d.device_id: d for d in kept if d.hidden_by}
    if not hidden:
        return list(kept), list(dropped)
    visible = [d for d in kept if not d.hidden_by]
    ids = {d.device_id for d in kept}
    parents: dict[DeviceID, DeviceID] = {}
    for drop in dropped:
        if drop.duplicate_of is not None and drop.device.device_id not in ids:
            parents.setdefault(drop.device.device_id, drop.duplicate_of)
    out = [Dropped(d, hidden_reason(d)) for d in kept if d.hidden_by]
    for drop in dropped:
        owner = None
        if drop.duplicate_of is not None and drop.reason == DUPLICATE_REASON:
            owner = hidden.get(_survivor_of(drop.duplicate_of, ids, parents))
        if owner is None:
            out.append(drop)
            continue
        sibling = next(
            (
                v
                for v in visible
                if v.library == owner.library and owner.pci_id and v.pci_id.lower() == owner.pci_id.lower()
            ),
            None,
        )
        if sibling is not None:
            out.append(Dropped(drop.device, DUPLICATE_REASON, sibling.device_id))
        else:
            out.append(Dropped(drop.device, hidden_reason(owner), owner.device_id))
    return visible, out


__all__ = ["set_aside"]
