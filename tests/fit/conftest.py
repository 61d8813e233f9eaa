"""Deterministic writers of small synthetic GGUF models for the `fit` tests.

Each ``write_*`` function writes one model with fixed hyper-parameters and tensor shapes (the
weights come from a seeded generator, so the bytes are reproducible too) and returns the path.
The same functions produced the models whose real llama.cpp allocations are recorded in
``tests/data/fit/<name>.json`` (see ``bench/llama_reference.py``); the name is the key in
``MODELS``. They need only ``gguf`` and ``numpy`` and take a fraction of a second each.

Tensor shapes below are written in ggml order (ne0 first, the contiguous dimension), as
llama.cpp's ``create_tensor`` lists them; ``_Writer.tensor`` reverses them for numpy.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import gguf
import numpy as np
import pytest
from gguf import GGMLQuantizationType as Q

N_VOCAB = 1024
N_CTX_TRAIN = 32768
_KINDS = {"f32": Q.F32, "f16": Q.F16, "q8_0": Q.Q8_0, "q4_0": Q.Q4_0, "q4_k": Q.Q4_K}


def _vocab(n_vocab: int = N_VOCAB) -> tuple[list[str], list[float], list[int]]:
    """A minimal SentencePiece ("llama") vocabulary llama.cpp accepts: <unk>, <s>, </s>, the 256
    byte tokens (so every string tokenizes and "\\n" has a token), then unique filler pieces."""
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [2, 3, 3] + [6] * 256  # UNKNOWN, CONTROL, CONTROL, BYTE...
    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    fillers = ["\u2581"] + list(letters) + ["\u2581" + c for c in letters]
    fillers += [a + b for a in letters for b in letters]
    tokens += fillers[: n_vocab - len(tokens)]
    types += [1] * (n_vocab - len(types))
    scores = [0.0] * 3 + [-1000.0] * 256 + [-float(i) for i in range(n_vocab - 259)]
    assert len(tokens) == n_vocab
    return tokens, scores, types


class _Writer:
    def __init__(self, path: Path, arch: str, seed: int) -> None:
        self.path = Path(path)
        self.arch = arch
        self.rng = np.random.default_rng(seed)
        self.w = gguf.GGUFWriter(str(self.path), arch)
        self.w.add_name(f"synthetic {arch}")
        self.w.add_uint32(f"{arch}.context_length", N_CTX_TRAIN)
        tokens, scores, types = _vocab()
        self.w.add_tokenizer_model("llama")
        self.w.add_token_list(tokens)
        self.w.add_token_scores(scores)
        self.w.add_token_types(types)
        self.w.add_bos_token_id(1)
        self.w.add_eos_token_id(2)
        self.w.add_unk_token_id(0)

    def kv(self, key: str, value: int | float | list[int]) -> None:
        name = f"{self.arch}.{key}"
        if isinstance(value, list):
            self.w.add_array(name, value)
        elif isinstance(value, float):
            self.w.add_float32(name, value)
        else:
            self.w.add_uint32(name, value)

    def tensor(self, name: str, ne: tuple[int, ...], kind: str = "f32", value: float | None = None) -> None:
        """Add tensor ``name`` with ggml shape ``ne`` as F32 / F16 (normal(0, 0.02) or ``value``) or
        Q8_0 / Q4_0 / Q4_K: random but valid blocks (random quants, a fixed small f16 scale, zero
        min), built directly because that is ~50x faster than ``gguf.quants.quantize`` and the
        numpy quantizer cannot write Q4_K at all; llama.cpp sizes and repacks them the same."""
        qtype = _KINDS[kind]
        shape = tuple(reversed(ne))
        if qtype in (Q.F32, Q.F16):
            if value is not None:
                data = np.full(shape, value, dtype=np.float32)
            else:
                data = self.rng.standard_normal(shape, dtype=np.float32) * np.float32(0.02)
            self.w.add_tensor(name, data if qtype == Q.F32 else data.astype(np.float16))
            return
        bsize, tsize = gguf.GGML_QUANT_SIZES[qtype]
        assert ne[0] % bsize == 0, (name, ne)
        n_blocks = int(np.prod(ne)) // bsize
        blocks = self.rng.integers(0, 256, size=(n_blocks, tsize), dtype=np.uint8)
        blocks[:, 0:4] = np.array([0.0005, 0.0], dtype=np.float16).view(np.uint8)  # d (and dmin)
        self.w.add_tensor(name, blocks.reshape(*shape[:-1], ne[0] // bsize * tsize), raw_dtype=qtype)

    def norm(self, name: str, n: int) -> None:
        self.tensor(name, (n,), "f32", value=1.0)

    def close(self) -> Path:
        self.w.write_header_to_file()
        self.w.write_kv_data_to_file()
        self.w.write_tensors_to_file()
        self.w.close()
        return self.path


def _attention_kv(
    m: _Writer,
    n_embd: int,
    n_layer: int,
    n_head: int,
    n_head_kv: int | list[int],
    head_dim: int | None = None,
    freq_base: float = 10000.0,
) -> None:
    m.kv("embedding_length", n_embd)
    m.kv("block_count", n_layer)
    m.kv("attention.head_count", n_head)
    m.kv("attention.head_count_kv", n_head_kv)
    m.kv("attention.layer_norm_rms_epsilon", 1e-6)
    m.kv("rope.freq_base", freq_base)
    if head_dim is not None:
        m.kv("attention.key_length", head_dim)
        m.kv("attention.value_length", head_dim)


def _embeddings(m: _Writer, n_embd: int, embd: str, output: str | None) -> None:
    m.tensor("token_embd.weight", (n_embd, N_VOCAB), embd)
    m.norm("output_norm.weight", n_embd)
    if output is not None:
        m.tensor("output.weight", (n_embd, N_VOCAB), output)


def _attn(m: _Writer, i: int, n_embd: int, n_q: int, n_kv: int, kinds: tuple[str, str, str, str]) -> None:
    m.tensor(f"blk.{i}.attn_q.weight", (n_embd, n_q), kinds[0])
    m.tensor(f"blk.{i}.attn_k.weight", (n_embd, n_kv), kinds[1])
    m.tensor(f"blk.{i}.attn_v.weight", (n_embd, n_kv), kinds[2])
    m.tensor(f"blk.{i}.attn_output.weight", (n_q, n_embd), kinds[3])


def _ffn(m: _Writer, i: int, n_embd: int, n_ff: int, kinds: tuple[str, str, str]) -> None:
    m.tensor(f"blk.{i}.ffn_gate.weight", (n_embd, n_ff), kinds[0])
    m.tensor(f"blk.{i}.ffn_up.weight", (n_embd, n_ff), kinds[1])
    m.tensor(f"blk.{i}.ffn_down.weight", (n_ff, n_embd), kinds[2])


def write_llama_gqa(path: Path) -> Path:
    """llama, 4 blocks, n_embd 512, 8 heads of 64, 2 KV heads, n_ff 1536, own output.weight;
    Q4_0 attention (repacked on AVX2), Q4_K gate/up, F16 down, Q8_0 embeddings and output."""
    m = _Writer(path, "llama", seed=1)
    n_embd, n_layer, n_head, n_head_kv, n_ff = 512, 4, 8, 2, 1536
    _attention_kv(m, n_embd, n_layer, n_head, n_head_kv)
    m.kv("feed_forward_length", n_ff)
    m.kv("rope.dimension_count", n_embd // n_head)
    _embeddings(m, n_embd, "q8_0", "q8_0")
    for i in range(n_layer):
        m.norm(f"blk.{i}.attn_norm.weight", n_embd)
        _attn(m, i, n_embd, n_embd, n_head_kv * 64, ("q4_0", "q4_0", "q4_0", "q4_0"))
        m.norm(f"blk.{i}.ffn_norm.weight", n_embd)
        _ffn(m, i, n_embd, n_ff, ("q4_k", "q4_k", "f16"))
    return m.close()


def _qk_norm_attention(m: _Writer, i: int, n_embd: int, n_head: int, n_head_kv: int, head_dim: int) -> None:
    """qwen3's attention block: norm, Q8_0 q/o and F16 k/v, q/k norms, then the ffn norm."""
    m.norm(f"blk.{i}.attn_norm.weight", n_embd)
    _attn(m, i, n_embd, n_head * head_dim, n_head_kv * head_dim, ("q8_0", "f16", "f16", "q8_0"))
    m.norm(f"blk.{i}.attn_q_norm.weight", head_dim)
    m.norm(f"blk.{i}.attn_k_norm.weight", head_dim)
    m.norm(f"blk.{i}.ffn_norm.weight", n_embd)


