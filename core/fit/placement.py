"""``Scout.fit``: where a model's layers land, what each device then holds, and whether it fits.

The estimate (``gpuscout.fit.estimate``) gives each layer's bytes and each device's compute
buffer; the reference planner (``gpuscout.plan``) places layers, reserving a graph only on
devices that hold layers (so a small model lands on as few GPUs as it needs); the verdict is
the planner's, with the real system memory.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import attrs

from gpuscout.errors import GpuscoutError
from gpuscout.fit import estimate as est
from gpuscout.fit.hparams import Hparams, read_hparams
from gpuscout.fit.reader import GGUFFile, ModelError, TensorInfo, quant_sizes, read_gguf
from gpuscout.layers import GPULayers, GPULayersList
from gpuscout.memory import BackendMemory, DeviceMemory, InsufficientMemoryError
from gpuscout.records import CPU_LIBRARY, DeviceInfo, SystemInfo

#: ggml backends offload a host weight's operation to a GPU from this many tokens on
#: (ggml-cuda and ggml-vulkan ``offload_op``: batch size >= 32).
OP_OFFLOAD_BATCH = 32
#: Rounds of "plan, then reserve the graphs of the devices that hold layers, plan again".
_ROUNDS = 8


@attrs.frozen
class Model:
    """A read model: its header, hyperparameters and tensors split into layers."""

    file: GGUFFile
    hparams: Hparams
    layers: est.Layers

    @property
    def path(self) -> str:
        """The file it was read from."""
        return self.file.path


def read_model(path: str | os.PathLike[str], *, timeout: float = 30.0) -> Model:
    """Read ``path`` (bounded, see ``gpuscout.fit.reader``); ModelError when it cannot be used."""
    file = read_gguf(path, timeout=timeout)
    hparams = read_hparams(file)
    return Model(file=file, hparams=hparams, layers=est.split_tensors(file, hparams))


@attrs.frozen
class Usage:
    """What one backend holds, in bytes (``weights`` includes, on the CPU, the input weights
    and the repacked copies; ``total`` the output buffer too)."""

    id: str
    library: str
    name: str
    weights: int
    kv_cache: int
    graph: int
    output: int = 0

    @property
    def total(self) -> int:
        """Everything this backend allocates."""
        return self.weights + self.kv_cache + self.graph + self.output


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

    @property
    def total(self) -> int:
        """Bytes over every backend."""
        return sum(u.total for u in self.usage)


def host_cpu_features(root: str = "/") -> frozenset[str]:
    """The instruction-set flags of this machine's CPU (``/proc/cpuinfo`` under ``root``),
    empty where that cannot be read."""
    import platform

    if platform.machine().lower() not in ("x86_64", "amd64"):
        return frozenset()
    try:
        with open(os.path.join(root, "proc/cpuinfo"), "rb") as f:
            head = f.read(1 << 16).decode("ascii", "replace")
    except OSError:
        return frozenset()
    for line in head.splitlines():
        if line.startswith("flags"):
            return frozenset(line.partition(":")[2].split())
    return frozenset()


def _too_big(t_bytes: int, device: DeviceInfo | None) -> bool:
    return device is not None and 0 < getattr(device, "max_allocation", 0) < t_bytes


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
                f"fit: {name} must be a path or a gpuscout.fit.Model, got {type(value).__name__}"
            )
    if not isinstance(model, Model):
        model = read_model(model)
    projector = mmproj if isinstance(mmproj, Model) or mmproj is None else read_projector(mmproj)
    h = model.hparams
    notes = list(h.notes)
    if flash_attn is None:
        flash_attn = flash_attention(devices)
        notes.append(
            f"flash attention auto: {'on' if flash_attn else 'off'} (as llama.cpp decides for these devices)"
        )
    sizes = quant_sizes()
    if options.cache_type_v not in ("f16", "f32", "bf16") and not flash_attn:
        raise ModelError(
            f"--cache-type-v {options.cache_type_v} needs flash attention (llama.cpp: "
            "V cache quantization requires flash_attn)"
        )
    opts = attrs.evolve(options, flash_attn=flash_attn)
    ctx = est.context(h, opts)
    if h.n_ctx_train and ctx.n_ctx_seq > h.n_ctx_train:
        notes.append(
            f"--ctx {ctx.n_ctx_seq} per sequence is more than the model was trained for "
            f"({h.n_ctx_train}); llama.cpp warns of a possible training context overflow"
        )
    kv = est.kv_bytes(h, ctx, opts, sizes)
    g = est.graph(h, ctx, opts)  # the host's (ggml-cpu) phases
    gd = est.graph(h, ctx, opts, device=True)  # a GPU backend's
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
                table[d.id] = _device_graph(gd, mine, n, d, h)
        return table

    layout = _place(layer_sizes, devices, reserve, graphs_for, num_gpu=num_gpu, spread=spread)
    placed = {i for x in layout for i in x.layers}
    cpu_layers = tuple(i for i in range(n + 1) if i not in placed)
    # llama.cpp's make_cpu_buft_list puts a GPU's host buffer type before the CPU's extra
    # (repacking) types, so host weights are repacked only when no GPU device is in use.
    features = frozenset(cpu_features) if not devices else frozenset()
    usage, memory = _account(model, kv, g, gd, ctx, layout, devices, features, tied, projector)
    if any(L_ in cpu_layers for L_ in range(n)) and est.repacked(
        [t for i in cpu_layers if i < n for t in L.tensors_by_block[i]], features
    ):
        notes.append(
            "CPU weights include the CPU_REPACK copies llama.cpp's CPU backend makes of "
            "Q4_0/Q4_K/IQ4_NL/MXFP4 matrices on this CPU (AVX2)"
        )
    fits = _verdict(layout, layer_sizes, devices, system, usage, reserve, platform, num_gpu, notes)
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


def _split(
    g: est.Graph, layers: set[int], n: int, device: DeviceInfo | None, h: Hparams
) -> tuple[list[int], list[int], bool, list[int], bool]:
    """What a device holding ``layers`` runs: (its blocks' attention, their other phase, the head)
    and what falls back to the host: attention whose KQ scores exceed the device's largest
    allocation, and the head when the logits do (ggml's supports_op keeps those ops on the CPU)."""
    blocks = sorted(i for i in layers if i < n)
    moved = [i for i in blocks if _too_big(g.scores[i], device)]
    attention = [i for i in blocks if i not in moved]
    head = n in layers and not _too_big(g.logits, device) and not _too_big(h.n_vocab * 4, device)
    return attention, blocks, head, moved, n in layers and not head


def _device_graph(g: est.Graph, layers: set[int], n: int, device: DeviceInfo | None, h: Hparams) -> int:
    attention, rest, head, _, _ = _split(g, layers, n, device, h)
    return g.on(attention, rest, head)


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
    from gpuscout.plan import create_layout

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


def _account(
    model: Model,
    kv: list[int],
    g: est.Graph,
    gd: est.Graph,
    ctx: est.Context,
    layout: GPULayersList,
    devices: Sequence[DeviceInfo],
    features: frozenset[str],
    tied: int,
    projector: Model | None,
) -> tuple[list[Usage], BackendMemory]:
    """Per backend: weights, cache and graph under ``layout`` (see DESIGN.md's fit figures)."""
    h, L = model.hparams, model.layers
    n = h.n_layer
    by_key = {(d.id, d.library): d for d in devices}
    cpu_w = [0] * (n + 1)
    cpu_c = [0] * (n + 1)
    gpus: list[DeviceMemory] = []
    usage: list[Usage] = []
    on_cpu = set(range(n + 1))
    cpu_head = True
    host_attention: list[int] = []  # blocks whose attention a device leaves to the host
    splits: list[tuple[list[int], list[int], bool]] = []
    mapped: list[TensorInfo] = list(L.input_tensors)  # host tensors served from the mapped file
    for x in layout:
        d = by_key[(x.id, x.library)]
        mine = set(x.layers)
        on_cpu -= mine
        w = [0] * (n + 1)
        c = [0] * (n + 1)
        for i in mine:
            tensors = L.tensors_by_block[i] if i < n else L.output_tensors
            for t in tensors:
                if _too_big(t.nbytes, d):
                    cpu_w[i] += t.nbytes  # stays in host memory (mapped)
                    mapped.append(t)
                else:
                    w[i] += t.nbytes
            if i == n and tied and not _too_big(tied, d):
                w[i] += tied
            if i < n:
                c[i] = kv[i]
        attention, rest, head, moved, head_moved = _split(g, mine, n, d, h)
        splits.append((attention, rest, head))
        host_attention += moved
        if n in mine:
            cpu_head = head_moved
        gpus.append(
            DeviceMemory(
                id=d.id,
                library=d.library,
                name=d.name,
                weights=w,
                cache=c,
                graph=gd.on(attention, rest, head),
            )
        )
    host: list[TensorInfo] = []
    for i in on_cpu:
        tensors = L.tensors_by_block[i] if i < n else L.output_tensors
        host += tensors
        cpu_w[i] += sum(t.nbytes for t in tensors)
        if i < n:
            cpu_c[i] = kv[i]
    if n in on_cpu and tied and L.embedding is not None:
        host.append(L.embedding)  # the tied output: a second tensor over the same file bytes
    repacked = [est.repacked([t], features) for t in host]
    mapped += [t for t, copy in zip(host, repacked, strict=True) if not copy]
    repack = sum(repacked)
    # The CPU's weights are the mapped range plus the repacked copies; what the layers' own
    # bytes do not cover (input weights, gaps, copies) is the input-weights share.
    host_weights = est.mapped_span(mapped) + repack
    cpu_blocks = sorted(i for i in on_cpu if i < n)
    if not gpus and devices and ctx.n_tokens >= OP_OFFLOAD_BATCH:
        # No layer on a GPU, but llama.cpp still opens the first one and offloads to it.
        first = devices[0]
        gpus.append(
            DeviceMemory(
                id=first.id,
                library=first.library,
                name=first.name,
                weights=[0] * (n + 1),
                cache=[0] * (n + 1),
            )
        )
        splits.append(([], [], False))
    if gpus and cpu_blocks and ctx.n_tokens >= OP_OFFLOAD_BATCH:
        # op_offload: with a GPU in use, ggml's scheduler runs a batch's operations on host
        # weights on the first GPU (their weights copied over), so the host keeps only its
        # staging buffer and that GPU's compute buffer covers the host's blocks too.
        d0 = by_key[(gpus[0].id, gpus[0].library)]
        attention, rest, head = splits[0]
        host_attention += [i for i in cpu_blocks if _too_big(g.scores[i], d0)]
        attention = attention + [i for i in cpu_blocks if i not in host_attention]
        moved_head = cpu_head and not _too_big(g.logits, d0) and not _too_big(h.n_vocab * 4, d0)
        graph = gd.on(attention, rest + cpu_blocks, head or moved_head)
        # An offloaded attention of a host block reads that block's K and V from host memory:
        # the scheduler copies them into the GPU's compute buffer for the operation.
        copies = [gd.masks + kv[i] + gd.core[i] for i in cpu_blocks if gd.core[i] and i not in host_attention]
        gpus[0] = attrs.evolve(gpus[0], graph=max([graph, *copies]))
        cpu_head = cpu_head and not moved_head
        cpu_blocks = []
    cpu_graph = g.on(cpu_blocks + host_attention, cpu_blocks, cpu_head)
    if gpus and not cpu_blocks and not host_attention:
        # GPUs run every block: the host still looks up the input embeddings and stages the
        # attention masks it fills for them (llama.cpp's *_Host compute buffer).
        cpu_graph = max(g.masks + g.embeddings, g.host_head if cpu_head else 0)
    if projector is not None and gpus:  # the projector's compute buffer, on the first GPU
        gpus[0] = attrs.evolve(gpus[0], graph=gpus[0].graph + projector_graph(projector))
    cpu = DeviceMemory(library=CPU_LIBRARY, name="CPU", weights=cpu_w, cache=cpu_c, graph=cpu_graph)
    input_weights = max(0, host_weights - sum(cpu_w))
    memory = BackendMemory(input_weights=input_weights, cpu=cpu, gpus=gpus)
    for dm in gpus:
        extra = projector_weights(projector) if projector is not None and dm is gpus[0] else 0
        usage.append(
            Usage(
                id=dm.id,
                library=dm.library,
                name=dm.name,
                weights=sum(dm.weights) + extra,
                kv_cache=sum(dm.cache),
                graph=dm.graph,
            )
        )
    on_host = projector is not None and not gpus
    usage.append(
        Usage(
            id="",
            library=CPU_LIBRARY,
            name="CPU",
            weights=input_weights + sum(cpu_w) + (projector_weights(projector) if on_host else 0),
            kv_cache=sum(cpu_c),
            graph=cpu_graph + (projector_graph(projector) if on_host else 0),
            output=h.n_vocab * ctx.n_seq * 4,
        )
    )
    return usage, memory


def read_projector(path: str | os.PathLike[str]) -> Model:
    """A multimodal projector file (``--mmproj``): read like a model, any architecture."""
    file = read_gguf(path)
    from gpuscout.fit.hparams import architecture

    arch = architecture(file)
    h = Hparams(
        arch=arch,
        n_layer=0,
        n_embd=0,
        n_ctx_train=0,
        n_vocab=0,
        n_head=(),
        n_head_kv=(),
        n_ff=(),
        head_k=0,
        head_v=0,
        head_k_swa=0,
        head_v_swa=0,
        n_swa=0,
        swa=(),
        kv_layers=(),
        recurrent=(),
        mla=False,
        n_embd_r=0,
        n_embd_s=0,
        n_expert=0,
        n_expert_used=0,
        n_ff_exp=0,
    )
    layers = est.Layers(
        blocks=(),
        output=0,
        input=sum(t.nbytes for t in file.tensors),
        tied=False,
        embedding=None,
        tensors_by_block=(),
        output_tensors=(),
    )
    return Model(file=file, hparams=h, layers=layers)


def projector_weights(p: Model | None) -> int:
    """The projector's weights (all its tensors)."""
    return p.layers.input if p is not None else 0


def projector_graph(p: Model | None) -> int:
    """A rough compute buffer for one image: patches x width activations and the attention
    scores (clip.vision.image_size, patch_size, embedding_length, head_count)."""
    if p is None:
        return 0
    v = p.file.values

    def num(key: str, default: int) -> int:
        value = v.get(key, default)
        return int(value) if isinstance(value, int) and not isinstance(value, bool) and value > 0 else default

    image, patch = num("clip.vision.image_size", 224), num("clip.vision.patch_size", 14)
    width, heads = num("clip.vision.embedding_length", 1024), num("clip.vision.attention.head_count", 16)
    patches = min((image // max(patch, 1)) ** 2, 1 << 20)
    return patches * width * 4 * 8 + patches * patches * heads * 4


def _verdict(
    layout: GPULayersList,
    layer_sizes: list[int],
    devices: Sequence[DeviceInfo],
    system: SystemInfo,
    usage: list[Usage],
    reserve: Callable[[DeviceInfo], int],
    platform: str,
    num_gpu: int,
    notes: list[str],
) -> bool:
    """The planner's verdict on the CPU side (verify_layout with the real system memory),
    and every GPU's share within its free memory less its reserve."""
    from gpuscout.plan import verify_layout

    cpu = usage[-1]
    on_gpu = {i for x in layout for i in x.layers}
    unplaced = sum(size for i, size in enumerate(layer_sizes) if i not in on_gpu)
    extra = max(0, cpu.total - unplaced)
    fits = True
    if system.total_memory == 0 and system.free_memory == 0:
        notes.append("system memory unknown: the CPU's share is not checked")
    else:
        try:
            verify_layout(
                layout,
                layer_sizes,
                devices,
                system,
                num_gpu=num_gpu,
                require_full=False,
                graphs=None,
                platform=platform,
                cpu_extra=extra,
            )
        except InsufficientMemoryError:
            fits = False
            notes.append(
                f"the CPU's share ({cpu.total} bytes) is more than free system memory "
                f"({system.free_memory} bytes{' plus swap' if system.free_swap else ''})"
            )
        else:
            fits = shared_verdict(usage, devices, system, platform, notes)
    by_key = {(d.id, d.library): d for d in devices}
    for u in usage[:-1]:
        d = by_key[(u.id, u.library)]
        room = d.usable_free - reserve(d)  # under the device's budget (docs/budgets.md)
        if d.free_memory_unknown:
            # Never used as if it were known (docs/selection.md): the runtime takes the same
            # stand-in figure, so it is the placement's too, but the verdict says so.
            notes.append(
                f"{d.name or d.id}: free memory unknown; placed against the {d.free_memory} "
                "bytes its driver reports instead (what the runtime uses too), so the "
                "verdict may be optimistic"
            )
        if u.total > room:
            fits = False
            notes.append(
                f"{d.name or d.id} needs {u.total} bytes but has {max(room, 0)} free after its reserve"
            )
    return fits


def shared_verdict(
    usage: Sequence[Usage], devices: Sequence[DeviceInfo], system: SystemInfo, platform: str, notes: list[str]
) -> bool:
    """Whether the CPU's share and everything on ``shared_memory`` devices (weights, cache and
    graph) fit the one pool they draw from (``plan.shared_pool``, plus swap off darwin); a note
    when they do not. The planner's check counts layers only; this counts every buffer."""
    from gpuscout.plan import shared_pool

    shared = {(d.id, d.library) for d in devices if d.shared_memory}
    on_shared = sum(u.total for u in usage[:-1] if (u.id, u.library) in shared)
    if not on_shared:
        return True
    pool = shared_pool(devices, system) + (system.free_swap if platform != "darwin" else 0)
    host = usage[-1].total + on_shared
    names = ", ".join(d.name or d.id for d in devices if (d.id, d.library) in shared)
    notes.append(
        f"{names}: memory shared with the system, so what it holds and the CPU's share are "
        f"counted together ({host} of {pool} bytes)"
    )
    if host <= pool:
        return True
    swap = " with swap" if platform != "darwin" and system.free_swap else ""
    notes.append(
        f"the CPU's share plus what sits on shared-memory devices ({host} bytes) is more than "
        f"the system memory they share ({pool} bytes{swap})"
    )
    return False


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
) -> est.Options:
    """Scout.fit's keyword arguments checked (GpuscoutError naming the one that is wrong)."""

    def whole(name: str, value: object, low: int) -> int:
        if type(value) is not int or not low <= value < 1 << 32:
            raise GpuscoutError(f"fit: {name} must be an int from {low} to 2**32-1, got {value!r:.60}")
        return value

    if ctx is not None:
        whole("ctx", ctx, 1)
    for name, value in (("cache_type_k", cache_type_k), ("cache_type_v", cache_type_v)):
        if value not in est.CACHE_TYPES:
            raise GpuscoutError(f"fit: {name} must be one of {', '.join(est.CACHE_TYPES)}, got {value!r:.60}")
    for name, value in (("swa_full", swa_full), ("spread", spread)):
        if not isinstance(value, bool):
            raise GpuscoutError(f"fit: {name} must be a bool, got {value!r:.60}")
    if flash_attn is not None and not isinstance(flash_attn, bool):
        raise GpuscoutError(f"fit: flash_attn must be True, False or None (auto), got {flash_attn!r:.60}")
    if type(num_gpu) is not int or num_gpu < -1:
        raise GpuscoutError(f"fit: num_gpu must be an int >= -1 (-1: auto), got {num_gpu!r:.60}")
    return est.Options(
        ctx=ctx,  # type: ignore[arg-type]
        parallel=whole("parallel", parallel, 1),
        ubatch_size=whole("ubatch_size", ubatch_size, 1),
        batch_size=whole("batch_size", batch_size, 1),
        cache_type_k=str(cache_type_k),
        cache_type_v=str(cache_type_v),
        swa_full=bool(swa_full),
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
