"""Budgets: how much of each device gpuscout may plan on (``cap``), how much it holds back
(``reserve``), and which devices it ranks first (``prefer``). See docs/budgets.md.

One syntax everywhere: ``SEL=SIZE`` entries separated by commas (``GPUSCOUT_CAP``,
``GPUSCOUT_RESERVE``, ``--cap``, ``--reserve``; a ``Scout``'s ``cap``/``reserve`` mapping holds
the same pairs). ``SEL`` is a selector of docs/selection.md that names devices by what they are
(``all``, ``library=NAME``, ``numa=N``, ``LIBRARY:INDEX``, a PCI id, an id or UUID); ``SIZE`` a
size as ``gpuscout.sizes.parse_size`` reads it (``20GiB``, ``1.5GB``: a unit is required, as for
``fits:``). Selectors that depend on
the ranking or on free memory (``best``, a rank position ``N``, ``fits:SIZE``) are refused:
budgets change both.

Several entries matching one device: every one holds, so the smallest cap and the largest reserve
win. A device's usable total is ``min(base, cap) - reserve`` (at least 0), ``base`` being its
usable total as its plugin reported it (its total, unless the plugin said less); its usable free
memory is ``free - (total - usable)`` (at least 0): what the budget takes away is taken from the
free memory, since what is already used on the device counts against a cap (gpuscout cannot
tell a model it loaded itself from another process's memory).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from gpuscout._records.device import DeviceID, DeviceInfo
from gpuscout._records.fields import show_value
from gpuscout._records.results import Applied, Entry, Outcome
from gpuscout._selection.numbering import Numbering
from gpuscout.errors import GpuscoutError
from gpuscout.sizes import SizeError, parse_size, size_text

#: The environment variables, one per kind of budget.
RESERVE_ENV = "GPUSCOUT_RESERVE"
CAP_ENV = "GPUSCOUT_CAP"
PREFER_ENV = "GPUSCOUT_PREFER"
#: Most entries one budget list may hold (a list, not a database).
MAX_ENTRIES = 256
#: Largest budget given as an int of bytes (16 EiB); one written as text is held to
#: ``gpuscout.sizes.MAX_SIZE``, as every size is.
MAX_SIZE = 1 << 64
#: How a budget's note on a device starts (``Scout.refresh`` keeps it on a refreshed record).
NOTE_PREFIX = "budget: "
#: What a budget selector may be, for messages.
BUDGET_GRAMMAR = "all, library=NAME, numa=N, LIBRARY:INDEX, PCI id, ID/UUID (or a prefix of 4+)"


class BudgetError(GpuscoutError, ValueError):
    """A budget that cannot be used: a malformed entry (named, with what is wrong), a selector
    that depends on the ranking, or one that matches several devices where one is meant."""


def _shown(text: str, limit: int = 60) -> str:
    return repr(text) if len(text) <= limit else f"{text[:limit]!r}... ({len(text)} characters)"


# Every selector word that depends on the ranking or on free memory.
_RANKED = re.compile(r"best|[0-9]+|fits:.*", re.ASCII | re.IGNORECASE | re.DOTALL)


def check_selector(selector: str, where: str) -> str:
    """``selector`` stripped, when it can name devices in a budget; BudgetError naming ``where``
    otherwise (a ranking word, an unknown word with its did-you-mean, an empty one)."""
    from gpuscout._selection.selectors import MAX_SELECTOR, NoMatchError, SelectionError, match_one

    if not isinstance(selector, str):
        raise BudgetError(f"{where}: a selector must be a str, got {type(selector).__name__}")
    text = selector.strip()
    if not text:
        raise BudgetError(f"{where}: empty selector; expected one of: {BUDGET_GRAMMAR}")
    if len(text) > MAX_SELECTOR:
        raise BudgetError(f"{where}: selector {_shown(text)} is too long: at most {MAX_SELECTOR} characters")
    if "," in text:
        raise BudgetError(f"{where}: selector {_shown(text)} holds a comma: one selector per entry")
    if _RANKED.fullmatch(text):
        raise BudgetError(
            f"{where}: selector {_shown(text)} depends on the ranking or on free memory, which "
            f"budgets change; name the device instead: {BUDGET_GRAMMAR}"
        )
    try:
        match_one(text, [], _NO_RESERVE)  # no devices: a well-formed selector matches nothing
    except NoMatchError:
        pass
    except SelectionError as exc:
        if not str(exc).startswith("unknown selector"):
            raise BudgetError(f"{where}: {exc}") from None
        raise BudgetError(
            f"{where}: unknown selector {_shown(text)}{_did_you_mean(text)}; "
            f"expected one of: {BUDGET_GRAMMAR}"
        ) from None
    return text


def _did_you_mean(text: str) -> str:
    """``; did you mean 'library=cuda'?`` for a misspelled budget selector word, else ''."""
    from gpuscout._suggest import did_you_mean_selector

    return did_you_mean_selector(text, ["all"], {"=": ["library", "numa"]})


class _NoReserve:
    def minimum_memory(self, device: DeviceInfo) -> int:
        return 0


_NO_RESERVE = _NoReserve()


def _size(text: str, where: str) -> int:
    """A budget's size (``20GiB``, by ``gpuscout.sizes.parse_size``) -> bytes; BudgetError
    naming ``where`` and saying what ``parse_size`` says."""
    try:
        return parse_size(text, what=where)
    except SizeError as exc:
        raise BudgetError(str(exc)) from None


def parse_entries(text: str, where: str) -> tuple[Entry, ...]:
    """``SEL=SIZE,SEL=SIZE`` -> entries, in the order written. An empty text (or only commas
    and spaces) is no entry. BudgetError naming ``where`` and the entry for anything else."""
    if not isinstance(text, str):
        raise BudgetError(f"{where}: expected 'SEL=SIZE,...' text, got {type(text).__name__}")
    parts = [p.strip() for p in text.split(",")]
    parts = [p for p in parts if p]
    if len(parts) > MAX_ENTRIES:
        raise BudgetError(f"{where}: {len(parts)} entries, at most {MAX_ENTRIES} allowed")
    entries = []
    for position, part in enumerate(parts, 1):
        at = f"{where} entry {position} {_shown(part)}"
        selector, equals, size = part.rpartition("=")
        if not equals:
            raise BudgetError(f"{at}: expected SEL=SIZE, e.g. all=20GiB or cuda:0=2GiB")
        if not selector.strip():
            raise BudgetError(f"{at}: no selector before '='; expected one of: {BUDGET_GRAMMAR}")
        if not size.strip():
            raise BudgetError(f"{at}: no size after '='; expected a number and a unit, e.g. 20GiB")
        # The text goes into notes and explanations: one line, whatever spaces it was written with.
        entries.append(Entry(check_selector(selector, at), _size(size, at), " ".join(part.split())))
    return tuple(entries)


def entries_from(value: Any, where: str) -> tuple[Entry, ...]:
    """A ``Scout`` keyword's budget as entries: a mapping of selector to bytes (an int, or a
    size as text such as ``"20GiB"``), or the ``SEL=SIZE,...`` text of the variables."""
    if isinstance(value, str):
        return parse_entries(value, where)
    if not isinstance(value, Mapping):
        raise BudgetError(
            f"{where}: expected a mapping of selector to bytes (e.g. {{'all': 20 * GIB}}) "
            f"or 'SEL=SIZE,...' text, got {type(value).__name__}"
        )
    items = list(value.items())
    if len(items) > MAX_ENTRIES:
        raise BudgetError(f"{where}: {len(items)} entries, at most {MAX_ENTRIES} allowed")
    entries = []
    for selector, size in items:
        at = f"{where}[{show_value(selector)}]"
        selector = check_selector(selector, at)
        if isinstance(size, str):
            entries.append(Entry(selector, _size(size, at), f"{selector}={' '.join(size.split())}"))
            continue
        if isinstance(size, bool) or not isinstance(size, int):
            raise BudgetError(
                f"{at}: expected an int of bytes or a size such as '20GiB', got {show_value(size)}"
            )
        if not 0 <= size <= MAX_SIZE:
            raise BudgetError(f"{at}: expected bytes in 0..2**64, got {show_value(size)}")
        entries.append(Entry(selector, size, f"{selector}={size_text(size)}"))
    return tuple(entries)


def prefer_from(value: Any, where: str) -> tuple[str, ...]:
    """A ``prefer`` keyword as selectors, in order (commas inside an item separate selectors
    too); a bare str is refused, as for ``plugins`` (``prefer_text`` reads the comma form)."""
    if isinstance(value, (bytes, bytearray, Mapping)) or not isinstance(value, Iterable):
        raise BudgetError(f"{where}: expected a list of selectors, got {type(value).__name__}")
    if isinstance(value, str):
        raise BudgetError(f"{where}: expected a list of selectors, not a bare string: prefer=[{value!r:.60}]")
    items = list(value)
    return _prefer_items(items, where)


def prefer_text(text: str, where: str) -> tuple[str, ...]:
    """``cuda:1,cuda:0`` (the variable's and ``--prefer``'s form) -> selectors, in order."""
    return _prefer_items([text], where)


def _prefer_items(items: Sequence[Any], where: str) -> tuple[str, ...]:
    out: list[str] = []
    for i, item in enumerate(items):
        if not isinstance(item, str):
            raise BudgetError(f"{where}[{i}]: a selector must be a str, got {type(item).__name__}")
        out += [p.strip() for p in item.split(",") if p.strip()]
    if len(out) > MAX_ENTRIES:
        raise BudgetError(f"{where}: {len(out)} selectors, at most {MAX_ENTRIES} allowed")
    return tuple(check_selector(s, f"{where} selector {_shown(s)}") for s in out)


@attrs.frozen
class Budgets:
    """A Scout's budgets: cap and reserve entries and the prefer order, already checked."""

    cap: tuple[Entry, ...] = ()
    reserve: tuple[Entry, ...] = ()
    prefer: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.cap or self.reserve or self.prefer)

    def apply(
        self, devices: Sequence[DeviceInfo], numbering: Numbering | None = None
    ) -> tuple[list[DeviceInfo], Outcome]:
        """``devices`` (a discovery's, before ranking) with each budget applied: a budgeted
        device gains ``usable_memory`` (only when it differs from its total) and a note; and
        what was done. ``LIBRARY:INDEX`` counts by ``numbering`` (the discovery's runtime
        numbers; PCI order without it), as selectors do. Raises BudgetError for a selector
        that matches several devices where it names one (an ambiguous id prefix, a PCI id of a
        partitioned card)."""
        devices = list(devices)
        unmatched: list[str] = []

        def matches(selector: str, kind: str) -> list[int]:
            hits = _match(selector, devices, kind, numbering)
            if not hits:
                unmatched.append(f"{kind} {selector!r} matches no device")
            return hits

        caps: dict[int, Entry] = {}
        reserves: dict[int, Entry] = {}
        for e in self.cap:
            for i in matches(e.selector, "cap"):
                if i not in caps or e.size < caps[i].size:  # the smallest cap holds
                    caps[i] = e
        for e in self.reserve:
            for i in matches(e.selector, "reserve"):
                if i not in reserves or e.size > reserves[i].size:  # the largest reserve holds
                    reserves[i] = e
        preference: dict[DeviceID, int] = {}
        for position, selector in enumerate(self.prefer):
            for i in matches(selector, "prefer"):
                preference.setdefault(devices[i].device_id, position)
        applied: dict[DeviceID, Applied] = {}
        out = []
        for i, d in enumerate(devices):
            cap, reserve = caps.get(i), reserves.get(i)
            if cap is None and reserve is None:
                out.append(d)
                continue
            base = d.usable_total
            usable = max(0, min(base, cap.size if cap else base) - (reserve.size if reserve else 0))
            done = Applied(cap, reserve, d.total_memory, usable)
            applied[d.device_id] = done
            out.append(
                d.evolve(
                    usable_memory=None if usable == d.total_memory else usable,
                    notes=(*d.notes, NOTE_PREFIX + done.sentence()),
                )
            )
        return out, Outcome(self.prefer, preference, applied, tuple(dict.fromkeys(unmatched)))


