"""Rules of ``gpuscout._fit.usage.account`` found by mutmut's survivors (tests/MUTATION.md,
"Seventh mutmut round").

``account`` is what each backend holds under a layout. tests/fit/test_fit_accuracy.py and
test_fit_compute_rules.py check its figures against llama.cpp's reports but are outside the
round's selection (time); each test here calls ``account`` directly on a small model built in
memory and checks the whole answer (every Usage and the BackendMemory), so a rule of the
function that changes any figure, name or list fails it. The graph parts (``est.graph``) are
tested in test_mutmut_gaps_7_estimate.py; here they are read from the graphs ``account`` is
given, and the rule is how ``account`` adds them up.

A docstring's last line names the first run's survivors the test fails on, each mutant planted
alone through mutmut's trampoline (``MUTANT_UNDER_TEST``, mutants/ on sys.path); tests share
some of them.

The model is test_mutmut_gaps_2's small llama (2 blocks of n_embd 64, 4 heads, 2 KV heads of
16, n_ff 256, n_vocab 1000) with the tensors below, laid out in the file in this order from
offset 0 (so a mapped span is a sum of consecutive sizes).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from gpuscout import DeviceInfo
from gpuscout._fit import estimate as est
from gpuscout._fit.hparams import Hparams
from gpuscout._fit.model import Model, projector_graph
from gpuscout._fit.reader import GGUFFile, TensorInfo, quant_sizes
from gpuscout._fit.usage import Usage, account
from gpuscout._records.device import CPU_LIBRARY
from gpuscout._records.layers import GPULayers, GPULayersList
from gpuscout._records.memory import BackendMemory, DeviceMemory
from gpuscout.sizes import GIB, MIB
from tests.test_mutmut_gaps_2 import hparams

F32, Q4_0 = 0, 2
EMBD = 64_000
#: block i's tensors: (name, bytes); the feed-forward's input projections are gate and up.
BLOCK = (("attn_q", 1000), ("ffn_gate", 2000), ("ffn_up", 3000), ("ffn_down", 4000))
OUT = 50_000
OUT_NORM = 256


def tensors(
    *, output: bool = True, big: Mapping[str, int] | None = None, kind: int = F32, blocks: int = 2
) -> list[tuple[str, int, int]]:
    """(name, bytes, type) in file order; ``big`` overrides a tensor's bytes by name."""
    big = big or {}
    out: list[tuple[str, int, int]] = [("token_embd.weight", EMBD, kind)]
    for i in range(blocks):
        out += [(f"blk.{i}.{n}.weight", b + 100 * i, kind) for n, b in BLOCK]
    out.append(("output_norm.weight", OUT_NORM, F32))
    if output:
        out.append(("output.weight", OUT, kind))
    return [(n, big.get(n, b), k) for n, b, k in out]


def gguf(items: Sequence[tuple[str, int, int]], values: Mapping[str, Any] | None = None) -> GGUFFile:
    infos, offset = [], 0
    for name, nbytes, kind in items:
        infos.append(TensorInfo(name=name, shape=(64, 64), type=kind, offset=offset, nbytes=nbytes))
        offset += nbytes
    return GGUFFile(
        path="m.gguf",
        version=3,
        alignment=32,
        data_offset=0,
        file_size=offset,
        values=dict(values or {}),
        types={},
        skipped={},
        tensors=tuple(infos),
        offsets={},
    )


def model(h: Hparams | None = None, **kw: Any) -> Model:
    h = h or hparams()
    f = gguf(tensors(blocks=h.n_layer, **kw))
    return Model(file=f, hparams=h, layers=est.split_tensors(f, h))


def projector() -> Model:
    f = gguf([("mm.0.weight", 7000, F32)])
    return Model(file=f, hparams=hparams(n_layer=0), layers=est.split_tensors(f, hparams(n_layer=0)))


def gpu(i: int, free: int = 20 * GIB, max_allocation: int = 0) -> DeviceInfo:
    return DeviceInfo(
        id=f"GPU-{i}",
        library="CUDA",
        name=f"CUDA{i}",
        total_memory=24 * GIB,
        free_memory=free,
        max_allocation=max_allocation,
    )


def on(*pairs: tuple[DeviceInfo, list[int]]) -> GPULayersList:
    return GPULayersList([GPULayers(id=d.id, library=d.library, layers=layers) for d, layers in pairs])


@attrs.frozen
class Run:
    usage: list[Usage]
    memory: BackendMemory
    g: est.Graph
    gd: est.Graph
    kv: list[int]
    ctx: est.Context


def run(
    m: Model,
    layout: GPULayersList,
    devices: Sequence[DeviceInfo],
    *,
    features: frozenset[str] = frozenset(),
    mmproj: Model | None = None,
    moved: Mapping[str, int | None] | None = None,
    kv_offload: bool = True,
    **options: Any,
) -> Run:
    h = m.hparams
    o = est.Options(**({"ctx": 4096} | options))
    c = est.context(h, o)
    kv = est.kv_bytes(h, c, o, quant_sizes())
    g = est.graph(h, c, o)
    gd = est.graph(h, c, o, device=True, float_down=est.float_ffn_down(m.layers))
    L = m.layers
    tied = L.embedding.nbytes if L.tied and L.embedding is not None else 0
    usage, memory = account(m, kv, g, gd, c, layout, devices, features, tied, mmproj, moved, kv_offload)
    return Run(usage, memory, g, gd, kv, c)


def block(i: int) -> int:
    return sum(b + 100 * i for _, b in BLOCK)


KV = 4096 * (32 + 32) * 2  # one block's f16 K and V at -c 4096
CPU = {"id": "", "library": CPU_LIBRARY, "name": "CPU"}


