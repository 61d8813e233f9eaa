"""Rules of the fit estimate (``gpuscout._fit.estimate``) found by mutmut's survivors
(tests/MUTATION.md, "Automatic mutants (mutmut)", second round).

Each test states a rule that no other test stated; the mutant it kills is named in its
docstring's last line.
"""

from __future__ import annotations

import pytest

from gpuscout._fit import estimate as est
from gpuscout._fit.errors import ModelError
from gpuscout._fit.reader import TensorInfo
from tests.test_mutmut_gaps_2 import hparams

# -- estimate.context, pad: the context llama.cpp builds from the options -------------------------


def test_a_context_one_past_a_multiple_of_256_is_padded_to_the_next() -> None:
    """n_ctx is rounded up to a multiple of 256 (GGML_PAD): 257 becomes 512, 256 stays, and a
    context of 1 is 256.
    Kills gpuscout._fit.estimate.x_pad__mutmut_5 (``- 2``) and x_context__mutmut_5 (``<= 1``)."""
    h = hparams()
    assert est.context(h, est.Options(ctx=257)).n_ctx == 512
    assert est.context(h, est.Options(ctx=256)).n_ctx == 256
    assert est.context(h, est.Options(ctx=1)).n_ctx == 256


def test_a_model_without_a_training_context_needs_ctx() -> None:
    """With no --ctx and no context_length in the model there is no context to build: a
    ModelError that says to give --ctx.
    Kills gpuscout._fit.estimate.x_context__mutmut_4 (``< 0``) and _6 (no message)."""
    with pytest.raises(ModelError, match=r"^llama: the model has no context_length; give --ctx$"):
        est.context(hparams(n_ctx_train=0), est.Options())


def test_more_sequences_than_context_cells_get_256_cells_each() -> None:
    """When --parallel is larger than the context, each sequence still gets 256 cells (the
    minimum), and the total context is that times the sequences.
    Kills gpuscout._fit.estimate.x_context__mutmut_16, _23 and _24 (the case of no cells left)."""
    c = est.context(hparams(), est.Options(ctx=256, parallel=512))
    assert (c.n_ctx_seq, c.n_ctx, c.full_cells) == (256, 256 * 512, 256 * 512)


def test_the_sliding_window_cache_is_the_window_plus_a_ubatch_per_sequence() -> None:
    """A sliding-window layer keeps pad(min(n_ctx_seq, n_swa + n_ubatch), 256) cells per
    sequence (all n_ctx_seq with swa_full), and every figure of the context is whole.
    Kills gpuscout._fit.estimate.x_context__mutmut_38, _39, _48, _49, _53, _54, _57 and _71."""
    h = hparams(n_swa=1000, swa=(True, False))
    assert est.context(h, est.Options(ctx=8192, parallel=2)) == est.Context(
        n_ctx=8192,
        n_ctx_seq=4096,
        n_seq=2,
        n_batch=2048,
        n_ubatch=512,
        n_tokens=512,
        full_cells=8192,
        swa_cells=2 * 1536,
    )
    assert est.context(h, est.Options(ctx=8192, swa_full=True)).swa_cells == 8192


# -- estimate.repacked, mapped_span, cache_type ---------------------------------------------------

Q2_K = 10


def tensor(kind: int, shape: tuple[int, ...], nbytes: int = 1000, offset: int = 0) -> TensorInfo:
    return TensorInfo(name="blk.0.ffn_up.weight", shape=shape, type=kind, offset=offset, nbytes=nbytes)


def test_q2_k_is_repacked_only_with_both_avx2_and_avx512f() -> None:
    """The CPU backend repacks Q2_K only on a CPU with AVX-512 on top of AVX2: neither flag alone
    repacks it.
    Kills gpuscout._fit.estimate.x_repacked__mutmut_8..11 (the avx512f test)."""
    q2 = [tensor(Q2_K, (256, 64))]
    assert est.repacked(q2, frozenset({"avx2", "avx512f"})) == 1000
    assert est.repacked(q2, frozenset({"avx2"})) == 0
    assert est.repacked(q2, frozenset({"avx512f"})) == 0


def test_3d_expert_matrices_are_repacked_but_4d_tensors_are_not() -> None:
    """Repacking applies to 2-D matrices and 3-D expert stacks, not to tensors of other ranks.
    Kills gpuscout._fit.estimate.x_repacked__mutmut_19 (``(2, 4)``)."""
    avx2 = frozenset({"avx2"})
    assert est.repacked([tensor(2, (64, 64, 8))], avx2) == 1000
    assert est.repacked([tensor(2, (64, 64, 8, 2))], avx2) == 0


def test_the_mapped_span_runs_from_the_first_tensors_data_to_the_last_ones_end() -> None:
    """The host buffer of mapped tensors is the file range from the lowest offset to the highest
    end, gaps included; no tensors map nothing.
    Kills gpuscout._fit.estimate.x_mapped_span__mutmut_2 and _3."""
    assert est.mapped_span([]) == 0
    assert est.mapped_span([tensor(2, (64, 64), 50, offset=300), tensor(2, (64, 64), 50, offset=100)]) == 250


def test_an_unknown_cache_type_names_the_types_llama_cpp_takes() -> None:
    """An unknown cache type is a ModelError that lists llama.cpp's cache types.
    Kills gpuscout._fit.estimate.x_cache_type__mutmut_2..4 (the message)."""
    with pytest.raises(ModelError) as caught:
        est.cache_type("q3_k", {})
    assert str(caught.value) == (
        "unknown cache type 'q3_k' (llama.cpp takes f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1)"
    )


