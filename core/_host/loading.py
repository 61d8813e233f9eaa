"""Which plugins a host loads, and how: the allow and deny lists (the arguments,
``GPUSCOUT_PLUGINS``, ``GPUSCOUT_DISABLE_PLUGINS``), the candidates (the built-ins first, then
entry points and ``extra`` objects), every import at once under the enumerate deadline (first in
a probe child with ``contain_imports``), and the checks a plugin passes before it is registered.
``PluginHost`` calls ``load_plugins`` once, from its constructor."""

from __future__ import annotations

import functools
import importlib
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from gpuscout._host.hookspecs import HOOKS
from gpuscout._host.markers import PROJECT, check_api_version
from gpuscout._host.names import ALLOW_ENV, BUILTINS, DENY_ENV, ENTRY_POINT_GROUP, normal_name
from gpuscout._host.workers import Batch
from gpuscout._records.results import PluginReport, PluginStatus
from gpuscout.errors import GpuscoutError, UnknownPluginError, describe_exception

if TYPE_CHECKING:
    from gpuscout._host.state import HostState


def load_plugins(
    host: HostState,
    *,
    extra: Iterable[Any],
    entry_points: bool,
    env: Mapping[str, str],
    allow_from: str,
    contain_imports: bool,
    process_env: Mapping[str, str] | None = None,
) -> None:
    """Gather the candidates, refuse an unknown name in the allow list (``allow_from`` says
    where the list came from), import and register every allowed plugin into ``host``; the
    import probe's child runs with ``process_env`` (default ``env``: on a replay, this
    process's environment, never the recording's)."""
    candidates: list[tuple[str, Callable[[], Any], str, str]] = [
        (name, functools.partial(importlib.import_module, module), _own_version(), PROJECT)
        for name, module in BUILTINS
    ]
    if entry_points:
        candidates += entry_point_candidates(host)
    try:
        extras = list(extra)
    except TypeError:
        raise GpuscoutError(f"extra must be a list of plugin objects, got {type(extra).__name__}") from None
    for item in extras:
        name, obj = item if isinstance(item, tuple) and len(item) == 2 else (_name_of(item), item)
        if not isinstance(name, str) or not name.strip():
            raise GpuscoutError(f"extra: a plugin name must be a non-empty str, got {name!r:.80}")
        candidates.append((name, functools.partial(_identity, obj), "", ""))
    check_names(host, {normal_name(c[0]) for c in candidates}, allow_from)
    probed: dict[str, tuple[str, str]] = {}
    if contain_imports:
        from gpuscout._host.isolation.probe import probe_imports

        # Third-party entry points. The built-ins import nothing native when imported
        # (tests/test_isolation.py checks it), so a child for them would only cost time.
        builtin = {name for name, _ in BUILTINS}
        names = [
            c[0]
            for c in candidates
            if c[3] and not host.blocked(c[0]) and not (c[3] == PROJECT and c[0] in builtin)
        ]
        probe_env = env if process_env is None else process_env
        probed = probe_imports(list(dict.fromkeys(names)), probe_env, host.enumerate_timeout)
    load_all(host, candidates, probed)


def check_names(host: HostState, known: set[str], allow_from: str) -> None:
    """Raise UnknownPluginError for an allow-list name not in ``known``; warn of deny-list ones."""
    from gpuscout._suggest import did_you_mean

    listed = ", ".join(sorted(known)) or "none"
    unknown = sorted(set(host.allow or ()) - known)
    if unknown:
        where = "--plugins / plugins=" if allow_from == "plugins" else ALLOW_ENV
        raise UnknownPluginError(
            f"unknown plugin {', '.join(repr(u) for u in unknown)} in the allow list "
            f"({where}){did_you_mean(unknown[0], sorted(known))}; known plugins: {listed}"
        )
    for name in sorted(host.deny - known):
        host.warnings.append(
            f"unknown plugin {name!r} in the deny list (--disable / {DENY_ENV})"
            f"{did_you_mean(name, sorted(known))}; known plugins: {listed}"
        )
        host.log.debug("plugins.unknown_disabled", plugin=name)


def entry_point_candidates(host: HostState) -> list[tuple[str, Callable[[], Any], str, str]]:
    """The installed ``gpuscout`` entry points as candidates; none when they cannot be read."""
    from gpuscout._host.entrypoints import entry_points

    try:
        eps = entry_points(ENTRY_POINT_GROUP)
    except Exception as exc:  # a broken installed distribution must not stop discovery
        host.log.warning("discovery.entry_points_failed", error=describe_exception(exc))
        return []
    return [(ep.name, ep.load, ep.version, ep.distribution) for ep in eps]


