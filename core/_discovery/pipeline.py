"""One discovery: enumerate, merge, set software devices aside, validate, place, read system
memory, apply the budgets, rank. ``Scout.discover`` holds the lock and hands ``discover`` a
``Run``: the plugin host, the budgets and the few calls a discovery makes, never the Scout
itself. This module logs through the Scout's own logger (``gpuscout.scout``)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from gpuscout._discovery.budgets import Budgets
from gpuscout._discovery.ranking import rank
from gpuscout._host.calls import PluginHost
from gpuscout._machine.context import Context
from gpuscout._machine.system import read_system
from gpuscout._records.device import DeviceInfo
from gpuscout._records.results import SOFTWARE_REASON, Discovery, Dropped
from gpuscout._selection.numbering import runtime_numbering


@attrs.frozen
class Run:
    """What one discovery is given by the Scout that starts it."""

    host: PluginHost
    budgets: Budgets
    #: The Scout's logger (``gpuscout.scout``).
    log: Any
    enumerate_timeout: float
    #: A recording is replayed (``replaying``) or made (``recording``) in this process.
    replaying: bool
    recording: bool
    #: A Context for the core's own reads: ``context(plugin="", deadline=None)``.
    context: Callable[..., Context]
    #: ``(plugin, device)`` pairs folded into survivors and dropped duplicates.
    merge: Callable[[Sequence[tuple[str, DeviceInfo]]], tuple[list[DeviceInfo], list[Dropped]]]
    #: The environment that initialises one device for init validation.
    init_check_env: Callable[[DeviceInfo], dict[str, str] | None]


def discover(run: Run, include_software: bool, validate: bool, isolated: bool) -> Discovery:
    """``Scout.discover``'s work, under the lock the caller holds."""
    host = run.host
    start = time.perf_counter()
    deadline = time.monotonic() + run.enumerate_timeout
    host.start_run()
    # A recording is replayed (and made) in this process: replaying asks no driver, and a
    # recording must see what each plugin read, which a child's reads are not.
    on_machine = not run.replaying and not run.recording
    answers = host.enumerate(isolated=isolated and on_machine)
    # Numbered before the merge: a runtime counts the devices gpuscout drops as duplicates too.
    numbering = runtime_numbering(answers)
    kept, dropped = run.merge(answers)
    if host.recording_errors:
        # A malformed answer is the recording's fault, not the plugin's: the caller hears it.
        raise host.recording_errors[0]
    if not include_software:
        dropped.extend(Dropped(d, SOFTWARE_REASON) for d in kept if d.software)
        kept = [d for d in kept if not d.software]
    if validate and run.replaying:
        run.log.info(
            "discovery.validation_skipped",
            reason="replaying a recording: there is no driver to initialise",
        )
    elif validate:
        from gpuscout._host.isolation import START_ALLOWANCE
        from gpuscout.runner import validate_devices

        # Each child initialises a driver (seconds without persistence mode) in a discovery
        # of its own: the enumerate deadline, plus the child's start, as isolated discovery.
        kept, failed = validate_devices(
            [(d, run.init_check_env(d)) for d in kept], timeout=run.enumerate_timeout + START_ALLOWANCE
        )
        dropped.extend(failed)
    kept = placed(run, kept, deadline)
    # System memory is read under the enumerate deadline too (at least 1 s of it left).
    memory_ctx = run.context(deadline=max(deadline, time.monotonic() + 1.0))
    system = read_system(memory_ctx)
    for note in memory_ctx.notes:
        run.log.info("discovery.system_memory_note", note=note)
    elapsed = time.perf_counter() - start
    run.log.debug(
        "discovery.done", devices=len(kept), dropped=len(dropped), elapsed_ms=round(elapsed * 1000, 3)
    )
    kept, outcome = run.budgets.apply(kept, numbering)
    for sentence in outcome.unmatched:
        run.log.warning("discovery.budget_unmatched", budget=sentence)
    return Discovery(
        devices=rank(kept, outcome.preference),
        dropped=dropped,
        system=system,
        plugins=host.snapshot(),
        elapsed=elapsed,
        budgets=outcome,
        numbering={d.device_id: numbering[d.device_id] for d in kept if d.device_id in numbering},
    )


def placed(run: Run, devices: list[DeviceInfo], deadline: float) -> list[DeviceInfo]:
    """``devices`` with their NUMA node, near CPUs and PCIe link read from sysfs where the
    plugin left them empty (``gpuscout._machine.topology``, under the enumerate deadline, at least
    1 s of it left), and peers only among themselves."""
    from gpuscout._machine.topology import add_topology, keep_known_peers

    if not any(d.pci_id or d.peers or d.pcie_link for d in devices):
        return devices
    ctx = run.context(deadline=max(deadline, time.monotonic() + 1.0))
    out = keep_known_peers(add_topology(devices, ctx))
    for note in ctx.notes:
        run.log.info("discovery.topology_note", note=note)
    return out
