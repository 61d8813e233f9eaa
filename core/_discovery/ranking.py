"""Ordering and grouping of devices (the seed's ByFreeMemory, ByLibrary, ByPerformance, LibraryPaths)."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple, TypeVar

from gpuscout._records.device import DeviceID, DeviceInfo, device_list
from gpuscout.errors import GpuscoutError

T = TypeVar("T")


class Criterion(NamedTuple):
    """One step of the ranking: of two devices, the one with the smaller ``key`` goes first."""

    name: str
    key: Callable[[DeviceInfo], Any]


#: The ranking, one criterion at a time, in the order they count. Software renderers go last
#: (nobody wants llvmpipe picked over a real GPU), then devices the runtime would not use
#: unless selected (``unused_reason``), then integrated after discrete, then free
#: memory descending (free memory under the device's budget, ``usable_free``), then library and
#: id so that the order never depends on the input's.
CRITERIA = (
    Criterion("software", lambda d: d.software),
    Criterion("unused", lambda d: bool(d.unused_reason)),
    Criterion("integrated", lambda d: d.integrated),
    Criterion("free_memory", lambda d: -d.usable_free),
    Criterion("library", lambda d: d.library),
    Criterion("id", lambda d: d.id),
)
#: The name of the criterion a ``prefer`` order adds before all the others.
PREFER = "prefer"


def criteria(preference: Mapping[DeviceID, int] | None = None) -> tuple[Criterion, ...]:
    """The criteria in the order they count: ``CRITERIA``, after a ``prefer`` criterion when
    ``preference`` (device -> place in the prefer order, a device absent from it after every
    one present) holds any device. A user's stated order comes before every rule of thumb."""
    if not preference:
        return CRITERIA
    unmatched = max(preference.values()) + 1
    table = dict(preference)
    return (Criterion(PREFER, lambda d: table.get(d.device_id, unmatched)), *CRITERIA)


def deciding_criterion(
    device: DeviceInfo, following: DeviceInfo, preference: Mapping[DeviceID, int] | None = None
) -> Criterion | None:
    """The first criterion that tells ``device`` from ``following`` (None: they tie)."""
    for criterion in criteria(preference):
        if criterion.key(device) != criterion.key(following):
            return criterion
    return None


def rank(devices: Iterable[DeviceInfo], preference: Mapping[DeviceID, int] | None = None) -> list[DeviceInfo]:
    """Best first: discrete before integrated, then free memory descending, then library and id.

    Deterministic for any input order. Software devices, when present, come after the rest, and
    before them devices the runtime would not use unless selected (``unused_reason``). With a
    ``preference`` (``gpuscout._discovery.budgets``: device -> index of the first prefer selector it
    matches), devices come in that order first, every unmatched one after them, each group in
    the usual order.
    """
    table = criteria(preference)
    return sorted(device_list(devices, "rank"), key=lambda d: tuple(criterion.key(d) for criterion in table))


def _group(items: Iterable[T], key: Callable[[T], Hashable]) -> list[list[T]]:
    groups: dict[Hashable, list[T]] = {}
    for item in items:
        groups.setdefault(key(item), []).append(item)
    return list(groups.values())


def by_library(devices: Iterable[DeviceInfo]) -> list[list[DeviceInfo]]:
    """Devices grouped by library, groups in first-seen order (the seed's ByLibrary)."""
    return _group(device_list(devices, "by_library"), lambda d: d.library)


def by_performance(devices: Iterable[DeviceInfo]) -> list[list[DeviceInfo]]:
    """Devices grouped by integrated-ness, groups in first-seen order (the seed's ByPerformance)."""
    return _group(device_list(devices, "by_performance"), lambda d: d.integrated)


def library_paths(devices: Iterable[DeviceInfo], base: Sequence[str] = ()) -> list[str]:
    """``base`` then every device's library paths, first occurrence kept (the seed's LibraryPaths).

    Raises GpuscoutError for devices that are not a list of DeviceInfo, or a ``base`` that is a
    bare string (it would be read as one path per character) or holds something else than str.
    """
    devices = device_list(devices, "library_paths")
    if isinstance(base, (str, bytes)) or not isinstance(base, Iterable):
        raise GpuscoutError(f"library_paths: base must be a list of str paths, got {type(base).__name__}")
    base = list(base)
    bad = next((i for i, p in enumerate(base) if not isinstance(p, str)), None)
    if bad is not None:
        raise GpuscoutError(f"library_paths: base[{bad}] must be a str path, got {type(base[bad]).__name__}")
    seen: dict[str, None] = dict.fromkeys(base)
    for d in devices:
        seen.update(dict.fromkeys(p for p in d.library_path if p not in seen))
    return list(seen)
