"""The plugin host: which plugins load, and calling each one so that none can hurt the host."""

from __future__ import annotations

import functools
import importlib
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import attrs
import pluggy

from gpuscout import hookspecs
from gpuscout.log import get_logger
from gpuscout.markers import PROJECT

#: Built-in backends: short name and module. Registered with the same ``hookimpl`` a third party
#: uses, so they can be allowed or blocked by name like any other plugin.
BUILTINS: tuple[tuple[str, str], ...] = (
    ("cuda", "gpuscout.plugins.cuda"),
    ("rocm", "gpuscout.plugins.rocm"),
    ("metal", "gpuscout.plugins.metal"),
    ("vulkan", "gpuscout.plugins.vulkan"),
)

ENTRY_POINT_GROUP = PROJECT
ALLOW_ENV = "GPUSCOUT_PLUGINS"
DENY_ENV = "GPUSCOUT_DISABLE_PLUGINS"

OK, FAILED, TIMEOUT, DISABLED = "ok", "failed", "timeout", "disabled"


@attrs.define
class PluginReport:
    """What one plugin did: whether it loaded, which hooks it answers, what it found and how fast."""

    name: str
    version: str = ""
    distribution: str = ""
    hooks: list[str] = attrs.field(factory=list)
    status: str = OK
    error: str = ""
    devices: int = 0
    elapsed: float = 0.0

    def fail(self, status: str, error: str) -> None:
        """Mark the plugin failed (or timed out); the first failure's reason is kept first."""
        self.status = status
        self.error = f"{self.error}; {error}" if self.error and error not in self.error else error


def _comma_set(value: str | None) -> set[str] | None:
    if value is None or not value.strip():
        return None
    return {part.strip() for part in value.split(",") if part.strip()}


def _own_version() -> str:
    from gpuscout import __version__

    return __version__


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