def write_qwen3(path: Path) -> Path:
    """qwen3, 4 blocks, n_embd 512, 8 heads of 128 (key_length > n_embd/n_head), 4 KV heads,
    q/k norms, tied output (no output.weight), n_ff 1024; Q8_0 and F16 matrices."""
    m = _Writer(path, "qwen3", seed=2)
    n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff = 512, 4, 8, 4, 128, 1024
    _attention_kv(m, n_embd, n_layer, n_head, n_head_kv, head_dim)
    m.kv("feed_forward_length", n_ff)
    _embeddings(m, n_embd, "q8_0", None)
    for i in range(n_layer):
        _qk_norm_attention(m, i, n_embd, n_head, n_head_kv, head_dim)
        _ffn(m, i, n_embd, n_ff, ("q8_0", "q8_0", "q8_0"))
    return m.close()


def write_gemma3_swa(path: Path) -> Path:
    """gemma3, 8 blocks, n_embd 512, 4 heads of 256, 1 KV head, sliding window 256 with llama.cpp's
    default gemma3 pattern (every 6th layer global: layer 5 is non-SWA, the other 7 are SWA), tied
    output, n_ff 1024; Q4_0 / Q8_0 / Q4_K matrices."""
    m = _Writer(path, "gemma3", seed=3)
    n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff = 512, 8, 4, 1, 256, 1024
    _attention_kv(m, n_embd, n_layer, n_head, n_head_kv, head_dim, freq_base=1000000.0)
    m.kv("feed_forward_length", n_ff)
    m.kv("attention.sliding_window", 256)
    _embeddings(m, n_embd, "q8_0", None)
    for i in range(n_layer):
        m.norm(f"blk.{i}.attn_norm.weight", n_embd)
        _attn(m, i, n_embd, n_head * head_dim, n_head_kv * head_dim, ("q4_0", "q8_0", "q8_0", "q4_0"))
        m.norm(f"blk.{i}.post_attention_norm.weight", n_embd)
        m.norm(f"blk.{i}.attn_q_norm.weight", head_dim)
        m.norm(f"blk.{i}.attn_k_norm.weight", head_dim)
        m.norm(f"blk.{i}.ffn_norm.weight", n_embd)
        _ffn(m, i, n_embd, n_ff, ("q4_k", "q4_k", "q8_0"))
        m.norm(f"blk.{i}.post_ffw_norm.weight", n_embd)
    return m.close()


