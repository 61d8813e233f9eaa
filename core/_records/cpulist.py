"""The kernel's CPU list form (``0-3,8-11``): checked and read, never guessed.

Linux prints a CPU mask as a list (``bitmap_print_to_pagebuf(true, ...)``, format ``%*pbl``,
lib/vsprintf.c ``bitmap_list_string``): ranges ``a-b`` and single CPUs ``n``, comma separated,
ascending and apart from each other, ending in a newline; an empty mask prints as just the
newline. That is what ``/sys/bus/pci/devices/<addr>/local_cpulist`` and
``/sys/devices/system/node/node<N>/cpulist`` hold. The region form ``0-63:2/4`` is something
the kernel accepts as input (``bitmap_parselist``) and never prints, so it is refused here.
"""

from __future__ import annotations

import re

#: The most characters a CPU list may have (a 4096-CPU machine with every other CPU in the
#: mask needs about 20,000).
MAX_CPULIST = 1 << 16
#: CPU numbers stay below this (Linux's NR_CPUS is at most 8192 today).
MAX_CPU = 1 << 20
_LIST = re.compile(r"[0-9]{1,7}(?:-[0-9]{1,7})?(?:,[0-9]{1,7}(?:-[0-9]{1,7})?)*", re.ASCII)


def cpulist_ranges(text: str) -> list[tuple[int, int]] | None:
    """``text`` (the kernel's list form, surrounding space ignored) as ``(first, last)``
    ranges; ``[]`` for an empty list, None for anything the kernel does not print (a bad
    token, a range backwards, ranges out of order or touching, a CPU >= ``MAX_CPU``, a text
    over ``MAX_CPULIST`` characters)."""
    if not isinstance(text, str) or len(text) > MAX_CPULIST:
        return None
    text = text.strip()
    if not text:
        return []
    if _LIST.fullmatch(text) is None:
        return None
    ranges: list[tuple[int, int]] = []
    for token in text.split(","):
        first, _, last = token.partition("-")
        low, high = int(first), int(last or first)
        if low > high or high >= MAX_CPU:
            return None
        if ranges and low <= ranges[-1][1] + 1:
            return None  # the kernel merges touching ranges and writes them in order
        ranges.append((low, high))
    return ranges


def is_cpulist(text: str) -> bool:
    """Whether ``text`` is a CPU list in the kernel's printed form (empty included)."""
    return cpulist_ranges(text) is not None


def cpus(text: str) -> frozenset[int] | None:
    """The CPU numbers ``text`` names (the kernel's list form), None when it is not one."""
    ranges = cpulist_ranges(text)
    if ranges is None:
        return None
    return frozenset(cpu for low, high in ranges for cpu in range(low, high + 1))


def cpulist(numbers: frozenset[int] | set[int] | list[int]) -> str:
    """CPU numbers in the kernel's list form (``[0, 1, 2, 3, 8]`` -> ``0-3,8``)."""
    out: list[str] = []
    ordered = sorted(set(numbers))
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        out.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(out)


__all__ = ["MAX_CPU", "MAX_CPULIST", "cpulist", "cpulist_ranges", "cpus", "is_cpulist"]