class PluginHost:
    """Owns one pluggy PluginManager and the report of every plugin it was asked to consider."""

    def __init__(
        self,
        plugins: Iterable[str] | None = None,
        disable: Iterable[str] = (),
        extra: Iterable[Any] = (),
        entry_points: bool = True,
        env: Mapping[str, str] | None = None,
    ) -> None:
        env = env or {}
        allow = set(plugins) if plugins is not None else None
        env_allow = _comma_set(env.get(ALLOW_ENV))
        if env_allow is not None:
            allow = env_allow if allow is None else allow & env_allow
        self.allow = allow
        self.deny = set(disable) | (_comma_set(env.get(DENY_ENV)) or set())
        self.pm = pluggy.PluginManager(PROJECT)
        self.pm.add_hookspecs(hookspecs)
        self.reports: dict[str, PluginReport] = {}
        #: Plugins registered and answering hooks (not blocked, not failed to load).
        self.loaded: set[str] = set()
        for name, module in BUILTINS:
            self._load(name, functools.partial(importlib.import_module, module),
                       version=_own_version(), distribution=PROJECT)
        if entry_points:
            self._load_entry_points()
        for item in extra:
            name, obj = item if isinstance(item, tuple) else (_name_of(item), item)
            self._load(name, functools.partial(_identity, obj), version="", distribution="")

    @property
    def log(self) -> Any:
        """The logger, looked up per use so a host's later structlog configuration applies."""
        return get_logger()

    def blocked(self, name: str) -> bool:
        """Whether ``name`` is kept out by the allow or deny list."""
        return name in self.deny or (self.allow is not None and name not in self.allow)

    def _load(
        self, name: str, load: Callable[[], Any], version: str, distribution: str
    ) -> None:
        report = PluginReport(name=name, version=version, distribution=distribution)
        if name in self.reports:
            report.fail(FAILED, f"a plugin named {name!r} is already registered")
            self.reports[f"{name}#{len(self.reports)}"] = report
            return
        self.reports[name] = report
        if self.blocked(name):
            # Blocked before import: a blocked plugin's code never runs.
            report.status = DISABLED
            return
        try:
            obj = load()
            self.pm.register(obj, name=name)
        except (Exception, SystemExit) as exc:  # a plugin must never end the host
            report.fail(FAILED, f"could not load plugin {name!r}: {_describe(exc)}")
            self.log.warning("discovery.plugin_failed", plugin=name, error=report.error)
            return
        unknown = [
            impl_name for impl_name in dir(obj)
            if impl_name.startswith(f"{PROJECT}_") and not hasattr(self.pm.hook, impl_name)
            and _is_hookimpl(getattr(obj, impl_name, None))
        ]
        if unknown:
            self.pm.unregister(name=name)
            report.fail(FAILED, f"plugin {name!r} implements unknown hooks: {', '.join(unknown)}")
            self.log.warning("discovery.plugin_failed", plugin=name, error=report.error)
            return
        report.hooks = sorted(c.name for c in self.pm.get_hookcallers(obj) or ())
        self.loaded.add(name)

    def start_run(self) -> None:
        """Clear what the last discovery said about each loaded plugin (load failures stay)."""
        for name in self.loaded:
            report = self.reports[name]
            report.status, report.error, report.devices, report.elapsed = OK, "", 0, 0.0

    def snapshot(self) -> list[PluginReport]:
        """Copies of every report, in load order, that later runs will not change."""
        return [attrs.evolve(r, hooks=list(r.hooks)) for r in self.reports.values()]

    def _load_entry_points(self) -> None:
        from gpuscout.entrypoints import entry_points

        try:
            eps = entry_points(ENTRY_POINT_GROUP)
        except Exception as exc:  # a broken installed distribution must not stop discovery
            self.log.warning("discovery.entry_points_failed", error=_describe(exc))
            return
        for ep in eps:
            self._load(ep.name, ep.load, version=ep.version, distribution=ep.distribution)

    def impls(self, hook: str, registration_order: bool = False) -> list[pluggy.HookImpl]:
        """The plain implementations of ``hook`` in pluggy's call order (last registered first),
        or in registration order (built-ins first) when asked."""
        caller = getattr(self.pm.hook, hook)
        found = caller.get_hookimpls()
        ordered = found if registration_order else list(reversed(found))
        return [i for i in ordered if not (i.hookwrapper or i.wrapper)]

    def call_one(self, impl: pluggy.HookImpl, hook: str, kwargs: Mapping[str, Any]) -> Any:
        """Call one implementation with the arguments it asks for; raises what it raises."""
        return impl.function(*(kwargs[a] for a in impl.argnames))

    def record_failure(self, plugin: str, hook: str, problem: str) -> None:
        """Report that ``plugin`` misbehaved in ``hook``; the host carries on without its answer."""
        report = self.reports.get(plugin)
        message = f"{hook}: {problem}"
        if report is not None:
            report.fail(FAILED, message)
        self.log.warning("discovery.plugin_failed", plugin=plugin, hook=hook, error=problem)

    def each(
        self, hook: str, check: Callable[[Any], bool], expected: str,
        registration_order: bool = False, **kwargs: Any,
    ) -> Iterator[tuple[str, Any]]:
        """Yield ``(plugin, answer)`` for every implementation whose answer passes ``check``.

        An implementation that raises or answers a value that fails ``check`` is recorded as a
        failure of its plugin and skipped. None answers are skipped silently.
        """
        for impl in self.impls(hook, registration_order):
            try:
                answer = self.call_one(impl, hook, kwargs)
            except (Exception, SystemExit) as exc:  # a plugin must never end the host
                self.record_failure(impl.plugin_name, hook, f"raised {_describe(exc)}")
                continue
            if answer is None:
                continue
            if not check(answer):
                self.record_failure(
                    impl.plugin_name, hook,
                    f"returned {type(answer).__name__} {answer!r:.80}, expected {expected}",
                )
                continue
            yield impl.plugin_name, answer

    def first(
        self, hook: str, check: Callable[[Any], bool], expected: str, **kwargs: Any
    ) -> Any:
        """The first valid non-None answer to a firstresult hook, or None."""
        for _, answer in self.each(hook, check, expected, **kwargs):
            return answer
        return None


def _identity(obj: Any) -> Any:
    return obj


def _is_hookimpl(obj: Any) -> bool:
    return callable(obj) and hasattr(obj, f"{PROJECT}_impl")


def _name_of(obj: Any) -> str:
    name = getattr(obj, "__name__", None)
    return name if isinstance(name, str) else type(obj).__name__


def elapsed_since(start: float) -> float:
    """Seconds since ``start`` (a perf_counter value)."""
    return time.perf_counter() - start