def write_deepseek2_mla(path: Path) -> Path:
    """deepseek2 with MLA: 4 blocks (1 leading dense + 3 MoE with 8 experts, 2 used, 1 shared),
    n_embd 512, 8 heads, q_lora_rank 256, kv_lora_rank 128, rope dim 32, nope dim 64, v head 64.
    As converted DeepSeek files are: key_length = kv_lora_rank + rope (160), value_length =
    kv_lora_rank (128), head_count_kv 1, key_length_mla 96, value_length_mla 64."""
    m = _Writer(path, "deepseek2", seed=4)
    n_embd, n_layer, n_head, n_ff, n_ff_exp, n_expert = 512, 4, 8, 1024, 256, 8
    q_lora, kv_lora, rope, nope, v_head = 256, 128, 32, 64, 64
    _attention_kv(m, n_embd, n_layer, n_head, 1, None)
    m.kv("attention.key_length", kv_lora + rope)
    m.kv("attention.value_length", kv_lora)
    m.kv("attention.key_length_mla", nope + rope)
    m.kv("attention.value_length_mla", v_head)
    m.kv("attention.q_lora_rank", q_lora)
    m.kv("attention.kv_lora_rank", kv_lora)
    m.kv("rope.dimension_count", rope)
    m.kv("feed_forward_length", n_ff)
    m.kv("leading_dense_block_count", 1)
    m.kv("expert_count", n_expert)
    m.kv("expert_used_count", 2)
    m.kv("expert_shared_count", 1)
    m.kv("expert_feed_forward_length", n_ff_exp)
    m.kv("expert_weights_scale", 1.0)
    _embeddings(m, n_embd, "q8_0", "q8_0")
    for i in range(n_layer):
        m.norm(f"blk.{i}.attn_norm.weight", n_embd)
        m.norm(f"blk.{i}.attn_q_a_norm.weight", q_lora)
        m.norm(f"blk.{i}.attn_kv_a_norm.weight", kv_lora)
        m.tensor(f"blk.{i}.attn_q_a.weight", (n_embd, q_lora), "q8_0")
        m.tensor(f"blk.{i}.attn_q_b.weight", (q_lora, n_head * (nope + rope)), "q8_0")
        m.tensor(f"blk.{i}.attn_kv_a_mqa.weight", (n_embd, kv_lora + rope), "q8_0")
        m.tensor(f"blk.{i}.attn_k_b.weight", (nope, kv_lora, n_head), "f16")
        m.tensor(f"blk.{i}.attn_v_b.weight", (kv_lora, v_head, n_head), "f16")
        m.tensor(f"blk.{i}.attn_output.weight", (n_head * v_head, n_embd), "q4_0")
        m.norm(f"blk.{i}.ffn_norm.weight", n_embd)
        if i == 0:
            _ffn(m, i, n_embd, n_ff, ("q4_0", "q4_0", "q8_0"))
            continue
        m.tensor(f"blk.{i}.ffn_gate_inp.weight", (n_embd, n_expert), "f32")
        m.tensor(f"blk.{i}.ffn_gate_exps.weight", (n_embd, n_ff_exp, n_expert), "q4_0")
        m.tensor(f"blk.{i}.ffn_up_exps.weight", (n_embd, n_ff_exp, n_expert), "q4_0")
        m.tensor(f"blk.{i}.ffn_down_exps.weight", (n_ff_exp, n_embd, n_expert), "q8_0")
        m.tensor(f"blk.{i}.ffn_gate_shexp.weight", (n_embd, n_ff_exp), "q8_0")
        m.tensor(f"blk.{i}.ffn_up_shexp.weight", (n_embd, n_ff_exp), "q8_0")
        m.tensor(f"blk.{i}.ffn_down_shexp.weight", (n_ff_exp, n_embd), "q8_0")
    return m.close()


