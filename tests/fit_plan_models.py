"""Deterministic writers of larger synthetic GGUF models whose tensor data is a sparse hole.

These are the models of ``tests/data/fit_plan`` (llama.cpp's own ``--fit`` decisions): big enough
that a layer is tens of MiB, so on lavapipe's 2048 MiB llama.cpp has to drop context, leave layers
on the CPU, split them across devices and move MoE experts to the CPU. Each ``write_*`` function
writes the GGUF header (every KV pair and tensor info, then the alignment padding) and extends the
file with ``truncate`` to its full size, so the weights cost no disk: llama.cpp's fit loads models
with ``no_alloc`` and never reads tensor data. Only the header bytes are written, so the same
function always gives the same bytes (``header_sha256`` hashes them). A plain module, not a test
file: it needs only ``gguf`` and ``numpy``.

Tensor shapes are written in ggml order (ne0 first, the contiguous dimension), as llama.cpp's
``create_tensor`` lists them. Vocabularies are small (4096 tokens) so that each gzipped header
stays a few KB.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gguf
import numpy as np
from gguf import GGMLQuantizationType as Q

N_VOCAB = 4096
_KINDS = {"f32": Q.F32, "f16": Q.F16, "q8_0": Q.Q8_0, "q4_0": Q.Q4_0, "q4_k": Q.Q4_K, "q6_k": Q.Q6_K}


def _vocab(n_vocab: int) -> tuple[list[str], list[float], list[int]]:
    """A SentencePiece ("llama") vocabulary llama.cpp accepts: <unk>, <s>, </s>, the 256 byte
    tokens, then unique filler pieces (letters, pairs, "\u2581" + pairs), as tests/fit/conftest.py."""
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [2, 3, 3] + [6] * 256  # UNKNOWN, CONTROL, CONTROL, BYTE...
    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    fillers = ["\u2581"] + list(letters) + ["\u2581" + c for c in letters]
    fillers += [a + b for a in letters for b in letters]
    fillers += ["\u2581" + a + b for a in letters for b in letters]
    need = n_vocab - len(tokens)
    assert 0 < need <= len(fillers), n_vocab
    tokens += fillers[:need]
    types += [1] * need
    scores = [0.0] * 3 + [-1000.0] * 256 + [-float(i) for i in range(need)]
    assert len(tokens) == n_vocab == len(set(tokens))
    return tokens, scores, types


def _conftest() -> Any:
    """tests/fit/conftest.py, whose tensor helpers (``_attention_kv``, ``_attn``, ``_ffn``) write
    through any writer with ``kv`` and ``tensor``: the header writer below is one."""
    spec = importlib.util.spec_from_file_location(
        "gpuscout_fit_conftest", Path(__file__).parent / "fit" / "conftest.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_SHARED = _conftest()
_attention_kv, _attn, _ffn = _SHARED._attention_kv, _SHARED._attn, _SHARED._ffn


class HeaderWriter:
    """A GGUF writer that writes tensor infos only and leaves the data range as a sparse hole."""

    def __init__(self, path: Path, arch: str, n_ctx_train: int, n_vocab: int = N_VOCAB) -> None:
        self.path = Path(path)
        self.arch = arch
        self.n_vocab = n_vocab
        self.data_size = 0
        self.w = gguf.GGUFWriter(str(self.path), arch)
        self.w.add_name(f"synthetic {arch} (header only)")
        self.w.add_uint32(f"{arch}.context_length", n_ctx_train)
        tokens, scores, types = _vocab(n_vocab)
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
        """Add the info of tensor ``name``, ggml shape ``ne``, type ``kind``; no data (``value``,
        the fill conftest's writer takes, has nothing to fill here)."""
        qtype = _KINDS[kind]
        bsize, tsize = gguf.GGML_QUANT_SIZES[qtype]
        assert ne[0] % bsize == 0, (name, ne)
        nbytes = int(np.prod(ne)) // bsize * tsize
        # with a raw dtype and a non-uint8 numpy dtype the shape is taken as given (numpy order)
        self.w.add_tensor_info(name, tuple(reversed(ne)), np.dtype(np.float32), nbytes, raw_dtype=qtype)
        self.data_size += gguf.GGUFWriter.ggml_pad(nbytes, self.w.data_alignment)

    def norm(self, name: str, n: int) -> None:
        self.tensor(name, (n,), "f32")

    def close(self) -> Path:
        self.w.write_header_to_file()
        self.w.write_kv_data_to_file()
        self.w.write_ti_data_to_file()
        assert self.w.fout is not None
        fout = self.w.fout[0]
        self.w.write_padding(fout, fout.tell())
        data_offset = fout.tell()
        self.w.close()
        with open(self.path, "r+b") as fh:
            fh.truncate(data_offset + self.data_size)
        return self.path


def _embeddings(m: HeaderWriter, n_embd: int, embd: str, output: str | None) -> None:
    m.tensor("token_embd.weight", (n_embd, m.n_vocab), embd)
    m.norm("output_norm.weight", n_embd)
    if output is not None:
        m.tensor("output.weight", (n_embd, m.n_vocab), output)


def write_dense32(path: Path) -> Path:
    """llama, 32 blocks, n_embd 2048, 16 heads of 128, 4 KV heads, n_ff 8192, training context
    32768, own output.weight; Q8_0 attention, Q4_K gate/up/down: about 37.6 MiB a block, the
    f16 KV cache 64 MiB a block at the full context."""
    m = HeaderWriter(path, "llama", n_ctx_train=32768)
    n_embd, n_layer, n_head, n_head_kv, n_ff = 2048, 32, 16, 4, 8192
    _attention_kv(m, n_embd, n_layer, n_head, n_head_kv)
    m.kv("feed_forward_length", n_ff)
    m.kv("rope.dimension_count", n_embd // n_head)
    _embeddings(m, n_embd, "q8_0", "q8_0")
    for i in range(n_layer):
        m.norm(f"blk.{i}.attn_norm.weight", n_embd)
        _attn(m, i, n_embd, n_embd, n_head_kv * 128, ("q8_0", "q8_0", "q8_0", "q8_0"))
        m.norm(f"blk.{i}.ffn_norm.weight", n_embd)
        _ffn(m, i, n_embd, n_ff, ("q4_k", "q4_k", "q4_k"))
    return m.close()


def write_llama70b(path: Path) -> Path:
    """A Llama-3-70B-shaped Q8_0 model (80 blocks, n_embd 8192, 64 heads of 128, 8 KV heads,
    n_ff 28672, training context 131072; a small vocabulary keeps the header small): about
    850 MiB a block, 70 GB in all, every byte of it a sparse hole."""
    m = HeaderWriter(path, "llama", n_ctx_train=131072)
    n_embd, n_layer, n_head, n_head_kv, n_ff = 8192, 80, 64, 8, 28672
    _attention_kv(m, n_embd, n_layer, n_head, n_head_kv)
    m.kv("feed_forward_length", n_ff)
    m.kv("rope.dimension_count", n_embd // n_head)
    _embeddings(m, n_embd, "q8_0", "q8_0")
    for i in range(n_layer):
        m.norm(f"blk.{i}.attn_norm.weight", n_embd)
        _attn(m, i, n_embd, n_embd, n_head_kv * 128, ("q8_0", "q8_0", "q8_0", "q8_0"))
        m.norm(f"blk.{i}.ffn_norm.weight", n_embd)
        _ffn(m, i, n_embd, n_ff, ("q8_0", "q8_0", "q8_0"))
    return m.close()


def write_dense16(path: Path) -> Path:
    """llama, 16 blocks, n_embd 3072, 24 heads of 128, 4 KV heads, n_ff 8192, training context
    65536, tied output; Q8_0 attention, Q4_K gate/up, ffn down Q6_K in even blocks and Q8_0 in
    odd ones (blocks of about 70 and 76 MiB, unequal on purpose); the f16 KV cache is 128 MiB a
    block at the full context, each K or V tensor 64 MiB (lavapipe's largest allocation is 128
    MiB: a cache tensor past it makes llama.cpp abort, so the context stays at 65536)."""
    m = HeaderWriter(path, "llama", n_ctx_train=65536)
    n_embd, n_layer, n_head, n_head_kv, n_ff = 3072, 16, 24, 4, 8192
    _attention_kv(m, n_embd, n_layer, n_head, n_head_kv)
    m.kv("feed_forward_length", n_ff)
    m.kv("rope.dimension_count", n_embd // n_head)
    _embeddings(m, n_embd, "q8_0", None)
    for i in range(n_layer):
        m.norm(f"blk.{i}.attn_norm.weight", n_embd)
        _attn(m, i, n_embd, n_embd, n_head_kv * 128, ("q8_0", "q8_0", "q8_0", "q8_0"))
        m.norm(f"blk.{i}.ffn_norm.weight", n_embd)
        _ffn(m, i, n_embd, n_ff, ("q4_k", "q4_k", "q8_0" if i % 2 else "q6_k"))
    return m.close()


def _qwen3moe(
    path: Path,
    n_layer: int,
    n_embd: int,
    n_head: int,
    n_head_kv: int,
    n_expert: int,
    n_used: int,
    n_ff_exp: int,
) -> Path:
    m = HeaderWriter(path, "qwen3moe", n_ctx_train=32768)
    head_dim = 128
    _attention_kv(m, n_embd, n_layer, n_head, n_head_kv)
    m.kv("attention.key_length", head_dim)
    m.kv("attention.value_length", head_dim)
    m.kv("feed_forward_length", 4 * n_embd)
    m.kv("expert_count", n_expert)
    m.kv("expert_used_count", n_used)
    m.kv("expert_feed_forward_length", n_ff_exp)
    _embeddings(m, n_embd, "q8_0", None)
    for i in range(n_layer):
        m.norm(f"blk.{i}.attn_norm.weight", n_embd)
        _attn(m, i, n_embd, n_head * head_dim, n_head_kv * head_dim, ("q8_0", "q8_0", "q8_0", "q8_0"))
        m.norm(f"blk.{i}.attn_q_norm.weight", head_dim)
        m.norm(f"blk.{i}.attn_k_norm.weight", head_dim)
        m.norm(f"blk.{i}.ffn_norm.weight", n_embd)
        m.tensor(f"blk.{i}.ffn_gate_inp.weight", (n_embd, n_expert), "f32")
        m.tensor(f"blk.{i}.ffn_gate_exps.weight", (n_embd, n_ff_exp, n_expert), "q4_0")
        m.tensor(f"blk.{i}.ffn_up_exps.weight", (n_embd, n_ff_exp, n_expert), "q4_0")
        m.tensor(f"blk.{i}.ffn_down_exps.weight", (n_ff_exp, n_embd, n_expert), "q8_0")
    return m.close()


def write_moe24(path: Path) -> Path:
    """qwen3moe, 24 blocks, n_embd 2048, 16 heads of 128, 4 KV heads, 32 experts (4 used) of 768,
    training context 32768, tied output; Q4_0 gate/up experts (27 MiB each), Q8_0 down experts
    (51 MiB), Q8_0 attention (about 10.6 MiB of dense weights a block)."""
    return _qwen3moe(path, 24, 2048, 16, 4, 32, 4, 768)


def write_moe8(path: Path) -> Path:
    """qwen3moe, 8 blocks, n_embd 1024, 8 heads of 128, 2 KV heads, 8 experts (2 used) of 2048,
    training context 32768, tied output: few blocks, each mostly experts (about 35 MiB of
    experts, 2.6 MiB dense)."""
    return _qwen3moe(path, 8, 1024, 8, 2, 8, 2, 2048)


_SSM = {"conv_kernel": 4, "inner_size": 4096, "state_size": 128, "time_step_rank": 64, "group_count": 1}


def _ssm_block(m: HeaderWriter, i: int, n_embd: int, kinds: tuple[str, str]) -> None:
    _SHARED._sized_ssm_block(m, i, n_embd, _SSM, kinds)


def write_mamba2_24(path: Path) -> Path:
    """mamba2, 24 blocks, n_embd 2048, d_inner 4096, d_state 128 (a state ggml-vulkan scans), 64
    SSM heads of 64, 1 group, conv 4, training context 32768, own output.weight; Q8_0
    projections: about 26 MiB a block, a recurrent state that does not grow with the context."""
    m = HeaderWriter(path, "mamba2", n_ctx_train=32768)
    n_embd, n_layer = 2048, 24
    m.kv("embedding_length", n_embd)
    m.kv("block_count", n_layer)
    m.kv("attention.layer_norm_rms_epsilon", 1e-5)
    for key, value in _SSM.items():
        m.kv(f"ssm.{key}", value)
    _embeddings(m, n_embd, "q8_0", "q8_0")
    for i in range(n_layer):
        m.norm(f"blk.{i}.attn_norm.weight", n_embd)
        _ssm_block(m, i, n_embd, ("q8_0", "q8_0"))
    return m.close()


def write_hybrid24(path: Path) -> Path:
    """granitehybrid, 24 blocks, n_embd 2048: every 6th block (5, 11, 17, 23) attention with 16
    heads of 128 and 4 KV heads, the rest mamba2 (the mamba2-24 SSM sizes), a dense Q4_K FFN of
    n_ff 4096 in every block, training context 32768, tied output: recurrent blocks of about
    39 MiB, attention blocks of about 24 MiB."""
    m = HeaderWriter(path, "granitehybrid", n_ctx_train=32768)
    n_embd, n_layer, n_head, n_ff = 2048, 24, 16, 4096
    head_count_kv = [4 if i % 6 == 5 else 0 for i in range(n_layer)]
    _attention_kv(m, n_embd, n_layer, n_head, head_count_kv)
    m.kv("feed_forward_length", n_ff)
    m.kv("rope.dimension_count", n_embd // n_head)
    for key, value in _SSM.items():
        m.kv(f"ssm.{key}", value)
    _embeddings(m, n_embd, "q8_0", None)
    for i, n_kv in enumerate(head_count_kv):
        m.norm(f"blk.{i}.attn_norm.weight", n_embd)
        if n_kv:
            _attn(m, i, n_embd, n_embd, n_kv * 128, ("q8_0", "q8_0", "q8_0", "q8_0"))
        else:
            _ssm_block(m, i, n_embd, ("q8_0", "q8_0"))
        m.norm(f"blk.{i}.ffn_norm.weight", n_embd)
        _ffn(m, i, n_embd, n_ff, ("q4_k", "q4_k", "q4_k"))
    return m.close()


MODELS: dict[str, Callable[[Path], Path]] = {
    "dense32": write_dense32,
    "dense16": write_dense16,
    "moe24": write_moe24,
    "moe8": write_moe8,
    "mamba2-24": write_mamba2_24,
    "hybrid24": write_hybrid24,
}


def data_offset(path: Path) -> int:
    """Where the tensor data of the GGUF file at ``path`` starts."""
    return int(gguf.GGUFReader(str(path)).data_offset)


def header_sha256(path: Path, offset: int | None = None) -> str:
    """The sha256 of the bytes before the tensor data of the GGUF file at ``path``."""
    n = data_offset(path) if offset is None else offset
    with open(path, "rb") as fh:
        head = fh.read(n)
    assert len(head) == n, path
    return hashlib.sha256(head).hexdigest()


def write_header_gz(model: Path, out: Path) -> int:
    """Write the bytes before ``model``'s tensor data to ``out``, gzipped (mtime 0, no name, so
    the same model gives the same bytes), atomically; return the data offset."""
    n = data_offset(model)
    with open(model, "rb") as fh:
        head = fh.read(n)
    tmp = out.with_name(f".{out.name}.tmp{os.getpid()}")
    with (
        open(tmp, "wb") as raw,
        gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=9, mtime=0) as gz,
    ):
        gz.write(head)
    os.replace(tmp, out)
    return n


def restore(header_gz: Path, file_size: int, dest: Path) -> Path:
    """Gunzip ``header_gz`` to ``dest`` and extend it (sparse) to ``file_size`` bytes."""
    with gzip.open(header_gz, "rb") as gz, open(dest, "wb") as fh:
        fh.write(gz.read())
        fh.truncate(file_size)
    return dest
