"""Rules of ``gpuscout._fit.estimate``'s ``graph`` and ``split_tensors`` found by mutmut's
survivors (tests/MUTATION.md, "Seventh mutmut round").

tests/fit/test_fit_accuracy.py checks these figures against llama.cpp's reports but is outside
the round's selection (time); each test here states one rule of the compute buffer's parts or
of the tensor split, with the figures worked out by hand from the module's formulas.

A docstring's last line names the first run's survivors the test fails on, each mutant planted
alone through mutmut's trampoline (``MUTANT_UNDER_TEST``, mutants/ on sys.path); tests share
some of them.

The model is test_mutmut_gaps_2's small llama: 2 blocks of n_embd 64, 4 heads (2 KV) of 16,
n_ff 256, n_vocab 1000. At ``-c 4096`` a ubatch is 512 tokens, so one row of activations
(n_embd f32 per token) is 64 x 512 x 4 = 131072 bytes.
"""

from __future__ import annotations

from typing import Any

import pytest

from gpuscout._fit import estimate as est
from gpuscout._fit.errors import ModelError
from gpuscout._fit.hparams import Hparams
from gpuscout._fit.reader import GGUFFile, TensorInfo
from tests.test_mutmut_gaps_2 import hparams

T = 512  # tokens of a ubatch at -c 4096
ROW = 64 * T * 4  # one row of activations
FF = 256 * T * 4  # one feed-forward tensor (n_ff 256)


def build(h: Hparams, *, device: bool = False, float_down: bool = True, **options: Any) -> est.Graph:
    o = est.Options(**({"ctx": 4096} | options))
    return est.graph(h, est.context(h, o), o, device=device, float_down=float_down)


# -- estimate.graph: the compute buffer's parts ----------------------------------------------------


def test_a_dense_block_on_the_host_with_flash_attention() -> None:
    """On ggml-cpu with flash attention: the mask holds 2 bytes (f16) per cell and token of one
    sequence (4096 x 512 x 2); the attention phase holds Q three times and K, V twice
    ((3 x 4 x 16 + 2 x 2 x 16) f32 per token) plus ATTN_ROWS (3) rows, no KQ scores; the
    feed-forward three n_ff tensors plus the larger of FFN_ROWS (4.5) rows and FFN_WIDE (1.3) of
    an n_ff tensor (here 1.3 x FF = 681574 > 4.5 rows = 589824); the head the logits (n_vocab f32
    per token) and HEAD_ROWS[flash] (5) rows; the host's staging HOST_ROWS (4) rows, or the
    logits and two rows. The sliding-window mask is pad(min(4096, 0 + 512), 256) = 512 cells.
    Kills gpuscout._fit.estimate.x_graph__mutmut_17, _18, _23, _25, _26, _40, _47, _49, _50, _57,
    _71, _73, _95, _115.._117, _125, _183, _185, _186, _195, _196, _198, _199, _207, _209,
    _214.._216, _218."""
    g = build(hparams())
    core = (3 * 64 + 2 * 32) * T * 4
    ffn = 3 * FF + int(1.3 * FF)
    assert g == est.Graph(
        masks=4096 * T * 2,
        attention=(core + 3 * ROW,) * 2,
        scores=(0, 0),
        core=(core,) * 2,
        rest=(ffn,) * 2,
        logits=1000 * T * 4,
        head_rest=5 * ROW,
        embeddings=4 * ROW,
        host_head=1000 * T * 4 + 2 * ROW,
        mask_kind=(0, 0),
        mask_bytes=(4096 * T * 2, 512 * T * 2),
        later=(ffn,) * 2,
        matmul=(ffn,) * 2,
        head_on_masks=True,
    )
    assert (core, ffn) == (524288, 2254438)