def cpu_usage(weights: int, kv: int, graph: int, n_seq: int = 1, n_vocab: int = 4000) -> Usage:
    return Usage(**CPU, weights=weights, kv_cache=kv, graph=graph, output=n_vocab * n_seq * 4)


def gpu_usage(d: DeviceInfo, weights: int, kv: int, graph: int) -> Usage:
    return Usage(id=d.id, library=d.library, name=d.name, weights=weights, kv_cache=kv, graph=graph)


def memory(d: DeviceInfo, weights: Sequence[int], cache: Sequence[int], graph: int) -> DeviceMemory:
    return DeviceMemory(id=d.id, library=d.library, name=d.name, weights=weights, cache=cache, graph=graph)


# -- the whole model on the host -------------------------------------------------------------------


def test_a_model_on_the_host_alone_maps_the_file_and_holds_the_projector_and_the_output() -> None:
    """Without GPUs everything is the CPU's: each layer's weights (blocks, output) and cache, the
    input layer as what the mapped file range adds to them (here the token embeddings), the graph
    of every block and the head (``g.on``), the projector's weights and compute buffer (there is
    no GPU to hold them), and the output buffer of n_vocab floats per sequence (two with
    --parallel 2). The CPU's Usage is named "CPU" with the cpu library and no id. With n_vocab
    4000 the head's logits (8192000 bytes) go on top of the masks, with HEAD_ROWS rows.
    Kills gpuscout._fit.usage.x_account__mutmut_16, _18, _23, _31, _32, _249, _443, _476, _477,
    _479.._485, _492, _494, _498, _499, _533, _544, _546, _547, _556, _557, _559, _563."""
    p = projector()
    for parallel in (1, 2):
        r = run(model(hparams(n_vocab=4000)), GPULayersList(), [], mmproj=p, parallel=parallel)
        c = r.ctx
        kv = [r.kv[0], r.kv[1], 0]
        weights = [block(0), block(1), OUT_NORM + OUT]
        graph = r.g.on([0, 1], [0, 1], True)
        assert graph == r.g.masks + r.g.logits + r.g.head_rest
        assert r.memory == BackendMemory(
            input_weights=EMBD,
            cpu=DeviceMemory(library=CPU_LIBRARY, name="CPU", weights=weights, cache=kv, graph=graph),
            gpus=(),
        )
        assert r.usage == [
            cpu_usage(EMBD + sum(weights) + 7000, sum(kv), graph + projector_graph(p), n_seq=c.n_seq)
        ]
    assert r.ctx.n_seq == 2 and r.kv[0] == KV


def test_a_model_without_input_tensors_has_no_input_weights() -> None:
    """The input-weights share is what the mapped range holds beyond the layers' own bytes; a
    model whose only host tensors are its layers' has none (0, not a byte).
    Kills gpuscout._fit.usage.x_account__mutmut_16, _231, _491, _492, _494."""
    h = hparams()
    f = gguf([(n, b, k) for n, b, k in tensors() if n != "token_embd.weight"])
    m = Model(file=f, hparams=h, layers=est.split_tensors(f, h))
    r = run(m, GPULayersList(), [])
    assert r.memory.input_weights == 0
    assert r.usage[0].weights == block(0) + block(1) + OUT_NORM + OUT


def test_a_tied_output_on_the_host_is_repacked_as_a_second_tensor() -> None:
    """Without output.weight the head reads the token embeddings (tied). On the host that output
    is a second tensor over the same file bytes: it adds nothing to the mapped range, but with
    AVX2 a Q4_0 one gets its CPU_REPACK copy like any host matrix (the embeddings as an input
    layer are not repacked). With every tensor Q4_0, the CPU's weights are the file plus the
    repacked copies of the two blocks and of the tied output.
    Kills gpuscout._fit.usage.x_account__mutmut_16, _230.._234, _249, _492, _494, _498."""
    m = model(output=False, kind=Q4_0)
    r = run(m, GPULayersList(), [], features=frozenset({"avx2"}))
    file = EMBD + block(0) + block(1) + OUT_NORM
    repacked = block(0) + block(1) + EMBD  # the mapped range still runs to output_norm
    assert r.usage[-1].weights == file + repacked
    assert r.memory.input_weights == EMBD + repacked
    untied = run(model(kind=Q4_0), GPULayersList(), [], features=frozenset({"avx2"}))
    # a repacked tensor at the end of the file leaves the mapped range; those between stay in it
    assert untied.usage[-1].weights == EMBD + 2 * (block(0) + block(1)) + OUT_NORM + OUT


# -- layers on GPUs ------------------------------------------------------------------------------


