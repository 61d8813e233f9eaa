"""``Scout.fit``: where a model's layers land, what each device then holds, and whether it fits.

The estimate (``gpuscout._fit.estimate``) gives each layer's bytes and each device's compute
buffer; the reference planner (``gpuscout._layout.plan``) places layers, reserving a graph only on
devices that hold layers (so a small model lands on as few GPUs as it needs); the verdict is
the planner's, with the real system memory. What each backend then holds is counted in
``gpuscout._fit.usage``, the verdict given in ``gpuscout._fit.verdict``; the model files are read
in ``gpuscout._fit.model`` (their names are importable from here as well).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs

from gpuscout._fit import estimate as est
from gpuscout._fit.errors import ModelError
from gpuscout._fit.hparams import Hparams
from gpuscout._fit.model import Model, read_model, read_projector
from gpuscout._fit.reader import quant_sizes
from gpuscout._fit.usage import Usage, account, device_graph
from gpuscout._fit.verdict import verdict
from gpuscout._records.device import DeviceInfo, SystemInfo
from gpuscout._records.layers import GPULayers, GPULayersList
from gpuscout._records.memory import BackendMemory
from gpuscout.errors import GpuscoutError

#: Rounds of "plan, then reserve the graphs of the devices that hold layers, plan again".
_ROUNDS = 8


@attrs.frozen
class FitResult:
    """The answer to "does this model fit here": sizes, placement, memory per device, verdict."""

    model: Model
    context: est.Context
    flash_attn: bool
    cache_type_k: str
    cache_type_v: str
    placement: GPULayersList
    memory: BackendMemory
    usage: tuple[Usage, ...]
    cpu_layers: tuple[int, ...]
    layer_sizes: tuple[int, ...]
    fits: bool
    notes: tuple[str, ...]
    #: Which planner decided: ``llama.cpp`` (its fit, computed) or ``ollama`` (LAYOUT.md).
    planner: str = "ollama"
    #: The llama.cpp arguments of the decision (``-m``-free), and the variables that make a
    #: child enumerate exactly the devices ``-dev`` names.
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = attrs.field(factory=dict)
    #: How many dry runs (memory estimates) the llama.cpp planner made.
    dry_runs: int = 0
    #: Why llama.cpp's own fit would give up here ("" when it would not): llama-fit-params
    #: exits 1, and ``--print-args`` does too; the arguments are the parameters as they stand.
    gave_up: str = ""

    @property
    def total(self) -> int:
        """Bytes over every backend."""
        return sum(u.total for u in self.usage)

    def to_dict(self) -> dict[str, Any]:
        """The ``gpuscout fit --json`` document of this result (DESIGN.md's fit contract)."""
        m, h = self.model, self.model.hparams
        n = h.n_layer
        blocks = m.layers.blocks
        kv = [self.layer_sizes[i] - blocks[i] for i in range(n)]
        return {
            "model": {
                "path": m.path,
                "architecture": h.arch,
                "blocks": n,
                "layer_weights": list(blocks),
                "output_weights": self.layer_sizes[n],
                "input_weights": m.layers.input,
                # One int, as the document has always said: the largest block's cache bytes.
                "kv_cache_per_layer": max(kv, default=0),
                "graph": max((u.graph for u in self.usage), default=0),
            },
            "placement": [
                {"id": g.id, "backend": g.library, "layers": sorted(g.layers)} for g in self.placement
            ],
            "cpu_layers": list(self.cpu_layers),
            "fits": self.fits,
            "ctx": self.context.n_ctx,
            "flash_attn": self.flash_attn,
            "cache_type_k": self.cache_type_k,
            "cache_type_v": self.cache_type_v,
            "notes": list(self.notes),
            "memory": layout_rows(self),
            "total": self.total,
            "planner": self.planner,
            "args": list(self.args),
            "env": dict(self.env),
            "gave_up": self.gave_up,
        }


def host_cpu_features(root: str = "/") -> frozenset[str]:
    """The instruction-set flags of this machine's CPU (``/proc/cpuinfo`` under ``root``),
    empty where that cannot be read."""
    import platform

    if platform.machine().lower() not in ("x86_64", "amd64"):
        return frozenset()
    from gpuscout._machine.context import Context

    # Through a Context: a recorded root is a read sandbox (no link leads out, no FIFO waits).
    head = Context(env={}, platform="linux", root=root).read_text("/proc/cpuinfo") or ""
    for line in head[: 1 << 16].splitlines():
        if line.startswith("flags"):
            return frozenset(line.partition(":")[2].split())
    return frozenset()


def fit(
    model: Model | str | os.PathLike[str],
    devices: Sequence[DeviceInfo],
    system: SystemInfo,
    *,
    reserve: Callable[[DeviceInfo], int],
    flash_attention: Callable[[Sequence[DeviceInfo]], bool],
    platform: str,
    options: est.Options,
    flash_attn: bool | None = None,
    mmproj: Model | str | os.PathLike[str] | None = None,
    num_gpu: int = -1,
    spread: bool = False,
    cpu_features: Iterable[str] = (),
) -> FitResult:
    """See ``Scout.fit``; ``reserve`` and ``flash_attention`` are the Scout's rules."""
    for name, value in (("model", model), ("mmproj", mmproj)):
        if not (isinstance(value, (Model, str, os.PathLike)) or (name == "mmproj" and value is None)):
            raise GpuscoutError(
                f"fit: {name} must be a path or a gpuscout._fit.Model, got {type(value).__name__}"
            )
    if not isinstance(model, Model):
        model = read_model(model)
    projector = mmproj if isinstance(mmproj, Model) or mmproj is None else read_projector(mmproj)
    h = model.hparams
    notes = list(h.notes)
    sizes = quant_sizes()
    opts = decided_options(options, flash_attn, flash_attention, devices, notes)
    flash_attn = opts.flash_attn
    ctx = est.context(h, opts)
    training_note(h, ctx, notes)
    kv = est.kv_bytes(h, ctx, opts, sizes)
    g = est.graph(h, ctx, opts)  # the host's (ggml-cpu) phases
    gd = est.graph(h, ctx, opts, device=True, float_down=est.float_ffn_down(model.layers))  # a GPU's
    L = model.layers
    tied = L.embedding.nbytes if L.tied and L.embedding is not None else 0
    n = h.n_layer
    # Each layer's cost on a GPU: weights and cache (the tied output's copy on the output layer).
    smallest_cap = min((d.max_allocation for d in devices if getattr(d, "max_allocation", 0)), default=0)
    out_on_gpu = L.output + (tied if not (0 < smallest_cap < tied) else 0)
    layer_sizes = [L.blocks[i] + kv[i] for i in range(n)] + [out_on_gpu]

    def graphs_for(layout: GPULayersList) -> dict[str, int]:
        where = {(x.id, x.library): set(x.layers) for x in layout}
        table = {}
        for d in devices:
            mine = where.get((d.id, d.library), set())
            if mine:
                table[d.id] = device_graph(gd, mine, n, d, h)
        return table

    layout = _place(layer_sizes, devices, reserve, graphs_for, num_gpu=num_gpu, spread=spread)
    placed = {i for x in layout for i in x.layers}
    cpu_layers = tuple(i for i in range(n + 1) if i not in placed)
    # llama.cpp's make_cpu_buft_list puts a GPU's host buffer type before the CPU's extra
    # (repacking) types, so host weights are repacked only when no GPU device is in use.
    features = frozenset(cpu_features) if not devices else frozenset()
    usage, memory = account(model, kv, g, gd, ctx, layout, devices, features, tied, projector)
    if any(L_ in cpu_layers for L_ in range(n)) and est.repacked(
        [t for i in cpu_layers if i < n for t in L.tensors_by_block[i]], features
    ):
        notes.append(
            "CPU weights include the CPU_REPACK copies llama.cpp's CPU backend makes of "
            "Q4_0/Q4_K/IQ4_NL/MXFP4 matrices on this CPU (AVX2)"
        )
    fits = verdict(layout, layer_sizes, devices, system, usage, reserve, platform, num_gpu, notes)
    return FitResult(
        model=model,
        context=ctx,
        flash_attn=flash_attn,
        cache_type_k=opts.cache_type_k,
        cache_type_v=opts.cache_type_v,
        placement=layout,
        memory=memory,
        usage=tuple(usage),
        cpu_layers=cpu_layers,
        layer_sizes=tuple(layer_sizes),
        fits=fits,
        notes=tuple(notes),
    )


def decided_options(
    options: est.Options,
    flash_attn: bool | None,
    flash_attention: Callable[[Sequence[DeviceInfo]], bool],
    devices: Sequence[DeviceInfo],
    notes: list[str],
) -> est.Options:
    """``options`` with flash attention decided (auto: as llama.cpp decides for ``devices``,
    said in ``notes``); ModelError for a quantized V cache without it, as llama.cpp refuses."""
    if flash_attn is None:
        flash_attn = flash_attention(devices)
        notes.append(
            f"flash attention auto: {'on' if flash_attn else 'off'} (as llama.cpp decides for these devices)"
        )
    if options.cache_type_v not in ("f16", "f32", "bf16") and not flash_attn:
        raise ModelError(
            f"--cache-type-v {options.cache_type_v} needs flash attention (llama.cpp: "
            "V cache quantization requires flash_attn)"
        )
    return attrs.evolve(options, flash_attn=flash_attn)


def training_note(h: Hparams, ctx: est.Context, notes: list[str]) -> None:
    """A note when the context per sequence passes the training context (llama.cpp warns)."""
    if h.n_ctx_train and ctx.n_ctx_seq > h.n_ctx_train:
        notes.append(
            f"--ctx {ctx.n_ctx_seq} per sequence is more than the model was trained for "
            f"({h.n_ctx_train}); llama.cpp warns of a possible training context overflow"
        )


def _place(
    layer_sizes: list[int],
    devices: Sequence[DeviceInfo],
    reserve: Callable[[DeviceInfo], int],
    graphs_for: Callable[[GPULayersList], dict[str, int]],
    *,
    num_gpu: int,
    spread: bool,
) -> GPULayersList:
    """The reference layout, graphs reserved on the devices that hold layers (rebuilt until
    the devices in use stop changing).

    A forced ``num_gpu`` = N is llama.cpp's ``-ngl N`` (``llama_model::load_tensors``: layers
    from n_layer + 1 - N on, the output layer first): those last N layers are placed, all of
    them, by the planner (forced, so a GPU may be overfilled: the verdict then says so), on the
    discrete devices while they can take them, integrated ones only if they cannot.
    """
    from gpuscout._layout.plan import create_layout

    first = 0
    sizes = layer_sizes
    if num_gpu >= 0:
        first = max(0, len(layer_sizes) - num_gpu)
        sizes = layer_sizes[first:]

    def layout_on(candidates: Sequence[DeviceInfo]) -> GPULayersList:
        graphs: dict[str, int] = {}
        seen: list[dict[str, int]] = []
        layout = GPULayersList()
        for _ in range(_ROUNDS):
            placed = create_layout(
                sizes,
                candidates,
                reserve,
                num_gpu=len(sizes) if num_gpu >= 0 else -1,
                spread=spread,
                graphs={k: v for k, v in graphs.items()},
            )
            layout = GPULayersList(GPULayers(x.id, x.library, [i + first for i in x.layers]) for x in placed)
            new = graphs_for(layout)
            if new == graphs or new in seen:
                break
            seen.append(graphs)
            graphs = new
        return layout

    if not devices or not sizes:
        return GPULayersList()
    if num_gpu >= 0:
        discrete = [d for d in devices if not d.integrated]
        if discrete and len(discrete) < len(devices):
            on_discrete = layout_on(discrete)
            if on_discrete.sum() >= len(sizes):
                return on_discrete
    return layout_on(devices)


def checked_options(
    *,
    ctx: object,
    parallel: object,
    ubatch_size: object,
    batch_size: object,
    cache_type_k: object,
    cache_type_v: object,
    swa_full: object,
    flash_attn: object,
    num_gpu: object,
    spread: object,
    kv_offload: object = True,
) -> est.Options:
    """Scout.fit's keyword arguments checked (GpuscoutError naming the one that is wrong)."""

    def whole(name: str, value: object, low: int) -> int:
        if type(value) is not int or not low <= value < 1 << 32:
            raise GpuscoutError(f"fit: {name} must be an int from {low} to 2**32-1, got {value!r:.60}")
        return value

    if ctx is not None:
        whole("ctx", ctx, 0)
    for name, value in (("cache_type_k", cache_type_k), ("cache_type_v", cache_type_v)):
        if value not in est.CACHE_TYPES:
            raise GpuscoutError(f"fit: {name} must be one of {', '.join(est.CACHE_TYPES)}, got {value!r:.60}")
    for name, value in (("swa_full", swa_full), ("spread", spread), ("kv_offload", kv_offload)):
        if not isinstance(value, bool):
            raise GpuscoutError(f"fit: {name} must be a bool, got {value!r:.60}")
    if flash_attn is not None and not isinstance(flash_attn, bool):
        raise GpuscoutError(f"fit: flash_attn must be True, False or None (auto), got {flash_attn!r:.60}")
    if type(num_gpu) is not int or num_gpu < -2:
        raise GpuscoutError(f"fit: num_gpu must be an int >= -2 (-1: auto, -2: all), got {num_gpu!r:.60}")
    return est.Options(
        ctx=ctx,  # type: ignore[arg-type]
        parallel=whole("parallel", parallel, 1),
        ubatch_size=whole("ubatch_size", ubatch_size, 1),
        batch_size=whole("batch_size", batch_size, 1),
        cache_type_k=str(cache_type_k),
        cache_type_v=str(cache_type_v),
        swa_full=bool(swa_full),
        kv_offload=bool(kv_offload),
    )


def layout_rows(result: FitResult) -> list[dict[str, Any]]:
    """The ``memory`` list of ``fit --json``: each device that holds anything, then the CPU."""
    return [
        {
            "id": u.id,
            "backend": u.library,
            "weights": u.weights,
            "kv_cache": u.kv_cache,
            "graph": u.graph,
            "total": u.total,
        }
        for u in result.usage
    ]


__all__ = [
    "FitResult",
    "Model",
    "Usage",
    "checked_options",
    "fit",
    "host_cpu_features",
    "layout_rows",
    "read_model",
    "read_projector",
]
