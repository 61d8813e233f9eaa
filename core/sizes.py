"""Sizes, written and read: the one grammar every size option follows (``fits:24GiB``, budgets
such as ``--cap all=20GiB``, ``fit --layers 100MiB,...``), byte counts as people read them
(``12.3 GiB``; ``sizes_apart`` for figures a sentence compares, so that two that differ never read
alike), and the binary units themselves, defined once (``from gpuscout.sizes import GIB``).
Every message, note and error writes sizes through these; bytes stay in the JSON documents.

The rule (``parse_size``): a size is an ASCII number, fractions allowed (``1.5GiB``), and a unit,
``B``, ``KiB``, ``MiB``, ``GiB``, ``TiB`` (powers of 1024) or ``KB``, ``MB``, ``GB``, ``TB`` (powers
of 1000), in any case, with ASCII whitespace allowed around and between them (``16 GiB``), not
inside either. A bare number is refused everywhere, since ``24`` could mean bytes, MiB or GiB:
bytes are written ``24B``. Fractions are rounded down to whole bytes. Signs, exponents,
``nan``/``inf``, underscores, quotes, non-ASCII digits, letters or spaces, and sizes over
``MAX_SIZE`` (2**63-1 bytes, what llama.cpp's int64 sizes hold) are refused with ``SizeError``,
whose message (one line) is the same wherever the size was written.
(llama.cpp's own MiB counts, such as ``fit -fitt 1024``, are llama.cpp's spelling, not sizes.)
"""

from __future__ import annotations

import re

from gpuscout.errors import GpuscoutError

#: Bytes in a kibibyte, a mebibyte and a gibibyte.
KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB

UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB")

#: Bytes per unit of a size as people write it (``GiB`` binary, ``GB`` decimal), keyed in lower
#: case; the one table behind ``fits:24GiB``, budgets (``all=20GiB``) and ``fit --layers``.
UNIT_BYTES = {
    "b": 1,
    "kib": KIB,
    "mib": MIB,
    "gib": GIB,
    "tib": 1 << 40,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
}

#: The largest size ``parse_size`` reads, in bytes: 2**63-1, the int64 llama.cpp sizes are.
MAX_SIZE = (1 << 63) - 1
#: The longest text ``parse_size`` reads (a fraction may have hundreds of digits, not more).
MAX_TEXT = 1000

#: The units, as every size error names them.
UNITS_TEXT = "B, KiB, MiB, GiB, TiB (powers of 1024) or KB, MB, GB, TB (powers of 1000)"

# ASCII only, and fullmatch: "\d" would take "²" or "٣", IGNORECASE alone would let the Kelvin
# sign match "k", "\s" would take a no-break space, and "$" matches before a trailing newline.
_SIZE = re.compile(r"\s*(-?)([0-9]+(?:\.[0-9]+)?)\s*([a-z]*)\s*", re.ASCII | re.IGNORECASE)
# Digits in a whole part (leading zeros aside) past which a size is over MAX_SIZE in any unit.
_MAX_DIGITS = len(str(MAX_SIZE))


class SizeError(GpuscoutError, ValueError):
    """A size that is not one: ``what`` (where it was written, e.g. ``--cap entry 1 'all=20'``)
    and ``reason`` (what is wrong with it, worded the same wherever it was written)."""

    def __init__(self, what: str, reason: str) -> None:
        super().__init__(f"{what}: {reason}" if what else reason)
        self.what = what
        self.reason = reason


def parse_size(text: str, *, what: str) -> int:
    """``24GiB`` -> bytes, by the rule of the module doc; ``what`` says where the size was
    written, for the message. Raises SizeError for anything else."""
    if not isinstance(text, str):
        raise SizeError(what, f"a size must be a str, got {type(text).__name__}")
    shown = _shown(text)
    if len(text) > MAX_TEXT:
        raise SizeError(what, f"{shown}: too long for a size (at most {MAX_TEXT} characters)")
    match = _SIZE.fullmatch(text)
    if not match:
        raise SizeError(what, f"{shown}: not a size; expected a number and a unit, {UNITS_TEXT}, e.g. 24GiB")
    sign, number, unit = match.groups()
    if sign:
        raise SizeError(what, f"{shown}: a size cannot be negative")
    if not unit:
        raise SizeError(what, _needs_unit(shown, number))
    if unit.lower() not in UNIT_BYTES:
        raise SizeError(what, f"{shown}: unknown unit {unit!r}; expected {UNITS_TEXT}")
    if len(number.partition(".")[0].lstrip("0")) > _MAX_DIGITS:  # before int() meets 900 digits
        raise SizeError(what, _too_large(shown))
    size = scaled(number, unit)
    if size > MAX_SIZE:
        raise SizeError(what, _too_large(shown))
    return size


