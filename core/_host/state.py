"""What the plugin host knows between calls: which plugins it was asked to load and loaded,
each plugin's report, the calls that overran and may still be inside a plugin, and the rules
that follow from them (which plugin is blocked, how long a hook may take, which
implementations may be called now).

``HostState`` is the part of ``PluginHost`` (``gpuscout._host.calls``) that the loading and
enumerate functions are handed (``gpuscout._host.loading``, ``gpuscout._host.enumeration``):
state passed down, so neither needs the host class that calls them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs
import pluggy

import gpuscout._host.hookspecs as hookspecs
from gpuscout._host.hookspecs import HOOKS
from gpuscout._host.markers import PROJECT
from gpuscout._host.names import ALLOW_ENV, DENY_ENV, comma_list, name_list, normal_name
from gpuscout._host.workers import Batch
from gpuscout._machine.context import Context
from gpuscout._records.results import PluginReport, PluginStatus
from gpuscout.errors import RecordingError
from gpuscout.log import get_logger

_log = get_logger("gpuscout._host.calls")

#: A call into a plugin that overran: its hook, its batch, and (for an enumerate) its context.
Call = tuple[str, Batch, Context | None]


class HostState:
    """The plugin manager, the reports and the overrun calls of one host (see the module)."""

    def __init__(
        self,
        *,
        plugins: Iterable[str] | None,
        disable: Iterable[str],
        env: Mapping[str, str],
        context: Callable[[str, float | None], Context],
        enumerate_timeout: float,
        hook_timeout: float,
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
        self.running: dict[str, Call] = {}
        #: Per plugin, what its last overrun was, for its report's note in the next discovery.
        self.overran: dict[str, str] = {}
        #: What plugins raised about a replayed recording's answers in this discovery.
        self.recording_errors: list[RecordingError] = []
        #: Sentences for the user about the plugin lists (unknown names in a deny list).
        self.warnings: list[str] = []
        #: Where the allow list came from: the ``plugins`` argument or ``GPUSCOUT_PLUGINS``.
        self.allow_from = allow_from

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

    def in_flight(self, name: str) -> Call | None:
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