def test_a_narrow_feed_forward_keeps_four_and_a_half_rows() -> None:
    """A feed-forward no wider than ~3.5 n_embd leaves FFN_ROWS (4.5) rows of its own in use, more
    than FFN_WIDE (1.3) of one of its tensors: n_ff 128 gives 3 x 262144 + 589824.
    Kills gpuscout._fit.estimate.x_graph__mutmut_95, _115.._117, _123."""
    g = build(hparams(n_ff=(128, 128)))
    assert g.rest == (3 * 128 * T * 4 + int(4.5 * ROW),) * 2 == (1376256, 1376256)


def test_without_flash_attention_the_host_holds_the_kq_scores_in_f32() -> None:
    """Without flash attention the mask is f32 (4 bytes a cell) and the attention phase adds the
    KQ scores: cells x tokens x heads f32 (4096 x 512 x 4 x 4), which are also the phase's largest
    tensor (``scores``); the head keeps HEAD_ROWS[False] (6) rows.
    Kills gpuscout._fit.estimate.x_graph__mutmut_9, _17, _18, _23, _25, _47, _50, _57, _63, _68,
    _69, _71, _73, _207, _209."""
    g = build(hparams(), flash_attn=False)
    kq = 4096 * T * 4 * 4
    core = (3 * 64 + 2 * 32) * T * 4 + kq
    assert (g.masks, g.mask_bytes) == (4096 * T * 4, (4096 * T * 4, 512 * T * 4))
    assert g.scores == (kq, kq)
    assert g.core == (core, core)
    assert g.attention == (core + 3 * ROW,) * 2
    assert g.head_rest == 6 * ROW