def test_two_gpus_split_the_blocks_and_the_output_gpu_after_the_first_starts_its_logits_at_zero() -> None:
    """Each GPU holds its layers' weights and cache; the first also the projector's weights and
    compute buffer. The output layer's GPU after the first runs the head from the bottom of its
    buffer (``head_on_masks`` off) with one row beside the logits, not four: at -c 1024 and
    n_vocab 4000 its buffer is the logits (4000 x 512 x 4) plus one row (64 x 512 x 4), not the
    masks under them. The host, while the GPUs run every block, holds its masks and embeddings
    (the head is a GPU's). Block 1's wider feed-forward (n_ff 512) is not the first GPU's.
    Kills gpuscout._fit.usage.x_account__mutmut_11, _16, _18, _23, _57, _60, _62, _121, _142, _150,
    _151, _155, _167, _173, _459, _476, _477, _479.._485, _494, _497.._500, _503, _505, _513, _533,
    _544, _546, _547, _560, _563."""
    h = hparams(n_vocab=4000, n_ff=(256, 512))
    d0, d1 = gpu(0), gpu(1)
    p = projector()
    r = run(model(h), on((d0, [0]), (d1, [1, 2])), [d0, d1], mmproj=p, ctx=1024)
    kv, gd, g = r.kv, r.gd, r.g
    row = 64 * 512 * 4
    g0 = gd.on([0], [0], False)
    g1 = max(gd.masks_for([1]) + max(gd.attention[1], gd.rest[1]), gd.logits + row)
    assert g1 == gd.logits + row == 4000 * 512 * 4 + row
    cpu_graph = g.masks + g.embeddings
    assert r.memory == BackendMemory(
        input_weights=EMBD,
        cpu=DeviceMemory(
            library=CPU_LIBRARY, name="CPU", weights=[0, 0, 0], cache=[0, 0, 0], graph=cpu_graph
        ),
        gpus=(
            memory(d0, [block(0), 0, 0], [kv[0], 0, 0], g0 + projector_graph(p)),
            memory(d1, [0, block(1), OUT_NORM + OUT], [0, kv[1], 0], g1),
        ),
    )
    assert r.usage == [
        gpu_usage(d0, block(0) + 7000, kv[0], g0 + projector_graph(p)),
        gpu_usage(d1, block(1) + OUT_NORM + OUT, kv[1], g1),
        Usage(**CPU, weights=EMBD, kv_cache=0, graph=cpu_graph, output=4000 * 4),
    ]


def test_an_output_layer_left_on_the_host_runs_the_head_there_and_maps_the_range_to_it() -> None:
    """With every block on a GPU and the output layer on the host, the host runs the head: its
    buffer is the larger of the masks and embeddings it stages and the logits with two rows
    (``host_head``). Its mapped range runs from the token embeddings to the output tensors, the
    blocks' bytes between included (the input-weights share is that range less the output's
    own bytes).
    Kills gpuscout._fit.usage.x_account__mutmut_16, _18, _23, _31, _32, _57, _60, _62, _156, _167,
    _249, _458, _476, _477, _479.._485, _492, _494, _497.._500."""
    h = hparams(n_vocab=4000)
    d0 = gpu(0)
    r = run(model(h), on((d0, [0, 1])), [d0])
    host = max(r.g.masks + r.g.embeddings, r.g.host_head)
    assert host == r.g.host_head == 4000 * 512 * 4 + 2 * 64 * 512 * 4
    assert r.memory.cpu == DeviceMemory(
        library=CPU_LIBRARY, name="CPU", weights=[0, 0, OUT_NORM + OUT], cache=[0, 0, 0], graph=host
    )
    assert r.memory.input_weights == EMBD + block(0) + block(1)
    assert r.memory.gpus == (
        memory(d0, [block(0), block(1), 0], [r.kv[0], r.kv[1], 0], r.gd.on([0, 1], [0, 1], False)),
    )


def test_without_kv_offload_the_cache_stays_on_the_host() -> None:
    """With -nkvo a GPU's layers keep their weights there but their cache in host memory.
    Kills gpuscout._fit.usage.x_account__mutmut_23, _60, _62, _109, _477, _482, _494, _497, _499,
    _500."""
    d0 = gpu(0)
    r = run(model(), on((d0, [0, 1, 2])), [d0], kv_offload=False)
    assert r.memory.cpu.cache == (KV, KV, 0)
    assert r.memory.gpus[0].cache == (0, 0, 0)
    assert r.usage[0].kv_cache == 0 and r.usage[-1].kv_cache == 2 * KV


def test_a_tensor_over_the_largest_allocation_stays_mapped_on_the_host() -> None:
    """A tensor larger than its device's largest allocation stays in host memory, mapped from the
    file (counted in its layer's CPU weights and in the mapped range), while the rest of its layer
    is on the device. An output weight too big for the output layer's device also sends the head
    to the host (ggml-vulkan refuses the matrix product), which then holds the logits and two
    rows (n_vocab 4000: more than the masks and embeddings).
    Two such tensors of one layer both count (20 and 17 MiB).
    Kills gpuscout._fit.usage.x_account__mutmut_16, _18, _35.._38, _57, _87, _90.._92, _123,
    _126.._128, _157, _458, _476, _481, _483, _492, _494, _497.._500."""
    d0 = gpu(0, max_allocation=16 * MIB)
    big = {"blk.0.ffn_up.weight": 20 * MIB, "blk.0.ffn_down.weight": 17 * MIB}
    r = run(model(big=big), on((d0, [0, 1, 2])), [d0])
    assert r.memory.cpu.weights == (37 * MIB, 0, 0)
    assert r.memory.gpus[0].weights == (1000 + 2000, block(1), OUT_NORM + OUT)
    assert r.memory.input_weights == EMBD + 1000 + 2000  # the range runs to the big tensors' end
    assert r.memory.cpu.graph == r.g.masks + r.g.embeddings  # the head is the GPU's
    big_out = {"output.weight": 20 * MIB}
    r = run(model(hparams(n_vocab=4000), big=big_out), on((d0, [0, 1, 2])), [d0])
    assert r.memory.cpu.weights == (0, 0, 20 * MIB)
    assert r.memory.gpus[0].weights == (block(0), block(1), OUT_NORM)
    assert r.memory.gpus[0].graph == r.gd.on([0, 1], [0, 1], False)
    assert r.memory.cpu.graph == max(r.g.masks + r.g.embeddings, r.g.host_head) == r.g.host_head


# -- op offload: host blocks run on the first GPU --------------------------------------------------


