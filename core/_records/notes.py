"""Notes as people read them: a device named the one way every note names it, and a note that
holds for several devices said once, naming them (or, when it holds for every one, their count)."""

from __future__ import annotations

from collections.abc import Iterable


def device_label(library: str, id: str, name: str = "") -> str:
    """``CUDA GPU-1a2b... (NVIDIA H200)``: the library and id a selector takes, the name after;
    only the parts that are known."""
    label = " ".join(part for part in (library, id) if part)
    if name and label and name != id:
        return f"{label} ({name})"
    return label or name


def grouped(notes: Iterable[tuple[str, str]], every: int = 0) -> list[str]:
    """``(who, text)`` pairs as notes, one per distinct ``text`` in the order each first appears:
    ``"who: text"``, or ``"A, B: text"`` when it holds for both; a text that holds for all
    ``every`` devices (three or more) is ``"each of the 8 devices: text"``."""
    by_text: dict[str, list[str]] = {}
    for who, text in notes:
        names = by_text.setdefault(text, [])
        if who not in names:
            names.append(who)
    out = []
    for text, names in by_text.items():
        if every > 2 and len(names) == every:
            out.append(f"each of the {every} devices: {text}")
        else:
            out.append(f"{', '.join(names)}: {text}" if names else text)
    return out


__all__ = ["device_label", "grouped"]
