"""How figures read for people in ``list``, ``plugins`` and ``cluster``: memory (an unknown
figure said so, never shown as a number), versions, the summary line and system memory.

The rule for unknown values (docs/selection.md, "Unknown values"): a device whose driver does
not report free memory (``free_memory_unknown``) has its free figure shown as ``?`` (a legend
line says what ``?`` means) or ``unknown``, never the total in its place, and it is left out of
every sum of free memory: a sum says how many devices' free memory it could not count. System
memory that could not be read (a recorded tree without ``/proc/meminfo``: all zeros) is
``unknown``, not ``0 B``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from gpuscout.sizes import human_bytes

if TYPE_CHECKING:
    from gpuscout._records.device import DeviceInfo, SystemInfo

#: The mark of an unknown free figure in a table, and the legend line printed below one that
#: shows it.
UNKNOWN_MARK = "?"
UNKNOWN_LEGEND = "?: free memory unknown (its driver does not say); fits: never selects it"


def memory_bar(free: int, total: int, width: int = 10, unknown: bool = False) -> str:
    """A bar of used memory: ``[###-------]`` is 30 % used; ``[??????????]`` when the free
    figure (``unknown``) or the total is not known."""
    if unknown or total <= 0:
        return "[" + "?" * width + "]"
    used = min(width, max(0, round(width * (total - free) / total)))
    return "[" + "#" * used + "-" * (width - used) + "]"


def compute_label(d: DeviceInfo) -> str:
    """The compute version, ``-`` when unknown (major -1, or 0.0 from a library without one)."""
    unknown = d.compute_major < 0 or (d.compute_major == 0 and d.compute_minor == 0)
    return "-" if unknown else d.compute


def integrated_label(d: DeviceInfo) -> str:
    """The ``integrated`` column: ``shared`` when the device's memory is the system's
    (``shared_memory``: its free bytes and the system's are the same bytes), else ``yes`` or
    ``no`` (an APU whose runtime uses only its carve-out is ``yes``)."""
    return "shared" if d.shared_memory else "yes" if d.integrated else "no"


def driver_label(d: DeviceInfo) -> str:
    """The driver version, ``-`` when unknown (0.0)."""
    return "-" if d.driver_major == 0 and d.driver_minor == 0 else d.driver


def numa_label(d: DeviceInfo) -> str:
    """The device's NUMA node, ``-`` when unknown (or the kernel names none)."""
    return "-" if d.numa_node < 0 else str(d.numa_node)


def link_label(d: DeviceInfo) -> str:
    """The PCIe link: ``Gen5 x16``, ``Gen3 x4 of Gen4 x16`` below its maximum, ``-`` unknown."""
    from gpuscout._machine.topology import describe

    return (describe(d.pcie_link) if d.pcie_link is not None else "") or "-"


def memory_label(d: DeviceInfo) -> str:
    """``20.0/24.0 GiB`` (free/total, the unit once when both share it); ``?/24.0 GiB`` when
    the free figure is unknown; `` (stale)`` after one that is not fresh."""
    total = human_bytes(d.total_memory)
    if d.free_memory_unknown:
        return f"{UNKNOWN_MARK}/{total}"
    free = human_bytes(d.free_memory)
    free_number, _, free_unit = free.partition(" ")
    text = f"{free_number}/{total}" if free_unit == total.partition(" ")[2] else f"{free}/{total}"
    return text + (" (stale)" if d.free_memory_stale else "")


def free_of_total(free: int, total: int, unknown_devices: int = 0, unknown_total: int = 0) -> str:
    """A sum of memory: ``22.0 GiB free of 26.0 GiB``; devices whose free memory is unknown
    (``unknown_devices`` of them, holding ``unknown_total`` of the ``total`` bytes) are said
    apart, never counted as free: ``20.0 GiB free of 24.0 GiB (1 more device, 2.0 GiB, free
    unknown)``, or ``2.0 GiB, free unknown`` when no free figure is known."""
    if not unknown_devices:
        return f"{human_bytes(free)} free of {human_bytes(total)}"
    known_total = total - unknown_total
    if known_total <= 0 and free == 0:
        return f"{human_bytes(total)}, free unknown"
    plural = "" if unknown_devices == 1 else "s"
    return (
        f"{human_bytes(free)} free of {human_bytes(known_total)} ({unknown_devices} more "
        f"device{plural}, {human_bytes(unknown_total)}, free unknown)"
    )


def devices_free_of_total(devices: Sequence[DeviceInfo]) -> str:
    """``free_of_total`` of ``devices``: unknown free figures are never added in."""
    unknown = [d for d in devices if d.free_memory_unknown]
    return free_of_total(
        sum(d.free_memory for d in devices if not d.free_memory_unknown),
        sum(d.total_memory for d in devices),
        len(unknown),
        sum(d.total_memory for d in unknown),
    )


def system_line(s: SystemInfo) -> str:
    """``System memory: 22.7 GiB free of 23.5 GiB, swap free 0 B``; ``System memory: unknown``
    when nothing could be read (a recorded tree without ``/proc/meminfo`` gives zeros; the
    ``/proc/meminfo`` hint only when no system note says why)."""
    if s.total_memory <= 0:
        if s.notes:  # they say why (a darwin recording without answers/core.json, ...)
            return "System memory: unknown"
        return "System memory: unknown (no /proc/meminfo was readable)"
    return (
        f"System memory: {human_bytes(s.free_memory)} free of {human_bytes(s.total_memory)}, "
        f"swap free {human_bytes(s.free_swap)}"
    )


__all__ = [
    "UNKNOWN_LEGEND",
    "UNKNOWN_MARK",
    "compute_label",
    "devices_free_of_total",
    "driver_label",
    "free_of_total",
    "integrated_label",
    "link_label",
    "memory_bar",
    "memory_label",
    "numa_label",
    "system_line",
]