def _match(
    selector: str, devices: Sequence[DeviceInfo], kind: str, numbering: Numbering | None = None
) -> list[int]:
    from gpuscout._selection.selectors import NoMatchError, SelectionError, match_one

    if selector.lower() == "all":
        return list(range(len(devices)))
    try:
        return match_one(selector, devices, _NO_RESERVE, numbering)
    except NoMatchError:
        return []
    except SelectionError as exc:
        raise BudgetError(f"{kind} {selector!r}: {exc}") from None


def from_settings(
    env: Mapping[str, str], reserve: Any = None, cap: Any = None, prefer: Any = None
) -> Budgets:
    """A Scout's budgets: each keyword given (not None) wins over its variable in ``env``
    (``GPUSCOUT_RESERVE``, ``GPUSCOUT_CAP``, ``GPUSCOUT_PREFER``), which is read otherwise."""
    return Budgets(
        cap=entries_from(cap, "cap") if cap is not None else parse_entries(env.get(CAP_ENV, ""), CAP_ENV),
        reserve=(
            entries_from(reserve, "reserve")
            if reserve is not None
            else parse_entries(env.get(RESERVE_ENV, ""), RESERVE_ENV)
        ),
        prefer=prefer_from(prefer, "prefer")
        if prefer is not None
        else prefer_text(env.get(PREFER_ENV, ""), PREFER_ENV),
    )


