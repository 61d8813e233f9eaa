"""``Scout``: the facade host applications use. One instance, one plugin manager, no global state."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from gpuscout.context import Context, EnvEntry
from gpuscout.host import OK, TIMEOUT, PluginHost, PluginReport
from gpuscout.log import get_logger
from gpuscout.merge import SOFTWARE_REASON, Dropped, compare, merge
from gpuscout.rank import rank
from gpuscout.records import CPU_LIBRARY, DeviceComparison, DeviceInfo, SystemInfo
from gpuscout.system import read_system

MIB = 1024 * 1024
#: The seed's MinimumMemory for every library that does not answer otherwise.
DEFAULT_MINIMUM_MEMORY = 457 * MIB


@attrs.frozen
class Discovery:
    """The result of one discovery: ranked devices, what was dropped and why, system memory,
    one report per plugin, and the wall time it took in seconds."""

    devices: list[DeviceInfo]
    dropped: list[Dropped]
    system: SystemInfo
    plugins: list[PluginReport]
    elapsed: float = 0.0


def _is_bool(value: Any) -> bool:
    return isinstance(value, bool)


def _is_size(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_str_map(value: Any) -> bool:
    return isinstance(value, Mapping) and all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    )


def _is_device_list(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and all(isinstance(d, DeviceInfo) for d in value)


class Scout:
    """Finds the machine's accelerators through plugins and answers the seed's rules about them.

    ``plugins`` is an allow list of plugin names (None: all), ``disable`` a deny list, ``extra``
    plugin objects (or ``(name, object)`` pairs) registered as well, ``entry_points`` whether to load
    third-party plugins of the ``gpuscout`` group. ``env`` (default ``os.environ``) is the only
    environment plugins see, ``platform`` a ``sys.platform`` value, ``root`` the prefix of every
    file plugins read, ``enumerate_timeout`` each plugin's enumerate deadline in seconds.
    """

    def __init__(
        self,
        plugins: Iterable[str] | None = None,
        disable: Iterable[str] = (),
        extra: Iterable[Any] = (),
        entry_points: bool = True,
        env: Mapping[str, str] | None = None,
        platform: str | None = None,
        root: str = "/",
        enumerate_timeout: float = 5.0,
    ) -> None:
        self.env: Mapping[str, str] = dict(os.environ if env is None else env)
        self.platform = platform or sys.platform
        self.root = root
        self.enumerate_timeout = enumerate_timeout
        # One discovery at a time per Scout: reports are per run.
        self._lock = threading.RLock()
        self._host = PluginHost(
            plugins=plugins, disable=disable, extra=extra, entry_points=entry_points, env=self.env
        )

    # -- plumbing -------------------------------------------------------------------------------

    @property
    def log(self) -> Any:
        """The logger, looked up per use so a host's later structlog configuration applies."""
        return get_logger()

    def context(self, plugin: str = "", deadline: float | None = None) -> Context:
        """A context for ``plugin`` carrying this Scout's env, platform and root."""
        return Context(env=self.env, platform=self.platform, root=self.root,
                       deadline=deadline, plugin=plugin)

    @property
    def reports(self) -> list[PluginReport]:
        """One report per plugin considered (loaded, failed or disabled), in load order, as the
        last discovery (and any rule call since) left them. A Discovery keeps its own copy."""
        return list(self._host.reports.values())

    @property
    def plugin_manager(self) -> Any:
        """The underlying pluggy PluginManager (for inspection; call hooks through Scout)."""
        return self._host.pm

    # -- discovery ------------------------------------------------------------------------------

    def enumerate(self) -> list[tuple[str, DeviceInfo]]:
        """Every device every plugin reports, tagged with the plugin, in plugin order.

        Each plugin runs in its own worker thread under its own deadline; a plugin that raises,
        answers the wrong type or overruns is reported and contributes nothing.
        """
        # Registration order: built-ins first, so "found first" means the same on every run.
        impls = self._host.impls("gpuscout_enumerate", registration_order=True)
        runs: list[tuple[Any, Context, threading.Thread, dict[str, Any]]] = []
        for impl in impls:
            start = time.monotonic()
            ctx = self.context(impl.plugin_name, deadline=start + self.enumerate_timeout)
            box: dict[str, Any] = {"start": time.perf_counter()}
            thread = threading.Thread(
                target=self._run_enumerate, args=(impl, ctx, box),
                name=f"gpuscout-enumerate-{impl.plugin_name}", daemon=True,
            )
            thread.start()
            runs.append((impl, ctx, thread, box))
        found: list[tuple[str, DeviceInfo]] = []
        for impl, ctx, thread, box in runs:
            name = impl.plugin_name
            report = self._host.reports[name]
            thread.join(timeout=ctx.time_left())
            if thread.is_alive():
                report.elapsed = time.perf_counter() - box["start"]
                report.fail(TIMEOUT, f"enumerate did not finish within {self.enumerate_timeout:g} s")
                self.log.warning("discovery.plugin_timeout", plugin=name,
                                 timeout_s=self.enumerate_timeout)
                continue
            report.elapsed = box["end"] - box["start"]
            if "error" in box:
                self._host.record_failure(name, "gpuscout_enumerate", box["error"])
                continue
            devices = box["result"]
            if not _is_device_list(devices):
                self._host.record_failure(
                    name, "gpuscout_enumerate",
                    f"returned {type(devices).__name__}, expected a list of DeviceInfo",
                )
                continue
            report.devices = len(devices)
            if ctx.notes and report.status == OK:
                report.error = "; ".join(ctx.notes)
            found.extend((name, d) for d in devices)
        return found

    def _run_enumerate(self, impl: Any, ctx: Context, box: dict[str, Any]) -> None:
        try:
            box["result"] = self._host.call_one(impl, "gpuscout_enumerate", {"context": ctx})
        except BaseException as exc:
            box["error"] = f"raised {type(exc).__name__}: {exc}"
        finally:
            box["end"] = time.perf_counter()

    def discover(self, include_software: bool = False, validate: bool = False) -> Discovery:
        """Enumerate, merge duplicates, drop software devices (unless asked), rank.

        With ``validate`` each device that needs it is initialised in a child process first and
        dropped when that fails (see ``gpuscout.runner``). Never raises for a plugin's fault.
        """
        with self._lock:
            return self._discover(include_software, validate)

    def _discover(self, include_software: bool, validate: bool) -> Discovery:
        start = time.perf_counter()
        self._host.start_run()
        kept, dropped = merge(self.enumerate(), self.compare, self.preferred)
        if not include_software:
            dropped.extend(Dropped(d, SOFTWARE_REASON) for d in kept if d.software)
            kept = [d for d in kept if not d.software]
        if validate:
            from gpuscout.runner import validate_devices

            kept, failed = validate_devices(self, kept)
            dropped.extend(failed)
        system = read_system(self.context())
        elapsed = time.perf_counter() - start
        self.log.debug("discovery.done", devices=len(kept), dropped=len(dropped),
                       elapsed_ms=round(elapsed * 1000, 3))
        return Discovery(devices=rank(kept), dropped=dropped, system=system,
                         plugins=self._host.snapshot(), elapsed=elapsed)

    def refresh(self, devices: Sequence[DeviceInfo]) -> list[DeviceInfo]:
        """``devices`` with free memory updated by the plugins that can do so cheaply."""
        updated = {d.device_id: d for d in devices}
        for _, answer in self._host.each(
            "gpuscout_refresh", _is_device_list, "a list of DeviceInfo",
            devices=list(devices), context=self.context(),
        ):
            for d in answer:
                if d.device_id in updated:
                    updated[d.device_id] = d
        return [updated[d.device_id] for d in devices]

    # -- the seed's rules -----------------------------------------------------------------------

    def is_duplicate(self, a: DeviceInfo, b: DeviceInfo) -> bool:
        """True if any plugin's heuristic says ``a`` and ``b`` are one card."""
        return any(
            answer for _, answer in self._host.each(
                "gpuscout_is_duplicate", _is_bool, "bool or None", a=a, b=b)
        )

    def compare(self, a: DeviceInfo, b: DeviceInfo) -> DeviceComparison:
        """The seed's Compare: PCI ids (any case), then the plugins' heuristics, then DeviceID."""
        return compare(a, b, self.is_duplicate)

    def preferred(self, a: DeviceInfo, b: DeviceInfo) -> bool:
        """The seed's PreferredLibrary: whether ``a``'s library wins over ``b``'s for one card."""
        answer = self._host.first(
            "gpuscout_preferred_library", _is_bool, "bool or None", device=a, other=b)
        return bool(answer)

    def minimum_memory(self, device: DeviceInfo) -> int:
        """Bytes to hold back on ``device``: a plugin's answer, else 457 MiB."""
        answer = self._host.first(
            "gpuscout_minimum_memory", _is_size, "a non-negative int or None", device=device)
        return DEFAULT_MINIMUM_MEMORY if answer is None else int(answer)

    def flash_attention(self, device: DeviceInfo) -> bool:
        """Whether flash attention is safe on one device."""
        answer = self._host.first(
            "gpuscout_flash_attention", _is_bool, "bool or None", device=device)
        if answer is None:
            return device.library == CPU_LIBRARY
        return bool(answer)

    def flash_attention_supported(self, devices: Iterable[DeviceInfo]) -> bool:
        """The seed's FlashAttentionSupported: every device must pass; no devices pass."""
        return all(self.flash_attention(d) for d in devices)

    def init_env(self, device: DeviceInfo) -> dict[str, str] | None:
        """Environment for a deep-init check of ``device``, or None when it needs none."""
        env: dict[str, str] | None = None
        for _, answer in self._host.each(
            "gpuscout_validate_init", _is_str_map, "a str->str mapping or None",
            device=device, context=self.context(),
        ):
            env = {**(env or {}), **answer}
        return env

    def needs_init_validation(self, device: DeviceInfo) -> bool:
        """The seed's NeedsInitValidation: whether ``device`` must be initialised in a child first."""
        return self.init_env(device) is not None

    def visible_env(self, devices: Sequence[DeviceInfo]) -> dict[str, str]:
        """The seed's GetDevicesEnv: the environment a child needs to see exactly ``devices``."""
        devices = list(devices)
        if not devices:
            return {}
        per_device: list[list[EnvEntry]] = [[] for _ in devices]
        for plugin, answer in self._host.each(
            "gpuscout_visible_env", _is_entry_list, "a list of EnvEntry or None",
            selection=devices, context=self.context(),
        ):
            bad = [e for e in answer if not 0 <= e[0] < len(devices)]
            if bad:
                self._host.record_failure(
                    plugin, "gpuscout_visible_env", f"entry index out of range: {bad[0]!r}")
                continue
            for index, name, value in answer:
                per_device[index].append(EnvEntry(index, name, value))
        env: dict[str, str] = {}
        for device, entries in zip(devices, per_device, strict=True):
            for _, name, value in entries:
                env[name] = f"{env[name]},{value}" if name in env else value
            for key, value in device.runner_env_overrides.items():
                if key in env and env[key] != value:
                    self.log.warning(
                        "env.override_conflict", key=key, existing=env[key], new=value,
                        library=device.library, id=device.id,
                    )
                env[key] = value
        return env

    def isolate_env(
        self, devices: Sequence[DeviceInfo], env: Mapping[str, str]
    ) -> list[tuple[str, dict[str, str]]]:
        """Each plugin's variables that hide its unselected devices: ``(plugin, variables)``."""
        return [
            (plugin, dict(answer)) for plugin, answer in self._host.each(
                "gpuscout_isolate_env", _is_str_map, "a str->str mapping or None",
                registration_order=True, selection=list(devices), env=dict(env), context=self.context(),
            )
        ]

    def select(self, selectors: Sequence[str], include_software: bool = False) -> list[DeviceInfo]:
        """Devices matching ``selectors`` (see ``gpuscout.select``), in rank order."""
        from gpuscout.select import select_devices

        discovery = self.discover(include_software=include_software)
        return select_devices(self, discovery.devices, selectors)

    def __repr__(self) -> str:
        loaded = [r.name for r in self.reports if r.status not in ("disabled",)]
        return f"Scout(platform={self.platform!r}, root={self.root!r}, plugins={loaded!r})"


def _is_entry_list(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and all(
        isinstance(e, tuple) and len(e) == 3 and isinstance(e[0], int)
        and isinstance(e[1], str) and isinstance(e[2], str)
        for e in value
    )


__all__ = ["DEFAULT_MINIMUM_MEMORY", "Discovery", "Scout"]
