"""One discovery of a ``Scout``: enumerate, merge, set software devices aside, validate, place,
read system memory, apply the budgets, rank. ``Scout.discover`` holds the lock and calls
``discover`` here; this module logs through the Scout's own logger (``gpuscout.scout``)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from gpuscout._discovery.ranking import rank
from gpuscout._machine.system import read_system
from gpuscout._records.device import DeviceInfo
from gpuscout._records.results import SOFTWARE_REASON, Discovery, Dropped

if TYPE_CHECKING:
    from gpuscout.scout import Scout


def discover(scout: Scout, include_software: bool, validate: bool, isolated: bool) -> Discovery:
    """``scout.discover``'s work, under the lock the caller holds."""
    host = scout._host
    start = time.perf_counter()
    deadline = time.monotonic() + scout.enumerate_timeout
    host.start_run()
    # A recording is replayed (and made) in this process: replaying asks no driver, and a
    # recording must see what each plugin read, which a child's reads are not.
    on_machine = scout.replay is None and scout.recorder is None
    kept, dropped = scout.merge(scout.enumerate(isolated and on_machine))
    if host.recording_errors:
        # A malformed answer is the recording's fault, not the plugin's: the caller hears it.
        raise host.recording_errors[0]
    if not include_software:
        dropped.extend(Dropped(d, SOFTWARE_REASON) for d in kept if d.software)
        kept = [d for d in kept if not d.software]
    if validate and scout.replay is not None:
        scout.log.info(
            "discovery.validation_skipped",
            reason="replaying a recording: there is no driver to initialise",
        )
    elif validate:
        from gpuscout._host.isolation import START_ALLOWANCE
        from gpuscout.runner import validate_devices

        # Each child initialises a driver (seconds without persistence mode) in a discovery
        # of its own: the enumerate deadline, plus the child's start, as isolated discovery.
        kept, failed = validate_devices(
            [(d, scout.init_check_env(d)) for d in kept], timeout=scout.enumerate_timeout + START_ALLOWANCE
        )
        dropped.extend(failed)
    kept = placed(scout, kept, deadline)
    # System memory is read under the enumerate deadline too (at least 1 s of it left).
    memory_ctx = scout.context(deadline=max(deadline, time.monotonic() + 1.0))
    system = read_system(memory_ctx)
    for note in memory_ctx.notes:
        scout.log.info("discovery.system_memory_note", note=note)
    elapsed = time.perf_counter() - start
    scout.log.debug(
        "discovery.done", devices=len(kept), dropped=len(dropped), elapsed_ms=round(elapsed * 1000, 3)
    )
    kept, outcome = scout.budgets.apply(kept)
    for sentence in outcome.unmatched:
        scout.log.warning("discovery.budget_unmatched", budget=sentence)
    return Discovery(
        devices=rank(kept, outcome.preference),
        dropped=dropped,
        system=system,
        plugins=host.snapshot(),
        elapsed=elapsed,
        budgets=outcome,
    )


def placed(scout: Scout, devices: list[DeviceInfo], deadline: float) -> list[DeviceInfo]:
    """``devices`` with their NUMA node, near CPUs and PCIe link read from sysfs where the
    plugin left them empty (``gpuscout._machine.topology``, under the enumerate deadline, at least
    1 s of it left), and peers only among themselves."""
    from gpuscout._machine.topology import add_topology, keep_known_peers

    if not any(d.pci_id or d.peers or d.pcie_link for d in devices):
        return devices
    ctx = scout.context(deadline=max(deadline, time.monotonic() + 1.0))
    out = keep_known_peers(add_topology(devices, ctx))
    for note in ctx.notes:
        scout.log.info("discovery.topology_note", note=note)
    return out
