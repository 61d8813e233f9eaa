"""Device selectors: the little language ``gpuscout env``, ``gpuscout exec`` and ``Scout.select`` share.

A selector is one of (tried in this order, case-insensitive):

* ``best`` (rank 0) or ``all`` (every device; may match nothing);
* ``fits:SIZE`` such as ``fits:24GiB``: every device whose free memory (under its budget,
  ``DeviceInfo.usable_free``) minus its minimum reserve holds SIZE (a size as
  ``gpuscout.sizes.parse_size`` reads it: a unit is required); a device whose free memory is
  unknown (``free_memory_unknown``) never fits;
* ``library=NAME``: every device of that library;
* ``numa=N``: every device attached to NUMA node N (``DeviceInfo.numa_node``; a device whose
  node is unknown is on none);
* a bare integer: a rank position;
* ``LIBRARY:INDEX`` such as ``cuda:1``: the device that library's runtime numbers INDEX in this
  environment (what ``CUDA_VISIBLE_DEVICES=1`` names, llama.cpp's ``CUDA1``; see
  ``gpuscout._selection.numbering``), or, for devices without a numbering, the INDEX-th in PCI
  bus order;
* a PCI id (``0000:c4:00.0``, or ``c4:00.0`` for domain 0);
* a device id or vendor UUID, or a unique prefix of one of at least 4 characters.

Several selectors union; the result is always in rank order. A well-formed selector that matches
nothing raises ``NoMatchError`` (a ``SelectionError``); a malformed one (a word that is no
selector, such as ``nope``), or a prefix or PCI id that matches several devices, raises
``SelectionError``. Both list what exists.
Numbers are ASCII digits only; a selector longer than ``MAX_SELECTOR`` characters, a size that
``parse_size`` refuses and anything that is not a str are refused with ``SelectionError`` too.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from gpuscout._records.device import DeviceInfo
from gpuscout._selection.numbering import LIBRARY_INDEX, Numbering, did_you_mean_device, library_numbers
from gpuscout.errors import GpuscoutError
from gpuscout.sizes import SizeError, parse_size, plural, sizes_apart, word_for

#: Shortest id/UUID prefix accepted (shorter ones are too easy to collide).
MIN_PREFIX = 4
#: Longest selector accepted; anything longer is a mistake or an attack, not a device name.
MAX_SELECTOR = 1000

# All patterns are ASCII-only and used with fullmatch: "\d" would take "²" or "٣", IGNORECASE
# alone would let the Kelvin sign match "k" and a dotless i match "i", and "$" matches before a
# trailing newline.
_ASCII_NOCASE = re.ASCII | re.IGNORECASE
_PCI = re.compile(r"(?:([0-9a-f]{4,8}):)?([0-9a-f]{2}):([0-9a-f]{2})\.([0-7])", _ASCII_NOCASE)
_RANK = re.compile(r"[0-9]+", re.ASCII)
# What a device id or UUID prefix looks like: hex digits and dashes, after an optional word and
# dash (``GPU-``, ``MIG-``) or ``0x``; a word outside this (``nope``) is no selector at all.
_ID_PREFIX = re.compile(r"(?:[a-z]+-|0x)?[0-9a-f][0-9a-f-]*", _ASCII_NOCASE)
# More digits than this is out of range of any device list (and would be slow to convert).
_MAX_DIGITS = 18

GRAMMAR = "N, ID/UUID (or a prefix of 4+), PCI id, LIBRARY:INDEX, best, all, fits:SIZE, library=NAME, numa=N"


class SelectionError(GpuscoutError):
    """A selector that is malformed, matches no device, or matches several where one is meant."""


class NoMatchError(SelectionError):
    """A well-formed selector that matches no device (``fits:1TiB``, an index past the end, an
    id prefix no device has); the ``gpuscout`` command exits 1 for it, 2 for other errors."""


class ReserveSource(Protocol):
    """What selection needs from a Scout: the per-device memory reserve."""

    def minimum_memory(self, device: DeviceInfo) -> int:
        """Bytes to hold back on ``device``."""
        ...


def _not_str(selector: object) -> SelectionError:
    # No repr: it can be huge, or raise (an int of over 4300 digits).
    return SelectionError(f"a selector must be a str, got {type(selector).__name__}")


def _shorten(text: str, limit: int = 60) -> str:
    """``repr(text)`` cut to about ``limit`` characters, saying how long it was."""
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}... ({len(text)} characters)"


def split_selectors(selectors: str | Iterable[str]) -> list[str]:
    """Selectors as a flat list: a lone string is one selector; commas separate selectors too.

    Raises SelectionError for anything but a str or an iterable of str (bytes included).
    """
    items = [selectors] if isinstance(selectors, str) else _str_items(selectors)
    return [part.strip() for item in items for part in item.split(",") if part.strip()]


def _str_items(selectors: Any) -> list[str]:
    if isinstance(selectors, (bytes, bytearray)) or not isinstance(selectors, Iterable):
        raise SelectionError(f"selectors must be a str or a list of str, got {type(selectors).__name__}")
    items = list(selectors)
    for item in items:
        if not isinstance(item, str):
            raise _not_str(item)
    return items


def describe(position: int, d: DeviceInfo) -> str:
    """One device for an error message: rank position, library, name, UUID or id, PCI id."""
    parts = [d.uuid or d.id]
    if d.pci_id:
        parts.append(d.pci_id)
    if d.software:
        parts.append("software")
    name = d.description or d.name
    label = f" {name!r}" if name else ""
    return f"{position}={d.library}{label} ({', '.join(parts)})"


def inventory(devices: Sequence[DeviceInfo]) -> str:
    """Every device on one line, for error messages."""
    if not devices:
        return "no devices were found"
    return "devices: " + "; ".join(describe(i, d) for i, d in enumerate(devices))


def library_order(
    devices: Sequence[DeviceInfo], library: str, numbering: Numbering | None = None
) -> list[int]:
    """Rank positions of ``library``'s devices by their number: the runtime's where
    ``numbering`` has one for each, else PCI bus order (``gpuscout._selection.numbering``)."""
    return [i for _, i in library_numbers(devices, library, numbering)]


def _normal_pci(match: re.Match[str]) -> str:
    domain, bus, dev, fn = match.groups()
    return f"{int(domain or '0', 16):04x}:{bus}:{dev}.{fn}".lower()


def match_one(
    selector: str, devices: Sequence[DeviceInfo], reserve: ReserveSource, numbering: Numbering | None = None
) -> list[int]:
    """Rank positions of ``devices`` that ``selector`` picks (see the module doc); ``numbering``
    (a discovery's) gives each device's runtime number for ``LIBRARY:INDEX``."""
    if not isinstance(selector, str):
        raise _not_str(selector)
    if len(selector) > MAX_SELECTOR:
        raise SelectionError(f"selector {_shorten(selector)} is too long: at most {MAX_SELECTOR} characters")
    text = selector.strip()
    low = text.lower()
    if not text:
        raise SelectionError(f"empty selector; expected one of: {GRAMMAR}")
    if low == "all":
        return list(range(len(devices)))
    if low == "best":
        _need(devices, selector)
        return [0]
    if low.startswith("fits:"):
        try:
            size = parse_size(text[5:], what=f"selector {selector!r}")
        except SizeError as exc:
            raise SelectionError(str(exc)) from None
        return _fits(selector, size, devices, reserve)
    if low.startswith("library="):
        return _library(selector, text[8:].strip(), devices)
    if low.startswith("numa="):
        return _numa(selector, text[5:].strip(), devices)
    if _RANK.fullmatch(text):
        position = _index(text)
        if position >= len(devices):
            _need(devices, selector)
            raise NoMatchError(
                f"selector {selector!r}: rank position {text} is out of range "
                f"(0..{len(devices) - 1}); {inventory(devices)}"
            )
        return [position]
    lib_index = LIBRARY_INDEX.fullmatch(text)
    if lib_index:
        return _library_index(selector, lib_index.group(1), _index(lib_index.group(2)), devices, numbering)
    pci = _PCI.fullmatch(text)
    if pci:
        return _pci(selector, _normal_pci(pci), devices)
    return _identity(selector, low, devices, numbering)


def _index(digits: str) -> int:
    """ASCII ``digits`` as an int; past ``_MAX_DIGITS`` digits a value beyond any list (int()
    refuses over 4300 digits, and a bigger number selects nothing either way)."""
    digits = digits.lstrip("0") or "0"
    return int(digits) if len(digits) <= _MAX_DIGITS else 10**_MAX_DIGITS


def _need(devices: Sequence[DeviceInfo], selector: str) -> None:
    if not devices:
        raise NoMatchError(f"selector {selector!r} matches nothing: no devices were found")


def _fits(selector: str, size: int, devices: Sequence[DeviceInfo], reserve: ReserveSource) -> list[int]:
    # A device whose free memory is unknown never fits: its free figure is a stand-in (often
    # the total), and a selector that scripts use to place work must not guess.
    hits = [
        i
        for i, d in enumerate(devices)
        if not d.free_memory_unknown and d.usable_free - reserve.minimum_memory(d) >= size
    ]
    if not hits:
        _need(devices, selector)
        # One formatter, as many decimals as tell the need from each device's room.
        need, *rooms = sizes_apart(
            size, *(max(0, d.usable_free - reserve.minimum_memory(d)) for d in devices)
        )
        usable = "; ".join(
            f"{i}={d.library} {d.uuid or d.id}: {_usable(d, room)}"
            for i, (d, room) in enumerate(zip(devices, rooms, strict=True))
        )
        raise NoMatchError(
            f"selector {selector!r}: no device has {selector.strip()[5:].strip()} "
            f"({need}) free after its reserve; usable memory: {usable}"
        )
    return hits


def _usable(d: DeviceInfo, room: str) -> str:
    if d.free_memory_unknown:
        return "free memory unknown (fits: never selects it; select it by rank, id or library)"
    budget = " under its budget" if d.usable_memory is not None else ""
    return f"{room}{budget}"


def _libraries(devices: Sequence[DeviceInfo]) -> str:
    names = sorted({d.library for d in devices}, key=str.lower)
    return ", ".join(names) if names else "none"


def _library(selector: str, name: str, devices: Sequence[DeviceInfo]) -> list[int]:
    if not name:
        raise SelectionError(f"selector {selector!r}: library= needs a name, e.g. library=rocm")
    hits = [i for i, d in enumerate(devices) if d.library.lower() == name.lower()]
    if not hits:
        from gpuscout._suggest import did_you_mean

        hint = did_you_mean(name, sorted({d.library.lower() for d in devices}))
        raise NoMatchError(
            f"selector {selector!r}: no device of library {name!r}; "
            f"libraries found: {_libraries(devices)}{hint}"
        )
    return hits


def _numa(selector: str, node: str, devices: Sequence[DeviceInfo]) -> list[int]:
    if not _RANK.fullmatch(node):
        raise SelectionError(f"selector {selector!r}: numa= needs a node number, e.g. numa=0")
    number = _index(node)
    hits = [i for i, d in enumerate(devices) if d.numa_node == number]
    if not hits:
        _need(devices, selector)
        nodes = sorted({d.numa_node for d in devices if d.numa_node >= 0})
        where = (
            f"devices are on {word_for(len(nodes), 'node')} {', '.join(map(str, nodes))}"
            if nodes
            else "no device's NUMA node is known (docs/topology.md)"
        )
        written = node.lstrip("0") or "0"  # as written: _index caps a number past any node
        raise NoMatchError(f"selector {selector!r}: no device on NUMA node {written}; {where}")
    return hits


def _library_index(
    selector: str, library: str, index: int, devices: Sequence[DeviceInfo], numbering: Numbering | None
) -> list[int]:
    numbers = library_numbers(devices, library, numbering)
    if not numbers:
        raise NoMatchError(
            f"selector {selector!r}: no device of library {library!r}; libraries found: "
            f"{_libraries(devices)}{did_you_mean_device(selector, devices, numbering)}"
        )
    hits = [i for n, i in numbers if n == index]
    if not hits:
        listed = "; ".join(f"{library.lower()}:{n} -> {describe(i, devices[i])}" for n, i in numbers)
        has = plural(len(numbers), "device")
        raise NoMatchError(
            f"selector {selector!r}: library {devices[numbers[0][1]].library} has {has}: {listed}"
        )
    return hits


def _ambiguous(selector: str, hits: Sequence[int], devices: Sequence[DeviceInfo]) -> SelectionError:
    listed = "; ".join(describe(i, devices[i]) for i in hits)
    return SelectionError(
        f"selector {selector!r} is ambiguous: it matches {len(hits)} devices ({listed}); "
        "use a longer id or UUID"
    )


def _pci(selector: str, pci_id: str, devices: Sequence[DeviceInfo]) -> list[int]:
    hits = [i for i, d in enumerate(devices) if d.pci_id.lower() == pci_id]
    if len(hits) > 1:
        # Several records on one card (MIG instances): the caller must name one.
        raise _ambiguous(selector, hits, devices)
    if not hits:
        raise NoMatchError(f"selector {selector!r}: no device at PCI id {pci_id}; {inventory(devices)}")
    return hits


def _identity(
    selector: str, low: str, devices: Sequence[DeviceInfo], numbering: Numbering | None = None
) -> list[int]:
    def names(d: DeviceInfo) -> set[str]:
        return {n.lower() for n in (d.id, d.uuid) if n}

    exact = [i for i, d in enumerate(devices) if low in names(d)]
    if len(exact) > 1:
        raise _ambiguous(selector, exact, devices)
    if exact:
        return exact
    if len(low) >= MIN_PREFIX:
        hits = [i for i, d in enumerate(devices) if any(n.startswith(low) for n in names(d))]
        if len(hits) > 1:
            raise _ambiguous(selector, hits, devices)
        if hits:
            return hits
        if _ID_PREFIX.fullmatch(low):
            raise NoMatchError(
                f"selector {selector!r}: no device id or UUID equals or starts with it"
                f"{did_you_mean_device(selector, devices, numbering)}; {inventory(devices)}"
            )
        why = "no device id or UUID equals or starts with it"
    else:
        why = f"not a device id, and an id prefix needs at least {MIN_PREFIX} characters"
    hint = did_you_mean_device(selector, devices, numbering) or _did_you_mean(selector.strip())
    raise SelectionError(
        f"unknown selector {selector!r}: {why}{hint}; expected one of: {GRAMMAR}; {inventory(devices)}"
    )


def _did_you_mean(text: str) -> str:
    """``; did you mean 'best'?`` for a misspelled selector word (``bset``, ``fts:8GiB``,
    ``libary=rocm``), else ''."""
    from gpuscout._suggest import did_you_mean_selector

    return did_you_mean_selector(text, ["best", "all"], {":": ["fits"], "=": ["library", "numa"]})


#: Ids at most this long are shown whole: a prefix would save little.
SHORT_ID = 12
_WORD_PREFIX = re.compile(r"[a-z]+-|0x", _ASCII_NOCASE)


class _NoReserve:
    def minimum_memory(self, device: DeviceInfo) -> int:
        return 0


def shortest_ids(devices: Sequence[DeviceInfo]) -> list[str]:
    """Each device's id cut to the shortest prefix that selects it alone among ``devices``
    (``GPU-05d9`` for ``GPU-05d9e6c2-...``): at least ``MIN_PREFIX`` characters and 4 after a
    word prefix such as ``GPU-``, never ending in ``-``; an id of ``SHORT_ID`` characters or
    fewer, or one no prefix selects alone, whole."""
    out = []
    for i, d in enumerate(devices):
        ident = d.id
        word = _WORD_PREFIX.match(ident)
        start = max(MIN_PREFIX, (word.end() if word else 0) + 4)
        short = ident
        if len(ident) > SHORT_ID:
            for end in range(start, len(ident)):
                prefix = ident[:end]
                if prefix.endswith("-"):
                    continue
                try:
                    if match_one(prefix, devices, _NoReserve()) == [i]:
                        short = prefix
                        break
                except SelectionError:
                    continue
        out.append(short)
    return out


def select_devices(
    reserve: ReserveSource,
    ranked_devices: Sequence[DeviceInfo],
    selectors: str | Iterable[str],
    numbering: Numbering | None = None,
) -> list[DeviceInfo]:
    """The union of what each selector matches, in rank order. No selectors means ``all``.

    ``reserve`` (a Scout) gives each device's minimum memory for ``fits:``; ``ranked_devices``
    is a discovery's ranked list and ``numbering`` its ``numbering`` (``LIBRARY:INDEX`` counts
    in PCI order without one). Raises ``NoMatchError`` for a well-formed selector that
    matches nothing, ``SelectionError`` for a malformed or ambiguous one.
    """
    devices = list(ranked_devices)
    chosen: set[int] = set()
    for selector in split_selectors(selectors) or ["all"]:
        chosen.update(match_one(selector, devices, reserve, numbering))
    return [devices[i] for i in sorted(chosen)]


__all__ = [
    "GRAMMAR",
    "MAX_SELECTOR",
    "MIN_PREFIX",
    "NoMatchError",
    "SelectionError",
    "inventory",
    "library_order",
    "match_one",
    "select_devices",
    "shortest_ids",
    "split_selectors",
]
