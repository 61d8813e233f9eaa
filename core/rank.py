"""Ordering and grouping of devices (the seed's ByFreeMemory, ByLibrary, ByPerformance, LibraryPaths)."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import TypeVar

from gpuscout.records import DeviceInfo

T = TypeVar("T")


def _rank_key(d: DeviceInfo) -> tuple[bool, bool, int, str, str]:
    # Software renderers go last: nobody wants llvmpipe picked over a real GPU.
    return (d.software, d.integrated, -d.free_memory, d.library, d.id)


def rank(devices: Iterable[DeviceInfo]) -> list[DeviceInfo]:
    """Best first: discrete before integrated, then free memory descending, then library and id.

    Deterministic for any input order (software devices, when present, come after the rest).
    """
    return sorted(devices, key=_rank_key)


def by_free_memory(devices: Iterable[DeviceInfo]) -> list[DeviceInfo]:
    """The seed's ``sort.Sort(ByFreeMemory)``: integrated first, then ascending free memory.

    Reverse it to get the largest discrete GPU first, as the seed's layout code does.
    """
    return sorted(devices, key=lambda d: (not d.integrated, d.free_memory))


def _group(items: Iterable[T], key: Callable[[T], Hashable]) -> list[list[T]]:
    groups: dict[Hashable, list[T]] = {}
    for item in items:
        groups.setdefault(key(item), []).append(item)
    return list(groups.values())


def by_library(devices: Iterable[DeviceInfo]) -> list[list[DeviceInfo]]:
    """Devices grouped by library, groups in first-seen order (the seed's ByLibrary)."""
    return _group(devices, lambda d: d.library)


def by_performance(devices: Iterable[DeviceInfo]) -> list[list[DeviceInfo]]:
    """Devices grouped by integrated-ness, groups in first-seen order (the seed's ByPerformance)."""
    return _group(devices, lambda d: d.integrated)


def library_paths(devices: Iterable[DeviceInfo], base: Sequence[str] = ()) -> list[str]:
    """``base`` then every device's library paths, first occurrence kept (the seed's LibraryPaths)."""
    seen: dict[str, None] = dict.fromkeys(base)
    for d in devices:
        seen.update(dict.fromkeys(p for p in d.library_path if p not in seen))
    return list(seen)
