"""Whether a placed model fits: the planner's check of the CPU side with the real system
memory, the one pool that the CPU and shared-memory devices draw from, and every GPU's share
within its free memory less its reserve; each shortfall said in a note."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from gpuscout._fit.usage import Usage
from gpuscout._records.device import DeviceInfo, SystemInfo
from gpuscout._records.layers import GPULayersList
from gpuscout._records.memory import InsufficientMemoryError
from gpuscout._records.notes import device_label
from gpuscout.sizes import human_bytes, sizes_apart


def verdict(
    layout: GPULayersList,
    layer_sizes: list[int],
    devices: Sequence[DeviceInfo],
    system: SystemInfo,
    usage: list[Usage],
    reserve: Callable[[DeviceInfo], int],
    platform: str,
    num_gpu: int,
    notes: list[str],
) -> bool:
    """The planner's verdict on the CPU side (verify_layout with the real system memory),
    and every GPU's share within its free memory less its reserve."""
    from gpuscout._layout.plan import verify_layout

    cpu = usage[-1]
    on_gpu = {i for x in layout for i in x.layers}
    unplaced = sum(size for i, size in enumerate(layer_sizes) if i not in on_gpu)
    extra = max(0, cpu.total - unplaced)
    fits = True
    if system.total_memory == 0 and system.free_memory == 0:
        notes.append("system memory unknown: the CPU's share is not checked")
    else:
        try:
            verify_layout(
                layout,
                layer_sizes,
                devices,
                system,
                num_gpu=num_gpu,
                require_full=False,
                graphs=None,
                platform=platform,
                cpu_extra=extra,
            )
        except InsufficientMemoryError:
            fits = False
            share, free, swap = sizes_apart(cpu.total, system.free_memory, system.free_swap)
            notes.append(
                f"the CPU's share ({share}) is more than free system memory "
                f"({free}{f' plus {swap} of swap' if system.free_swap else ''})"
            )
        else:
            fits = shared_verdict(usage, devices, system, platform, notes)
    by_key = {(d.id, d.library): d for d in devices}
    for u in usage[:-1]:
        d = by_key[(u.id, u.library)]
        room = d.usable_free - reserve(d)  # under the device's budget (docs/budgets.md)
        who = device_label(d.library, d.id, d.name)
        if d.free_memory_unknown:
            # Never used as if it were known (docs/selection.md): the runtime takes the same
            # stand-in figure, so it is the placement's too, but the verdict says so.
            notes.append(
                f"{who}: free memory unknown; placed against the {human_bytes(d.free_memory)} "
                "its driver reports instead (what the runtime uses too), so the "
                "verdict may be optimistic"
            )
        if u.total > room:
            fits = False
            need, has = sizes_apart(u.total, max(room, 0))
            notes.append(f"{who} needs {need} but has {has} free after its reserve")
    return fits


def shared_verdict(
    usage: Sequence[Usage], devices: Sequence[DeviceInfo], system: SystemInfo, platform: str, notes: list[str]
) -> bool:
    """Whether the CPU's share and everything on ``shared_memory`` devices (weights, cache and
    graph) fit the one pool they draw from (``plan.shared_pool``, plus swap off darwin); a note
    when they do not. The planner's check counts layers only; this counts every buffer."""
    from gpuscout._layout.plan import shared_pool

    shared = {(d.id, d.library) for d in devices if d.shared_memory}
    on_shared = sum(u.total for u in usage[:-1] if (u.id, u.library) in shared)
    if not on_shared:
        return True
    pool = shared_pool(devices, system) + (system.free_swap if platform != "darwin" else 0)
    host = usage[-1].total + on_shared
    names = ", ".join(device_label(d.library, d.id, d.name) for d in devices if (d.id, d.library) in shared)
    held, room = sizes_apart(host, pool)
    notes.append(
        f"{names}: memory shared with the system, so what it holds and the CPU's share are "
        f"counted together ({held} of {room})"
    )
    if host <= pool:
        return True
    swap = " with swap" if platform != "darwin" and system.free_swap else ""
    notes.append(
        f"the CPU's share plus what sits on shared-memory devices ({held}) is more than "
        f"the system memory they share ({room}{swap})"
    )
    return False


__all__ = ["shared_verdict", "verdict"]