def _needs_unit(shown: str, number: str) -> str:
    # The number echoed into the examples only while it is short enough to read.
    n = number if len(number) <= 24 else "24"
    bytes_too = f"; bytes are {n}B" if "." not in n else ""
    return f"{shown}: a size needs a unit, e.g. {n}GiB or {n}MiB{bytes_too}"


def _too_large(shown: str) -> str:
    return f"{shown}: larger than the largest size, 2**63-1 bytes (8 EiB)"


def _shown(text: str, limit: int = 60) -> str:
    """``text`` quoted, every character that is not printable ASCII escaped (a Kelvin sign shows
    as ``\\u212a``, not as a K), cut to about ``limit`` characters saying how long it was."""
    return ascii(text) if len(text) <= limit else f"{text[:limit]!a}... ({len(text)} characters)"


def scaled(number: str, unit: str) -> int:
    """``number`` (ASCII digits, optionally ``.`` and more digits) of ``unit`` (a UNIT_BYTES key,
    any case) in whole bytes, rounded down exactly however many digits the fraction has."""
    whole, _, fraction = number.partition(".")
    scale = UNIT_BYTES[unit.lower()]
    exact = int(fraction) * scale // 10 ** len(fraction) if fraction else 0
    return int(whole or "0") * scale + exact


def size_text(size: int) -> str:
    """``size`` bytes as a size is written, exactly: ``20GiB`` when a binary unit divides it,
    else ``123B``; ``parse_size`` reads it back to the same bytes."""
    for unit, scale in (("TiB", 1 << 40), ("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if size and size % scale == 0:
            return f"{size // scale}{unit}"
    return f"{size}B"


def human_bytes(n: int, digits: int = 1) -> str:
    """Bytes as ``12.3 GiB`` (binary units up to YiB; beyond that the YiB figure grows), with
    ``digits`` decimals (1 to 3); under 1 KiB the exact count, ``512 B``.

    Integer arithmetic throughout, so no size is too large to print.
    """
    n = int(n)
    if n < 0:
        return "-" + human_bytes(-n, digits)
    if n < 1024:
        return f"{n} B"
    tens = 10 ** max(1, min(3, int(digits)))
    for power, unit in enumerate(UNITS[1:], start=1):
        scale = 1024**power
        parts = (n * tens + scale // 2) // scale
        # 1023.96 KiB rounds to 1024.0: say 1.0 MiB instead.
        if parts < 1024 * tens or unit == UNITS[-1]:
            whole, fraction = divmod(parts, tens)
            return f"{whole}.{fraction:0{len(str(tens)) - 1}d} {unit}"
    raise AssertionError("unreachable")  # pragma: no cover


def sizes_apart(*sizes: int) -> tuple[str, ...]:
    """``sizes`` as ``human_bytes`` writes them, to the fewest decimals (1 to 3) at which any two
    that differ read differently: ``sizes_apart(24762777600, 24741150720)`` is ``("23.1 GiB",
    "23.0 GiB")``, and two sizes a few bytes apart are written exactly, ``1073741834 B``. For a
    sentence whose point is that two figures differ ("needs 23.1 GiB but has 23.0 GiB")."""
    distinct = len(set(sizes))
    for digits in (1, 2, 3):
        texts = tuple(human_bytes(n, digits) for n in sizes)
        if len(set(texts)) == distinct:
            return texts
    return tuple(f"{int(n)} B" for n in sizes)


def word_for(count: int, word: str, words: str = "") -> str:
    """``word`` when ``count`` is 1, else its plural (``words``, or ``word`` + ``s``):
    ``f"on {word_for(n, 'node')} 0, 1"``."""
    return word if count == 1 else words or word + "s"


def plural(count: int, word: str, words: str = "") -> str:
    """``1 block``, ``2 blocks``, ``0 blocks``: ``count`` and the word it takes."""
    return f"{count} {word_for(count, word, words)}"


__all__ = [
    "GIB",
    "KIB",
    "MAX_SIZE",
    "MAX_TEXT",
    "MIB",
    "UNITS",
    "UNITS_TEXT",
    "UNIT_BYTES",
    "SizeError",
    "human_bytes",
    "parse_size",
    "plural",
    "scaled",
    "size_text",
    "sizes_apart",
    "word_for",
]
