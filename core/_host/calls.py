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
``gpuscout._host.border``; the host calls them. What the host knows between calls is ``HostState``
(``gpuscout._host.state``), the part of it those functions are handed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import pluggy

from gpuscout._host.enumeration import enumerate_plugins
from gpuscout._host.hookfacts import HookFacts
from gpuscout._host.hookspecs import HOOKS
from gpuscout._host.loading import load_plugins
from gpuscout._host.state import HostState
from gpuscout._host.workers import Batch, run_inline
from gpuscout._machine.context import Context
from gpuscout._records.device import DeviceInfo
from gpuscout.errors import SelectionRefused, describe_exception
from gpuscout.log import get_logger

#: Rule hooks that the built-in plugins answer with pure functions of their arguments (no file,
#: driver or clock; ``HookFacts.pure``): the host calls the built-ins' answers inline, since a
#: thread hand-off per call (about 0.1 ms) would dominate a merge of thousands of devices.
#: Third-party plugins, and every import, enumerate and refresh, always run bounded on a worker
#: thread.
PURE_HOOKS = frozenset(name for name, facts in HOOKS.items() if facts.pure)

_log = get_logger(__name__)


class PluginHost(HostState):
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
        super().__init__(
            plugins=plugins,
            disable=disable,
            env=env,
            context=context,
            enumerate_timeout=enumerate_timeout,
            hook_timeout=hook_timeout,
        )
        load_plugins(
            self,
            extra=extra,
            entry_points=entry_points,
            env=env,
            allow_from=self.allow_from,
            contain_imports=contain_imports,
            process_env=env if process_env is None else process_env,
        )

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


__all__ = ["PluginHost", "describe_exception"]
