"""Merging what several libraries say about the same cards (the seed's Compare and IsBetter)."""

from __future__ import annotations

import bisect
import heapq
import itertools
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from gpuscout._discovery.hidden import set_aside
from gpuscout._records.device import DeviceComparison, DeviceID, DeviceInfo
from gpuscout._records.results import DUPLICATE_REASON, Dropped


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
    return tuple((0, int(part)) if part.isdigit() else (1, part) for part in re.findall(r"\d+|\D+", text))


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


Keys = frozenset[Any] | None


def _as_keys(answer: Any) -> Keys:
    if answer is None:
        return None
    return answer if isinstance(answer, frozenset) else frozenset((answer,))


def merge(
    found: Iterable[tuple[str, DeviceInfo]],
    is_duplicate: Callable[[Sequence[tuple[DeviceInfo, DeviceInfo]]], Sequence[bool]] | None,
    preferred: Callable[[DeviceInfo, DeviceInfo], bool],
    duplicate_keys: Callable[[Sequence[DeviceInfo]], Sequence[Any]] | None = None,
) -> tuple[list[DeviceInfo], list[Dropped]]:
    """Fold ``(plugin, device)`` pairs (in discovery order) into survivors and dropped duplicates.

    Each new device meets the survivors in order, as the seed's Compare would see them, and the
    first that is not UNIQUE decides; indexes make that near-linear: a PCI id only meets the
    same PCI id, a device without one only the same DeviceID, and ``is_duplicate`` (the plugins'
    heuristics) is asked only for pairs of different libraries that the PCI ids cannot decide
    and whose ``duplicate_keys`` (one answer per device, a key, a frozenset of keys or None)
    match (``is_duplicate`` takes all of one new device's pairs at once, ``(old, new)``, and
    answers one bool each). Without keys every such pair is asked; with ``is_duplicate`` None,
    none is.

    DUPLICATE: the preferred library survives (when neither or both are, a visible one over one
    hidden by a visibility variable, else the earlier one). SAME_BACKEND: a visible one over a
    hidden one, else the newer library variant, else the earlier one; except that two devices
    with different ids from the same plugin are partitions of one card (MIG instances, MI300
    compute partitions), which share the card's PCI id and are all kept. Hidden survivors and
    their duplicates then leave the list together (``gpuscout._discovery.hidden``).
    """
    items = list(found)
    raw_keys = duplicate_keys([d for _, d in items]) if duplicate_keys else [None] * len(items)
    keys = [_as_keys(k) for k in raw_keys]
    kept: list[tuple[str, DeviceInfo, Keys]] = []
    index = _Index(kept, heuristics=is_duplicate is not None)
    dropped: list[Dropped] = []
    for (source, new), new_keys in zip(items, keys, strict=True):
        decisive, heuristic = index.candidates(source, new, new_keys)
        twin = _first_twin(new, heuristic, kept, is_duplicate)
        twins = {twin} if twin is not None else set()
        candidates = sorted({*decisive, *twins})
        for i in candidates:
            old_source, old, _ = kept[i]
            how = DeviceComparison.DUPLICATE if i in twins else compare(old, new, _never)
            if how is DeviceComparison.UNIQUE:
                continue
            if (
                how is DeviceComparison.SAME_BACKEND
                and source == old_source
                and old.device_id != new.device_id
            ):
                continue
            if how is DeviceComparison.DUPLICATE:
                new_first, old_first = preferred(new, old), preferred(old, new)
                replace = (new_first and not old_first) or (
                    new_first == old_first and bool(old.hidden_by) and not new.hidden_by
                )
            elif bool(old.hidden_by) != bool(new.hidden_by):
                replace = bool(old.hidden_by)
            else:
                replace = is_better(old, new)
            if replace:
                kept[i] = (source, new, new_keys)
                index.add(i)
                dropped.append(Dropped(old, DUPLICATE_REASON, new.device_id))
            else:
                dropped.append(Dropped(new, DUPLICATE_REASON, old.device_id))
            break
        else:
            kept.append((source, new, new_keys))
            index.add(len(kept) - 1)
    return set_aside([d for _, d, _ in kept], dropped)


def _first_twin(
    new: DeviceInfo,
    heuristic: Iterator[int],
    kept: Sequence[tuple[str, DeviceInfo, Keys]],
    is_duplicate: Callable[[Sequence[tuple[DeviceInfo, DeviceInfo]]], Sequence[bool]] | None,
) -> int | None:
    """The first of ``heuristic`` (sorted positions) the plugins call a twin of ``new``.

    Asked in growing chunks, so the usual case (the first candidate is the twin) costs one
    small batch and a long list of near misses costs a few batches, not one call per pair.
    """
    if is_duplicate is None:
        return None
    size = 4
    while chunk := list(itertools.islice(heuristic, size)):
        answers = is_duplicate([(kept[i][1], new) for i in chunk])
        for i, yes in zip(chunk, answers, strict=True):
            if yes:
                return i
        size *= 8
    return None


def _never(a: DeviceInfo, b: DeviceInfo) -> bool:
    return False


