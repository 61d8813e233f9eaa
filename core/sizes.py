"""Byte counts as people read them (``12.3 GiB``): tables, ``list --explain``, memory summaries;
and the binary units themselves, defined once (``from gpuscout.sizes import GIB, MIB``)."""

from __future__ import annotations

#: Bytes in a kibibyte, a mebibyte and a gibibyte.
KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB

UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB")


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


__all__ = ["GIB", "KIB", "MIB", "UNITS", "human_bytes"]
