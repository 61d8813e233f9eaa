"""``Scout.refresh``'s work: the plugins' fresh records matched to the devices passed in, by
identity (id, library, PCI id and UUID); a device nobody refreshed keeps its values, stale."""

from __future__ import annotations

import time
from typing import Any

from gpuscout._host.border import checked_devices
from gpuscout._host.calls import PluginHost
from gpuscout._machine.context import Context
from gpuscout._records.device import DeviceInfo
from gpuscout._records.results import Discovery
from gpuscout.errors import GpuscoutError


def refresh(host: PluginHost, devices: list[DeviceInfo], log: Any) -> list[DeviceInfo]:
    """``Scout.refresh``'s work, under the lock the caller holds: the plugins are asked through
    ``host``, and ``log`` (the Scout's logger) hears how it went."""
    start = time.perf_counter()
    host.start_refresh()  # a plugin that overran before is asked again
    passed: dict[Any, list[DeviceInfo]] = {}
    for d in devices:
        passed.setdefault(d.device_id, []).append(d)
    # Per device identity, the plugins' valid answers in call order (the last one wins).
    answers: dict[Any, list[DeviceInfo]] = {}
    for plugin, answer in host.each("gpuscout_refresh", devices=tuple(devices)):
        try:
            fresh = checked_devices(answer)
        except GpuscoutError as exc:
            host.record_failure(plugin, "gpuscout_refresh", str(exc))
            continue
        for d in fresh:
            originals = passed.get(d.device_id)
            if originals is None:
                continue  # not asked about (another library's, or an id it changed)
            if not any(_same_identity(o, d) for o in originals):
                host.record_failure(
                    plugin,
                    "gpuscout_refresh",
                    f"{_identity_change(originals[0], d)}; that device is kept, stale",
                )
                continue
            answers.setdefault(_identity(d), []).append(d)
    from gpuscout._discovery.budgets import keep_budget

    out: list[DeviceInfo] = []
    for d in devices:
        got = answers.get(_identity(d))
        out.append(
            d.evolve(free_memory_stale=True)
            if not got
            else keep_budget(d, got[-1].evolve(free_memory_stale=False))
        )
    stale = [f"{d.library}:{d.id}" for d in out if d.free_memory_stale]
    log.debug(
        "refresh.done",
        devices=len(out),
        stale=stale,
        elapsed_ms=round((time.perf_counter() - start) * 1000, 3),
    )
    return out


def refreshed_listing(found: Discovery, fresh: list[DeviceInfo], context: Context) -> Discovery:
    """``found`` with its devices replaced by ``fresh`` (a refresh of them) and system memory
    read anew through ``context``, ranked as the discovery ranked them: with the budgets'
    preference (``--prefer``) first, then the usual order. What ``list --watch`` shows between
    two discoveries."""
    import attrs

    from gpuscout._discovery.ranking import rank
    from gpuscout._machine.system import read_system

    return attrs.evolve(found, devices=rank(fresh, found.budgets.preference), system=read_system(context))


def _identity(device: DeviceInfo) -> tuple[str, str, str, str]:
    """What a refreshed record must keep: id, library, PCI id and UUID (case ignored)."""
    return device.id, device.library, device.pci_id.lower(), device.uuid.lower()


def _same_identity(a: DeviceInfo, b: DeviceInfo) -> bool:
    return _identity(a) == _identity(b)


def _identity_change(old: DeviceInfo, new: DeviceInfo) -> str:
    """``{library} device {id!r}: pci_id '...' -> '...'``: which identity field a refresh changed."""
    changed = [
        f"{name} {getattr(old, name)!r:.80} -> {getattr(new, name)!r:.80}"
        for name in ("pci_id", "uuid")
        if getattr(old, name).lower() != getattr(new, name).lower()
    ]
    return f"{old.library} device {old.id!r:.80}: changed its {', '.join(changed)}"