def test_a_host_blocks_feed_forward_runs_on_the_first_gpu_with_its_weights_copied_in() -> None:
    """With a GPU in use and a ubatch of at least 32 tokens, ggml's scheduler runs the host
    block's operations on the first GPU: its attention and feed-forward count in that GPU's
    buffer, and the feed-forward's input weights (gate and up, 2 x 1,000,000 bytes here) are
    copied in beside the phase. The host then keeps only its staging (masks and embeddings).
    Kills gpuscout._fit.usage.x_account__mutmut_16, _18, _23, _370, _371, _476, _477, _479.._485,
    _494, _497, _499, _500."""
    d0 = gpu(0)
    big = {"blk.0.ffn_gate.weight": 1_000_000, "blk.0.ffn_up.weight": 1_000_000}
    r = run(model(big=big), on((d0, [1, 2])), [d0])
    gd = r.gd
    masks = gd.masks_for([1, 0])
    copy = masks + gd.rest[0] + 2_000_000
    assert copy > max(gd.on([1, 0], [1, 0], True), masks + r.kv[0] + gd.core[0])
    assert r.memory.gpus[0].graph == copy
    assert r.memory.cpu == DeviceMemory(
        library=CPU_LIBRARY,
        name="CPU",
        weights=[1000 + 2_000_000 + 4000, 0, 0],
        cache=[KV, 0, 0],
        graph=r.g.masks + r.g.embeddings,
    )


def test_a_host_blocks_offloaded_attention_has_its_k_and_v_copied_in() -> None:
    """The host block's attention, run on the first GPU, reads the block's K and V from host
    memory: the scheduler copies them in beside the attention's tensors. At -c 32768 that copy
    (masks, K and V of 32768 cells, the attention phase with its rows) is the GPU's largest.
    Kills gpuscout._fit.usage.x_account__mutmut_364, _494, _497, _500."""
    d0 = gpu(0)
    r = run(model(), on((d0, [1, 2])), [d0], ctx=32768)
    gd = r.gd
    masks = gd.masks_for([1, 0])
    assert r.kv[0] == 32768 * 64 * 2
    copy = masks + r.kv[0] + gd.attention[0]
    assert gd.attention[0] > gd.core[0]
    assert copy > max(gd.on([1, 0], [1, 0], True), masks + gd.rest[0] + 5000)
    assert r.memory.gpus[0].graph == copy


def _head_case(out: int, max_allocation: int, n_vocab: int = 4000) -> Run:
    d0 = gpu(0, max_allocation=max_allocation)
    return run(model(hparams(n_vocab=n_vocab), big={"output.weight": out}), on((d0, [1])), [d0])


def test_a_host_head_runs_on_the_first_gpu_only_when_its_logits_and_weight_fit_there() -> None:
    """With a host block and the output layer on the host, the head too is offloaded to the first
    GPU, its output weight copied in beside the logits; then the host holds no head. It stays on
    the host when the logits (n_vocab 4000: 8192000 bytes over 8,000,000) or the output weight
    (10,000,000 bytes over 9,000,000, the logits fitting) exceed that GPU's largest allocation;
    the host's buffer then holds the logits and two rows.
    Kills gpuscout._fit.usage.x_account__mutmut_31, _32, _35.._38, _156, _289, _296, _322.._328,
    _331, _332, _338.._340, _370, _371, _377, _380, _384, _411.._413, _458, _459, _483, _494, _497,
    _499, _500."""
    moved = _head_case(5_000_000, 0)
    gd, g = moved.gd, moved.g
    head_copy = gd.on([], [], True) + 5_000_000
    assert head_copy == 4000 * 512 * 4 + 4 * 64 * 512 * 4 + 5_000_000
    assert head_copy > gd.on([1, 0], [1, 0], True)
    assert moved.memory.gpus[0].graph == head_copy
    assert moved.memory.cpu.graph == g.masks + g.embeddings
    # the output weight or the logits over the GPU's largest allocation: the head stays on the host
    for r in (_head_case(10_000_000, 9_000_000), _head_case(50_000, 8_000_000)):
        assert r.memory.cpu.graph == r.g.host_head > r.g.masks + r.g.embeddings
        assert r.memory.gpus[0].graph == max(
            r.gd.on([1, 0], [1, 0], False),
            r.gd.masks_for([1, 0]) + r.kv[0] + r.gd.core[0],
            r.gd.masks_for([1, 0]) + r.gd.rest[0] + 5000,
        )


def test_an_offloaded_head_counts_its_logits_in_the_first_gpus_graph() -> None:
    """The offloaded head's logits are part of the first GPU's graph (on the masks, or on top of
    them when larger: n_vocab 4000 at 512 tokens is 8192000 bytes over 4 MiB of masks), which is
    then larger than the head's weight copy (a 50,000-byte output weight).
    Kills gpuscout._fit.usage.x_account__mutmut_31, _32, _156, _322, _326, _331, _338, _349, _355,
    _494, _497, _500."""
    r = _head_case(50_000, 0)
    gd = r.gd
    graph = gd.on([1, 0], [1, 0], True)
    assert graph == gd.masks_for([1, 0]) + gd.logits + gd.head_rest
    assert graph > gd.on([], [], True) + 50_000
    assert r.memory.gpus[0].graph == graph


def test_a_tied_head_offloaded_copies_the_token_embeddings() -> None:
    """A tied model's head reads the token embeddings: they are the weight an offloaded head
    copies in, and they decide whether it fits the first GPU (5,000,000 bytes here: over a
    4,000,000-byte allocation the head stays on the host).
    Kills gpuscout._fit.usage.x_account__mutmut_31, _32, _35, _40, _41, _156, _234, _296, _322,
    _326, _327, _331, _332, _338, _339, _377, _380, _384, _483, _494, _497, _499, _500."""
    h = hparams()
    f = gguf(tensors(output=False, big={"token_embd.weight": 5_000_000}))
    m = Model(file=f, hparams=h, layers=est.split_tensors(f, h))
    d0 = gpu(0)
    r = run(m, on((d0, [1])), [d0])
    assert r.memory.gpus[0].graph == r.gd.on([], [], True) + 5_000_000
    limited = gpu(0, max_allocation=4_000_000)
    r = run(m, on((limited, [1])), [limited])
    assert r.memory.cpu.graph == max(r.g.masks + r.g.embeddings, r.g.host_head)


