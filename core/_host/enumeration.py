"""Every plugin's ``gpuscout_enumerate`` at once: each on a worker thread of its own under the
enumerate deadline, or (isolated) in a child process of its own (``gpuscout._host.isolation``); the
answers checked at the border, the reports written. ``PluginHost.enumerate`` calls
``enumerate_plugins``."""

from __future__ import annotations

import functools
import time
from typing import TYPE_CHECKING, Any

import pluggy

from gpuscout._host.border import checked_devices
from gpuscout._host.hookspecs import HOOKS
from gpuscout._host.workers import Batch
from gpuscout._machine.context import Context
from gpuscout._records.device import DeviceInfo
from gpuscout._records.fields import RecordError
from gpuscout._records.results import PluginReport, PluginStatus
from gpuscout.errors import RecordingError, describe_exception

if TYPE_CHECKING:
    from gpuscout._host.state import Call, HostState

#: The hook a discovery calls first; the host calls it itself, all plugins at once.
_ENUMERATE = HOOKS["gpuscout_enumerate"]

#: Seconds an isolated discovery's child may take to start (``gpuscout._host.isolation``).
_START_ALLOWANCE = 5.0
#: The note of an in-process plugin in an isolated discovery.
_NOT_ISOLATED = "ran in this process: a plugin passed as an object cannot be loaded in a child"


def enumerate_plugins(host: HostState, isolated: bool = False) -> list[tuple[str, DeviceInfo]]:
    """``PluginHost.enumerate``'s work (see there)."""
    hook = _ENUMERATE
    impls = host.impls(hook.name)
    isolated_names = [i.plugin_name for i in impls if i.plugin_name in host.by_name] if isolated else []
    start = time.monotonic()
    limit = host.limit(hook.name)
    deadline = start + limit
    # (implementation, context, call, the earlier call still running that it waits for)
    runs: list[tuple[pluggy.HookImpl, Context, Batch, Call | None]] = []
    for impl in impls:
        name = impl.plugin_name
        if name in isolated_names:
            continue
        earlier = host.in_flight(name)
        if earlier is not None and earlier[0] == hook.name and earlier[2]:
            # Its enumerate from an earlier discovery: wait for that one, no second call.
            runs.append((impl, earlier[2], earlier[1], earlier))
            continue
        # After another hook's call still running, the worker waits for that one first.
        ctx = host.context(name, deadline)
        batch = Batch(
            functools.partial(_call_with_context, impl),
            [ctx],
            f"gpuscout-enumerate-{name}",
            after=earlier[1] if earlier is not None else None,
            until=deadline,
        )
        runs.append((impl, ctx, batch, earlier))
    # The children are waited for on this thread, so that an interrupt still kills them.
    per_plugin = enumerate_in_children(host, isolated_names) if isolated_names else {}
    for impl, ctx, batch, earlier in runs:
        name = impl.plugin_name
        report = host.reports[name]
        finished = batch.wait_until(deadline) and not batch.skipped
        report.elapsed = time.monotonic() - start
        if not finished:
            problem = f"{hook.label} did not finish within {limit:g} s"
            if earlier is not None and not earlier[1].done.is_set():
                before = HOOKS[earlier[0]].label if earlier[0] in HOOKS else earlier[0]
                problem += f" (its {before} call from before was still running)"
            host.timed_out(name, hook.name, problem, batch, ctx, limit)
            continue
        if earlier is not None and earlier[1] is batch:
            host.running.pop(name, None)
            _add_note(report, "this answer is from that earlier call, which finished late")
        ok, value = batch.results[0]
        if not ok:
            if isinstance(value, RecordingError):
                host.recording_errors.append(value)  # the recording's fault: the caller's
            host.record_failure(name, hook.name, f"raised {describe_exception(value)}")
            continue
        try:
            devices = checked_devices(value)
        except RecordError as exc:
            host.record_failure(name, hook.name, str(exc))
            continue
        # Devices its library's visibility variable hides are reported, not found.
        report.devices = sum(not d.hidden_by for d in devices)
        for note in [str(n) for n in ctx.notes] + ([_NOT_ISOLATED] if isolated else []):
            _add_note(report, note)
        per_plugin[name] = devices
    # Registration order, whichever way each plugin ran.
    return [(impl.plugin_name, d) for impl in impls for d in per_plugin.get(impl.plugin_name, ())]


def enumerate_in_children(host: HostState, names: list[str]) -> dict[str, list[DeviceInfo]]:
    """Run ``names``' enumerate in child processes; write their reports; their devices."""
    from gpuscout._host.isolation import IsolationError, decode_device, enumerate_isolated

    probe = host.context("", None)
    start = time.monotonic()
    try:
        outcomes = enumerate_isolated(
            names, env=probe.env, platform=probe.platform, root=probe.root, timeout=host.enumerate_timeout
        )
    except IsolationError as exc:
        for name in names:
            host.record_failure(name, _ENUMERATE.name, str(exc))
            host.reports[name].elapsed = time.monotonic() - start
        return {}
    found: dict[str, list[DeviceInfo]] = {}
    for name in names:
        report = host.reports[name]
        outcome = outcomes.get(name)
        if outcome is None:
            host.record_failure(name, _ENUMERATE.name, "the isolation child said nothing about it")
            continue
        report.elapsed = float(outcome.elapsed)
        for note in [str(n) for n in outcome.notes][:50]:
            _add_note(report, note)
        if outcome.status == PluginStatus.TIMEOUT:
            report.fail(PluginStatus.TIMEOUT, outcome.error)
            host.log.warning(
                "discovery.plugin_timeout", plugin=name, hook=_ENUMERATE.name, error=outcome.error
            )
            continue
        if outcome.status != PluginStatus.OK:
            host.record_failure(name, _ENUMERATE.name, outcome.error or "failed")
            continue
        try:
            decoded = []
            for i, d in enumerate(outcome.devices):
                # Decoded under the enumerate deadline (plus the child's start): a plugin
                # answering many records costs that much time, then fails, alone.
                if i % 1000 == 999 and time.monotonic() > start + host.enumerate_timeout + _START_ALLOWANCE:
                    raise ValueError(
                        f"its {len(outcome.devices)} records were not decoded within the deadline"
                    )
                decoded.append(decode_device(d, f"[{i}]"))
            devices = checked_devices(decoded)
        except (RecordError, ValueError) as exc:
            host.record_failure(name, _ENUMERATE.name, str(exc))
            continue
        # Devices its library's visibility variable hides are reported, not found.
        report.devices = sum(not d.hidden_by for d in devices)
        found[name] = devices
    return found


def _add_note(report: PluginReport, note: str) -> None:
    """Append ``note`` to the report's (all of them together at most 2,000 characters)."""
    report.note = (f"{report.note}; {note}" if report.note else note)[:2000]


def _call_with_context(impl: pluggy.HookImpl, context: Context) -> Any:
    # A hook whose parameters are not the spec's raises KeyError: a failure of that plugin.
    return impl.function(*({"context": context}[name] for name in impl.argnames))
