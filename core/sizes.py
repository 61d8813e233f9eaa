"""Byte counts as people read them (``12.3 GiB``): tables, ``list --explain``, memory summaries;
and the binary units themselves, defined once (``from gpuscout.sizes import GIB, MIB``)."""

from __future__ import annotations

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


def scaled(number: str, unit: str) -> int:
    """``number`` (ASCII digits, optionally ``.`` and more digits) of ``unit`` (a UNIT_BYTES key,
    any case) in whole bytes, rounded down exactly however many digits the fraction has."""
    whole, _, fraction = number.partition(".")
    scale = UNIT_BYTES[unit.lower()]
    exact = int(fraction) * scale // 10 ** len(fraction) if fraction else 0
    return int(whole or "0") * scale + exact


def human_bytes(n: int) -> str:
    """Bytes as ``12.3 GiB`` (binary units up to YiB; beyond that the YiB figure grows).

    Integer arithmetic throughout, so no size is too large to print.
    """
    n = int(n)
    if n < 0:
        return "-" + human_bytes(-n)
    if n < 1024:
        return f"{n} B"
    for power, unit in enumerate(UNITS[1:], start=1):
        scale = 1024**power
        tenths = (n * 10 + scale // 2) // scale
        # 1023.96 KiB rounds to 1024.0: say 1.0 MiB instead.
        if tenths < 1024 * 10 or unit == UNITS[-1]:
            return f"{tenths // 10}.{tenths % 10} {unit}"
    raise AssertionError("unreachable")  # pragma: no cover


__all__ = ["GIB", "KIB", "MIB", "UNITS", "UNIT_BYTES", "human_bytes", "scaled"]