def test_with_no_layer_on_a_gpu_llama_cpp_still_offloads_to_the_one_with_most_free_memory() -> None:
    """No layer on a GPU, but with devices and a ubatch of at least 32 tokens llama.cpp opens the
    first in its order (discrete, most free memory first) and offloads every host block and the
    head there: that GPU holds no weights or cache, only the compute buffer. At 32 tokens it
    still does; at 16 it does not, and the host runs everything.
    Kills gpuscout._fit.usage.x_account__mutmut_261, _269, _270, _273.._275, _278, _279, _282, _283,
    _288, _364, _370, _371, _483, _494, _497, _499, _500, _513."""
    small, large = gpu(0, free=10 * GIB), gpu(1, free=20 * GIB)
    for ubatch in (512, 32):
        r = run(model(), GPULayersList(), [small, large], ubatch_size=ubatch)
        gd = r.gd
        masks = gd.masks_for([0, 1])
        graph = max(
            gd.on([0, 1], [0, 1], True),
            *(masks + r.kv[i] + gd.attention[i] for i in (0, 1)),
            masks + gd.rest[0] + 5000,
            masks + gd.rest[1] + 5200,
            gd.on([], [], True) + OUT,
        )
        assert r.memory.gpus == (memory(large, [0, 0, 0], [0, 0, 0], graph),), ubatch
        assert r.usage[0] == gpu_usage(large, 0, 0, graph)
        assert r.memory.cpu.graph == r.g.masks + r.g.embeddings
    r = run(model(), GPULayersList(), [small, large], ubatch_size=16)
    assert r.memory.gpus == ()
    assert r.memory.cpu.graph == r.g.on([0, 1], [0, 1], True)


# -- tensor overrides (-ot) and attention left to the host -----------------------------------------

OT = {
    "blk.1.ffn_gate.weight": None,
    "blk.1.ffn_up.weight": None,
    "blk.1.ffn_down.weight": 1,
    "blk.0.ffn_gate.weight": 0,
}


def test_overridden_tensors_go_where_the_override_says_and_host_ones_are_copied_to_the_first_gpu() -> None:
    """An override (-ot) puts a tensor on the CPU (None) or on a device by index, instead of its
    layer's device: block 1's gate and up (1,000,000 bytes each) on the host, its down (4100) on
    GPU 1, which holds no layer and so gets weights only (no cache, no compute buffer), and block
    0's gate on GPU 0, where its layer is anyway. The host's overridden weights are mapped (the
    range runs to block 1's up) and, as the first GPU runs their operation, copied into its
    compute buffer beside the phase: the first GPU's buffer is block 1's feed-forward phase plus
    the 2,000,000 bytes of gate and up. Without flash attention at -c 4096 the KQ scores (32 MiB)
    exceed the GPU's 16 MiB allocations, so both blocks' attention is the host's, and the first
    GPU holds no masks; the host's buffer is that attention (the masks and the larger phase).
    The same at a ubatch of 32 tokens (still op offload; 1 MiB allocations, the scores 2 MiB).
    Kills gpuscout._fit.usage.x_account__mutmut_7, _12, _16, _18, _23, _57, _60, _62, _68.._71, _74,
    _76.._85, _114, _167, _178, _179, _182.._189, _191, _192, _195.._210, _212, _213, _249,
    _418.._423, _425.._438, _449, _476, _477, _479.._485, _492, _494, _497.._500, _513."""
    big = {"blk.1.ffn_gate.weight": 1_000_000, "blk.1.ffn_up.weight": 1_000_000}
    for ubatch, limit in ((512, 16 * MIB), (32, MIB)):
        d0, d1 = gpu(0, max_allocation=limit), gpu(1, max_allocation=limit)
        r = run(model(big=big), on((d0, [0, 1, 2])), [d0, d1], moved=OT, flash_attn=False, ubatch_size=ubatch)
        gd, g = r.gd, r.g
        assert gd.scores[0] > limit
        graph = gd.rest[1] + 2_000_000
        assert graph > gd.on([], [0, 1], True)
        assert r.memory == BackendMemory(
            input_weights=EMBD + block(0) + 1100,
            cpu=DeviceMemory(
                library=CPU_LIBRARY,
                name="CPU",
                weights=[0, 2_000_000, 0],
                cache=[0, 0, 0],
                graph=g.on([0, 1], [], False),
            ),
            gpus=(
                memory(d0, [block(0), 1100, OUT_NORM + OUT], [r.kv[0], r.kv[1], 0], graph),
                memory(d1, [0, 4100, 0], [0, 0, 0], 0),
            ),
        ), ubatch
        assert r.usage[1] == gpu_usage(d1, 4100, 0, 0)


def _host_attention(h: Hparams, layout: GPULayersList, devices: Sequence[DeviceInfo]) -> Run:
    return run(model(h), layout, devices, flash_attn=False)


def test_every_gpus_attention_over_its_allocation_is_left_to_the_host() -> None:
    """Each device leaves the host the attention whose KQ scores it cannot hold; the host's buffer
    is the masks and the largest of all those attentions, the first device's too (block 0's,
    with 8 heads, is the larger).
    Kills gpuscout._fit.usage.x_account__mutmut_114, _138, _449, _483, _494, _499."""
    h = hparams(n_head=(8, 4))
    d0, d1 = gpu(0, max_allocation=16 * MIB), gpu(1, max_allocation=16 * MIB)
    r = _host_attention(h, on((d0, [0]), (d1, [1, 2])), [d0, d1])
    assert r.g.attention[0] > r.g.attention[1]
    assert r.memory.cpu.graph == r.g.on([0, 1], [], False) == r.g.masks + r.g.attention[0]


