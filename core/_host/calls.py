"""The plugin host: the one module that calls plugins. It decides which plugins load, imports
them, calls every hook implementation on its own under a deadline, checks the answers, and writes
each plugin's report. Nothing a plugin does here can raise into, hang or change the host.

Every call runs on a daemon thread that the host waits for with a deadline: imports,
``gpuscout_enumerate`` and ``gpuscout_refresh`` (both may talk to a driver) get
``enumerate_timeout``, every rule hook ``hook_timeout`` per call (``gpuscout._host.workers``). A
plugin that overruns is reported ``timeout``, treated as not answering, and not called again for
the rest of that run (a discovery, or a refresh); its thread is abandoned. The next run asks it
again, its report's note saying that it overran before, since a slow driver may well answer then.
While its abandoned call is still inside the plugin no second call is started: the next one
waits for that call, up to its own deadline, and an enumerate uses that call's answer if it comes
in time; so a plugin that hangs for good costs its deadline once per run, on one thread. Calls of
one hook over many items (one per device in a merge) run as one batch on one thread, each call
timed on its own.

Which plugins load and how they are imported is in ``gpuscout._host.loading``, the enumerate of
every plugin at once in ``gpuscout._host.enumeration``, the check of a plugin's device list in
``gpuscout._host.border``; the host calls them, and re-exports their names that others import from here.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs
import pluggy

import gpuscout._host.hookspecs as hookspecs
from gpuscout._host.border import VISIBILITY_SEPARATOR, checked_devices, visibility_id_problem
from gpuscout._host.enumeration import enumerate_plugins
from gpuscout._host.hookspecs import HOOKS, HookFacts
from gpuscout._host.loading import (
    ALLOW_ENV,
    BUILTINS,
    DENY_ENV,
    ENTRY_POINT_GROUP,
    comma_list,
    load_plugins,
    name_list,
    normal_name,
)
from gpuscout._host.markers import PROJECT
from gpuscout._host.workers import Batch, run_inline, set_inline
from gpuscout._machine.context import Context
from gpuscout._records.device import DeviceInfo
from gpuscout._records.results import PluginReport, PluginStatus
from gpuscout.errors import RecordingError, SelectionRefused, describe_exception
from gpuscout.log import get_logger

#: Rule hooks that the built-in plugins answer with pure functions of their arguments (no file,
#: driver or clock; ``HookFacts.pure``): the host calls the built-ins' answers inline, since a
#: thread hand-off per call (about 0.1 ms) would dominate a merge of thousands of devices.
#: Third-party plugins, and every import, enumerate and refresh, always run bounded on a worker
#: thread.
PURE_HOOKS = frozenset(name for name, facts in HOOKS.items() if facts.pure)

_log = get_logger(__name__)


#: A call into a plugin that overran: its hook, its batch, and (for an enumerate) its context.
_Call = tuple[str, Batch, Context | None]


class PluginHost:
    """Owns one pluggy PluginManager and the report of every plugin it was asked to consider."""

    def __init__(
        self,
        *,
        plugins: Iterable[str] | None,
        disable: Iterable[str],
        extra: Iterable[Any],
        entry_points: bool,
        env: Mapping[str, str],
        context: Callable[[str, float | None], Context],
        enumerate_timeout: float,
        hook_timeout: float,
        contain_imports: bool = False,
        process_env: Mapping[str, str] | None = None,
    ) -> None:
        self.context = context
        self.enumerate_timeout = enumerate_timeout
        self.hook_timeout = hook_timeout
        # An explicit allow list overrides the environment's; deny lists add up.
        self.allow = name_list(plugins, "plugins")
        allow_from = "plugins"
        if self.allow is None:
            self.allow = comma_list(env.get(ALLOW_ENV))
            allow_from = ALLOW_ENV
        self.deny = set(name_list(disable, "disable") or ()) | set(comma_list(env.get(DENY_ENV)) or ())
        self.pm = pluggy.PluginManager(PROJECT)
        self.pm.add_hookspecs(hookspecs)
        self.reports: dict[str, PluginReport] = {}
        #: Plugins registered and answering hooks (not blocked, not failed to load).
        self.loaded: set[str] = set()
        #: Built-in plugins registered from BUILTINS (see PURE_HOOKS).
        self.builtin: set[str] = set()
        #: Plugins a child process can load by name (built-ins and entry points, not ``extra``).
        self.by_name: set[str] = set()
        #: Plugins that overran a deadline in this run: not called again until the next one.
        self.banned: set[str] = set()
        #: Per plugin, the call that overran and may still be inside it: ``(hook, batch,
        #: context)``. No other call into that plugin starts before this one has finished.
        self.running: dict[str, _Call] = {}
        #: Per plugin, what its last overrun was, for its report's note in the next discovery.
        self.overran: dict[str, str] = {}
        #: What plugins raised about a replayed recording's answers in this discovery.
        self.recording_errors: list[RecordingError] = []
        #: Sentences for the user about the plugin lists (unknown names in a deny list).
        self.warnings: list[str] = []

        load_plugins(
            self,
            extra=extra,
            entry_points=entry_points,
            env=env,
            allow_from=allow_from,
            contain_imports=contain_imports,
            process_env=env if process_env is None else process_env,
        )

    @property
    def log(self) -> Any:
        """This module's logger (it follows a host's later structlog configuration itself)."""
        return _log

    # -- which plugins load ---------------------------------------------------------------------

    def blocked(self, name: str) -> bool:
        """Whether ``name`` is kept out by the allow or deny list."""
        key = normal_name(name)
        return key in self.deny or (self.allow is not None and key not in self.allow)

    # -- reports --------------------------------------------------------------------------------

    def start_run(self) -> None:
        """Start a discovery: clear what the last one said about each loaded plugin and ask
        again those that overran (their report's note says so)."""
        self.banned.clear()
        self.recording_errors = []
        for name in self.loaded:
            report = self.reports[name]
            report.status, report.error = PluginStatus.OK, ""
            report.note = self.overran.pop(name, "")
            report.devices, report.elapsed = 0, 0.0

    def start_refresh(self) -> None:
        """Start a refresh: plugins that overran earlier are asked again (their reports stay
        as the last discovery left them unless they fail again)."""
        self.banned.clear()

    def snapshot(self) -> list[PluginReport]:
        """Copies of every report, in load order, that later runs will not change."""
        return [attrs.evolve(r, hooks=list(r.hooks)) for r in self.reports.values()]

    def record_failure(self, plugin: str, hook: str, problem: str) -> None:
        """Report that ``plugin`` misbehaved in ``hook``; the host carries on without its answer."""
        report = self.reports.get(plugin)
        if report is not None:
            report.fail(PluginStatus.FAILED, f"{hook}: {problem}")
        self.log.warning("discovery.plugin_failed", plugin=plugin, hook=hook, error=problem)

    def timed_out(
        self,
        plugin: str,
        hook: str,
        problem: str,
        batch: Batch | None = None,
        context: Context | None = None,
        limit: float | None = None,
    ) -> None:
        """Report that ``plugin`` overran ``limit`` in ``hook`` (``batch``: the call it
        overran in); it is not called again in this run."""
        self.banned.add(plugin)
        if batch is not None and batch.abandon():
            self.running[plugin] = (hook, batch, context)
        # A batch that never entered the plugin leaves the call it waited for as the one running.
        if limit is not None:
            facts = HOOKS.get(hook)
            what, run = (facts.label, facts.run) if facts is not None else (hook, "call")
            self.overran[plugin] = (
                f"overran its {what} deadline in an earlier {run} ({limit:g} s); asked again"
            )
        report = self.reports.get(plugin)
        if report is not None:
            report.fail(PluginStatus.TIMEOUT, problem)
        self.log.warning("discovery.plugin_timeout", plugin=plugin, hook=hook, error=problem)

    # -- calling --------------------------------------------------------------------------------

    def in_flight(self, name: str) -> _Call | None:
        """``name``'s call that overran and is still inside the plugin, or None. One that has
        finished since is forgotten, its late answer unused: the next run calls anew."""
        entry = self.running.get(name)
        if entry is not None and entry[1].done.is_set():
            del self.running[name]
            return None
        return entry

    def limit(self, hook: str) -> float:
        """The seconds each call of ``hook`` may take (``HookFacts.timeout``)."""
        timeout = HOOKS[hook].timeout
        return self.enumerate_timeout if timeout == "enumerate_timeout" else self.hook_timeout

    def impls(self, hook: str, registration_order: bool | None = None) -> list[pluggy.HookImpl]:
        """The implementations of ``hook`` that may be called, in pluggy's call order (last
        registered first, tryfirst/trylast respected) or in registration order: as its facts
        say (``HookFacts.registration_order``) unless ``registration_order`` is given."""
        if registration_order is None:
            registration_order = HOOKS[hook].registration_order
        found = getattr(self.pm.hook, hook).get_hookimpls()
        ordered = found if registration_order else list(reversed(found))
        return [i for i in ordered if i.plugin_name not in self.banned]

    def call(
        self,
        impl: pluggy.HookImpl,
        hook: str,
        items: Sequence[Mapping[str, Any]],
    ) -> list[Any] | None:
        """Call one implementation once per item (keyword arguments; ``context`` is added per
        plugin), each call under the hook's timeout; answers that raise or fail the hook's
        check (``HookFacts.check``) become None. None for all when it overran."""
        facts: HookFacts = HOOKS[hook]
        name = impl.plugin_name
        function, argnames = impl.function, impl.argnames
        limit = self.limit(hook)
        # A batch (one call per device) also has a total: a plugin that takes nearly the
        # limit on every call would otherwise cost it once per device.
        total = max(limit, self.enumerate_timeout)
        # The context's deadline is the batch's, so a plugin can see how long it has.
        context = self.context(name, time.monotonic() + total) if "context" in argnames else None

        def one(kwargs: Mapping[str, Any]) -> Any:
            full = {**kwargs, "context": context} if context is not None else kwargs
            return function(*(full[a] for a in argnames))

        if name in self.builtin and facts.pure:
            # Pure functions of their arguments: safe even beside a call still in a driver.
            results = run_inline(one, items)
        else:
            earlier = self.in_flight(name)
            after = earlier[1] if earlier is not None else None
            batch = Batch(one, items, f"gpuscout-{hook}-{name}", after=after, until=time.monotonic() + limit)
            if not batch.wait(limit, total) or batch.skipped:
                problem = (
                    f"{hook} did not answer within {limit:g} s per call ({total:g} s for {len(items)} calls)"
                )
                if earlier is not None and not earlier[1].done.is_set():
                    problem += f"; its {earlier[0]} call from before was still running"
                self.timed_out(name, hook, problem, batch, limit=limit)
                return None
            results = batch.results
        answers: list[Any] = []
        problem = ""
        for ok, value in results:
            if not ok and isinstance(value, SelectionRefused) and facts.may_refuse:
                # Not a fault of the plugin: the selection cannot be shown to one child.
                raise SelectionRefused(f"{name}: {str(value)[:1000]}") from None
            if not ok:
                problem = problem or f"raised {describe_exception(value)}"
                answers.append(None)
            elif value is not None and not facts.check(value):
                problem = (
                    problem
                    or f"returned {type(value).__name__} {_safe_repr(value)}, expected {facts.expected}"
                )
                answers.append(None)
            else:
                answers.append(value)
        if problem:
            self.record_failure(name, hook, problem)
        return answers

    def first_each(self, hook: str, items: Sequence[Mapping[str, Any]]) -> list[Any]:
        """For a firstresult hook: per item, the first valid non-None answer in call order."""
        answers: list[Any] = [None] * len(items)
        pending = list(range(len(items)))
        for impl in self.impls(hook):
            if not pending:
                break
            got = self.call(impl, hook, [items[i] for i in pending])
            if got is None:
                continue
            still: list[int] = []
            for i, answer in zip(pending, got, strict=True):
                if answer is None:
                    still.append(i)
                else:
                    answers[i] = answer
            pending = still
        return answers

    def first(self, hook: str, **kwargs: Any) -> Any:
        """The first valid non-None answer to a firstresult hook, or None."""
        return self.first_each(hook, [kwargs])[0]

    def each(self, hook: str, **kwargs: Any) -> list[tuple[str, Any]]:
        """``(plugin, answer)`` for every implementation that gives a valid non-None answer, in
        the hook's order."""
        out: list[tuple[str, Any]] = []
        for impl in self.impls(hook):
            got = self.call(impl, hook, [kwargs])
            if got is not None and got[0] is not None:
                out.append((impl.plugin_name, got[0]))
        return out

    def enumerate(self, isolated: bool = False) -> list[tuple[str, DeviceInfo]]:
        """Every device every plugin reports, tagged with the plugin, in registration order.

        All plugins run at once, each on its own thread under its own deadline; a plugin that
        raises, answers the wrong type, returns a bad record or overruns contributes nothing.
        A plugin whose enumerate from an earlier discovery is still running is not called
        again: that call is waited for, up to this deadline, and its answer used if it comes.
        With ``isolated`` each plugin a child can load by name runs in a child process of its
        own instead (``gpuscout._host.isolation``), where a crash costs only that plugin; plugins
        passed in-process (``extra``) still run here, and their report's note says so.
        """
        return enumerate_plugins(self, isolated)


def _safe_repr(value: Any) -> str:
    try:
        return f"{value!r:.80}"
    except Exception:
        return "(unprintable)"


__all__ = [
    "ALLOW_ENV",
    "BUILTINS",
    "DENY_ENV",
    "ENTRY_POINT_GROUP",
    "VISIBILITY_SEPARATOR",
    "PluginHost",
    "PluginReport",
    "PluginStatus",
    "checked_devices",
    "describe_exception",
    "name_list",
    "normal_name",
    "set_inline",
    "visibility_id_problem",
]
