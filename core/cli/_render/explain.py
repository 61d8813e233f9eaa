"""``gpuscout list --explain``: why each device ranks where it does, why each dropped one was
dropped, and what each plugin did.

``explain`` gives plain data (the ``"explain"`` key of ``list --json``); ``explain_lines`` the same
as text lines, every string from a plugin passed through ``printable``, leaving out the system
memory notes the listing above them has just printed; ``write_explanation``
writes them, on a terminal wrapped between words to its width (continuation lines indented under
their line), in a pipe one line each.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TextIO

from gpuscout._discovery.ranking import criteria, deciding_criterion
from gpuscout._records.results import DUPLICATE_REASON
from gpuscout._selection.numbering import selector_names
from gpuscout.cli._common import printable
from gpuscout.sizes import human_bytes, plural

if TYPE_CHECKING:
    from gpuscout._records.device import DeviceID, DeviceInfo
    from gpuscout._records.results import Discovery


def _ref(device: DeviceID | DeviceInfo) -> dict[str, str]:
    # The wire keys of a DeviceID, as in the "dropped" entries' "duplicate_of".
    return {"id": device.id, "backend": device.library}


def explain(found: Discovery) -> dict[str, Any]:
    """Why ``found`` is what it is, as JSON-ready data.

    ``ranking``: per ranked device its rank, the ``LIBRARY:INDEX`` selector it answers to
    (``selector``: its runtime's own number), id, library (``backend``), the values the ranking
    reads, the next device and the criterion that put this one before it (``decided_by``: a
    name from ``criteria``, or None for the last device or a full tie), and where it sits
    (``numa_node``, -1 unknown; ``link``, the PCIe link as ``list`` shows it, "" unknown) with its
    ``notes`` (a link below its maximum among them). ``dropped``: each
    dropped device with its reason, ``duplicate_of`` and ``hidden_by``: the visibility
    setting (``CUDA_VISIBLE_DEVICES=0``) that hides the device or the device it is a twin of,
    "" when none does. ``plugins``: status, device count, elapsed milliseconds, error and note
    of each plugin. ``system_notes``: what the system memory figures are.
    With budgets (docs/budgets.md) each ranked device also says which applied
    (``budget``: None, or the deciding ``cap`` and ``reserve`` entries as written, the
    ``total_memory``, ``usable_memory`` and ``usable_free_memory`` in bytes and the
    ``sentence``), and with a prefer order ``criteria`` starts with ``prefer``, ``prefer``
    lists its selectors and each device has its ``preferred`` place (None: matched none).
    """
    devices = found.devices
    outcome = found.budgets
    ranking = []
    selectors = selector_names(devices, found.numbering)
    for rank, device in enumerate(devices):
        following = devices[rank + 1] if rank + 1 < len(devices) else None
        decided = None if following is None else deciding_criterion(device, following, outcome.preference)
        applied = outcome.applied.get(device.device_id)
        ranking.append(
            {
                "rank": rank,
                "selector": selectors[rank],
                **_ref(device),
                "software": device.software,
                "integrated": device.integrated,
                "shared_memory": device.shared_memory,
                "free_memory": device.free_memory,
                "free_memory_unknown": device.free_memory_unknown,
                "unused_reason": device.unused_reason,
                "numa_node": device.numa_node,
                "link": link_text(device),
                "notes": list(device.notes),
                "next": None if following is None else _ref(following),
                "decided_by": None if decided is None else decided.name,
                "usable_free_memory": device.usable_free,
                "budget": None
                if applied is None
                else {
                    "cap": applied.cap.text if applied.cap else None,
                    "reserve": applied.reserve.text if applied.reserve else None,
                    "total_memory": applied.total,
                    "usable_memory": applied.usable,
                    "usable_free_memory": device.usable_free,
                    "sentence": applied.sentence(),
                },
                "preferred": outcome.preference.get(device.device_id),
            }
        )
    hidden = {
        d.device.device_id: d.device.hidden_by
        for d in found.dropped
        if d.device.hidden_by and d.duplicate_of is None
    }
    return {
        "criteria": [c.name for c in criteria(outcome.preference)],
        "prefer": list(outcome.prefer),
        "unmatched_budgets": list(outcome.unmatched),
        "ranking": ranking,
        "dropped": [
            {
                **_ref(drop.device),
                "reason": drop.reason,
                "duplicate_of": None if drop.duplicate_of is None else _ref(drop.duplicate_of),
                "hidden_by": drop.device.hidden_by
                or (hidden.get(drop.duplicate_of, "") if drop.duplicate_of else ""),
            }
            for drop in found.dropped
        ],
        "plugins": [
            {
                "name": r.name,
                "status": str(r.status),
                "devices": r.devices,
                "elapsed_ms": round(r.elapsed * 1000, 3),
                "error": r.error,
                "note": r.note,
            }
            for r in found.plugins
        ],
        # What the system memory figures are (WSL2's virtual machine, macOS's VM statistics).
        "system_notes": list(found.system.notes),
    }


def link_text(device: DeviceInfo) -> str:
    """The device's PCIe link as ``list`` shows it (``Gen5 x16``), "" when unknown."""
    from gpuscout._machine.topology import describe

    return describe(device.pcie_link) if device.pcie_link is not None else ""


def _name(ref: dict[str, Any]) -> str:
    """``cuda:0 (CUDA GPU-…)``: the selector the device answers to, as the table's selector
    column shows it, then its library and id (a ref without a selector: those alone)."""
    selector = ref.get("selector")
    return f"{selector} ({ref['backend']} {ref['id']})" if selector else f"{ref['backend']} {ref['id']}"


def _free(entry: dict[str, Any]) -> str:
    """The free figure (under the device's budget, when it has one); an unknown one says so,
    and what the ranking counted in its place."""
    free = entry.get("usable_free_memory", entry["free_memory"])
    if entry["free_memory_unknown"]:
        return f"unknown, ranked as {human_bytes(free)}"
    return human_bytes(free)


def _free_label(entry: dict[str, Any]) -> str:
    if entry["free_memory_unknown"]:
        return f"free memory {_free(entry)}"
    return f"{_free(entry)} free" + (" under its budget" if entry.get("budget") else "")


def _kind(entry: dict[str, Any]) -> str:
    kind = "software" if entry["software"] else "integrated" if entry["integrated"] else "discrete"
    # Its free memory is the system's: the planner counts those bytes once (docs/shared-memory.md).
    return f"{kind}, memory shared with the system" if entry.get("shared_memory") else kind


def _reason(entry: dict[str, Any], following: dict[str, Any], prefer: list[str]) -> str:
    """Why ``entry`` ranks before ``following`` (``prefer``: the prefer selectors), in words."""
    decided = entry["decided_by"]
    if decided == "prefer":
        theirs = _prefer_label(following, prefer)
        return f"earlier in --prefer: it matches {_prefer_label(entry, prefer)}, {_name(following)} " + (
            f"only {theirs}" if following.get("preferred") is not None else "none of its selectors"
        )
    if decided == "software":
        return "a hardware device before a software one"
    if decided == "unused":
        return "a device the runtime uses by default before one it would not use unless selected"
    if decided == "integrated":
        return "discrete before integrated"
    if decided == "free_memory":
        under = " under their budgets" if entry.get("budget") or following.get("budget") else ""
        return f"more free memory{under} ({_free(entry)} > {_free(following)})"
    if decided == "library":
        return (
            f"same kind and free memory, and library {entry['backend']!r} sorts before "
            f"{following['backend']!r}"
        )
    if decided == "id":
        return f"same kind, free memory and library, and id {entry['id']!r} sorts before {following['id']!r}"
    return "equal on every criterion, so discovery order is kept"


def _prefer_label(entry: dict[str, Any], prefer: list[str]) -> str:
    """``'cuda:1' (prefer #1)``: the prefer selector ``entry`` matched first."""
    place = entry.get("preferred")
    if place is None or not 0 <= place < len(prefer):
        return "none"
    return f"{prefer[place]!r} (prefer #{place + 1})"


def explain_lines(data: dict[str, Any]) -> list[str]:
    """``explain``'s data as text lines, for after the listing: each ranked device with its
    notes (part of why it ranks where it does, docs/topology.md); the system memory notes are
    left out, the listing's last lines have them (in JSON they stay, ``system_notes``)."""
    prefer = data.get("prefer", [])
    lines = [
        (
            "Ranking: the devices --prefer names first, in its order (" + ", ".join(prefer) + "); then "
            if prefer
            else "Ranking: "
        )
        + "discrete before integrated, then free memory descending, then library "
        "and id (devices the runtime would not use unless selected, then software devices, "
        "last):"
    ]
    ranking = data["ranking"]
    if not ranking:
        lines.append("  no device was ranked")
    for entry, following in zip(ranking, [*ranking[1:], None], strict=False):
        who = f"{entry['backend']} {entry['id']}"
        head = (
            f"  #{entry['rank']} {entry['selector']} ({who}, {_kind(entry)}, {_free_label(entry)})"
            if entry.get("selector")
            else f"  #{entry['rank']} {who} ({_kind(entry)}, {_free_label(entry)})"
        )
        if entry["unused_reason"]:
            head += f" [not used by the runtime unless selected: {entry['unused_reason']}]"
        if entry["numa_node"] >= 0 or entry["link"]:
            where = [f"NUMA node {entry['numa_node']}"] if entry["numa_node"] >= 0 else []
            where += [f"PCIe {entry['link']}"] if entry["link"] else []
            head += f" [{', '.join(where)}]"
        if entry.get("budget"):
            head += f" [budget: {entry['budget']['sentence']}]"
        if following is None:
            lines.append(printable(f"{head}: last"))
        else:
            why = _reason(entry, following, prefer)
            lines.append(printable(f"{head} before #{following['rank']} {_name(following)}: {why}"))
        lines += [printable(f"    note: {note}") for note in entry["notes"]]
    lines += [
        printable(f"  budget {sentence}: it changes nothing here")
        for sentence in data.get("unmatched_budgets", [])
    ]
    if data["dropped"]:
        lines.append("Dropped:")
    for drop in data["dropped"]:
        of = ""
        if drop["duplicate_of"]:
            # "duplicate of CUDA 0"; a twin dropped for another reason says whose twin it is.
            of = (
                f" of {_name(drop['duplicate_of'])}"
                if drop["reason"] == DUPLICATE_REASON
                else f" (the same card as {_name(drop['duplicate_of'])})"
            )
        lines.append(printable(f"  {_name(drop)}: {drop['reason']}{of}"))
    lines.append("Plugins:")
    for r in data["plugins"]:
        text = f"  {r['name']}: {r['status']}, {plural(r['devices'], 'device')}, {r['elapsed_ms']:.1f} ms"
        if r["error"]:
            text += f"; error: {r['error']}"
        if r["note"]:
            text += f"; note: {r['note']}"
        lines.append(printable(text))
    return lines


def write_explanation(lines: Sequence[str], stream: TextIO, *, wrap: bool = True) -> None:
    """``lines`` on ``stream``: on a terminal each wrapped between words to its width (a word
    wider than that stays whole), continuation lines indented under their line's text; in a
    pipe, or with ``wrap`` False (after ``--format tsv``, plain lines asked for), one line each."""
    from gpuscout.cli._render.hints import terminal_width

    width = terminal_width(stream) if wrap else None
    if width is None:
        stream.write("".join(f"{line}\n" for line in lines))
        return
    from gpuscout.cli._render.wrap import wrap_words

    out = [
        "\n".join(wrap_words(line, width, " " * (len(line) - len(line.lstrip(" ")) + 2))) for line in lines
    ]
    stream.write("".join(f"{text}\n" for text in out))