def test_a_host_blocks_attention_stays_on_the_host_when_the_first_gpu_cannot_hold_its_scores() -> None:
    """Op offload sends a host block's attention to the first GPU only when its KQ scores fit
    that GPU's largest allocation; otherwise the host runs it, beside the attention the GPU itself
    left (block 1's here). The host's buffer then covers both blocks' attention (block 1's, with
    8 heads, the larger), and the first GPU copies in no K and V for block 0.
    Kills gpuscout._fit.usage.x_account__mutmut_114, _121, _156, _289, _294, _296, _297, _307, _316,
    _323.._325, _349, _355, _366, _449, _483, _494, _497, _499, _500."""
    h = hparams(n_head=(4, 8))
    d0 = gpu(0, max_allocation=16 * MIB)
    r = _host_attention(h, on((d0, [1, 2])), [d0])
    gd = r.gd
    assert r.memory.cpu.graph == r.g.on([1, 0], [], False) == r.g.masks + r.g.attention[1]
    assert r.memory.gpus[0].graph == max(gd.on([], [1, 0], True), gd.rest[0] + 5000)


# -- hybrid models: attention blocks beside recurrent ones ----------------------------------------


def hybrid(n_ff1: int = 0) -> Hparams:
    """Block 0 an attention block, block 1 a Mamba2 block (d_inner 256, no cache, a state), with a
    feed-forward of ``n_ff1`` (0: none)."""
    return hparams(
        n_ff=(256, n_ff1),
        kv_layers=(True, False),
        recurrent=(False, True),
        n_embd_r=100,
        n_embd_s=1000,
        ssm_inner=256,
        ssm_state=16,
        ssm_groups=1,
        ssm_heads=4,
    )


def test_a_host_attention_before_a_recurrent_block_on_a_later_gpu_is_copied_to_that_gpu() -> None:
    """A host attention block followed by a recurrent-only block: ggml's scheduler gives the
    attention the backend of the next block's state copies (expand gpu up), here GPU 1, which
    holds block 1, not the first GPU: GPU 1 then copies in block 0's K and V (at -c 32768,
    4 MiB) beside its attention's tensors and the mask it reads; the first GPU runs only block
    0's feed-forward (its weights copied in) and no masks; the host keeps nothing of block 0's
    attention.
    Kills gpuscout._fit.usage.x_account__mutmut_11, _121, _309, _310, _314, _315, _318, _323.._325,
    _349, _355, _366, _393.._400, _402.._410, _449, _483, _494, _497, _499, _500."""
    d0, d1 = gpu(0), gpu(1)
    r = run(model(hybrid()), on((d0, [2]), (d1, [1])), [d0, d1], ctx=32768)
    gd = r.gd
    copy = gd.masks_for([0]) + r.kv[0] + gd.core[0]
    assert copy > gd.on([1], [1], False)
    assert r.memory.gpus[1].graph == copy
    assert r.memory.gpus[0].graph == max(gd.on([], [0], True), gd.rest[0] + 5000)
    assert r.memory.cpu.graph == r.g.on([0], [], False)


def test_a_host_attention_before_a_host_recurrent_block_stays_on_the_host() -> None:
    """When that recurrent-only block is on the host too, the attention stays on the host (its
    buffer holds it); the first GPU runs both blocks' other phases from host weights: block 1's
    scan phase (a Mamba2 block without a feed-forward: the projections and convolution around the
    scan measured about the phase's size, so that phase stands) with the block's feed-forward
    names' weights copied in (5200 bytes), the larger.
    Kills gpuscout._fit.usage.x_account__mutmut_316, _344, _345, _370, _371, _373, _374, _449, _483,
    _494, _497, _499, _500."""
    d0 = gpu(0)
    r = run(model(hybrid()), on((d0, [2])), [d0])
    gd = r.gd
    assert gd.rest[1] > gd.rest[0] and gd.matmul[1] == 0
    assert r.memory.gpus[0].graph == max(gd.on([], [0, 1], True), gd.rest[1] + 5200) == gd.rest[1] + 5200
    assert r.memory.cpu.graph == r.g.on([0], [], False)


def test_a_host_recurrent_blocks_scan_stays_on_the_host_and_its_feed_forward_runs_on_the_gpu() -> None:
    """A host recurrent block's conv and scan read state tensors in host memory, so ggml's
    scheduler keeps them on the host; the first GPU runs its matrix products, and where the block
    has a feed-forward that phase (``matmul``, smaller than the scan phase here) with its input
    weights copied in is the GPU's peak for it, not the scan phase.
    Kills gpuscout._fit.usage.x_account__mutmut_11, _354, _360, _370.._372, _374, _494, _497, _500."""
    d0 = gpu(0)
    r = run(model(hybrid(n_ff1=256)), on((d0, [0, 2])), [d0])
    gd = r.gd
    assert gd.rest[1] > gd.matmul[1] > 0
    peak = gd.masks_for([0]) + gd.matmul[1] + 5200
    assert peak > gd.on([0], [0], True)
    assert r.memory.gpus[0].graph == peak


def test_the_output_gpu_after_the_first_runs_a_recurrent_block_with_one_d_inner_tensor_fewer() -> None:
    """The output layer's GPU after the first holds a recurrent block's scan phase with one
    d_inner tensor fewer (``later``, fitted to llama-fit-params on lavapipe), and that phase, not
    the head's logits and row, is its buffer here.
    Kills gpuscout._fit.usage.x_account__mutmut_142, _149, _152, _494, _497, _500."""
    d0, d1 = gpu(0), gpu(1)
    r = run(model(hybrid()), on((d0, [0]), (d1, [1, 2])), [d0, d1])
    gd = r.gd
    assert gd.later[1] == gd.rest[1] - 256 * 512 * 4
    assert gd.later[1] > gd.logits + 64 * 512 * 4
    assert r.memory.gpus[1].graph == gd.later[1]


