"""The plugin host: the one module that calls plugins. It decides which plugins load, imports
them, calls every hook implementation on its own under a deadline, checks the answers, and writes
each plugin's report. Nothing a plugin does here can raise into, hang or change the host.

Every call runs on a daemon thread that the host waits for with a deadline: imports,
``gpuscout_enumerate`` and ``gpuscout_refresh`` (both may talk to a driver) get
``enumerate_timeout``, every rule hook ``hook_timeout`` per call (``gpuscout.workers``). A
plugin that overruns is reported ``timeout``, treated as not answering, and not called again for
the rest of that run (a discovery, or a refresh); its thread is abandoned. The next run asks it
again, its report's note saying that it overran before, since a slow driver may well answer then.
While its abandoned call is still inside the plugin no second call is started: the next one
waits for that call, up to its own deadline, and an enumerate uses that call's answer if it comes
in time; so a plugin that hangs for good costs its deadline once per run, on one thread. Calls of
one hook over many items (one per device in a merge) run as one batch on one thread, each call
timed on its own.
"""

from __future__ import annotations

import functools
import importlib
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs
import pluggy

import gpuscout.hookspecs as hookspecs
from gpuscout.context import Context
from gpuscout.errors import GpuscoutError, RecordingError, SelectionRefused, UnknownPluginError
from gpuscout.hookspecs import HOOKS, HookFacts
from gpuscout.log import get_logger
from gpuscout.markers import PROJECT
from gpuscout.plugin import check_api_version
from gpuscout.records import DeviceInfo, RecordError, check_device
from gpuscout.results import PluginReport, PluginStatus
from gpuscout.workers import Batch, run_inline, set_inline

#: Built-in backends: short name and module. Registered with the same ``hookimpl`` a third party
#: uses, so they can be allowed or blocked by name like any other plugin.
BUILTINS: tuple[tuple[str, str], ...] = (
    ("cuda", "gpuscout.plugins.cuda"),
    ("rocm", "gpuscout.plugins.rocm"),
    ("metal", "gpuscout.plugins.metal"),
    ("vulkan", "gpuscout.plugins.vulkan"),
)

#: Rule hooks that the built-in plugins answer with pure functions of their arguments (no file,
#: driver or clock; ``HookFacts.pure``): the host calls the built-ins' answers inline, since a
#: thread hand-off per call (about 0.1 ms) would dominate a merge of thousands of devices.
#: Third-party plugins, and every import, enumerate and refresh, always run bounded on a worker
#: thread.
PURE_HOOKS = frozenset(name for name, facts in HOOKS.items() if facts.pure)

ENTRY_POINT_GROUP = PROJECT
_log = get_logger(__name__)
ALLOW_ENV = "GPUSCOUT_PLUGINS"
DENY_ENV = "GPUSCOUT_DISABLE_PLUGINS"


def normal_name(name: str) -> str:
    """A plugin name as allow and deny lists compare it: spaces stripped, lower case."""
    return name.strip().lower()


def name_list(value: Iterable[str] | None, what: str) -> list[str] | None:
    """``value`` (a list of plugin names) normalized; a bare string is refused."""
    if value is None:
        return None
    if isinstance(value, (str, bytes)):
        raise GpuscoutError(
            f"{what} must be a list of plugin names, not the string {value!r:.80} "
            f"(pass [{value!r:.40}] for one name)"
        )
    try:
        items = list(value)
    except TypeError:
        raise GpuscoutError(f"{what} must be a list of plugin names, got {type(value).__name__}") from None
    bad = [v for v in items if not isinstance(v, str)]
    if bad:
        raise GpuscoutError(f"{what}: plugin names must be str, got {bad[0]!r:.80}")
    return [n for n in (normal_name(v) for v in items) if n]


def _comma_list(value: str | None) -> list[str] | None:
    if value is None or not value.strip():
        return None
    return [n for n in (normal_name(p) for p in value.split(",")) if n]


