"""What a ``Scout`` does with a model: place its layers (``plan``), run the load loop with a
host's runner (``load``) and say whether a GGUF file fits (``fit``). ``Scout`` inherits these
methods from ``ModelMethods``; the work itself is in ``gpuscout._layout.plan``, ``gpuscout.load`` and
``gpuscout._fit``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from gpuscout._records.device import DeviceInfo, SystemInfo, device_list
from gpuscout._records.layers import GPULayersList
from gpuscout.errors import GpuscoutError

if TYPE_CHECKING:
    from gpuscout._fit.ggml import GgmlDevices
    from gpuscout._fit.placement import FitResult
    from gpuscout._records.memory import BackendMemory
    from gpuscout._records.results import Discovery
    from gpuscout.load import Allocate, LoadResult


class ModelMethods:
    """``Scout``'s model methods; what they use of the Scout is declared here."""

    platform: str
    root: str

    if TYPE_CHECKING:

        def minimum_memory(self, device: DeviceInfo) -> int: ...

        def flash_attention_supported(self, devices: Iterable[DeviceInfo]) -> bool: ...

        def ggml_devices(self, devices: Sequence[DeviceInfo]) -> GgmlDevices: ...

        def discover(
            self, include_software: bool = False, validate: bool = False, isolated: bool = False
        ) -> Discovery: ...

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
        ``gpuscout._layout.plan.verify_layout``; the swap check is skipped when ``platform`` is darwin),
        GpuscoutError for bad arguments. What sits on ``shared_memory`` devices and what stays
        on the CPU draw from one pool (``gpuscout._layout.plan.shared_pool``): never counted twice.
        """
        import gpuscout._layout.plan as planner

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
        import gpuscout._layout.plan as planner
        import gpuscout.load as loader
        from gpuscout._records.memory import BackendMemory

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

    def fit(
        self,
        model: Any,
        *,
        devices: Sequence[DeviceInfo] | None = None,
        system: SystemInfo | None = None,
        ctx: int | str | None = None,
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
        planner: str = "llama.cpp",
        fit_target: int | Sequence[int] | None = None,
        fit_ctx: int = 4096,
        tensor_split: Sequence[float] | None = None,
        override_tensor: Sequence[str] | str | None = None,
        cpu_moe: bool = False,
        n_cpu_moe: int | None = None,
        split_mode: str = "layer",
        model_draft: Any = None,
        no_cpu_offload: bool = False,
        fewest_gpus: bool = False,
        kv_offload: bool = True,
    ) -> FitResult:
        """Whether ``model`` (a GGUF path or a ``gpuscout._fit.Model``) fits here -> ``FitResult``.

        The memory llama.cpp would allocate with these options (its long option names:
        ``ctx`` is the total context shared by ``parallel`` sequences; ``flash_attn`` None is
        auto: on when every device passes ``flash_attention_supported``), per device, with the
        layers placed by the reference planner on ``devices`` (default: this machine's,
        software devices only with ``include_software``) and the verdict against ``system``
        (default: this machine's). ``cpu_features`` are the CPU's instruction-set flags that
        decide llama.cpp's repacked CPU weights (default: this machine's). Raises ``ModelError``
        for a file that cannot be used, GpuscoutError for bad arguments. See docs/fit.md.

        ``ctx="auto"`` (llama.cpp planner) is the largest context, up to the training context,
        whose decision keeps every layer on the devices (or, where none does, still fits).
        ``planner`` ``llama.cpp`` (the default) decides as llama.cpp's ``--fit`` does, on the
        devices a llama.cpp build would use: ``ctx`` None lets it choose the context (down to
        ``fit_ctx``), ``num_gpu`` -1 the layers, and ``fit_target`` (bytes, one value or one
        per device; default 1 GiB) is the margin kept free on each device; ``tensor_split``,
        ``override_tensor`` (``PATTERN=BUFFER`` entries), ``cpu_moe`` and ``n_cpu_moe`` are
        llama.cpp's ``-ts``, ``-ot``, ``-cmoe`` and ``-ncmoe``, kept as given. The result's
        ``args`` and ``env`` run exactly that decision. ``planner="ollama"`` places layers with
        the reference planner (LAYOUT.md) as before. ``no_cpu_offload`` makes anything left on
        the CPU a "does not fit"; ``fewest_gpus`` hands llama.cpp the fewest GPUs that hold
        the model (one NUMA node and NVLink/xGMI peers first).
        """
        from gpuscout._fit.placement import checked_options, fit, host_cpu_features

        auto_ctx = ctx == "auto"
        if auto_ctx and planner != "llama.cpp":
            raise GpuscoutError("fit: ctx='auto' needs the llama.cpp planner")
        options = checked_options(
            ctx=None if auto_ctx else ctx,
            parallel=parallel,
            ubatch_size=ubatch_size,
            batch_size=batch_size,
            cache_type_k=cache_type_k,
            cache_type_v=cache_type_v,
            swa_full=swa_full,
            flash_attn=flash_attn,
            num_gpu=num_gpu,
            spread=spread,
            kv_offload=kv_offload,
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

        from gpuscout._discovery.budgets import budget_notes

        if planner not in ("llama.cpp", "ollama"):
            raise GpuscoutError(f"fit: planner must be 'llama.cpp' or 'ollama', got {planner!r:.60}")
        if planner == "llama.cpp":
            from gpuscout._fit.session import fit_with_llamacpp

            result = fit_with_llamacpp(
                self,
                model,
                devices,
                system,
                options=options,
                flash_attn=flash_attn,
                mmproj=mmproj,
                num_gpu=num_gpu,
                cpu_features=frozenset(features),
                fit_target=fit_target,
                fit_ctx=fit_ctx,
                tensor_split=tensor_split,
                override_tensor=override_tensor,
                cpu_moe=cpu_moe,
                n_cpu_moe=n_cpu_moe,
                split_mode=split_mode,
                model_draft=model_draft,
                no_cpu_offload=no_cpu_offload,
                fewest_gpus=fewest_gpus,
                auto_ctx=auto_ctx,
            )
            held = budget_notes(devices, result.notes)
            return attrs.evolve(result, notes=(*result.notes, *held)) if held else result
        if num_gpu == -2:
            num_gpu = 1 << 31  # llama.cpp's "all": every layer, however many
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


__all__ = ["ModelMethods"]