def test_a_block_whose_experts_an_override_keeps_on_the_host_leaves_its_device_only_attention() -> None:
    """A MoE block whose expert tensors an override sends to the CPU: its MUL_MAT_IDs run where
    ggml's scheduler sends ops on host weights (the first GPU, the experts copied in), so the
    block's own device keeps only its attention and router (moe8 -ts 1,6,2 with blocks 1-6's
    experts on the CPU: Vulkan1 15 MiB). GPU 1, holding block 1, has the masks and block 1's
    attention; GPU 0, which runs blocks of its own, two rows and block 1's expert products,
    one weight copied in at a time (``usage.expert_matmuls``: here the down product's).
    Kills gpuscout._fit.usage.x_account__mutmut_12, _57, _69, _71, _74, _134, _419.._423,
    _426.._436, _438, _494, _497, _500."""
    h = hparams(n_expert=8, n_expert_used=2, n_ff_exp=32)
    items = [("token_embd.weight", EMBD, F32)]
    for i in range(2):
        items += [(f"blk.{i}.attn_q.weight", 1000, F32)]
        items += [(f"blk.{i}.ffn_{n}_exps.weight", 30_000, F32) for n in ("gate", "up", "down")]
    items += [("output_norm.weight", OUT_NORM, F32), ("output.weight", OUT, F32)]
    f = gguf(items)
    m = Model(file=f, hparams=h, layers=est.split_tensors(f, h))
    moved: dict[str, int | None] = {f"blk.1.ffn_{n}_exps.weight": None for n in ("gate", "up", "down")}
    d0, d1 = gpu(0), gpu(1)
    r = run(m, on((d0, [0, 2]), (d1, [1])), [d0, d1], moved=moved)
    gd = r.gd
    assert r.memory.gpus[1].graph == gd.on([1], [], False) == gd.masks_for([1]) + gd.attention[1]
    assert r.memory.gpus[1].weights == (0, 1000, 0)
    t = r.ctx.n_tokens
    row, inner, out = h.n_embd * t * 4, 2 * 32 * t * 4, 2 * h.n_embd * t * 4
    products = max(row + 2 * inner + 30_000, inner + 30_000 + out + row) + row
    assert products == inner + 30_000 + out + 2 * row
    assert r.memory.gpus[0].graph == gd.masks_for([0]) + 2 * row + products > gd.on([0], [0], True)


def test_a_gpu_opened_with_no_layer_runs_no_head_its_logits_cannot_hold() -> None:
    """The GPU llama.cpp opens with no layer on any GPU runs no head of its own: the head is
    offloaded to it only when its logits fit its largest allocation (n_vocab 4000 at 512 tokens:
    8192000 bytes over 1 MiB here), so the host keeps it (the logits and two rows).
    Kills gpuscout._fit.usage.x_account__mutmut_31, _32, _285, _289, _296, _323.._328, _370, _371,
    _411, _413, _458, _483, _494, _497, _499, _500."""
    d0 = gpu(0, max_allocation=MIB)
    r = run(model(hparams(n_vocab=4000)), GPULayersList(), [d0])
    gd = r.gd
    masks = gd.masks_for([0, 1])
    assert r.memory.gpus[0].graph == max(
        gd.on([0, 1], [0, 1], False),
        *(masks + r.kv[i] + gd.core[i] for i in (0, 1)),
        masks + gd.rest[0] + 5000,
        masks + gd.rest[1] + 5200,
    )
    assert r.memory.cpu.graph == max(r.g.masks + r.g.embeddings, r.g.host_head) == r.g.host_head


def test_the_first_gpu_holding_the_output_keeps_its_logits_on_the_masks_with_four_rows() -> None:
    """Only the output layer's GPU after the first starts its logits at zero with one row beside
    them; the first GPU (here the only one) allocates them on its masks, on top when they are
    larger (n_vocab 4000 at -c 1024: 8192000 bytes over 1 MiB of masks), with GPU_ROWS["head"]
    (4) rows (llama-fit-params on llama-wide, -c 4096: 74.52 MiB on one device).
    Kills gpuscout._fit.usage.x_account__mutmut_121, _141, _173, _494, _497, _500."""
    d0 = gpu(0)
    r = run(model(hparams(n_vocab=4000)), on((d0, [0, 1, 2])), [d0], ctx=1024)
    gd = r.gd
    assert r.memory.gpus[0].graph == gd.masks_for([0, 1]) + gd.logits + 4 * 64 * 512 * 4


def test_tensors_of_one_layer_moved_to_one_device_add_up_there() -> None:
    """Several tensors of one layer that overrides send to the same device all count there (the
    gate and up of block 1 on GPU 1: 2100 + 3100 bytes), and those sent to the host are copied
    into the first GPU's buffer on its masks (one GPU, flash attention: block 1's up of
    1,000,000 bytes beside its feed-forward phase).
    Kills gpuscout._fit.usage.x_account__mutmut_7, _12, _57, _60, _62, _68, _69, _71, _74.._85,
    _167, _195.._200, _205, _207, _212, _213, _419.._424, _426.._439, _494, _497, _500."""
    d0, d1 = gpu(0), gpu(1)
    r = run(
        model(), on((d0, [0, 1, 2])), [d0, d1], moved={"blk.1.ffn_gate.weight": 1, "blk.1.ffn_up.weight": 1}
    )
    assert r.memory.gpus[1].weights == (0, 2100 + 3100, 0)
    assert r.memory.gpus[0].weights == (block(0), 1100 + 4100, OUT_NORM + OUT)
    one = run(
        model(big={"blk.1.ffn_up.weight": 1_000_000}),
        on((d0, [0, 1, 2])),
        [d0],
        moved={"blk.1.ffn_up.weight": None},
    )
    gd = one.gd
    copy = gd.masks_for([0, 1]) + gd.rest[1] + 1_000_000
    assert copy > gd.on([0, 1], [0, 1], True)
    assert one.memory.gpus == (memory(d0, [block(0), 1100 + 2100 + 4100, OUT_NORM + OUT], [KV, KV, 0], copy),)