def describe_exception(exc: BaseException) -> str:
    """What a plugin's exception says, in one line (``called sys.exit(3)`` for SystemExit)."""
    if isinstance(exc, SystemExit):
        return f"called sys.exit({exc.code!r})"
    text = str(exc)
    return f"{type(exc).__name__}: {text:.300}" if text else type(exc).__name__


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
    ) -> None:
        self.context = context
        self.enumerate_timeout = enumerate_timeout
        self.hook_timeout = hook_timeout
        # An explicit allow list overrides the environment's; deny lists add up.
        self.allow = name_list(plugins, "plugins")
        allow_from = "plugins"
        if self.allow is None:
            self.allow = _comma_list(env.get(ALLOW_ENV))
            allow_from = ALLOW_ENV
        self.deny = set(name_list(disable, "disable") or ()) | set(_comma_list(env.get(DENY_ENV)) or ())
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

        candidates: list[tuple[str, Callable[[], Any], str, str]] = [
            (name, functools.partial(importlib.import_module, module), _own_version(), PROJECT)
            for name, module in BUILTINS
        ]
        if entry_points:
            candidates += self._entry_point_candidates()
        try:
            extras = list(extra)
        except TypeError:
            raise GpuscoutError(
                f"extra must be a list of plugin objects, got {type(extra).__name__}"
            ) from None
        for item in extras:
            name, obj = item if isinstance(item, tuple) and len(item) == 2 else (_name_of(item), item)
            if not isinstance(name, str) or not name.strip():
                raise GpuscoutError(f"extra: a plugin name must be a non-empty str, got {name!r:.80}")
            candidates.append((name, functools.partial(_identity, obj), "", ""))
        self._check_names({normal_name(c[0]) for c in candidates}, allow_from)
        probed: dict[str, tuple[str, str]] = {}
        if contain_imports:
            from gpuscout.isolation.probe import probe_imports

            # Third-party entry points. The built-ins import nothing native when imported
            # (tests/test_isolation.py checks it), so a child for them would only cost time.
            builtin = {name for name, _ in BUILTINS}
            names = [
                c[0]
                for c in candidates
                if c[3] and not self.blocked(c[0]) and not (c[3] == PROJECT and c[0] in builtin)
            ]
            probed = probe_imports(list(dict.fromkeys(names)), env, enumerate_timeout)
        self._load_all(candidates, probed)

    @property
    def log(self) -> Any:
        """This module's logger (it follows a host's later structlog configuration itself)."""
        return _log

    # -- which plugins load ---------------------------------------------------------------------

    def _check_names(self, known: set[str], allow_from: str) -> None:
        from gpuscout.suggest import did_you_mean

        listed = ", ".join(sorted(known)) or "none"
        unknown = sorted(set(self.allow or ()) - known)
        if unknown:
            where = "--plugins / plugins=" if allow_from == "plugins" else ALLOW_ENV
            raise UnknownPluginError(
                f"unknown plugin {', '.join(repr(u) for u in unknown)} in the allow list "
                f"({where}){did_you_mean(unknown[0], sorted(known))}; known plugins: {listed}"
            )
        for name in sorted(self.deny - known):
            self.warnings.append(
                f"unknown plugin {name!r} in the deny list (--disable / {DENY_ENV})"
                f"{did_you_mean(name, sorted(known))}; known plugins: {listed}"
            )
            self.log.debug("plugins.unknown_disabled", plugin=name)

    def blocked(self, name: str) -> bool:
        """Whether ``name`` is kept out by the allow or deny list."""
        key = normal_name(name)
        return key in self.deny or (self.allow is not None and key not in self.allow)

    def _entry_point_candidates(self) -> list[tuple[str, Callable[[], Any], str, str]]:
        from gpuscout.entrypoints import entry_points

        try:
            eps = entry_points(ENTRY_POINT_GROUP)
        except Exception as exc:  # a broken installed distribution must not stop discovery
            self.log.warning("discovery.entry_points_failed", error=describe_exception(exc))
            return []
        return [(ep.name, ep.load, ep.version, ep.distribution) for ep in eps]

    def _load_all(
        self,
        candidates: Sequence[tuple[str, Callable[[], Any], str, str]],
        probed: Mapping[str, tuple[str, str]],
    ) -> None:
        """Import every allowed plugin at once, each under the enumerate deadline, then register
        them in candidate order (built-ins first) so that "found first" is stable. A plugin in
        ``probed`` (its import crashed or hung in the probe's child) is not imported."""
        pending: list[tuple[PluginReport, Batch]] = []
        for name, load, version, distribution in candidates:
            report = PluginReport(name=name, version=version, distribution=distribution)
            if name in self.reports:
                report.fail(PluginStatus.FAILED, f"a plugin named {name!r} is already registered")
                self.reports[f"{name}#{len(self.reports)}"] = report
                continue
            self.reports[name] = report
            if self.blocked(name):
                # Blocked before import: a blocked plugin's code never runs.
                report.status = PluginStatus.DISABLED
                continue
            if name in probed:
                status, reason = probed[name]
                if status == "timeout":
                    self._timed_out(name, "import", reason)
                else:
                    self._load_failed(report, f"plugin {name!r}: {reason}")
                continue
            pending.append((report, Batch(lambda f: f(), [load], f"gpuscout-load-{name}")))
        start = time.monotonic()
        for report, batch in pending:
            if not batch.wait(max(0.0, start + self.enumerate_timeout - time.monotonic())):
                self._timed_out(
                    report.name, "import", f"import did not finish within {self.enumerate_timeout:g} s"
                )
                continue
            ok, value = batch.results[0]
            if not ok:
                self._load_failed(
                    report, f"could not load plugin {report.name!r}: {describe_exception(value)}"
                )
                continue
            self._register(report, value)

    def _register(self, report: PluginReport, obj: Any) -> None:
        name = report.name
        refused = check_api_version(obj)
        if refused:
            self._load_failed(report, f"plugin {name!r} refused: {refused}")
            return
        try:
            unknown = [
                attr
                for attr in dir(obj)
                if attr.startswith(f"{PROJECT}_")
                and attr not in HOOKS
                and self.pm.parse_hookimpl_opts(obj, attr) is not None
            ]
        except Exception as exc:
            self._load_failed(report, f"plugin {name!r} cannot be inspected: {describe_exception(exc)}")
            return
        if unknown:
            self._load_failed(report, f"plugin {name!r} implements unknown hooks: {', '.join(unknown)}")
            return
        try:
            self.pm.register(obj, name=name)
        except Exception as exc:
            self._load_failed(report, f"could not load plugin {name!r}: {describe_exception(exc)}")
            return
        callers = self.pm.get_hookcallers(obj) or []
        wrappers = [
            c.name
            for c in callers
            if any(i.hookwrapper or i.wrapper for i in c.get_hookimpls() if i.plugin is obj)
        ]
        if wrappers:
            self.pm.unregister(obj)
            self._load_failed(
                report,
                f"plugin {name!r} declares hook wrappers, which gpuscout does "
                f"not call: {', '.join(sorted(wrappers))}",
            )
            return
        report.hooks = sorted(c.name for c in callers)
        self.loaded.add(name)
        if report.distribution == PROJECT and any(name == b for b, _ in BUILTINS):
            self.builtin.add(name)
        if report.distribution:  # a built-in or an entry point: a child can load it by name
            self.by_name.add(name)

    def _load_failed(self, report: PluginReport, message: str) -> None:
        report.fail(PluginStatus.FAILED, message)
        self.log.warning("discovery.plugin_failed", plugin=report.name, error=message)

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

    def _timed_out(
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
                self._timed_out(name, hook, problem, batch, limit=limit)
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
        own instead (``gpuscout.isolation``), where a crash costs only that plugin; plugins
        passed in-process (``extra``) still run here, and their report's note says so.
        """
        hook = _ENUMERATE
        impls = self.impls(hook.name)
        isolated_names = [i.plugin_name for i in impls if i.plugin_name in self.by_name] if isolated else []
        start = time.monotonic()
        limit = self.limit(hook.name)
        deadline = start + limit
        # (implementation, context, call, the earlier call still running that it waits for)
        runs: list[tuple[pluggy.HookImpl, Context, Batch, _Call | None]] = []
        for impl in impls:
            name = impl.plugin_name
            if name in isolated_names:
                continue
            earlier = self.in_flight(name)
            if earlier is not None and earlier[0] == hook.name and earlier[2]:
                # Its enumerate from an earlier discovery: wait for that one, no second call.
                runs.append((impl, earlier[2], earlier[1], earlier))
                continue
            # After another hook's call still running, the worker waits for that one first.
            ctx = self.context(name, deadline)
            batch = Batch(
                functools.partial(_call_with_context, impl),
                [ctx],
                f"gpuscout-enumerate-{name}",
                after=earlier[1] if earlier is not None else None,
                until=deadline,
            )
            runs.append((impl, ctx, batch, earlier))
        # The children are waited for on this thread, so that an interrupt still kills them.
        per_plugin = self._enumerate_in_children(isolated_names) if isolated_names else {}
        for impl, ctx, batch, earlier in runs:
            name = impl.plugin_name
            report = self.reports[name]
            finished = batch.wait_until(deadline) and not batch.skipped
            report.elapsed = time.monotonic() - start
            if not finished:
                problem = f"{hook.label} did not finish within {limit:g} s"
                if earlier is not None and not earlier[1].done.is_set():
                    before = HOOKS[earlier[0]].label if earlier[0] in HOOKS else earlier[0]
                    problem += f" (its {before} call from before was still running)"
                self._timed_out(name, hook.name, problem, batch, ctx, limit)
                continue
            if earlier is not None and earlier[1] is batch:
                self.running.pop(name, None)
                _add_note(report, "this answer is from that earlier call, which finished late")
            ok, value = batch.results[0]
            if not ok:
                if isinstance(value, RecordingError):
                    self.recording_errors.append(value)  # the recording's fault: the caller's
                self.record_failure(name, hook.name, f"raised {describe_exception(value)}")
                continue
            try:
                devices = checked_devices(value)
            except RecordError as exc:
                self.record_failure(name, hook.name, str(exc))
                continue
            # Devices its library's visibility variable hides are reported, not found.
            report.devices = sum(not d.hidden_by for d in devices)
            for note in [str(n) for n in ctx.notes] + ([_NOT_ISOLATED] if isolated else []):
                _add_note(report, note)
            per_plugin[name] = devices
        # Registration order, whichever way each plugin ran.
        return [(impl.plugin_name, d) for impl in impls for d in per_plugin.get(impl.plugin_name, ())]

    def _enumerate_in_children(self, names: list[str]) -> dict[str, list[DeviceInfo]]:
        """Run ``names``' enumerate in child processes; write their reports; their devices."""
        from gpuscout.isolation import IsolationError, decode_device, enumerate_isolated

        probe = self.context("", None)
        start = time.monotonic()
        try:
            outcomes = enumerate_isolated(
                names, env=probe.env, platform=probe.platform, root=probe.root, timeout=self.enumerate_timeout
            )
        except IsolationError as exc:
            for name in names:
                self.record_failure(name, _ENUMERATE.name, str(exc))
                self.reports[name].elapsed = time.monotonic() - start
            return {}
        found: dict[str, list[DeviceInfo]] = {}
        for name in names:
            report = self.reports[name]
            outcome = outcomes.get(name)
            if outcome is None:
                self.record_failure(name, _ENUMERATE.name, "the isolation child said nothing about it")
                continue
            report.elapsed = float(outcome.elapsed)
            for note in [str(n) for n in outcome.notes][:50]:
                _add_note(report, note)
            if outcome.status == PluginStatus.TIMEOUT:
                report.fail(PluginStatus.TIMEOUT, outcome.error)
                self.log.warning(
                    "discovery.plugin_timeout", plugin=name, hook=_ENUMERATE.name, error=outcome.error
                )
                continue
            if outcome.status != PluginStatus.OK:
                self.record_failure(name, _ENUMERATE.name, outcome.error or "failed")
                continue
            try:
                devices = checked_devices([decode_device(d, f"[{i}]") for i, d in enumerate(outcome.devices)])
            except (RecordError, ValueError) as exc:
                self.record_failure(name, _ENUMERATE.name, str(exc))
                continue
            # Devices its library's visibility variable hides are reported, not found.
            report.devices = sum(not d.hidden_by for d in devices)
            found[name] = devices
        return found


#: The hook a discovery calls first; the host calls it itself, all plugins at once.
_ENUMERATE = HOOKS["gpuscout_enumerate"]

#: The note of an in-process plugin in an isolated discovery.
_NOT_ISOLATED = "ran in this process: a plugin passed as an object cannot be loaded in a child"


def _add_note(report: PluginReport, note: str) -> None:
    """Append ``note`` to the report's (all of them together at most 2,000 characters)."""
    report.note = (f"{report.note}; {note}" if report.note else note)[:2000]


def _call_with_context(impl: pluggy.HookImpl, context: Context) -> Any:
    # A hook whose parameters are not the spec's raises KeyError: a failure of that plugin.
    return impl.function(*({"context": context}[name] for name in impl.argnames))


def checked_devices(value: Any) -> list[DeviceInfo]:
    """``value`` as a list of plain, valid DeviceInfo records; RecordError names the first
    problem (``[3].pci_id: expected str, got 1234``, ``[0].id: empty ...``).

    Beyond the record's own checks, a device's ``id`` (and ``filter_id`` when set) must be a
    usable visibility token: see ``visibility_id_problem``.
    """
    if not isinstance(value, (list, tuple)):
        raise RecordError(f"returned {type(value).__name__}, expected {_ENUMERATE.expected}")
    devices = [check_device(d, f"[{i}]") for i, d in enumerate(value)]
    for i, d in enumerate(devices):
        problem = visibility_id_problem(d)
        if problem:
            raise RecordError(f"[{i}].{problem}")
    return devices


#: What separates the tokens of every library's visibility variable (CUDA_VISIBLE_DEVICES,
#: HIP/ROCR_VISIBLE_DEVICES, GGML_VK_VISIBLE_DEVICES and a plugin's own).
VISIBILITY_SEPARATOR = ","


def visibility_id_problem(device: DeviceInfo) -> str:
    """Why ``device``'s ``id`` or ``filter_id`` cannot stand in a visibility list, as
    ``"<field>: <why>"``; ``""`` when both can.

    The visible token is ``filter_id or id``: an empty (or blank) token makes the libraries see no
    device at all, and one holding the separator is read as two devices. Anything else (quotes,
    ``$()``, spaces inside) is only text and is quoted where it is written.
    """
    fields = [("id", device.id)] + ([("filter_id", device.filter_id)] if device.filter_id else [])
    for field, token in fields:
        if not token.strip():
            return (
                f"{field}: {'empty' if not token else f'blank ({token!r:.40})'}, which in "
                "a visibility variable would hide every device"
            )
        if VISIBILITY_SEPARATOR in token:
            count = token.count(VISIBILITY_SEPARATOR) + 1
            return (
                f"{field}: {token!r:.80} holds the visibility separator "
                f"{VISIBILITY_SEPARATOR!r}, so a visibility variable would read it as "
                f"{count} devices"
            )
    return ""


def _safe_repr(value: Any) -> str:
    try:
        return f"{value!r:.80}"
    except Exception:
        return "(unprintable)"


def _own_version() -> str:
    from gpuscout.version import VERSION

    return VERSION


def _identity(obj: Any) -> Any:
    return obj


def _name_of(obj: Any) -> str:
    name = getattr(obj, "__name__", None)
    return name if isinstance(name, str) else type(obj).__name__


__all__ = [
    "BUILTINS",
    "VISIBILITY_SEPARATOR",
    "PluginHost",
    "PluginReport",
    "PluginStatus",
    "checked_devices",
    "describe_exception",
    "set_inline",
    "visibility_id_problem",
]