def budget_notes(devices: Sequence[DeviceInfo], already: Sequence[str] = ()) -> list[str]:
    """``CUDA GPU-1: budget: cap all=20GiB: usable 20.0 GiB of 80.0 GiB``: the budget of each
    device a plan could use, so a verdict says what it was held to, once for the devices it
    holds alike (``each of the 8 devices: budget: ...``); notes in ``already`` are left out."""
    from gpuscout._records.notes import grouped

    pairs = [
        (f"{d.library} {d.id}", note) for d in devices for note in d.notes if note.startswith(NOTE_PREFIX)
    ]
    return [note for note in grouped(pairs, every=len(devices)) if note not in already]


def keep_budget(old: DeviceInfo, new: DeviceInfo) -> DeviceInfo:
    """``new`` (a refreshed record of ``old``) with ``old``'s budget: its usable total and its
    budget note (a refresh changes free memory, not the budget)."""
    notes = [n for n in old.notes if n.startswith(NOTE_PREFIX) and n not in new.notes]
    if old.usable_memory == new.usable_memory and not notes:
        return new
    return new.evolve(usable_memory=old.usable_memory, notes=(*new.notes, *notes))


__all__ = [
    "BUDGET_GRAMMAR",
    "CAP_ENV",
    "MAX_ENTRIES",
    "NOTE_PREFIX",
    "PREFER_ENV",
    "RESERVE_ENV",
    "Applied",
    "BudgetError",
    "Budgets",
    "Entry",
    "Outcome",
    "budget_notes",
    "check_selector",
    "entries_from",
    "from_settings",
    "keep_budget",
    "parse_entries",
    "prefer_from",
    "prefer_text",
]
