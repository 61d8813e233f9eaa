"""GGML_VK_VISIBLE_DEVICES as llama.cpp's Vulkan backend reads it (pure functions)."""

from __future__ import annotations

import re

from gpuscout.plugins.vulkan.names import VISIBLE_ENV

_SIZE_T_LIMIT = 2**64
# ASCII only, like an istream in the classic locale: "\d" would take "²", "\s" a no-break space.
_NUMBER = re.compile(r"\s*([+-]?)([0-9]+)", re.ASCII)
# More digits than 2**64 has never fit size_t (and int() refuses over 4300 digits).
_SIZE_T_DIGITS = len(str(_SIZE_T_LIMIT))


def parse_indices(value: str) -> list[int]:
    """The indices llama.cpp reads from ``value``, in order.

    Commas count as spaces, then numbers are read like ``std::istream >> size_t``: reading stops
    at the first token that is not a number ("0,x,1" gives [0]); a minus sign wraps around
    ("-1" is 2**64 - 1); a number too large for size_t stops the reading.
    """
    text = value.replace(",", " ")
    out: list[int] = []
    pos = 0
    while True:
        match = _NUMBER.match(text, pos)
        if match is None:
            return out
        digits = match.group(2).lstrip("0") or "0"
        if len(digits) > _SIZE_T_DIGITS or int(digits) >= _SIZE_T_LIMIT:
            return out
        number = int(digits)
        out.append(-number % _SIZE_T_LIMIT if match.group(1) == "-" else number)
        pos = match.end()


def select_indices(value: str | None, count: int) -> tuple[list[int], str]:
    """(raw indices to report, note) for the variable's ``value`` and ``count`` devices.

    Unset: every device. Set but empty: none. An index >= count (``-1`` included) makes
    llama.cpp register no Vulkan backend at all, so none, with a note. A repeated index is
    reported once (llama.cpp would open the same device twice), with a note.
    """
    if value is None:
        return list(range(count)), ""
    indices = parse_indices(value)
    if not value.strip():
        return [], f"{VISIBLE_ENV} is set but empty: no Vulkan device is visible"
    bad = [i for i in indices if i >= count]
    if bad:
        shown = bad[0] if bad[0] < 2**63 else bad[0] - _SIZE_T_LIMIT
        return [], (
            f"{VISIBLE_ENV}={value!r} names device {shown}, but the loader lists "
            f"{count}: llama.cpp then uses no Vulkan device at all"
        )
    unique = list(dict.fromkeys(indices))
    note = ""
    if len(unique) != len(indices):
        note = f"{VISIBLE_ENV}={value!r} repeats a device; each is reported once"
    elif not indices:
        note = f"{VISIBLE_ENV}={value!r} holds no device index: no Vulkan device is visible"
    return unique, note