def write_qwen3moe(path: Path) -> Path:
    """qwen3moe, 4 blocks, n_embd 512, 8 heads of 64, 4 KV heads, 8 experts (2 used) of 256,
    tied output; Q4_0 gate/up experts, Q8_0 down experts, Q8_0 q/o and F16 k/v attention."""
    m = _Writer(path, "qwen3moe", seed=5)
    n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff_exp, n_expert = 512, 4, 8, 4, 64, 256, 8
    _attention_kv(m, n_embd, n_layer, n_head, n_head_kv, head_dim)
    m.kv("feed_forward_length", 1536)
    m.kv("expert_count", n_expert)
    m.kv("expert_used_count", 2)
    m.kv("expert_feed_forward_length", n_ff_exp)
    _embeddings(m, n_embd, "q8_0", None)
    for i in range(n_layer):
        _qk_norm_attention(m, i, n_embd, n_head, n_head_kv, head_dim)
        m.tensor(f"blk.{i}.ffn_gate_inp.weight", (n_embd, n_expert), "f32")
        m.tensor(f"blk.{i}.ffn_gate_exps.weight", (n_embd, n_ff_exp, n_expert), "q4_0")
        m.tensor(f"blk.{i}.ffn_up_exps.weight", (n_embd, n_ff_exp, n_expert), "q4_0")
        m.tensor(f"blk.{i}.ffn_down_exps.weight", (n_ff_exp, n_embd, n_expert), "q8_0")
    return m.close()


_SSM = {"conv_kernel": 4, "inner_size": 1024, "state_size": 64, "time_step_rank": 16, "group_count": 2}


