"""``Scout``: the facade host applications use. One instance, one plugin manager, no global state."""

from __future__ import annotations

import math
import os
import sys
import threading
import time
import types
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from gpuscout.context import Context, EnvEntry
from gpuscout.errors import GpuscoutError
from gpuscout.host import PluginHost, checked_devices, visibility_id_problem
from gpuscout.layers import GPULayersList
from gpuscout.log import get_logger
from gpuscout.merge import compare, merge
from gpuscout.ranking import rank
from gpuscout.records import (
    CPU_LIBRARY,
    DeviceComparison,
    DeviceInfo,
    SystemInfo,
    device_list,
)
from gpuscout.results import SOFTWARE_REASON, Discovery, Dropped, PluginReport, PluginStatus
from gpuscout.sizes import MIB
from gpuscout.system import read_system

if TYPE_CHECKING:
    from gpuscout.affinity import Affinity
    from gpuscout.fit.placement import FitResult
    from gpuscout.load import Allocate, LoadResult
    from gpuscout.memory import BackendMemory
    from gpuscout.recording import Recorder
    from gpuscout.replay import Recording

#: The seed's MinimumMemory for every library that does not answer otherwise.
DEFAULT_MINIMUM_MEMORY = 457 * MIB
_log = get_logger(__name__)


