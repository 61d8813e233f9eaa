"""What llama.cpp would allocate per device for one set of its parameters: the memory oracle of
the llama.cpp planner (``gpuscout._fit.llamacpp``), standing where llama.cpp's fit makes a dry run
(``common/fit.cpp`` ``common_get_device_memory_data_impl``: a no-alloc load, then
``llama_get_memory_breakdown``).

The parameters are the ones that fit changes: the context, ``n_gpu_layers``, the tensor split
and the tensor buffer-type overrides. Which device holds which layer follows
``src/llama-model.cpp`` ``llama_model_base::load_tensors``: layers from ``n_layer + 1 -
n_gpu_layers`` on, the output layer counted as layer ``n_layer``, each on the device whose share
of the cumulative split first exceeds its position (``std::upper_bound``), in 32-bit floats as
llama.cpp computes them; with no split given, the shares are the devices' free memory. An
override's pattern is searched in each tensor's name (``llama_model_loader``'s
``std::regex_search``; the first matching override wins).
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable, Mapping, Sequence

import attrs

from gpuscout._fit import estimate as est
from gpuscout._fit.model import Model, projector_graph, projector_weights
from gpuscout._fit.usage import Usage, account, too_big
from gpuscout._records.device import DeviceInfo
from gpuscout._records.layers import GPULayers, GPULayersList
from gpuscout._records.memory import BackendMemory

#: Where an override sends a tensor: a device's position in the planner's list, or the CPU.
CPU = None
#: GGML_SCHED_MAX_COPIES: under pipeline parallelism ggml's scheduler keeps this many copies of
#: every split input for the whole graph (``Oracle._pipeline``).
COPIES = 4


def f32(x: float) -> float:
    """``x`` rounded to a C ``float``, as llama.cpp keeps its split points."""
    return float(struct.unpack("f", struct.pack("f", x))[0])


@attrs.frozen
class Config:
    """The llama.cpp parameters a fit varies (``-c``, ``-ngl``, ``-ts``, ``-ot``)."""

    n_ctx: int
    n_gpu_layers: int = -1
    tensor_split: tuple[float, ...] = ()
    overrides: tuple[tuple[str, int | None], ...] = ()


@attrs.frozen
class Measured:
    """One dry run's answer: per device and for the host, what llama.cpp's memory breakdown
    says (model + context + compute, bytes), with the usage rows behind it."""

    devices: tuple[int, ...]
    models: tuple[int, ...]
    host: int
    usage: tuple[Usage, ...]
    memory: BackendMemory
    layout: GPULayersList
    context: est.Context
    moved: tuple[str, ...]
    #: ``-fa auto`` turned off by llama.cpp for this placement (``Oracle.fa_off``).
    fa_off: bool = False


def layer_devices(
    n_layer: int, n_gpu_layers: int, split: Sequence[float], free: Sequence[int]
) -> list[int | None]:
    """For layers 0..n_layer (the last is the output layer): the index of the device that holds
    it, None for the CPU (``load_tensors``' ``get_layer_buft_list``)."""
    nd = len(free)
    ngl = n_gpu_layers if n_gpu_layers >= 0 else n_layer + 1
    if nd == 0:
        return [None] * (n_layer + 1)
    shares = [f32(float(x)) for x in split[:nd]] + [0.0] * max(0, nd - len(split))
    if all(x == 0.0 for x in shares):
        shares = [f32(float(x)) for x in free]
    points, total = [], 0.0
    for x in shares:
        total = f32(total + x)
        points.append(total)
    if total <= 0.0:  # every device reports 0 free: llama.cpp would divide by zero; all on the first
        points = [1.0] * nd
    else:
        points = [f32(p / total) for p in points]
    start = max(n_layer + 1 - ngl, 0)
    active = min(ngl, n_layer + 1)
    out: list[int | None] = []
    for il in range(n_layer + 1):
        if il < start or il - start >= active:
            out.append(None)
            continue
        value = f32(f32(float(il - start)) / f32(float(active)))
        index = next((k for k, p in enumerate(points) if p > value), nd - 1)
        out.append(index)
    return out


class Oracle:
    """Measures configurations of one model on one device list (the planner's dry runs)."""

    def __init__(
        self,
        model: Model,
        devices: Sequence[DeviceInfo],
        free: Sequence[int],
        options: est.Options,
        sizes: Mapping[int, tuple[int, int]],
        *,
        projector: Model | None = None,
        cpu_features: frozenset[str] = frozenset(),
        extra: Oracle | None = None,
        fa_auto: bool = False,
        host_scan: frozenset[tuple[str, str]] = frozenset(),
    ) -> None:
        self.model = model
        self.devices = list(devices)
        self.free = list(free)
        self.options = options
        self.sizes = sizes
        self.projector = projector
        self.features = cpu_features if not devices else frozenset()
        self.calls = 0
        #: A second model on the same devices (a draft model): its memory at the same context
        #: is added to every measurement (``common_fit_extra_model``).
        self.extra = extra
        #: ``-fa auto`` resolved to on: llama.cpp may still turn it off per dry run (``fa_off``).
        self.fa_auto = fa_auto and options.flash_attn and options.cache_type_v in ("f16", "f32", "bf16")
        #: The (id, library) of the devices whose backend refuses the model's recurrent scan
        #: (``gpuscout_ggml_supports_op``): ggml's scheduler runs it on the host (``_pipeline``).
        self.host_scan = host_scan
        self._extra: dict[int, Measured] = {}
        self._ctx: dict[tuple[int, bool], tuple[est.Context, list[int], est.Graph, est.Graph]] = {}
        h = model.hparams
        self._names = [[t.name for t in ts] for ts in model.layers.tensors_by_block]
        self._n = h.n_layer

    def context(
        self, n_ctx: int, fa_off: bool = False
    ) -> tuple[est.Context, list[int], est.Graph, est.Graph]:
        """The padded context, the cache per block and the host's and a GPU's graph parts
        (``fa_off``: with flash attention turned off)."""
        if (n_ctx, fa_off) not in self._ctx:
            o = attrs.evolve(self.options, ctx=n_ctx)
            if fa_off:
                o = attrs.evolve(o, flash_attn=False)
            ctx = est.context(self.model.hparams, o)
            kv = est.kv_bytes(self.model.hparams, ctx, o, self.sizes)
            g = est.graph(self.model.hparams, ctx, o)
            gd = est.graph(
                self.model.hparams, ctx, o, device=True, float_down=est.float_ffn_down(self.model.layers)
            )
            self._ctx[(n_ctx, fa_off)] = (ctx, kv, g, gd)
        return self._ctx[(n_ctx, fa_off)]

    def fa_off(self, where: Sequence[int | None]) -> bool:
        """Whether ``-fa auto`` resolves to off for this placement. llama.cpp
        (src/llama-context.cpp ``resolve_fused_ops``) reserves a one-token graph and turns flash
        attention off when a layer's FLASH_ATTN_EXT is scheduled on another device than the
        layer. A host attention block followed by a recurrent-only block on a GPU is such a
        case: the recurrent block's state copies are the next nodes of the graph after that
        attention (they read none of its output), they run where their state is, and ggml's
        scheduler (ggml-backend.cpp ``ggml_backend_sched_split_graph``, "expand gpu up")
        hands the unassigned attention to that GPU (measured with llama-fit-params on
        granitehybrid: -ngl 19 of hybrid24, -ngl 4 of the small one; dense, MoE, mamba2 and
        falcon-h1's parallel blocks keep it on)."""
        if not self.fa_auto or not self.options.kv_offload:
            return False
        h = self.model.hparams
        for i in range(h.n_layer - 1):
            if (
                where[i] is None
                and h.kv_layers[i]
                and where[i + 1] is not None
                and h.recurrent[i + 1]
                and not h.kv_layers[i + 1]
            ):
                return True
        return False

    def moved(self, overrides: Sequence[tuple[str, int | None]]) -> dict[str, int | None]:
        """Tensor name -> where the first override whose pattern it matches sends it."""
        if not overrides:
            return {}
        compiled: list[tuple[Callable[[str], object], int | None]] = [
            (re.compile(p).search, target) for p, target in overrides
        ]
        out: dict[str, int | None] = {}
        for names in self._names:
            for name in names:
                for search, target in compiled:
                    if search(name):
                        out[name] = target
                        break
        return out

    def _pipeline(
        self, usage: list[Usage], layout: GPULayersList, ctx: est.Context, gd: est.Graph, kv: Sequence[int]
    ) -> list[Usage]:
        """Pipeline parallelism (``llama_context``: several devices, every layer offloaded, layer
        split, no overrides): ggml's scheduler keeps GGML_SCHED_MAX_COPIES (4) copies of each
        split's inputs, so each backend's compute buffer holds three more copies of the
        attention masks it reads and of the activations crossing into it (fitted to llama.cpp's
        breakdown on lavapipe: eight rows of n_embd per ubatch token, five more on the first
        device with layers, which takes the embeddings from the host)."""
        h = self.model.hparams
        t = ctx.n_tokens
        row = h.n_embd * t * est.F32
        per_cell = 2 if self.options.flash_attn else est.F32

        by_device = {(d.id, d.library): d for d in self.devices}

        def left(i: int, key: tuple[str, str] | None) -> bool:
            """Whether block ``i``'s attention, on device ``key``, runs on the host instead: its
            KQ scores exceed that device's largest allocation."""
            return too_big(gd.scores[i], by_device.get(key) if key else None)

        def masks(layers: Sequence[int], key: tuple[str, str] | None = None) -> int:
            """The masks of the attention ``layers`` run on device ``key`` (None: the host):
            not those whose KQ scores exceed its largest allocation, which run on the host."""
            kinds = {h.swa[i] for i in layers if i < h.n_layer and h.kv_layers[i] and not left(i, key)}
            return sum(
                (ctx.swa_cells if swa else ctx.full_cells) // ctx.n_seq * t * per_cell for swa in kinds
            )

        extra: dict[tuple[str, str], int] = {}
        first = True
        by_key = {(u.id, u.library): u for u in usage[:-1]}
        head = h.n_vocab * t * est.F32 + row  # the head phase of the output GPU after the first
        for x in layout:
            if x.layers:
                key = (x.id, x.library)
                extra[key] = 3 * masks(x.layers, key) + 8 * row + (5 * row if first else 0)
                if not first and h.n_layer in x.layers and key in by_key and by_key[key].graph == head:
                    # its peak is the head, whose one input row is copied four times (llama-wide
                    # -ngl 7 -ts 6,1: Vulkan1 72.50 MiB = 62.5 of logits + 2 + 8); where it
                    # runs attention too, the masks are split inputs that live through the
                    # graph, so the logits sit on them and their four copies, with eight rows
                    # (-ts 4,3: 96.55 MiB at -c 4096, 144.55 at 16384 = 64.5 + 4 x 4 or 16 + 16;
                    # tests/data/fit_plan/pp_head.json)
                    held = masks(x.layers, key)
                    extra[key] = COPIES * held + 8 * row if held else COPIES * row
                first = False
        # A recurrent block on a device whose backend refuses its scan: the scan runs on the
        # host, its inputs (the state and the x, B, C views, each spanning the xBC rows, and dt)
        # copied there and its outputs (y and the new state) copied back, and under pipeline
        # parallelism every split input is kept GGML_SCHED_MAX_COPIES times for the whole graph
        # (ggml-backend.cpp ggml_backend_sched_split_graph: the copies are inputs and outputs,
        # "prevent ggml-alloc from overwriting", added as leafs). falcon-h1 (d_state 64) on two
        # lavapipe devices, -ts 4,1: Vulkan0 78.61 MiB against 44.8 without them; ssm_pp.json.
        state = h.n_embd_s * est.F32 * ctx.n_seq
        xbc_width, projection_width = est.ssm_widths(h)
        xbc = xbc_width * t * est.F32
        back = COPIES * (h.ssm_inner * t * est.F32 + state)  # y and the new state, per block
        sent = COPIES * (state + 3 * xbc + h.ssm_heads * t * est.F32)
        scans = 0
        for x in layout:
            key = (x.id, x.library)
            if key in self.host_scan:
                mine = sum(1 for i in x.layers if i < h.n_layer and h.recurrent[i] and h.ssm_inner)
                extra[key] = extra.get(key, 0) + mine * back
                scans += mine
        # A device whose first block is recurrent-only after a recurrent-only block elsewhere:
        # that block's state copies come early in the graph, and ggml's scheduler gives the
        # previous block's weightless tail (the CONT of z, a view of the input projection) their
        # backend, so the projection is copied over and z back, four times each
        # (GGML_SCHED_DEBUG on mamba2-24 -ngl 25 -ts 12,13: Vulkan1 16 MiB in, Vulkan0 8 MiB).
        where = {i: (x.id, x.library) for x in layout for i in x.layers}
        projection = projection_width * t * est.F32
        for j in range(1, h.n_layer):
            here, before = where.get(j), where.get(j - 1)
            only = all(h.recurrent[k] and not h.kv_layers[k] for k in (j - 1, j))  # no attention
            if here and before and here != before and only and h.ssm_inner:
                extra[here] = extra.get(here, 0) + COPIES * projection
                extra[before] = extra.get(before, 0) + COPIES * h.ssm_inner * t * est.F32
        # A device's attention whose KQ scores exceed its largest allocation runs on the host
        # (``usage.split_ops``): the block's Q and its K and V cache are inputs of a host split and
        # its output one of the device's, each kept COPIES times (qwen3 at -c 8192 -ub 1024
        # -fa off on three lavapipe devices, -ts 0,0,1: Vulkan2 122 MiB, the host 740).
        sent_home = 0
        for x in layout:
            key = (x.id, x.library)
            for i in x.layers:
                if i < h.n_layer and h.kv_layers[i] and left(i, key):
                    swa = h.swa[i]
                    q = h.n_head[i] * (h.head_k_swa if swa else h.head_k) * t * est.F32
                    sent_home += COPIES * (q + kv[i])
                    out_v = h.n_head[i] * (h.head_v_swa if swa else h.head_v) * t * est.F32
                    extra[key] = extra.get(key, 0) + COPIES * out_v
        out = [attrs.evolve(u, graph=u.graph + extra.get((u.id, u.library), 0)) for u in usage[:-1]]
        everything = [i for x in layout for i in x.layers]
        host = usage[-1]
        more = 3 * masks(everything) + 6 * row + scans * sent + sent_home
        return [*out, attrs.evolve(host, graph=host.graph + more)]

    def measure(self, config: Config) -> Measured:
        """What llama.cpp's breakdown would say for ``config`` (one dry run)."""
        self.calls += 1
        model, n = self.model, self._n
        L = model.layers
        where = layer_devices(n, config.n_gpu_layers, config.tensor_split, self.free)
        fa_off = self.fa_off(where)
        ctx, kv, g, gd = self.context(config.n_ctx, fa_off)
        layout = GPULayersList(
            GPULayers(d.id, d.library, [i for i, w in enumerate(where) if w == k])
            for k, d in enumerate(self.devices)
        )
        moved = self.moved(config.overrides)
        tied = L.embedding.nbytes if L.tied and L.embedding is not None else 0
        usage, memory = account(
            model,
            kv,
            g,
            gd,
            ctx,
            layout,
            self.devices,
            self.features,
            tied,
            None,
            moved,
            self.options.kv_offload,
        )
        ngl = config.n_gpu_layers if config.n_gpu_layers >= 0 else n + 1
        if len(self.devices) > 1 and ngl > n and not config.overrides and self.options.kv_offload:
            usage = self._pipeline(usage, layout, ctx, gd, kv)
        by_key = {(u.id, u.library): u for u in usage[:-1]}
        totals, models = [], []
        for k, d in enumerate(self.devices):
            u = by_key.get((d.id, d.library))
            weights = u.weights if u is not None else 0
            total = (u.weights + u.kv_cache + u.graph) if u is not None else 0
            if k == 0 and self.projector is not None:
                # gpuscout reserves the projector on the first device before placing layers
                # (llama.cpp's fit leaves it out: llama.cpp issue 18111).
                weights += projector_weights(self.projector)
                total += projector_weights(self.projector) + projector_graph(self.projector)
            totals.append(total)
            models.append(weights)
        host = usage[-1]
        host_total = host.weights + host.kv_cache + host.graph + host.output
        if self.extra is not None:
            if config.n_ctx not in self._extra:
                self._extra[config.n_ctx] = self.extra.measure(Config(config.n_ctx))
            more = self._extra[config.n_ctx]
            totals = [a + b for a, b in zip(totals, more.devices, strict=True)]
            models = [a + b for a, b in zip(models, more.models, strict=True)]
            host_total += more.host
        return Measured(
            devices=tuple(totals),
            models=tuple(models),
            host=host_total,
            usage=tuple(usage),
            memory=memory,
            layout=layout,
            context=ctx,
            moved=tuple(sorted(moved)),
            fa_off=fa_off,
        )


__all__ = ["CPU", "Config", "Measured", "Oracle", "f32", "layer_devices"]
