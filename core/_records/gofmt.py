"""The few pieces of Go's fmt verbs that the seed's String methods print."""

from __future__ import annotations

from collections.abc import Iterable


def go_plus_v(values: Iterable[int]) -> str:
    """A Go slice of integers as ``%v`` prints it: ``[1 2 3]``, nil and empty alike as ``[]``."""
    return "[" + " ".join(str(v) for v in values) + "]"