# -- estimate.kv_bytes: the cache and recurrent state of each block -------------------------------


def _sizes() -> dict[int, tuple[int, int]]:
    from gpuscout._fit.reader import quant_sizes

    return dict(quant_sizes())


def test_without_flash_attention_v_rows_are_padded_to_the_widest_layer() -> None:
    """Without flash attention V is stored transposed and every layer's V rows are as wide as the
    widest layer's; with it, each layer keeps its own width.
    Kills gpuscout._fit.estimate.x_kv_bytes__mutmut_10, _11, _29 and _30."""
    h = hparams(n_head_kv=(2, 4))  # V widths 32 and 64
    for flash, v0 in ((True, 32), (False, 64)):
        o = est.Options(ctx=256, flash_attn=flash)
        kv = est.kv_bytes(h, est.context(h, o), o, _sizes())
        assert kv[0] == 256 * (32 + v0) * 2, flash


def test_a_sliding_window_layer_caches_only_its_window() -> None:
    """A sliding-window layer's cache has the window's cells, a full layer's all n_ctx cells.
    Kills gpuscout._fit.estimate.x_kv_bytes__mutmut_25 (every layer given the full cells)."""
    h = hparams(n_swa=200, swa=(True, False))
    o = est.Options(ctx=8192)
    c = est.context(h, o)
    assert (c.swa_cells, c.full_cells) == (768, 8192)
    assert est.kv_bytes(h, c, o, _sizes()) == [768 * 64 * 2, 8192 * 64 * 2]


def test_a_block_with_a_cache_and_a_recurrent_state_holds_both() -> None:
    """A block's figure is its KV cache plus its recurrent state (f32 rows of n_embd_r + n_embd_s).
    Kills gpuscout._fit.estimate.x_kv_bytes__mutmut_59 (the state replacing the cache)."""
    h = hparams(recurrent=(True, False), n_embd_r=10, n_embd_s=20)
    o = est.Options(ctx=256)
    assert est.kv_bytes(h, est.context(h, o), o, _sizes())[0] == 256 * 64 * 2 + 30 * 4


@pytest.mark.parametrize(("k", "v", "named"), [("q8_0", "f16", "q8_0"), ("f16", "q4_0", "q4_0")])
def test_a_cache_row_that_is_not_whole_blocks_names_the_type_that_refuses_it(
    k: str, v: str, named: str
) -> None:
    """A cache type whose block does not divide a layer's row is refused, and the error names that
    type (K's or V's), the block and the row's width.
    Kills gpuscout._fit.estimate.x_kv_bytes__mutmut_34..40 (the message)."""
    h = hparams(head_k=8, head_v=8)  # rows of 16 elements: not a whole 32-element block
    o = est.Options(ctx=256, cache_type_k=k, cache_type_v=v)
    with pytest.raises(ModelError) as caught:
        est.kv_bytes(h, est.context(h, o), o, _sizes())
    assert str(caught.value) == (
        f"llama: block 0: rows of 16 cache elements are not a whole number of {named} blocks; "
        "llama.cpp refuses this cache type"
    )


# -- estimate.float_ffn_down and Graph.on -----------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "kind", "floating"),
    [
        ("blk.0.ffn_down.weight", 0, True),  # F32
        ("blk.0.ffn_down.weight", 1, True),  # F16
        ("blk.0.ffn_down.weight", 30, True),  # BF16
        ("blk.0.ffn_down.weight", 2, False),  # Q4_0
        ("blk.0.ffn_up.weight", 1, False),
    ],
)
def test_only_an_unquantized_ffn_down_counts_as_float(name: str, kind: int, floating: bool) -> None:
    """The feed-forward output weights are "float" when an ``ffn_down.weight`` is F32, F16 or BF16;
    a quantized one, or another float tensor, is not.
    Kills gpuscout._fit.estimate.x_float_ffn_down__mutmut_2 and _4..9."""
    t = TensorInfo(name=name, shape=(64, 64), type=kind, offset=0, nbytes=1)
    layers = est.Layers(
        blocks=(1,),
        output=0,
        input=0,
        tied=False,
        embedding=None,
        tensors_by_block=((t,),),
        output_tensors=(),
    )
    assert est.float_ffn_down(layers) is floating


def _on_graph(logits: int) -> est.Graph:
    return est.Graph(
        masks=100,
        attention=(10,),
        scores=(0,),
        core=(0,),
        rest=(5,),
        logits=logits,
        head_rest=50,
        embeddings=0,
    )


def test_a_backend_without_attention_holds_no_masks_and_nothing_costs_nothing() -> None:
    """The masks are held only by a backend that runs some attention: the other phase alone costs
    just itself, and a backend that runs nothing has no compute buffer.
    Kills gpuscout._fit.estimate.xǁGraphǁon__mutmut_3, _5, _10, _15 and _16."""
    g = _on_graph(100)
    assert g.on([], [0], False) == 5
    assert g.on([], [], False) == 0
    assert g.on([0], [0], False) == 110


def test_the_logits_take_the_masks_hole_only_when_they_fit_in_it() -> None:
    """The head's logits reuse the masks' memory when they are no larger (equal fits), and go on
    top of the masks otherwise; the head's other tensors come on top of either.
    Kills gpuscout._fit.estimate.xǁGraphǁon__mutmut_18, _19, _24, _25 and _31."""
    assert _on_graph(100).on([0], [0], True) == 100 + 50
    assert _on_graph(150).on([0], [0], True) == 100 + 150 + 50