def _timeout(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise GpuscoutError(f"{name} must be a number of seconds, got {value!r:.60}")
    if not math.isfinite(value) or value <= 0:
        raise GpuscoutError(f"{name} must be finite and > 0 seconds, got {value!r}")
    return float(value)


def _recording(replay: Any) -> Recording | None:
    if replay is None:
        return None
    from gpuscout.replay import Recording, load  # only a replay pays for it

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


class Scout:
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
    process first (``gpuscout.isolation.probe``): one whose import crashes or hangs there is
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
            from gpuscout.recording import TrackedEnv

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
        self.root = root
        from gpuscout.budgets import from_settings

        #: The budgets every discovery applies (``gpuscout.budgets.Budgets``).
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
        )
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
            from gpuscout.recording import RecordingContext

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
        (``gpuscout.isolation.START_ALLOWANCE``). With ``isolated`` every plugin's
        enumerate runs in a child process of its own (``gpuscout.isolation``), with this Scout's
        env, platform, root and plugins: a driver that crashes or hangs there costs only its
        plugin, reported ``failed`` (with the signal and the child's last stderr line) or
        ``timeout``; merge and rank stay here. Never raises for a plugin's fault; on a replayed
        recording, raises ``RecordingError`` when a plugin found its recorded answers malformed.
        """
        with self._lock:
            return self._discover(include_software, validate, isolated)

    def _discover(self, include_software: bool, validate: bool, isolated: bool) -> Discovery:
        start = time.perf_counter()
        deadline = time.monotonic() + self.enumerate_timeout
        self._host.start_run()
        # A recording is replayed (and made) in this process: replaying asks no driver, and a
        # recording must see what each plugin read, which a child's reads are not.
        on_machine = self.replay is None and self.recorder is None
        kept, dropped = self.merge(self.enumerate(isolated and on_machine))
        if self._host.recording_errors:
            # A malformed answer is the recording's fault, not the plugin's: the caller hears it.
            raise self._host.recording_errors[0]
        if not include_software:
            dropped.extend(Dropped(d, SOFTWARE_REASON) for d in kept if d.software)
            kept = [d for d in kept if not d.software]
        if validate and self.replay is not None:
            self.log.info(
                "discovery.validation_skipped",
                reason="replaying a recording: there is no driver to initialise",
            )
        elif validate:
            from gpuscout.isolation import START_ALLOWANCE
            from gpuscout.runner import validate_devices

            # Each child initialises a driver (seconds without persistence mode) in a discovery
            # of its own: the enumerate deadline, plus the child's start, as isolated discovery.
            kept, failed = validate_devices(
                [(d, self.init_check_env(d)) for d in kept], timeout=self.enumerate_timeout + START_ALLOWANCE
            )
            dropped.extend(failed)
        kept = self._placed(kept, deadline)
        # System memory is read under the enumerate deadline too (at least 1 s of it left).
        memory_ctx = self.context(deadline=max(deadline, time.monotonic() + 1.0))
        system = read_system(memory_ctx)
        for note in memory_ctx.notes:
            self.log.info("discovery.system_memory_note", note=note)
        elapsed = time.perf_counter() - start
        self.log.debug(
            "discovery.done", devices=len(kept), dropped=len(dropped), elapsed_ms=round(elapsed * 1000, 3)
        )
        kept, outcome = self.budgets.apply(kept)
        for sentence in outcome.unmatched:
            self.log.warning("discovery.budget_unmatched", budget=sentence)
        return Discovery(
            devices=rank(kept, outcome.preference),
            dropped=dropped,
            system=system,
            plugins=self._host.snapshot(),
            elapsed=elapsed,
            budgets=outcome,
        )

    def _placed(self, devices: list[DeviceInfo], deadline: float) -> list[DeviceInfo]:
        """``devices`` with their NUMA node, near CPUs and PCIe link read from sysfs where the
        plugin left them empty (``gpuscout.topology``, under the enumerate deadline, at least
        1 s of it left), and peers only among themselves."""
        from gpuscout.topology import add_topology, keep_known_peers

        if not any(d.pci_id or d.peers or d.pcie_link for d in devices):
            return devices
        ctx = self.context(deadline=max(deadline, time.monotonic() + 1.0))
        placed = keep_known_peers(add_topology(devices, ctx))
        for note in ctx.notes:
            self.log.info("discovery.topology_note", note=note)
        return placed

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
        devices = device_list(devices, "refresh")
        with self._lock:
            return self._refresh(devices)

    def _refresh(self, devices: list[DeviceInfo]) -> list[DeviceInfo]:
        start = time.perf_counter()
        self._host.start_refresh()  # a plugin that overran before is asked again
        passed: dict[Any, list[DeviceInfo]] = {}
        for d in devices:
            passed.setdefault(d.device_id, []).append(d)
        # Per device identity, the plugins' valid answers in call order (the last one wins).
        answers: dict[Any, list[DeviceInfo]] = {}
        for plugin, answer in self._host.each("gpuscout_refresh", devices=tuple(devices)):
            try:
                fresh = checked_devices(answer)
            except GpuscoutError as exc:
                self._host.record_failure(plugin, "gpuscout_refresh", str(exc))
                continue
            for d in fresh:
                originals = passed.get(d.device_id)
                if originals is None:
                    continue  # not asked about (another library's, or an id it changed)
                if not any(_same_identity(o, d) for o in originals):
                    self._host.record_failure(
                        plugin,
                        "gpuscout_refresh",
                        f"{_identity_change(originals[0], d)}; that device is kept, stale",
                    )
                    continue
                answers.setdefault(_identity(d), []).append(d)
        from gpuscout.budgets import keep_budget

        out: list[DeviceInfo] = []
        for d in devices:
            got = answers.get(_identity(d))
            out.append(
                d.evolve(free_memory_stale=True)
                if not got
                else keep_budget(d, got[-1].evolve(free_memory_stale=False))
            )
        stale = [f"{d.library}:{d.id}" for d in out if d.free_memory_stale]
        self.log.debug(
            "refresh.done",
            devices=len(out),
            stale=stale,
            elapsed_ms=round((time.perf_counter() - start) * 1000, 3),
        )
        return out

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

    def plan(
        self,
        layers: Sequence[int],
        devices: Sequence[DeviceInfo],
        system: SystemInfo,
        *,
        num_gpu: int = -1,
        require_full: bool = False,
        spread: bool = False,
        backoff: float = 0.0,
        overhead: int = 0,
        graphs: Mapping[str, int] | None = None,
    ) -> GPULayersList:
        """Place model layers on GPUs by the reference rules (docs LAYOUT.md) -> GPULayersList.

        ``layers`` are bytes per layer (output layer last); every device in ``devices`` counts
        as reported by the runner; ``system`` is a SystemInfo; ``graphs`` maps a device id to its
        graph bytes (absent: 0); ``overhead`` is OLLAMA_GPU_OVERHEAD, ``spread``
        OLLAMA_SCHED_SPREAD, ``backoff`` in [0, 1]. Each device's reserve is
        ``minimum_memory``. Raises InsufficientMemoryError when the layout cannot load (see
        ``gpuscout.plan.verify_layout``; the swap check is skipped when ``platform`` is darwin),
        GpuscoutError for bad arguments. What sits on ``shared_memory`` devices and what stays
        on the CPU draw from one pool (``gpuscout.plan.shared_pool``): never counted twice.
        """
        import gpuscout.plan as planner

        sizes, gpus, table = planner.checked_arguments(
            layers, devices, system, num_gpu, require_full, spread, backoff, overhead, graphs
        )
        return planner.plan(
            sizes,
            gpus,
            system,
            self.minimum_memory,
            num_gpu=num_gpu,
            require_full=require_full,
            spread=spread,
            backoff=float(backoff),
            overhead=overhead,
            graphs=table,
            platform=self.platform,
        )

    def load(
        self,
        memory: BackendMemory,
        devices: Sequence[DeviceInfo],
        system: SystemInfo,
        allocate: Allocate,
        *,
        num_gpu: int = -1,
        require_full: bool = False,
        spread: bool = False,
        overhead: int = 0,
    ) -> LoadResult:
        """The load loop (docs LAYOUT.md step 7, ``gpuscout.load``) with a runner of the host's.

        ``memory`` is the first estimate (weights and cache per layer and device, as ``gpuscout
        fit`` builds it); ``allocate(layout, operation)`` asks the runner to fit, allocate or
        commit a layout (``LoadOperation``) and returns an ``Allocation``: whether it succeeded
        and the ``BackendMemory`` it found it needs. Each report rebuilds the layout, as
        ``plan`` would from it, until it settles, then commits. Returns a ``LoadResult``.
        Raises InsufficientMemoryError when a layout cannot load, GpuscoutError when the runner
        cannot allocate any layout ("memory layout cannot be allocated", also with
        ``num_gpu``), cannot commit, or answers something else than an Allocation; on any
        failure the runner is first asked to release what it holds (``LoadOperation.CLOSE``).
        What ``allocate`` itself raises passes through.
        """
        import gpuscout.load as loader
        import gpuscout.plan as planner
        from gpuscout.memory import BackendMemory

        if not isinstance(memory, BackendMemory):
            raise GpuscoutError(f"load: memory must be a BackendMemory, got {type(memory).__name__}")
        if not callable(allocate):
            raise GpuscoutError(f"load: allocate must be callable, got {type(allocate).__name__}")
        _, gpus, _ = planner.checked_arguments(
            loader.layer_sizes(memory), devices, system, num_gpu, require_full, spread, 0.0, overhead, None
        )
        return loader.load(
            memory,
            gpus,
            system,
            self.minimum_memory,
            allocate,
            num_gpu=num_gpu,
            require_full=require_full,
            spread=spread,
            overhead=overhead,
            platform=self.platform,
        )

    def flash_attention(self, device: DeviceInfo) -> bool:
        """Whether flash attention is safe on one device."""
        device = _device(device, "flash_attention")
        answer = self._host.first("gpuscout_flash_attention", device=device)
        if answer is None:
            return device.library == CPU_LIBRARY
        return bool(answer)

    def fit(
        self,
        model: Any,
        *,
        devices: Sequence[DeviceInfo] | None = None,
        system: SystemInfo | None = None,
        ctx: int | None = None,
        flash_attn: bool | None = None,
        cache_type_k: str = "f16",
        cache_type_v: str = "f16",
        parallel: int = 1,
        ubatch_size: int = 512,
        batch_size: int = 2048,
        swa_full: bool = False,
        mmproj: Any = None,
        num_gpu: int = -1,
        spread: bool = False,
        include_software: bool = False,
        cpu_features: Iterable[str] | None = None,
    ) -> FitResult:
        """Whether ``model`` (a GGUF path or a ``gpuscout.fit.Model``) fits here -> ``FitResult``.

        The memory llama.cpp would allocate with these options (its long option names:
        ``ctx`` is the total context shared by ``parallel`` sequences; ``flash_attn`` None is
        auto: on when every device passes ``flash_attention_supported``), per device, with the
        layers placed by the reference planner on ``devices`` (default: this machine's,
        software devices only with ``include_software``) and the verdict against ``system``
        (default: this machine's). ``cpu_features`` are the CPU's instruction-set flags that
        decide llama.cpp's repacked CPU weights (default: this machine's). Raises ``ModelError``
        for a file that cannot be used, GpuscoutError for bad arguments. See docs/fit.md.
        """
        from gpuscout.fit.placement import checked_options, fit, host_cpu_features

        options = checked_options(
            ctx=ctx,
            parallel=parallel,
            ubatch_size=ubatch_size,
            batch_size=batch_size,
            cache_type_k=cache_type_k,
            cache_type_v=cache_type_v,
            swa_full=swa_full,
            flash_attn=flash_attn,
            num_gpu=num_gpu,
            spread=spread,
        )
        if devices is None or system is None:
            found = self.discover(include_software=include_software)
            devices = found.devices if devices is None else devices
            system = found.system if system is None else system
        devices = device_list(devices, "fit: devices")
        if not isinstance(system, SystemInfo):
            raise GpuscoutError(f"fit: system must be a SystemInfo, got {type(system).__name__}")
        features = host_cpu_features(self.root) if cpu_features is None else cpu_features
        if isinstance(features, (str, bytes)):
            raise GpuscoutError("fit: cpu_features must be a list of flags, not a bare string")
        import attrs

        from gpuscout.budgets import budget_notes

        result = fit(
            model,
            devices,
            system,
            reserve=self.minimum_memory,
            flash_attention=self.flash_attention_supported,
            platform=self.platform,
            options=options,
            flash_attn=flash_attn,
            mmproj=mmproj,
            num_gpu=num_gpu,
            spread=spread,
            cpu_features=features,
        )
        held = budget_notes(devices, result.notes)  # what each device's budget held it to
        return attrs.evolve(result, notes=(*result.notes, *held)) if held else result

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

    def visible_env(self, devices: Sequence[DeviceInfo]) -> dict[str, str]:
        """The seed's GetDevicesEnv: the environment a child needs to see exactly ``devices``.

        Raises ``SelectionRefused`` when a plugin says no environment can do that (CUDA: several
        MIG instances, of which a process enumerates only one); its message says what to do.
        Raises ``GpuscoutError`` for a device whose visible token (``filter_id or id``) is empty
        or holds the list separator ``,``, naming the device and the field.
        """
        devices = device_list(devices, "visible_env")
        if not devices:
            return {}
        for i, d in enumerate(devices):
            # A hand-built record can hold what no plugin may return: an id that hides every
            # device or stands for two.
            problem = visibility_id_problem(d)
            if problem:
                raise GpuscoutError(
                    f"visible_env: device [{i}] ({d.library} {d.id!r:.80}) cannot be made visible: {problem}"
                )
        per_device: list[list[EnvEntry]] = [[] for _ in devices]
        for plugin, answer in self._host.each("gpuscout_visible_env", selection=tuple(devices)):
            bad = [e for e in answer if not 0 <= e[0] < len(devices)]
            if bad:
                self._host.record_failure(
                    plugin, "gpuscout_visible_env", f"entry index out of range: {bad[0]!r}"
                )
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
                        "env.override_conflict",
                        key=key,
                        existing=env[key],
                        new=value,
                        library=device.library,
                        id=device.id,
                    )
                env[key] = value
        for key, value in env.items():
            # What no child environment can hold: refuse it here rather than in the host's exec.
            if not key or "=" in key or "\x00" in key or "\x00" in value:
                raise GpuscoutError(
                    f"visible_env: variable {key!r:.80} = {value!r:.80} cannot be put into an "
                    "environment (an empty name, '=' in the name, or a NUL character)"
                )
        return env

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
        within the CPUs this process may use, with a note (``gpuscout.affinity``). Start the
        child inside ``gpuscout.affinity.pinned(result.cpus)`` (it inherits them), or pass
        ``preexec_fn=lambda: os.sched_setaffinity(0, result.cpus)``; ``cpus`` None means
        leave them as they are (the note says why)."""
        from gpuscout import affinity

        return affinity.for_devices(
            device_list(devices, "cpu_affinity"),
            affinity.allowed_cpus(),
            platform_supported=affinity.supported() and self.platform == "linux",
        )

    def select(
        self, selectors: Sequence[str], include_software: bool = False, isolated: bool = False
    ) -> list[DeviceInfo]:
        """Devices matching ``selectors`` (see ``gpuscout.select``), in rank order, from one
        discovery (``isolated`` as in ``discover``)."""
        from gpuscout.select import select_devices

        discovery = self.discover(include_software=include_software, isolated=isolated)
        return select_devices(self, discovery.devices, selectors)

    def __repr__(self) -> str:
        loaded = [r.name for r in self.reports if r.status is not PluginStatus.DISABLED]
        return f"Scout(platform={self.platform!r}, root={self.root!r}, plugins={loaded!r})"


def _device(value: Any, where: str) -> DeviceInfo:
    if not isinstance(value, DeviceInfo):
        raise GpuscoutError(f"{where}: expected a DeviceInfo, got {type(value).__name__}")
    return value


def _identity(device: DeviceInfo) -> tuple[str, str, str, str]:
    """What a refreshed record must keep: id, library, PCI id and UUID (case ignored)."""
    return device.id, device.library, device.pci_id.lower(), device.uuid.lower()


def _same_identity(a: DeviceInfo, b: DeviceInfo) -> bool:
    return _identity(a) == _identity(b)


def _identity_change(old: DeviceInfo, new: DeviceInfo) -> str:
    """``{library} device {id!r}: pci_id '...' -> '...'``: which identity field a refresh changed."""
    changed = [
        f"{name} {getattr(old, name)!r:.80} -> {getattr(new, name)!r:.80}"
        for name in ("pci_id", "uuid")
        if getattr(old, name).lower() != getattr(new, name).lower()
    ]
    return f"{old.library} device {old.id!r:.80}: changed its {', '.join(changed)}"


__all__ = ["DEFAULT_MINIMUM_MEMORY", "Discovery", "Scout"]