def load_all(
    host: HostState,
    candidates: Sequence[tuple[str, Callable[[], Any], str, str]],
    probed: Mapping[str, tuple[str, str]],
) -> None:
    """Import every allowed plugin at once, each under the enumerate deadline, then register
    them in candidate order (built-ins first) so that "found first" is stable. A plugin in
    ``probed`` (its import crashed or hung in the probe's child) is not imported."""
    pending: list[tuple[PluginReport, Callable[[], Any], bool]] = []
    builtin = {name for name, _ in BUILTINS}
    for name, load, version, distribution in candidates:
        report = PluginReport(name=name, version=version, distribution=distribution)
        if name in host.reports:
            report.fail(PluginStatus.FAILED, f"a plugin named {name!r} is already registered")
            host.reports[f"{name}#{len(host.reports)}"] = report
            continue
        host.reports[name] = report
        if host.blocked(name):
            # Blocked before import: a blocked plugin's code never runs.
            report.status = PluginStatus.DISABLED
            continue
        if name in probed:
            status, reason = probed[name]
            if status == "timeout":
                host.timed_out(name, "import", reason)
            else:
                load_failed(host, report, f"plugin {name!r}: {reason}")
            continue
        pending.append((report, load, distribution == PROJECT and name in builtin))
    # gpuscout's own plugins import one after another on one thread: they import nothing
    # native (tests/test_isolation.py), and four imports at once contend for the import locks
    # (about 3 ms of a `list`). Every other plugin gets a thread of its own.
    own = [load for _, load, is_own in pending if is_own]
    shared = Batch(lambda f: f(), own, "gpuscout-load-builtins") if own else None
    batches: list[tuple[PluginReport, Batch, int]] = []
    for report, load, is_own in pending:
        if is_own and shared is not None:
            batches.append((report, shared, own.index(load)))
        else:
            batches.append((report, Batch(lambda f: f(), [load], f"gpuscout-load-{report.name}"), 0))
    start = time.monotonic()
    for report, batch, index in batches:
        batch.wait_until(start + host.enumerate_timeout)
        if index >= len(batch.results):
            host.timed_out(
                report.name, "import", f"import did not finish within {host.enumerate_timeout:g} s"
            )
            continue
        ok, value = batch.results[index]
        if not ok:
            load_failed(host, report, f"could not load plugin {report.name!r}: {describe_exception(value)}")
            continue
        register(host, report, value)


def register(host: HostState, report: PluginReport, obj: Any) -> None:
    """Register an imported plugin, unless it refuses the API version, implements unknown hooks
    or declares hook wrappers (then its report says why)."""
    name = report.name
    refused = check_api_version(obj)
    if refused:
        load_failed(host, report, f"plugin {name!r} refused: {refused}")
        return
    try:
        unknown = [
            attr
            for attr in dir(obj)
            if attr.startswith(f"{PROJECT}_")
            and attr not in HOOKS
            and host.pm.parse_hookimpl_opts(obj, attr) is not None
        ]
    except Exception as exc:
        load_failed(host, report, f"plugin {name!r} cannot be inspected: {describe_exception(exc)}")
        return
    if unknown:
        load_failed(host, report, f"plugin {name!r} implements unknown hooks: {', '.join(unknown)}")
        return
    try:
        host.pm.register(obj, name=name)
    except Exception as exc:
        load_failed(host, report, f"could not load plugin {name!r}: {describe_exception(exc)}")
        return
    callers = host.pm.get_hookcallers(obj) or []
    wrappers = [
        c.name
        for c in callers
        if any(i.hookwrapper or i.wrapper for i in c.get_hookimpls() if i.plugin is obj)
    ]
    if wrappers:
        host.pm.unregister(obj)
        load_failed(
            host,
            report,
            f"plugin {name!r} declares hook wrappers, which gpuscout does "
            f"not call: {', '.join(sorted(wrappers))}",
        )
        return
    report.hooks = sorted(c.name for c in callers)
    host.loaded.add(name)
    if report.distribution == PROJECT and any(name == b for b, _ in BUILTINS):
        host.builtin.add(name)
    if report.distribution:  # a built-in or an entry point: a child can load it by name
        host.by_name.add(name)


def load_failed(host: HostState, report: PluginReport, message: str) -> None:
    """Report that a plugin could not be loaded, and log it."""
    report.fail(PluginStatus.FAILED, message)
    host.log.warning("discovery.plugin_failed", plugin=report.name, error=message)


def _own_version() -> str:
    from gpuscout.version import VERSION

    return VERSION


def _identity(obj: Any) -> Any:
    return obj


def _name_of(obj: Any) -> str:
    name = getattr(obj, "__name__", None)
    return name if isinstance(name, str) else type(obj).__name__