def test_a_gpu_reads_q_in_place_under_flash_attention_and_holds_a_fourth_ffn_tensor() -> None:
    """On a GPU backend (measured on ggml-vulkan) flash attention keeps Q twice, not three times;
    an unquantized ffn_down adds a fourth n_ff tensor and half a row (GPU_ROWS["ffn"]); the head
    keeps four rows (GPU_ROWS["head"]); without flash attention Q is there three times again.
    Kills gpuscout._fit.estimate.x_graph__mutmut_46.._50, _57, _63, _68, _69, _71, _73, _96, _101,
    _103, _105, _185, _186, _195, _198, _199, _207, _208, _214.._216, _218."""
    g = build(hparams(), device=True)
    core = (2 * 64 + 2 * 32) * T * 4
    assert g.core == (core, core)
    assert g.attention == (core + 3 * ROW,) * 2
    assert g.rest == g.matmul == g.later == (4 * FF + ROW // 2,) * 2
    assert g.head_rest == 4 * ROW
    assert g.embeddings == 4 * ROW and g.host_head == 1000 * T * 4 + 2 * ROW
    off = build(hparams(), device=True, flash_attn=False)
    assert off.core[0] == (3 * 64 + 2 * 32) * T * 4 + 4096 * T * 4 * 4


def test_a_gpu_with_quantized_ffn_down_holds_three_ffn_tensors_and_two_rows_except_gemma() -> None:
    """With a quantized ffn_down a GPU's feed-forward holds three n_ff tensors and two rows;
    gemma's post-feed-forward norm keeps the fourth tensor (and half a row) even then.
    Kills gpuscout._fit.estimate.x_graph__mutmut_95, _96, _98, _99, _101, _103, _105, _109.._111,
    _113."""
    assert build(hparams(), device=True, float_down=False).rest == (3 * FF + 2 * ROW,) * 2
    gemma = build(hparams(arch="gemma3"), device=True, float_down=False)
    assert gemma.rest == (4 * FF + ROW // 2,) * 2
    assert build(hparams(arch="xgemma"), device=True, float_down=False).rest == (3 * FF + 2 * ROW,) * 2


def test_sliding_window_blocks_read_their_own_mask_and_q_width() -> None:
    """A sliding-window block reads the sliding-window mask (kind 1) of pad(min(n_ctx_seq,
    n_swa + n_ubatch), 256) cells, here pad(200 + 512) = 768, and its Q and K are
    head_k_swa wide (8 here): without flash attention its KQ scores cover those 768 cells. The
    masks the graph holds are both kinds, 4096 + 768 cells of 4 bytes per token.
    Kills gpuscout._fit.estimate.x_graph__mutmut_9, _17, _18, _22.._26, _30, _32, _43, _44, _47,
    _50, _57, _62, _63, _68, _69, _183, _196."""
    h = hparams(n_swa=200, swa=(True, False), head_k_swa=8, head_v_swa=8)
    g = build(h, flash_attn=False)
    assert g.mask_kind == (1, 0)
    assert g.mask_bytes == (4096 * T * 4, 768 * T * 4)
    assert g.masks == (4096 + 768) * T * 4
    kq_swa = 768 * T * 4 * 4
    assert g.scores == (kq_swa, 4096 * T * 4 * 4)
    assert g.core[0] == (3 * 4 * 8 + 2 * 2 * 8) * T * 4 + kq_swa
    assert g.core[1] == (3 * 4 * 16 + 2 * 2 * 16) * T * 4 + 4096 * T * 4 * 4  # head_k for a full block
    only_swa = build(hparams(n_swa=200, swa=(True, True)))
    assert only_swa.masks == 768 * T * 2


def test_a_block_without_a_cache_has_no_attention_and_reads_no_mask() -> None:
    """A block without a KV cache (recurrent-only, or a cacheless layer) has no attention phase
    (0, mask kind -1), and its mask kind does not count among the masks the graph holds: here
    block 1 would be sliding-window but has no cache, so only the full mask is held.
    Kills gpuscout._fit.estimate.x_graph__mutmut_23, _25, _26, _29, _34, _35, _40, _183, _196."""
    g = build(hparams(n_swa=200, swa=(False, True), kv_layers=(True, False)))
    assert g.mask_kind == (0, -1)
    assert g.masks == 4096 * T * 2
    assert (g.attention[1], g.scores[1], g.core[1]) == (0, 0, 0)


def test_expert_blocks_after_the_dense_lead_hold_the_used_experts() -> None:
    """A MoE block at or after n_dense_lead holds, per token, the used experts' gate, up and
    product (3 x used x n_ff_exp) and each used expert's output (used x n_embd), plus MOE_ROWS (1)
    row; a leading dense block keeps its feed-forward. With 2 of 8 experts of 32:
    (3 x 2 x 32 + 2 x 64) x 512 x 4 + 131072.
    Kills gpuscout._fit.estimate.x_graph__mutmut_77.._91, _95, _115.._117, _125."""
    h = hparams(n_expert=8, n_expert_used=2, n_ff_exp=32, n_dense_lead=1)
    experts = (3 * 2 * 32 + 2 * 64) * T * 4 + ROW
    ffn = 3 * FF + int(1.3 * FF)
    assert build(h).rest == (ffn, experts) == (2254438, 786432)
    assert build(h, device=True).rest[1] == experts
    # without used experts, or without an expert width, a block is dense
    assert build(hparams(n_expert=8, n_expert_used=0, n_ff_exp=32)).rest == (ffn, ffn)
    assert build(hparams(n_expert=8, n_expert_used=2, n_ff_exp=0)).rest == (ffn, ffn)
    assert build(hparams(n_expert=0, n_expert_used=2, n_ff_exp=32)).rest == (ffn, ffn)


def _mamba2(**changes: Any) -> Hparams:
    base: dict[str, Any] = {
        "arch": "mamba2",
        "n_ff": (0, 0),
        "kv_layers": (False, False),
        "recurrent": (True, True),
        "n_embd_s": 1000,
        "ssm_inner": 128,
        "ssm_state": 16,
        "ssm_groups": 1,
        "ssm_heads": 4,
    }
    return hparams(**(base | changes))


def test_a_mamba2_scan_phase_holds_the_projection_convolution_and_states() -> None:
    """A Mamba2 block's scan phase: the input projection (d_inner + xBC + heads = 128 + 160 + 4),
    the convolution's input and output (2 x xBC, xBC = 128 + 2 x 1 x 16), the scan's output and
    gates (3 x d_inner) per token, plus one row on the host and the states (n_embd_s f32 per
    sequence). Without a feed-forward, ``matmul`` (what a GPU runs of a host block besides the
    scan) is 0, and on the output layer's GPU after the first the phase holds one d_inner tensor
    fewer (SCAN_LATER).
    Kills gpuscout._fit.estimate.x_graph__mutmut_26, _29, _34, _35, _40, _75, _132.._134, _137,
    _166, _183, _185, _186, _196, _198, _199."""
    per_token = (128 + 160 + 4) + 2 * 160 + 3 * 128
    host = per_token * T * 4 + ROW + 1000 * 4
    g = build(_mamba2())
    assert g.rest == (host, host) == (2174880, 2174880)
    assert g.matmul == (0, 0)
    assert g.later == (host - 128 * T * 4,) * 2
    assert g.attention == (0, 0) and g.masks == 0 and g.mask_kind == (-1, -1)
    device = build(_mamba2(), device=True)
    assert device.rest == (per_token * T * 4 + 1000 * 4,) * 2
    two = build(_mamba2(), parallel=2)
    assert two.rest[0] == host + 1000 * 4


def test_a_hybrid_block_keeps_its_feed_forward_as_matmul_and_the_larger_phase() -> None:
    """A recurrent block with a feed-forward (falcon-h1's): ``rest`` is the larger of the
    feed-forward and the scan, ``matmul`` the feed-forward alone, and ``later`` the larger of the
    feed-forward and the scan less one d_inner tensor. With n_ff 1024 the feed-forward
    (3 x 4 x FF + 1.3 x 4 x FF) outgrows the scan.
    Kills gpuscout._fit.estimate.x_graph__mutmut_75, _95, _115.._117, _125, _133, _137, _166, _185,
    _186, _198, _199."""
    g = build(_mamba2(n_ff=(1024, 0)))
    ffn = 3 * 4 * FF + int(1.3 * 4 * FF)
    scan = ((128 + 160 + 4) + 2 * 160 + 3 * 128) * T * 4 + ROW + 1000 * 4
    assert ffn > scan
    assert g.rest == (ffn, scan)
    assert g.matmul == (ffn, 0)
    assert g.later == (ffn, scan - 128 * T * 4)


def test_a_mamba1_block_without_a_d_inner_holds_rows_and_states() -> None:
    """A recurrent block the scan widths do not describe (no ssm_inner) holds FFN_ROWS (4.5) rows
    and its states; ``later`` is that phase too.
    Kills gpuscout._fit.estimate.x_graph__mutmut_75, _128, _160.._165, _185, _186, _198, _199."""
    g = build(_mamba2(ssm_inner=0))
    assert g.rest == g.later == (int(4.5 * ROW) + 1000 * 4,) * 2
    assert g.matmul == (0, 0)
    assert build(_mamba2(ssm_inner=0), parallel=2).rest[0] == int(4.5 * ROW) + 1000 * 4 * 2  # per sequence


def test_the_graph_is_the_hosts_by_default_and_counts_a_float_ffn_down_on_a_gpu_by_default() -> None:
    """``graph(h, c, o)`` is ggml-cpu's (``device=False``), and a GPU's graph without
    ``float_down`` assumes an unquantized ffn_down (the fourth n_ff tensor): the callers that do not
    know the weights get the larger figure. Every part is a whole number of bytes (the records
    reject a float), the masks' too with several sequences.
    Kills gpuscout._fit.estimate.x_graph__mutmut_1, _2, _17.._19, _24, _96, _101, _103, _105."""
    h = hparams()
    o = est.Options(ctx=4096)
    c = est.context(h, o)
    assert est.graph(h, c, o) == build(h)
    assert est.graph(h, c, o, device=True).rest == (4 * FF + ROW // 2,) * 2
    two = build(hparams(n_swa=200, swa=(True, False)), ctx=8192, parallel=2)
    assert [type(x) for x in two.mask_bytes] == [int, int]
    assert two.mask_bytes[1] == 768 * T * 2


# -- estimate.split_tensors: the tensors split the way llama.cpp loads them ------------------------


def _file(*tensors: tuple[str, int]) -> GGUFFile:
    infos, offset = [], 0
    for name, nbytes in tensors:
        infos.append(TensorInfo(name=name, shape=(nbytes // 4,), type=0, offset=offset, nbytes=nbytes))
        offset += nbytes
    return GGUFFile(
        path="m.gguf",
        version=3,
        alignment=32,
        data_offset=0,
        file_size=offset,
        values={},
        types={},
        skipped={},
        tensors=tuple(infos),
        offsets={},
    )


def test_blocks_output_and_input_layers_hold_their_tensors() -> None:
    """``blk.i.*`` is block i's; ``output.weight``, ``output.bias``, ``output_norm.weight`` and
    ``output_norm.bias`` the output layer's; everything else (token embeddings, rope factors, a
    name that only contains ``blk.``) the input layer's, kept in file order.
    Kills gpuscout._fit.estimate.x_split_tensors__mutmut_31, _35, _36."""
    f = _file(
        ("token_embd.weight", 4000),
        ("blk.0.attn_q.weight", 100),
        ("blk.1.attn_q.weight", 200),
        ("blk.1.ffn_up.weight", 300),
        ("output_norm.weight", 8),
        ("output_norm.bias", 12),
        ("output.weight", 4000),
        ("output.bias", 16),
        ("rope_freqs.weight", 20),
        ("v.blk.0.attn_q.weight", 24),
    )
    L = est.split_tensors(f, hparams())
    names = [[t.name for t in b] for b in L.tensors_by_block]
    assert names == [["blk.0.attn_q.weight"], ["blk.1.attn_q.weight", "blk.1.ffn_up.weight"]]
    assert L.blocks == (100, 500)
    assert [t.name for t in L.output_tensors] == [
        "output_norm.weight",
        "output_norm.bias",
        "output.weight",
        "output.bias",
    ]
    assert L.output == 8 + 12 + 4000 + 16
    assert [t.name for t in L.input_tensors] == [
        "token_embd.weight",
        "rope_freqs.weight",
        "v.blk.0.attn_q.weight",
    ]
    assert L.input == 4000 + 20 + 24
    assert L.embedding == f.tensors[0]
    assert L.tied is False


def test_without_output_weight_the_token_embeddings_are_the_tied_output() -> None:
    """A model with token embeddings and no ``output.weight`` ties its output to them (llama.cpp
    loads them a second time as the output); without either, nothing is tied.
    Kills gpuscout._fit.estimate.x_split_tensors__mutmut_26, _31."""
    tied = est.split_tensors(_file(("token_embd.weight", 4000), ("output_norm.weight", 8)), hparams())
    assert tied.tied is True and tied.embedding is not None and tied.embedding.name == "token_embd.weight"
    none = est.split_tensors(_file(("rope_freqs.weight", 20), ("output_norm.weight", 8)), hparams())
    assert none.tied is False and none.embedding is None


def test_a_block_number_of_seven_digits_is_refused_even_when_small() -> None:
    """A block number of more than six digits is refused as not below block_count (it is not
    converted, so a hostile ``blk.<huge>`` never becomes a huge int), and the message quotes at most
    20 of its digits: ``blk.0000001.*`` in a 2-block model is a ModelError, ``blk.000001.*`` is
    block 1.
    Kills gpuscout._fit.estimate.x_split_tensors__mutmut_12, _14, _15, _18, _26."""
    ok = est.split_tensors(_file(("blk.000001.attn_q.weight", 100)), hparams())
    assert ok.blocks == (0, 100)
    with pytest.raises(ModelError) as caught:
        est.split_tensors(_file(("blk.0000001.attn_q.weight", 100)), hparams())
    assert str(caught.value) == (
        "m.gguf: tensor blk.0000001.attn_q.weight: block 0000001 is not below llama.block_count = 2"
    )
    long = "9" * 30
    with pytest.raises(ModelError) as caught:
        est.split_tensors(_file((f"blk.{long}.x", 4)), hparams())
    assert f"block {'9' * 20} is not below" in str(caught.value)