class _Index:
    """Where a new device can meet the survivors, so each device is compared with a few, not all.

    Survivors with a PCI id are grouped by (PCI id, library, plugin): a new device of that PCI id
    is decided by the first survivor of any other group, or of its own group with its own id
    (the rest of its own group are partitions of the card, which it never matches). Survivors
    without one are found by DeviceID. Heuristic candidates come from sorted position lists per
    duplicate key and library, merged lazily in position order, so a new device meets its
    first twin after a few near misses however many devices share its keys.

    A replaced survivor is not taken out of the group heaps and position lists; entries whose
    position now holds another device are skipped when met.
    """

    def __init__(self, kept: list[tuple[str, DeviceInfo, Keys]], heuristics: bool) -> None:
        self.kept = kept
        self.heuristics = heuristics
        self.groups: dict[str, dict[tuple[str, str], list[int]]] = {}
        # Heaps of positions, checked lazily: after a replacement, an earlier position may hold
        # the same identity as a later one, and the earliest still holding it decides.
        self.by_card_id: dict[tuple[str, str, str, str], list[int]] = {}
        self.by_id: dict[DeviceID, list[int]] = {}
        # (key, library) -> sorted positions; the key None stands for "no keys" (compared with
        # every other library) and _ANY for every survivor of that library.
        self.lists: dict[tuple[Any, str], list[int]] = {}
        self.libraries: dict[Any, set[str]] = {}

    def _group(self, i: int) -> tuple[str, tuple[str, str]]:
        source, d, _ = self.kept[i]
        return d.pci_id.lower(), (d.library, source)

    def add(self, i: int) -> None:
        _, d, keys = self.kept[i]
        if d.pci_id:
            pci, group = self._group(i)
            heapq.heappush(self.groups.setdefault(pci, {}).setdefault(group, []), i)
            heapq.heappush(self.by_card_id.setdefault(self._card_id(i), []), i)
        else:
            heapq.heappush(self.by_id.setdefault(d.device_id, []), i)
        if self.heuristics:
            for key in (_ANY, *(keys if keys is not None else (None,))):
                at = self.lists.setdefault((key, d.library), [])
                if not at or at[-1] < i:
                    at.append(i)
                else:
                    bisect.insort(at, i)
                self.libraries.setdefault(key, set()).add(d.library)

    def _card_id(self, i: int) -> tuple[str, str, str, str]:
        source, d, _ = self.kept[i]
        return d.pci_id.lower(), d.library, source, d.id

    def _earliest(self, heap: list[int], holds: Callable[[int], bool]) -> int | None:
        """The first position of ``heap`` that still ``holds``; stale ones are dropped."""
        while heap and not holds(heap[0]):
            heapq.heappop(heap)
        return heap[0] if heap else None

    def _first(self, pci: str, group: tuple[str, str]) -> int | None:
        heap = self.groups[pci][group]
        while heap and (not self.kept[heap[0]][1].pci_id or self._group(heap[0]) != (pci, group)):
            heapq.heappop(heap)
        return heap[0] if heap else None

    def candidates(self, source: str, d: DeviceInfo, keys: Keys) -> tuple[list[int], Iterator[int]]:
        """Positions of the survivors ``d`` may match: those the PCI id or DeviceID decide
        (sorted), and, lazily in position order, those to ask the heuristics about (other
        libraries, PCI ids that cannot decide, matching keys, met before the first decisive)."""
        decisive: list[int] = []
        if d.pci_id:
            pci = d.pci_id.lower()
            own = (d.library, source)
            for group in list(self.groups.get(pci, {})):
                first = self._first(pci, group) if group != own else None
                if first is not None:
                    decisive.append(first)
            card = (pci, d.library, source, d.id)
            same = self._earliest(
                self.by_card_id.get(card, []),
                lambda i: bool(self.kept[i][1].pci_id) and self._card_id(i) == card,
            )
            if same is not None:
                decisive.append(same)
        else:
            same = self._earliest(
                self.by_id.get(d.device_id, []),
                lambda i: not self.kept[i][1].pci_id and self.kept[i][1].device_id == d.device_id,
            )
            if same is not None:
                decisive.append(same)
        decisive.sort()
        if not self.heuristics:
            return decisive, iter(())
        return decisive, self._heuristic(d, keys, decisive[0] if decisive else len(self.kept))

    def _heuristic(self, d: DeviceInfo, keys: Keys, limit: int) -> Iterator[int]:
        wanted = [_ANY] if keys is None else [None, *keys]
        streams = [
            self._stream(key, library)
            for key in wanted
            for library in self.libraries.get(key, ())
            if library != d.library
        ]
        last = -1
        for i in heapq.merge(*streams):
            if i >= limit:
                return
            if i != last and (not d.pci_id or not self.kept[i][1].pci_id):
                yield i
            last = i

    def _stream(self, key: Any, library: str) -> Iterator[int]:
        return (i for i in self.lists[(key, library)] if self._holds(i, key, library))

    def _holds(self, i: int, key: Any, library: str) -> bool:
        _, d, keys = self.kept[i]
        if d.library != library:
            return False
        if key is _ANY:
            return True
        return keys is None if key is None else keys is not None and key in keys


#: Stands for "every survivor of the library" in _Index.lists.
_ANY = object()
