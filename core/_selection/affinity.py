"""CPU affinity for a child process: the CPUs local to the devices it will use.

A device's ``local_cpus`` is the kernel's ``local_cpulist`` for its PCI function: the CPUs of
the NUMA node the device hangs off. A child pinned there keeps its host-side buffers, its
driver threads and its copies on that node instead of crossing the socket interconnect.

``for_devices`` decides the set (the union over the devices, within the CPUs this process may
use); ``pinned`` applies it to the calling thread for the time it takes to start a child,
which inherits it (Linux's ``sched_setaffinity(0, ...)`` acts on the calling thread only, so
the host's other threads are untouched). Where the kernel gives no locality, or the platform
has no ``sched_setaffinity``, nothing is changed and the note says why.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator, Sequence

import attrs

from gpuscout._records.cpulist import cpulist, cpus
from gpuscout._records.device import DeviceInfo
from gpuscout._selection.selectors import describe


@attrs.frozen
class Affinity:
    """The CPUs a child should run on (``cpus``; None: leave them as they are) and one
    sentence saying what was decided and why (``note``)."""

    cpus: frozenset[int] | None
    note: str

    @property
    def cpulist(self) -> str:
        """``cpus`` in the kernel's list form (``0-15,32-47``); "" when unchanged."""
        return cpulist(self.cpus) if self.cpus is not None else ""


def supported() -> bool:
    """Whether this platform can set a thread's CPU affinity (Linux can; macOS cannot)."""
    return hasattr(os, "sched_setaffinity") and hasattr(os, "sched_getaffinity")


def allowed_cpus() -> frozenset[int] | None:
    """The CPUs this thread may run on now (its cpuset and affinity), None where unknown."""
    if not supported():
        return None
    try:
        return frozenset(os.sched_getaffinity(0))
    except OSError:
        return None


def _names(devices: Iterable[tuple[int, DeviceInfo]]) -> str:
    return ", ".join(describe(i, d) for i, d in devices)


def for_devices(
    devices: Sequence[DeviceInfo], allowed: frozenset[int] | None = None, *, platform_supported: bool = True
) -> Affinity:
    """The CPUs local to ``devices``: the union of their ``local_cpus`` within ``allowed``
    (default: what this process may use now).

    Unchanged (``cpus`` None) when nothing is selected, the platform cannot pin, no device has
    a known locality, or the local CPUs are all outside ``allowed`` (a cpuset that gives the
    process other CPUs: pinning there is not ours to undo). A device without locality next to
    devices with it is named in the note; the child runs on the others' CPUs.
    """
    if not devices:
        return Affinity(None, "CPU affinity unchanged: no device is selected")
    if not platform_supported:
        return Affinity(None, "CPU affinity unchanged: this platform cannot set a process's CPUs")
    known: list[tuple[int, DeviceInfo, frozenset[int]]] = []
    unknown: list[tuple[int, DeviceInfo]] = []
    for i, d in enumerate(devices):
        local = cpus(d.local_cpus) if d.local_cpus else None
        if local:
            known.append((i, d, local))
        else:
            unknown.append((i, d))
    if not known:
        return Affinity(
            None, f"CPU affinity unchanged: the kernel gives no CPU locality for {_names(unknown)}"
        )
    local_union = frozenset().union(*(c for _, _, c in known))
    chosen = local_union if allowed is None else local_union & allowed
    if not chosen:
        return Affinity(
            None,
            f"CPU affinity unchanged: the CPUs local to the selection ({cpulist(local_union)}) "
            f"are outside those this process may use ({cpulist(allowed or frozenset())})",
        )
    nodes = sorted({d.numa_node for _, d, _ in known if d.numa_node >= 0})
    where = f"NUMA node{'s' if len(nodes) > 1 else ''} {', '.join(map(str, nodes))}, " if nodes else ""
    note = f"CPU affinity {cpulist(chosen)} ({where}local to {_names((i, d) for i, d, _ in known)})"
    if chosen != local_union:
        note += f"; {cpulist(local_union - chosen)} left out: not allowed to this process"
    if unknown:
        note += f"; no CPU locality known for {_names(unknown)}"
    return Affinity(chosen, note)


@contextlib.contextmanager
def pinned(chosen: frozenset[int] | None) -> Iterator[None]:
    """Run the block with the calling thread pinned to ``chosen`` (nothing when None), then
    restore its CPUs: a child started inside the block inherits ``chosen``.

    Raises OSError from the kernel when ``chosen`` cannot be set (no CPU of it is online)."""
    if chosen is None or not supported():
        yield
        return
    previous = os.sched_getaffinity(0)
    os.sched_setaffinity(0, chosen)
    try:
        yield
    finally:
        os.sched_setaffinity(0, previous)


__all__ = ["Affinity", "allowed_cpus", "for_devices", "pinned", "supported"]
