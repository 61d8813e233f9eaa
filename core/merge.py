"""Merging what several libraries say about the same cards (the seed's Compare and IsBetter)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

import attrs

from gpuscout.records import DeviceComparison, DeviceID, DeviceInfo

DUPLICATE_REASON = "duplicate"
SOFTWARE_REASON = "software device"


@attrs.frozen
class Dropped:
    """A device left out of the ranked list, and why."""

    device: DeviceInfo
    reason: str
    duplicate_of: DeviceID | None = None


def compare(
    a: DeviceInfo, b: DeviceInfo, is_duplicate: Callable[[DeviceInfo, DeviceInfo], bool]
) -> DeviceComparison:
    """The seed's Compare, with the plugins' duplicate heuristics passed in as ``is_duplicate``."""
    if a.pci_id and b.pci_id:
        if a.pci_id.lower() != b.pci_id.lower():
            return DeviceComparison.UNIQUE
        return _same_card(a, b)
    if is_duplicate(a, b):
        return DeviceComparison.DUPLICATE
    if a.pci_id != b.pci_id:
        return DeviceComparison.UNIQUE
    if a.device_id != b.device_id:
        return DeviceComparison.UNIQUE
    return _same_card(a, b)


def _same_card(a: DeviceInfo, b: DeviceInfo) -> DeviceComparison:
    if a.library == b.library:
        return DeviceComparison.SAME_BACKEND
    return DeviceComparison.DUPLICATE


def _version_key(text: str) -> tuple[tuple[int, int | str], ...]:
    # Digit runs compare as numbers (v9 < v12); the seed compares strings, which we fix on purpose.
    return tuple(
        (0, int(part)) if part.isdigit() else (1, part)
        for part in re.findall(r"\d+|\D+", text)
    )


def is_better(a: DeviceInfo, b: DeviceInfo) -> bool:
    """For a SAME_BACKEND pair: True if ``b`` comes from a newer variant of the same library.

    The variant is the suffix after the first ``_`` of the last library path (``cuda_v12``).
    Different prefixes, no suffix or no path at all mean "not better".
    """
    if not a.library_path or not b.library_path:
        return False
    a_lib, b_lib = a.library_path[-1], b.library_path[-1]
    if a_lib == b_lib:
        return False
    a_split, b_split = a_lib.split("_", 1), b_lib.split("_", 1)
    if len(a_split) < 2 or len(b_split) < 2 or a_split[0] != b_split[0]:
        return False
    if a_split[1] == b_split[1]:
        return False
    return _version_key(b_split[1]) > _version_key(a_split[1])


def merge(
    found: Iterable[tuple[str, DeviceInfo]],
    compare_fn: Callable[[DeviceInfo, DeviceInfo], DeviceComparison],
    preferred: Callable[[DeviceInfo, DeviceInfo], bool],
) -> tuple[list[DeviceInfo], list[Dropped]]:
    """Fold ``(plugin, device)`` pairs (in discovery order) into survivors and dropped duplicates.

    DUPLICATE: the preferred library survives (the earlier one when neither or both are).
    SAME_BACKEND: the newer library variant survives, else the earlier one; except that two
    devices with different ids from the same plugin are partitions of one card (MIG instances,
    MI300 compute partitions), which share the card's PCI id and are all kept.
    """
    kept: list[tuple[str, DeviceInfo]] = []
    dropped: list[Dropped] = []
    for source, new in found:
        for i, (old_source, old) in enumerate(kept):
            how = compare_fn(old, new)
            if how is DeviceComparison.UNIQUE:
                continue
            if (how is DeviceComparison.SAME_BACKEND and source == old_source
                    and old.device_id != new.device_id):
                continue
            if how is DeviceComparison.DUPLICATE:
                replace = preferred(new, old) and not preferred(old, new)
            else:
                replace = is_better(old, new)
            if replace:
                kept[i] = (source, new)
                dropped.append(Dropped(old, DUPLICATE_REASON, new.device_id))
            else:
                dropped.append(Dropped(new, DUPLICATE_REASON, old.device_id))
            break
        else:
            kept.append((source, new))
    return [d for _, d in kept], dropped
