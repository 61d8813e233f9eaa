"""``Scout``: the facade host applications use. One instance, one plugin manager, no global state."""

from __future__ import annotations

import math
import os
import sys
import threading
import types
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from gpuscout._discovery.merge import compare, merge
from gpuscout._host.calls import PluginHost
from gpuscout._machine.context import Context
from gpuscout._records.device import CPU_LIBRARY, DeviceComparison, DeviceInfo, device_list
from gpuscout._records.results import Discovery, Dropped, PluginReport, PluginStatus
from gpuscout._scout_models import ModelMethods
from gpuscout.errors import GpuscoutError
from gpuscout.log import get_logger
from gpuscout.sizes import MIB

if TYPE_CHECKING:
    from gpuscout._fit.ggml import GgmlDevices
    from gpuscout._recording.record import Recorder
    from gpuscout._recording.replay import Recording
    from gpuscout._selection.affinity import Affinity

#: The seed's MinimumMemory for every library that does not answer otherwise.
DEFAULT_MINIMUM_MEMORY = 457 * MIB
_log = get_logger(__name__)


def _timeout(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise GpuscoutError(f"{name} must be a number of seconds, got {value!r:.60}")
    # Compared before float(): an int past a double's range (10**400) would raise OverflowError.
    if not 0 < value < math.inf or value > sys.float_info.max:
        raise GpuscoutError(f"{name} must be finite and > 0 seconds, got {value!r:.60}")
    return float(value)


def _recording(replay: Any) -> Recording | None:
    if replay is None:
        return None
    from gpuscout._recording.replay import Recording, load  # only a replay pays for it

    return replay if isinstance(replay, Recording) else load(replay)


def _environment(env: Mapping[str, str] | None) -> Mapping[str, str]:
    source = os.environ if env is None else env
    if not isinstance(source, Mapping):
        raise GpuscoutError(f"env must be a mapping of str to str, got {type(source).__name__}")
    if getattr(source, "_gpuscout_read_only", False):
        return source  # a recording's tracked environment: read-only already
    copy = dict(source)
    bad = next(((k, v) for k, v in copy.items() if not isinstance(k, str) or not isinstance(v, str)), None)
    if bad is not None:
        raise GpuscoutError(f"env must map str to str; {bad[0]!r:.60} maps to {bad[1]!r:.60}")
    # Read-only: nothing (a plugin included) can change what later calls see.
    return types.MappingProxyType(copy)


class Scout(ModelMethods):
    """Finds the machine's accelerators through plugins and answers the seed's rules about them.

    ``plugins`` is an allow list of plugin names (None: all; it overrides ``GPUSCOUT_PLUGINS``),
    ``disable`` a deny list (added to ``GPUSCOUT_DISABLE_PLUGINS``); names are compared without
    case or surrounding spaces, an unknown name in an allow list raises ``UnknownPluginError``
    and one in a deny list adds a sentence to ``warnings``. ``extra`` holds plugin objects (or
    ``(name, object)`` pairs) registered as well, ``entry_points`` whether to load third-party
    plugins of the ``gpuscout`` group. ``env`` (default ``os.environ``, copied) is the only
    environment plugins see, ``platform`` a ``sys.platform`` value, ``root`` the prefix of every
    file plugins read (a missing folder is fine: plugins find nothing there).
    ``enumerate_timeout`` bounds each plugin's import and enumerate, ``hook_timeout`` each call
    of a rule hook, in seconds (finite, > 0). ``isolate_imports`` imports the plugins in a child
    process first (``gpuscout._host.isolation.probe``): one whose import crashes or hangs there is
    reported failed or timed out and never imported here (the command line's ``--isolated``).
    ``reserve`` and ``cap`` map selectors (docs/selection.md; ``all`` is every device) to bytes
    held back and bytes at most planned on per device, ``prefer`` lists selectors whose devices
    rank first, in that order (docs/budgets.md); each one given (not None) wins over its
    variable, ``GPUSCOUT_RESERVE``, ``GPUSCOUT_CAP`` or ``GPUSCOUT_PREFER`` in ``env``, which
    is read otherwise; a malformed one raises ``BudgetError``.
    Raises only ``GpuscoutError`` for bad arguments.
    """

    def __init__(
        self,
        plugins: Iterable[str] | None = None,
        disable: Iterable[str] = (),
        extra: Iterable[Any] = (),
        entry_points: bool = True,
        env: Mapping[str, str] | None = None,
        platform: str | None = None,
        root: str | os.PathLike[str] = "/",
        enumerate_timeout: float = 15.0,
        hook_timeout: float = 1.0,
        replay: str | os.PathLike[str] | Recording | None = None,
        reserve: Mapping[str, int | str] | str | None = None,
        cap: Mapping[str, int | str] | str | None = None,
        prefer: Sequence[str] | None = None,
        *,
        isolate_imports: bool = False,
        recorder: Recorder | None = None,
    ) -> None:
        #: The recording discovery runs against (``replay``), or None on the live machine.
        self.replay: Recording | None = _recording(replay)
        if self.replay is not None and env is None:
            env = self.replay.env  # the recorded environment, unless the caller passes one
        if self.replay is not None and platform is None:
            platform = self.replay.platform
        self.recorder = recorder
        if recorder is not None:
            from gpuscout._recording.record import TrackedEnv

            env = TrackedEnv(os.environ if env is None else env)
        self.env: Mapping[str, str] = _environment(env)
        if platform is not None and not isinstance(platform, str):
            raise GpuscoutError(f"platform must be a sys.platform string, got {platform!r:.60}")
        self.platform = platform or sys.platform
        try:
            root = os.fspath(root)
        except TypeError:
            raise GpuscoutError(f"root must be a path, got {root!r:.60}") from None
        if not isinstance(root, str) or "\x00" in root:
            raise GpuscoutError(f"root must be a str path without NUL, got {root!r:.60}")
        if self.replay is not None:
            if root not in ("", "/"):
                raise GpuscoutError(
                    "replay and root exclude each other: a recording brings its own files (under root/)"
                )
            root = self.replay.root
        elif root not in ("", "/"):
            # Absolute once: a relative tree stays the same tree whatever the cwd becomes later.
            root = os.path.abspath(root)
        self.root = root
        from gpuscout._discovery.budgets import from_settings

        #: The budgets every discovery applies (``gpuscout._discovery.budgets.Budgets``).
        self.budgets = from_settings(self.env, reserve=reserve, cap=cap, prefer=prefer)
        self.enumerate_timeout = _timeout(enumerate_timeout, "enumerate_timeout")
        self.hook_timeout = _timeout(hook_timeout, "hook_timeout")
        # One discovery at a time per Scout: reports are per run.
        self._lock = threading.RLock()
        self._host = PluginHost(
            plugins=plugins,
            disable=disable,
            extra=extra,
            entry_points=bool(entry_points),
            env=self.env,
            context=lambda name, deadline: self.context(name, deadline),
            enumerate_timeout=self.enumerate_timeout,
            hook_timeout=self.hook_timeout,
            contain_imports=bool(isolate_imports),
            # A recording's environment feeds discovery only; children run with this one's.
            process_env=os.environ if self.replay is not None else None,
        )
        if self.replay is not None:
            # Only the answers of plugins this Scout has are read (and the core's own).
            self.replay = self.replay.with_answers([*self._host.loaded, "core"])
        #: Sentences for the user about this Scout's plugin lists (unknown names in a deny list).
        self.warnings: list[str] = list(self._host.warnings)

    # -- plumbing -------------------------------------------------------------------------------

    @property
    def log(self) -> Any:
        """This module's logger (it follows a host's later structlog configuration itself)."""
        return _log

    def context(self, plugin: str = "", deadline: float | None = None) -> Context:
        """A fresh context for ``plugin`` carrying this Scout's env (read-only), platform, root,
        and, while replaying, the plugin's recorded driver answers (while recording, the
        recorder that notes what it reads)."""
        if self.recorder is not None:
            from gpuscout._recording.record import RecordingContext

            return RecordingContext(
                env=self.env,
                platform=self.platform,
                root=self.root,
                deadline=deadline,
                plugin=plugin,
                recorder=self.recorder,
            )
        # The system-memory reader (no plugin name) records as "core" (Recorder.answer).
        answers = None if self.replay is None else self.replay.answers_for(plugin or "core")
        return Context(
            env=self.env,
            platform=self.platform,
            root=self.root,
            deadline=deadline,
            plugin=plugin,
            answers=answers,
        )

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

    def enumerate(self, isolated: bool = False) -> list[tuple[str, DeviceInfo]]:
        """Every device every plugin reports, tagged with the plugin, in plugin order.

        Each plugin runs on its own thread under its own deadline (with ``isolated``, in a
        child process of its own); a plugin that raises, answers the wrong type, returns a bad
        record, crashes its child or overruns is reported and contributes nothing.
        """
        return self._host.enumerate(isolated=isolated)

    def discover(
        self, include_software: bool = False, validate: bool = False, isolated: bool = False
    ) -> Discovery:
        """Enumerate, merge duplicates, drop software devices (unless asked), rank.

        With ``validate`` each device that needs it is initialised in a child process first and
        dropped when that fails (see ``gpuscout.runner``), all children at once under one
        deadline: ``enumerate_timeout`` plus 5 s for the child's own start
        (``gpuscout._host.isolation.START_ALLOWANCE``). With ``isolated`` every plugin's
        enumerate runs in a child process of its own (``gpuscout._host.isolation``), with this Scout's
        env, platform, root and plugins: a driver that crashes or hangs there costs only its
        plugin, reported ``failed`` (with the signal and the child's last stderr line) or
        ``timeout``; merge and rank stay here. Never raises for a plugin's fault; on a replayed
        recording, raises ``RecordingError`` when a plugin found its recorded answers malformed.
        """
        from gpuscout._discovery.pipeline import Run, discover

        run = Run(
            host=self._host,
            budgets=self.budgets,
            log=self.log,
            enumerate_timeout=self.enumerate_timeout,
            replaying=self.replay is not None,
            recording=self.recorder is not None,
            context=self.context,
            merge=self.merge,
            init_check_env=self.init_check_env,
        )
        with self._lock:
            return discover(run, include_software, validate, isolated)

    def merge(self, found: Sequence[tuple[str, DeviceInfo]]) -> tuple[list[DeviceInfo], list[Dropped]]:
        """``(plugin, device)`` pairs folded into survivors and dropped duplicates (near-linear)."""
        has = self._host.impls
        heuristic = self.duplicates if has("gpuscout_is_duplicate") else None
        # Keys only narrow down whom the heuristics ask; without heuristics nobody needs them.
        keys = self.duplicate_keys if heuristic and has("gpuscout_duplicate_key") else None
        return merge(found, heuristic, self.preferred, keys)

    def duplicates(self, pairs: Sequence[tuple[DeviceInfo, DeviceInfo]]) -> list[bool]:
        """``is_duplicate`` for many pairs at once (one bounded batch per plugin)."""
        answers = [False] * len(pairs)
        items = [{"a": a, "b": b} for a, b in pairs]
        for impl in self._host.impls("gpuscout_is_duplicate"):
            got = self._host.call(impl, "gpuscout_is_duplicate", items)
            for i, answer in enumerate(got or ()):
                answers[i] = answers[i] or answer is True
        return answers

    def duplicate_keys(self, devices: Sequence[DeviceInfo]) -> list[Any]:
        """Each device's duplicate key (``gpuscout_duplicate_key``), None where nobody answers."""
        return self._host.first_each("gpuscout_duplicate_key", [{"device": d} for d in devices])

    def refresh(self, devices: Sequence[DeviceInfo]) -> list[DeviceInfo]:
        """``devices``, in the same order, with free memory brought up to date by the plugins
        that can do so cheaply (``gpuscout_refresh``).

        Each answer is the record a plugin returned for the device (matched by ``(id,
        library)``) with ``free_memory_stale=False``. A device that no plugin refreshed (none
        answers for its library, its plugin raised, timed out, answered something invalid or
        left it out) keeps every previous value and gets ``free_memory_stale=True``: a failure
        never turns into 0 free. A refreshed device keeps its budget (``usable_memory`` and the
        budget's note) from the record passed in. A returned record must keep the device's identity (``id``,
        ``library``, ``pci_id`` and ``uuid``, case ignored); one that changes it fails that
        plugin for that device, which stays as it was, stale.

        Deadline: a refresh may talk to a driver (an NVML init takes seconds without
        persistence mode), so each plugin's call is bounded by ``enumerate_timeout``, not
        ``hook_timeout``; the plugins are asked one after another, so the whole refresh ends
        within ``enumerate_timeout`` times the number of plugins that implement the hook (plus
        the record checks). A plugin that overruns is reported ``timeout``; a later refresh or
        discovery asks it again, but while its overrun call is still running no second one is
        started: the next waits for it, up to its own deadline.
        """
        from gpuscout._discovery.refresh import refresh

        devices = device_list(devices, "refresh")
        with self._lock:
            return refresh(self._host, devices, self.log)

    # -- the seed's rules -----------------------------------------------------------------------

    def is_duplicate(self, a: DeviceInfo, b: DeviceInfo) -> bool:
        """True if any plugin's heuristic says ``a`` and ``b`` are one card."""
        a, b = _device(a, "is_duplicate"), _device(b, "is_duplicate")
        return any(answer for _, answer in self._host.each("gpuscout_is_duplicate", a=a, b=b))

    def compare(self, a: DeviceInfo, b: DeviceInfo) -> DeviceComparison:
        """The seed's Compare: PCI ids (any case), then the plugins' heuristics, then DeviceID."""
        return compare(_device(a, "compare"), _device(b, "compare"), self.is_duplicate)

    def preferred(self, a: DeviceInfo, b: DeviceInfo) -> bool:
        """The seed's PreferredLibrary: whether ``a``'s library wins over ``b``'s for one card."""
        a, b = _device(a, "preferred"), _device(b, "preferred")
        answer = self._host.first("gpuscout_preferred_library", device=a, other=b)
        return bool(answer)

    def minimum_memory(self, device: DeviceInfo) -> int:
        """Bytes to hold back on ``device``: a plugin's answer, else 457 MiB."""
        device = _device(device, "minimum_memory")
        answer = self._host.first("gpuscout_minimum_memory", device=device)
        return DEFAULT_MINIMUM_MEMORY if answer is None else int(answer)

    def flash_attention(self, device: DeviceInfo) -> bool:
        """Whether flash attention is safe on one device."""
        device = _device(device, "flash_attention")
        answer = self._host.first("gpuscout_flash_attention", device=device)
        if answer is None:
            return device.library == CPU_LIBRARY
        return bool(answer)

    def ggml_supports_op(self, device: DeviceInfo, op: str, params: Mapping[str, int]) -> bool:
        """Whether ggml's backend runs ``op`` (with ``params``) on ``device``
        (``gpuscout_ggml_supports_op``); without an answer it does."""
        device = _device(device, "ggml_supports_op")
        shown = types.MappingProxyType({str(k): int(v) for k, v in params.items()})
        answer = self._host.first("gpuscout_ggml_supports_op", device=device, op=str(op), params=shown)
        return True if answer is None else bool(answer)

    def flash_attention_supported(self, devices: Iterable[DeviceInfo]) -> bool:
        """The seed's FlashAttentionSupported: every device must pass; no devices pass."""
        return all(self.flash_attention(d) for d in device_list(devices, "flash_attention_supported"))

    def init_env(self, device: DeviceInfo) -> dict[str, str] | None:
        """Environment for a deep-init check of ``device``, or None when it needs none."""
        device = _device(device, "init_env")
        env: dict[str, str] | None = None
        for _, answer in self._host.each("gpuscout_validate_init", device=device):
            env = {**(env or {}), **answer}
        return env

    def init_check_env(self, device: DeviceInfo) -> dict[str, str] | None:
        """The whole environment of the child that checks ``device`` (this Scout's env, only
        ``device`` visible, its plugin's init variables), or None when it needs no check."""
        init_env = self.init_env(device)
        if init_env is None:
            return None
        return {**self.env, **self.visible_env([device]), **init_env}

    def needs_init_validation(self, device: DeviceInfo) -> bool:
        """The seed's NeedsInitValidation: whether ``device`` must be initialised in a child first."""
        return self.init_env(device) is not None

    def ggml_devices(self, devices: Sequence[DeviceInfo]) -> GgmlDevices:
        """The devices of ``devices`` a llama.cpp build would use, in ggml's order, with ggml's
        names and the environment that makes a child enumerate exactly them
        (``gpuscout_ggml_devices`` answers, then llama.cpp's default device selection:
        ``gpuscout._fit.ggml``)."""
        from gpuscout._fit.ggml import ggml_devices

        devices = device_list(devices, "ggml_devices")
        answers = self._host.each("gpuscout_ggml_devices", devices=tuple(devices))
        return ggml_devices(devices, answers, self.visible_env)

    def visible_env(self, devices: Sequence[DeviceInfo]) -> dict[str, str]:
        """The seed's GetDevicesEnv: the environment a child needs to see exactly ``devices``.

        Raises ``SelectionRefused`` when a plugin says no environment can do that (CUDA: several
        MIG instances, of which a process enumerates only one); its message says what to do.
        Raises ``GpuscoutError`` for a device whose visible token (``filter_id or id``) is empty
        or holds the list separator ``,``, naming the device and the field.
        """
        from gpuscout._selection.visibility import visible_env

        devices = device_list(devices, "visible_env")
        return visible_env(self._host, devices, self.log) if devices else {}

    def isolate_env(
        self, devices: Sequence[DeviceInfo], env: Mapping[str, str]
    ) -> list[tuple[str, dict[str, str]]]:
        """Each plugin's variables that hide its unselected devices: ``(plugin, variables)``."""
        return [
            (plugin, dict(answer))
            for plugin, answer in self._host.each(
                "gpuscout_isolate_env",
                selection=tuple(device_list(devices, "isolate_env")),
                env=types.MappingProxyType(dict(env)),
            )
        ]

    def cpu_affinity(self, devices: Sequence[DeviceInfo]) -> Affinity:
        """The CPUs a child using ``devices`` should run on: the union of their ``local_cpus``
        within the CPUs this process may use, with a note (``gpuscout._selection.affinity``). Start the
        child inside ``gpuscout._selection.affinity.pinned(result.cpus)`` (it inherits them), or pass
        ``preexec_fn=lambda: os.sched_setaffinity(0, result.cpus)``; ``cpus`` None means
        leave them as they are (the note says why)."""
        from gpuscout._selection import affinity

        return affinity.for_devices(
            device_list(devices, "cpu_affinity"),
            affinity.allowed_cpus(),
            platform_supported=affinity.supported() and self.platform == "linux",
        )

    def select(
        self, selectors: Sequence[str], include_software: bool = False, isolated: bool = False
    ) -> list[DeviceInfo]:
        """Devices matching ``selectors`` (see ``gpuscout._selection.selectors``), in rank order, from one
        discovery (``isolated`` as in ``discover``)."""
        from gpuscout._selection.selectors import select_devices

        discovery = self.discover(include_software=include_software, isolated=isolated)
        return select_devices(self, discovery.devices, selectors, discovery.numbering)

    def __repr__(self) -> str:
        loaded = [r.name for r in self.reports if r.status is not PluginStatus.DISABLED]
        return f"Scout(platform={self.platform!r}, root={self.root!r}, plugins={loaded!r})"


def _device(value: Any, where: str) -> DeviceInfo:
    if not isinstance(value, DeviceInfo):
        raise GpuscoutError(f"{where}: expected a DeviceInfo, got {type(value).__name__}")
    return value


__all__ = ["DEFAULT_MINIMUM_MEMORY", "Discovery", "Scout"]