def test_a_host_attention_the_first_gpu_cannot_hold_is_not_copied_to_the_next_blocks_gpu() -> None:
    """A host attention block whose KQ scores exceed the first GPU's largest allocation stays on
    the host even when the next block is recurrent-only on another GPU: its K and V are not
    copied there (without flash attention at -c 4096 the scores are 32 MiB, over 16 MiB), and
    that GPU's buffer is its own block's phase; the host runs the attention.
    Kills gpuscout._fit.usage.x_account__mutmut_141, _142, _289, _296, _297, _307, _313, _315, _316,
    _449, _483, _494, _497, _499, _500."""
    d0, d1 = gpu(0, max_allocation=16 * MIB), gpu(1)
    r = run(model(hybrid()), on((d0, [2]), (d1, [1])), [d0, d1], flash_attn=False)
    gd = r.gd
    assert gd.scores[0] > 16 * MIB
    assert r.memory.gpus[1].graph == gd.on([1], [1], False)
    assert r.memory.cpu.graph == r.g.on([0], [], False)


def test_below_32_tokens_host_weights_of_a_gpu_layer_are_not_copied_to_the_first_gpu() -> None:
    """ggml offloads a host weight's operation to a GPU only from 32 tokens on (OP_OFFLOAD_BATCH):
    with a ubatch of 16, a tensor an override keeps on the host (block 1's up, 1,000,000 bytes)
    is read there, and the first GPU's buffer is its own graph, without the copy.
    Kills gpuscout._fit.usage.x_account__mutmut_12, _69, _71, _74, _416, _494, _497, _500."""
    d0 = gpu(0)
    big = {"blk.1.ffn_up.weight": 1_000_000}
    r = run(model(big=big), on((d0, [0, 1, 2])), [d0], moved={"blk.1.ffn_up.weight": None}, ubatch_size=16)
    assert r.ctx.n_tokens == 16
    assert r.memory.gpus[0].graph == r.gd.on([0, 1], [0, 1], True)


def test_the_next_blocks_gpu_copies_in_only_the_masks_its_attention_and_the_host_block_read() -> None:
    """The GPU that runs a host attention block before its recurrent-only block holds the masks
    of the attention it runs, that block's included, not those of blocks whose attention it
    leaves to the host: here GPU 1 holds block 1 (recurrent) and block 2, a sliding-window block
    whose KQ scores (768 cells x 512 tokens x 4 heads x 4 bytes, 6 MiB) exceed its 4 MiB
    allocations, so its copy of block 0's attention sits on the full-context mask only (4096 x
    512 x 4 bytes), not on the sliding-window one too.
    Kills gpuscout._fit.usage.x_account__mutmut_401."""
    h = hparams(
        n_layer=3,
        n_head=(4, 4, 4),
        n_head_kv=(2, 2, 2),
        n_ff=(256, 0, 256),
        n_swa=200,
        swa=(False, False, True),
        kv_layers=(True, False, True),
        recurrent=(False, True, False),
        n_embd_r=100,
        n_embd_s=1000,
        ssm_inner=256,
        ssm_state=16,
        ssm_groups=1,
        ssm_heads=4,
    )
    d0, d1 = gpu(0), gpu(1, max_allocation=4 * MIB)
    r = run(model(h), on((d0, [3]), (d1, [1, 2])), [d0, d1], flash_attn=False)
    gd = r.gd
    assert gd.scores[2] == 768 * 512 * 4 * 4 > 4 * MIB
    assert gd.mask_bytes == (4096 * 512 * 4, 768 * 512 * 4)
    copy = gd.mask_bytes[0] + r.kv[0] + gd.core[0]
    assert copy > gd.on([1], [1, 2], False)
    assert r.memory.gpus[1].graph == copy


def test_only_the_weights_an_override_leaves_on_the_host_are_copied_to_the_first_gpu() -> None:
    """Op offload copies a host weight into the first GPU's compute buffer for the operation
    that reads it; a tensor an override sends to another GPU stays there, and its operation runs
    there (ggml's scheduler gives an op with weights the backend of the weight's buffer). Block
    1's gate and up (1,000 bytes each) on the host and its down (3,000,000) on GPU 1: the first
    GPU's buffer is the phase plus gate and up, not plus the down projection GPU 1 holds."""
    big = {"blk.1.ffn_gate.weight": 1_000, "blk.1.ffn_up.weight": 1_000, "blk.1.ffn_down.weight": 3_000_000}
    d0, d1 = gpu(0, max_allocation=16 * MIB), gpu(1, max_allocation=16 * MIB)
    r = run(model(big=big), on((d0, [0, 1, 2])), [d0, d1], moved=OT, flash_attn=False)
    gd = r.gd
    assert r.memory.gpus[0].graph == max(gd.on([], [0, 1], True), gd.rest[1] + 2_000)
    assert r.memory.gpus[0].graph < gd.rest[1] + 3_000_000
    assert list(r.memory.gpus[1].weights) == [0, 3_000_000, 0]