def _ssm_block(m: _Writer, i: int, n_embd: int, kinds: tuple[str, str]) -> None:
    d_inner, d_state, n_group = _SSM["inner_size"], _SSM["state_size"], _SSM["group_count"]
    n_ssm_head, conv_dim = _SSM["time_step_rank"], _SSM["inner_size"] + 2 * n_group * d_state
    m.tensor(f"blk.{i}.ssm_in.weight", (n_embd, d_inner + conv_dim + n_ssm_head), kinds[0])
    m.tensor(f"blk.{i}.ssm_conv1d.weight", (_SSM["conv_kernel"], conv_dim), "f32")
    m.tensor(f"blk.{i}.ssm_conv1d.bias", (conv_dim,), "f32")
    m.tensor(f"blk.{i}.ssm_dt.bias", (n_ssm_head,), "f32")
    m.tensor(f"blk.{i}.ssm_a", (1, n_ssm_head), "f32", value=-1.0)
    m.tensor(f"blk.{i}.ssm_d", (1, n_ssm_head), "f32", value=1.0)
    m.tensor(f"blk.{i}.ssm_norm.weight", (d_inner // n_group, n_group), "f32", value=1.0)
    m.tensor(f"blk.{i}.ssm_out.weight", (d_inner, n_embd), kinds[1])


def write_mamba2(path: Path) -> Path:
    """mamba2, 4 blocks, n_embd 512, d_inner 1024, d_state 64, 16 SSM heads, 2 groups, conv 4;
    Q8_0 in-projection, Q4_0 out-projection, F32 conv/A/D/norm, own output.weight (F16)."""
    m = _Writer(path, "mamba2", seed=6)
    n_embd, n_layer = 512, 4
    m.kv("embedding_length", n_embd)
    m.kv("block_count", n_layer)
    m.kv("attention.layer_norm_rms_epsilon", 1e-5)
    for key, value in _SSM.items():
        m.kv(f"ssm.{key}", value)
    _embeddings(m, n_embd, "q8_0", "f16")
    for i in range(n_layer):
        m.norm(f"blk.{i}.attn_norm.weight", n_embd)
        _ssm_block(m, i, n_embd, ("q8_0", "q4_0"))
    return m.close()


def write_granitehybrid(path: Path) -> Path:
    """granitehybrid (Granite 4.0 style mamba2 + attention): 6 blocks, n_embd 512; layers 2 and 5 are
    attention (8 heads of 64, 2 KV heads), the rest mamba2 (per-layer head_count_kv 0 marks them),
    dense FFN n_ff 1024 in every block, tied output; Q8_0 / Q4_0 / F16 matrices."""
    m = _Writer(path, "granitehybrid", seed=7)
    n_embd, n_head, n_ff = 512, 8, 1024
    head_count_kv = [0, 0, 2, 0, 0, 2]
    _attention_kv(m, n_embd, len(head_count_kv), n_head, head_count_kv)
    m.kv("feed_forward_length", n_ff)
    m.kv("rope.dimension_count", n_embd // n_head)
    for key, value in _SSM.items():
        m.kv(f"ssm.{key}", value)
    _embeddings(m, n_embd, "q8_0", None)
    for i, n_kv in enumerate(head_count_kv):
        m.norm(f"blk.{i}.attn_norm.weight", n_embd)
        if n_kv:
            _attn(m, i, n_embd, n_embd, n_kv * 64, ("q4_0", "q8_0", "q8_0", "q4_0"))
        else:
            _ssm_block(m, i, n_embd, ("q8_0", "q4_0"))
        m.norm(f"blk.{i}.ffn_norm.weight", n_embd)
        _ffn(m, i, n_embd, n_ff, ("q4_0", "q4_0", "f16"))
    return m.close()


# --- held-out shapes: other widths, vocabulary sizes and architectures than the models above ---


def _vocab_sized(n_vocab: int) -> tuple[list[str], list[float], list[int]]:
    """``_vocab`` for any size: the same first pieces, then "\u2581" + two letters and three letters."""
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [2, 3, 3] + [6] * 256
    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    fillers = ["\u2581"] + list(letters) + ["\u2581" + c for c in letters]
    fillers += [a + b for a in letters for b in letters]
    fillers += ["\u2581" + a + b for a in letters for b in letters]
    need = n_vocab - len(tokens)
    if len(fillers) < need:
        fillers += [a + b + c for a in letters for b in letters for c in letters][: need - len(fillers)]
    tokens += fillers[:need]
    types += [1] * (n_vocab - len(types))
    scores = [0.0] * 3 + [-1000.0] * 256 + [-float(i) for i in range(n_vocab - 259)]
    assert len(tokens) == n_vocab == len(set(tokens))
    return tokens, scores, types


class _SizedWriter(_Writer):
    """``_Writer`` with an ``n_vocab``-token vocabulary."""

    def __init__(self, path: Path, arch: str, seed: int, n_vocab: int) -> None:
        self.path = Path(path)
        self.arch = arch
        self.n_vocab = n_vocab
        self.rng = np.random.default_rng(seed)
        self.w = gguf.GGUFWriter(str(self.path), arch)
        self.w.add_name(f"synthetic {arch}")
        self.w.add_uint32(f"{arch}.context_length", N_CTX_TRAIN)
        tokens, scores, types = _vocab_sized(n_vocab)
        self.w.add_tokenizer_model("llama")
        self.w.add_token_list(tokens)
        self.w.add_token_scores(scores)
        self.w.add_token_types(types)
        self.w.add_bos_token_id(1)
        self.w.add_eos_token_id(2)
        self.w.add_unk_token_id(0)


def _sized_embeddings(m: _SizedWriter, n_embd: int, embd: str, output: str | None) -> None:
    m.tensor("token_embd.weight", (n_embd, m.n_vocab), embd)
    m.norm("output_norm.weight", n_embd)
    if output is not None:
        m.tensor("output.weight", (n_embd, m.n_vocab), output)


def write_llama_wide(path: Path) -> Path:
    """llama, 6 blocks, n_embd 1024, 16 heads of 64, 4 KV heads, n_ff 2816, 32000-token vocabulary,
    own output.weight; Q4_K embeddings / output / q / o / gate / up, F16 k and v, ffn down Q8_0 in
    even blocks and Q4_K in odd ones."""
    m = _SizedWriter(path, "llama", seed=11, n_vocab=32000)
    n_embd, n_layer, n_head, n_head_kv, n_ff = 1024, 6, 16, 4, 2816
    _attention_kv(m, n_embd, n_layer, n_head, n_head_kv)
    m.kv("feed_forward_length", n_ff)
    m.kv("rope.dimension_count", n_embd // n_head)
    _sized_embeddings(m, n_embd, "q4_k", "q4_k")
    for i in range(n_layer):
        m.norm(f"blk.{i}.attn_norm.weight", n_embd)
        _attn(m, i, n_embd, n_embd, n_head_kv * 64, ("q4_k", "f16", "f16", "q4_k"))
        m.norm(f"blk.{i}.ffn_norm.weight", n_embd)
        _ffn(m, i, n_embd, n_ff, ("q4_k", "q4_k", "q4_k" if i % 2 else "q8_0"))
    return m.close()


def write_llama_narrow(path: Path) -> Path:
    """llama, 4 blocks, n_embd 256, 4 heads of 64, 1 KV head, n_ff 768, 4096-token vocabulary,
    tied output; Q8_0 embeddings, Q4_0 q/o, Q8_0 k/v, Q4_K gate/up, F16 down."""
    m = _SizedWriter(path, "llama", seed=12, n_vocab=4096)
    n_embd, n_layer, n_head, n_head_kv, n_ff = 256, 4, 4, 1, 768
    _attention_kv(m, n_embd, n_layer, n_head, n_head_kv)
    m.kv("feed_forward_length", n_ff)
    m.kv("rope.dimension_count", n_embd // n_head)
    _sized_embeddings(m, n_embd, "q8_0", None)
    for i in range(n_layer):
        m.norm(f"blk.{i}.attn_norm.weight", n_embd)
        _attn(m, i, n_embd, n_embd, n_head_kv * 64, ("q4_0", "q8_0", "q8_0", "q4_0"))
        m.norm(f"blk.{i}.ffn_norm.weight", n_embd)
        _ffn(m, i, n_embd, n_ff, ("q4_k", "q4_k", "f16"))
    return m.close()


def write_qwen2_bias(path: Path) -> Path:
    """qwen2, 4 blocks, n_embd 896, 14 heads of 64, 2 KV heads, q/k/v biases, n_ff 4864,
    16384-token vocabulary, tied output; Q4_0 embeddings / gate / up, Q8_0 q/o, F16 k/v, Q4_K down."""
    m = _SizedWriter(path, "qwen2", seed=13, n_vocab=16384)
    n_embd, n_layer, n_head, n_head_kv, n_ff = 896, 4, 14, 2, 4864
    _attention_kv(m, n_embd, n_layer, n_head, n_head_kv, freq_base=1000000.0)
    m.kv("feed_forward_length", n_ff)
    _sized_embeddings(m, n_embd, "q4_0", None)
    for i in range(n_layer):
        m.norm(f"blk.{i}.attn_norm.weight", n_embd)
        _attn(m, i, n_embd, n_embd, n_head_kv * 64, ("q8_0", "f16", "f16", "q8_0"))
        m.tensor(f"blk.{i}.attn_q.bias", (n_embd,), "f32")
        m.tensor(f"blk.{i}.attn_k.bias", (n_head_kv * 64,), "f32")
        m.tensor(f"blk.{i}.attn_v.bias", (n_head_kv * 64,), "f32")
        m.norm(f"blk.{i}.ffn_norm.weight", n_embd)
        _ffn(m, i, n_embd, n_ff, ("q4_0", "q4_0", "q4_k"))
    return m.close()


def write_gemma2(path: Path) -> Path:
    """gemma2, 6 blocks, n_embd 576, 8 heads of 64 (q width 512 < n_embd), 4 KV heads, sliding
    window 1024 with llama.cpp's gemma2 pattern 2 (even layers SWA), attention / final logit
    soft-capping 50 / 30, n_ff 1536, 8192-token vocabulary, tied output; Q8_0 / Q4_0 matrices."""
    m = _SizedWriter(path, "gemma2", seed=14, n_vocab=8192)
    n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff = 576, 6, 8, 4, 64, 1536
    _attention_kv(m, n_embd, n_layer, n_head, n_head_kv, head_dim)
    m.kv("feed_forward_length", n_ff)
    m.kv("attention.sliding_window", 1024)
    m.kv("attn_logit_softcapping", 50.0)
    m.kv("final_logit_softcapping", 30.0)
    _sized_embeddings(m, n_embd, "q8_0", None)
    for i in range(n_layer):
        m.norm(f"blk.{i}.attn_norm.weight", n_embd)
        _attn(m, i, n_embd, n_head * head_dim, n_head_kv * head_dim, ("q8_0", "f16", "f16", "q4_0"))
        m.norm(f"blk.{i}.post_attention_norm.weight", n_embd)
        m.norm(f"blk.{i}.ffn_norm.weight", n_embd)
        _ffn(m, i, n_embd, n_ff, ("q4_0", "q4_0", "q8_0"))
        m.norm(f"blk.{i}.post_ffw_norm.weight", n_embd)
    return m.close()


def write_qwen3moe_wide(path: Path) -> Path:
    """qwen3moe, 4 blocks, n_embd 1024, 16 heads of 64, 4 KV heads, 16 experts (4 used) of 512,
    8192-token vocabulary, tied output; Q4_0 gate/up experts, Q4_K down experts."""
    m = _SizedWriter(path, "qwen3moe", seed=15, n_vocab=8192)
    n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff_exp, n_expert = 1024, 4, 16, 4, 64, 512, 16
    _attention_kv(m, n_embd, n_layer, n_head, n_head_kv, head_dim)
    m.kv("feed_forward_length", 3072)
    m.kv("expert_count", n_expert)
    m.kv("expert_used_count", 4)
    m.kv("expert_feed_forward_length", n_ff_exp)
    _sized_embeddings(m, n_embd, "q8_0", None)
    for i in range(n_layer):
        _qk_norm_attention(m, i, n_embd, n_head, n_head_kv, head_dim)
        m.tensor(f"blk.{i}.ffn_gate_inp.weight", (n_embd, n_expert), "f32")
        m.tensor(f"blk.{i}.ffn_gate_exps.weight", (n_embd, n_ff_exp, n_expert), "q4_0")
        m.tensor(f"blk.{i}.ffn_up_exps.weight", (n_embd, n_ff_exp, n_expert), "q4_0")
        m.tensor(f"blk.{i}.ffn_down_exps.weight", (n_ff_exp, n_embd, n_expert), "q4_k")
    return m.close()


def _sized_ssm_block(m: _Writer, i: int, n_embd: int, ssm: dict[str, int], kinds: tuple[str, str]) -> None:
    d_inner, d_state, n_group = ssm["inner_size"], ssm["state_size"], ssm["group_count"]
    n_ssm_head, conv_dim = ssm["time_step_rank"], ssm["inner_size"] + 2 * n_group * d_state
    m.tensor(f"blk.{i}.ssm_in.weight", (n_embd, d_inner + conv_dim + n_ssm_head), kinds[0])
    m.tensor(f"blk.{i}.ssm_conv1d.weight", (ssm["conv_kernel"], conv_dim), "f32")
    m.tensor(f"blk.{i}.ssm_conv1d.bias", (conv_dim,), "f32")
    m.tensor(f"blk.{i}.ssm_dt.bias", (n_ssm_head,), "f32")
    m.tensor(f"blk.{i}.ssm_a", (1, n_ssm_head), "f32", value=-1.0)
    m.tensor(f"blk.{i}.ssm_d", (1, n_ssm_head), "f32", value=1.0)
    m.tensor(f"blk.{i}.ssm_norm.weight", (d_inner // n_group, n_group), "f32", value=1.0)
    m.tensor(f"blk.{i}.ssm_out.weight", (d_inner, n_embd), kinds[1])


_SSM_WIDE = {"conv_kernel": 4, "inner_size": 1536, "state_size": 128, "time_step_rank": 24, "group_count": 1}


def write_mamba2_wide(path: Path) -> Path:
    """mamba2, 4 blocks, n_embd 768, d_inner 1536, d_state 128, 24 SSM heads of 64, 1 group,
    conv 4, 8192-token vocabulary, tied output; Q4_K in-projection, Q8_0 out-projection."""
    m = _SizedWriter(path, "mamba2", seed=16, n_vocab=8192)
    n_embd, n_layer = 768, 4
    m.kv("embedding_length", n_embd)
    m.kv("block_count", n_layer)
    m.kv("attention.layer_norm_rms_epsilon", 1e-5)
    for key, value in _SSM_WIDE.items():
        m.kv(f"ssm.{key}", value)
    _sized_embeddings(m, n_embd, "q8_0", None)
    for i in range(n_layer):
        m.norm(f"blk.{i}.attn_norm.weight", n_embd)
        _sized_ssm_block(m, i, n_embd, _SSM_WIDE, ("q4_k", "q8_0"))
    return m.close()


def write_falcon_h1(path: Path) -> Path:
    """falcon-h1: 4 blocks, n_embd 512, every block attention (8 heads of 64, 2 KV heads) and mamba2
    in parallel (the granitehybrid SSM sizes), n_ff 1024, 4096-token vocabulary, tied output;
    Q8_0 / Q4_0 / F16 matrices (its ffn norm is named blk.N.ffn_norm, no ".weight")."""
    m = _SizedWriter(path, "falcon-h1", seed=17, n_vocab=4096)
    n_embd, n_layer, n_head, n_head_kv, n_ff = 512, 4, 8, 2, 1024
    _attention_kv(m, n_embd, n_layer, n_head, n_head_kv)
    m.kv("feed_forward_length", n_ff)
    m.kv("rope.dimension_count", n_embd // n_head)
    for key, value in _SSM.items():
        m.kv(f"ssm.{key}", value)
    _sized_embeddings(m, n_embd, "q8_0", None)
    for i in range(n_layer):
        m.norm(f"blk.{i}.attn_norm.weight", n_embd)
        _attn(m, i, n_embd, n_embd, n_head_kv * 64, ("q4_0", "q8_0", "q8_0", "q4_0"))
        _ssm_block(m, i, n_embd, ("q8_0", "q4_0"))
        m.norm(f"blk.{i}.ffn_norm", n_embd)
        _ffn(m, i, n_embd, n_ff, ("q4_0", "q4_0", "f16"))
    return m.close()


MODELS: dict[str, Callable[[Path], Path]] = {
    "llama-gqa": write_llama_gqa,
    "qwen3": write_qwen3,
    "gemma3-swa": write_gemma3_swa,
    "deepseek2-mla": write_deepseek2_mla,
    "qwen3moe": write_qwen3moe,
    "mamba2": write_mamba2,
    "granitehybrid": write_granitehybrid,
    "llama-wide": write_llama_wide,
    "llama-narrow": write_llama_narrow,
    "qwen2-bias": write_qwen2_bias,
    "gemma2": write_gemma2,
    "qwen3moe-wide": write_qwen3moe_wide,
    "mamba2-wide": write_mamba2_wide,
    "falcon-h1": write_falcon_h1,
}


@pytest.fixture
def fit_model(tmp_path: Path) -> Callable[[str], Path]:
    """``fit_model("llama-gqa")`` writes that synthetic model under tmp_path and returns its path."""

    def write(name: str) -> Path:
        return MODELS[name](tmp_path / f"{name}.gguf")

    return write
