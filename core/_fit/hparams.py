"""The hyperparameters llama.cpp reads from a GGUF header, read the way it reads them.

Follows ``src/llama-model.cpp`` (``llama_model_base::load_hparams``: per-layer head and
feed-forward arrays, head sizes defaulting to n_embd / n_head, the SWA head sizes), the
per-architecture ``load_arch_hparams`` in ``src/models/*.cpp`` (sliding-window patterns,
recurrent layers, latent attention) and ``src/llama-hparams.cpp`` (``n_embd_r``, ``n_embd_s``,
``set_swa_pattern``). Types are checked as ``llama-model-loader.cpp`` checks them (``GKV``: a
u32 key must be UINT32; per-layer arrays may be INT32 or UINT32).
"""

from __future__ import annotations

import math
import re
from typing import Any

import attrs

from gpuscout._fit.errors import ModelError, shown
from gpuscout._fit.reader import ARRAY, GGUFFile
from gpuscout.sizes import plural

UINT32, INT32, FLOAT32, BOOL, STRING = 4, 5, 6, 7, 8
_ARCH_NAME = re.compile(r"[A-Za-z0-9_.\-]+")
_MAX_U32 = (1 << 32) - 1

#: Sliding-window architectures: the layer pattern llama.cpp assumes when the file has no
#: ``{arch}.attention.sliding_window_pattern`` (models/*.cpp ``load_swa_pattern(ml, N, dense_first)``),
#: and the window when the file has none (gemma2: 4096).
SWA_PATTERNS: dict[str, tuple[int, bool]] = {
    "gemma2": (2, False),
    "gemma3": (6, False),
    "gemma3n": (5, False),
    "gemma-embedding": (6, False),
    "cohere2": (4, False),
    "cohere2moe": (4, True),
    "exaone4": (4, False),
    "exaone-moe": (4, False),
    "olmo2": (4, False),
    "llama4": (4, False),
    "gpt-oss": (2, False),
    "afmoe": (4, False),
    "smallthinker": (4, True),
    "plamo3": (8, False),
    "mellum": (4, False),
    "laguna": (4, True),
}
_DEFAULT_WINDOW = {"gemma2": 4096}

#: llm_arch_is_recurrent (src/llama-arch.cpp): every layer holds recurrent state, none a KV cache.
RECURRENT = {"mamba", "mamba2", "rwkv6", "rwkv6qwen2", "rwkv7", "arwkv7"}
#: Hybrids whose recurrent layers are those without KV heads (jamba, granitehybrid, plamo2,
#: lfm2: ``is_recr = n_head_kv(il) == 0``); falcon-h1 has both in every layer.
HYBRID_BY_KV_HEADS = {"jamba", "granitehybrid", "plamo2", "lfm2", "lfm2moe", "nemotron_h", "nemotron_h_moe"}
HYBRID_EVERY_LAYER = {"falcon-h1"}
#: Hybrids whose attention blocks come at an interval (gated delta net between them).
HYBRID_BY_INTERVAL = {"qwen3next", "qwen35", "qwen35moe"}
#: Architectures whose every rule above is the generic one (checked against llama.cpp's figures).
KNOWN = {
    "llama",
    "qwen2",
    "qwen3",
    "qwen3moe",
    "qwen2moe",
    "mistral3",
    "gemma",
    "gemma2",
    "gemma3",
    "deepseek2",
    "mamba",
    "mamba2",
    "jamba",
    "granitehybrid",
    "falcon-h1",
    "phi3",
    "granite",
    "olmo2",
    "cohere2",
    "gpt-oss",
    "smollm3",
    "starcoder2",
    "stablelm",
    "internlm2",
    "exaone4",
}


@attrs.frozen
class Hparams:
    """One model's shape: per-layer tuples have one entry per block."""

    arch: str
    n_layer: int
    n_embd: int
    n_ctx_train: int
    n_vocab: int
    n_head: tuple[int, ...]
    n_head_kv: tuple[int, ...]
    n_ff: tuple[int, ...]
    head_k: int
    head_v: int
    head_k_swa: int
    head_v_swa: int
    n_swa: int
    swa: tuple[bool, ...]
    kv_layers: tuple[bool, ...]
    recurrent: tuple[bool, ...]
    mla: bool
    n_embd_r: int
    n_embd_s: int
    n_expert: int
    n_expert_used: int
    n_ff_exp: int
    n_dense_lead: int = 0
    ssm_inner: int = 0
    ssm_state: int = 0
    ssm_groups: int = 0
    ssm_heads: int = 0
    notes: tuple[str, ...] = ()

    def k_width(self, il: int) -> int:
        """n_embd_k_gqa(il): K elements per cell."""
        return (self.head_k_swa if self.swa[il] else self.head_k) * self.n_head_kv[il]

    def v_width(self, il: int) -> int:
        """n_embd_v_gqa(il): V elements per cell."""
        return (self.head_v_swa if self.swa[il] else self.head_v) * self.n_head_kv[il]


class _Keys:
    """Typed look-ups in a header, failing as llama-model-loader does, naming key and offset."""

    def __init__(self, model: GGUFFile, arch: str) -> None:
        self.m, self.arch = model, arch

    def fail(self, key: str, what: str) -> ModelError:
        at = self.m.offsets.get(key)
        where = f"offset {at}: " if at is not None else ""
        return ModelError(f"{self.m.path}: {where}{key}: {what}")

    def u32(self, name: str, default: int | None = None, *, prefixed: bool = True) -> int:
        key = f"{self.arch}.{name}" if prefixed else name
        if key not in self.m.types:
            if default is None:
                raise ModelError(f"{self.m.path}: missing {key} (llama.cpp requires it)")
            return default
        if self.m.types[key] != (UINT32, 0):
            raise self.fail(key, f"expected UINT32, got {_kind(self.m.types[key])}")
        return int(self.m.values[key])

    def f32(self, name: str) -> float | None:
        key = f"{self.arch}.{name}"
        if key not in self.m.types:
            return None
        if self.m.types[key] != (FLOAT32, 0):
            raise self.fail(key, f"expected FLOAT32, got {_kind(self.m.types[key])}")
        value = float(self.m.values[key])
        if not math.isfinite(value):
            raise self.fail(key, f"expected a finite number, got {value}")
        return value

    def per_layer(self, name: str, n: int, default: tuple[int, ...] | None) -> tuple[int, ...]:
        """llama-model-loader ``get_key_or_arr``: a UINT32 for every layer, or an INT32/UINT32
        array of exactly ``n`` entries."""
        key = f"{self.arch}.{name}"
        kind = self.m.types.get(key)
        if kind is None:
            if default is None:
                raise ModelError(f"{self.m.path}: missing {key} (llama.cpp requires it)")
            return default
        if kind == (UINT32, 0):
            return (int(self.m.values[key]),) * n
        if kind not in ((ARRAY, UINT32), (ARRAY, INT32)):
            raise self.fail(key, f"expected UINT32 or an array of INT32/UINT32, got {_kind(kind)}")
        count = self.m.count(key)
        if count != n or key not in self.m.values:
            raise self.fail(key, f"expected {plural(n, 'value')} (one per block), got {count}")
        values = tuple(int(v) for v in self.m.values[key])
        bad = next((v for v in values if v < 0), None)
        if bad is not None:
            raise self.fail(key, f"expected values >= 0, got {bad}")
        return values


def _kind(kind: tuple[int, int]) -> str:
    from gpuscout._fit.reader import TYPE_NAMES

    outer, elem = kind
    if outer == ARRAY:
        return f"an array of {TYPE_NAMES.get(elem, str(elem))}"
    return TYPE_NAMES.get(outer, str(outer))


def known_to_gguf() -> set[str]:
    """The architecture names of the installed ``gguf`` package (empty without it)."""
    try:
        import gguf
    except ImportError:
        return set()
    return {str(name) for name in gguf.MODEL_ARCH_NAMES.values()}


def architecture(model: GGUFFile) -> str:
    """``general.architecture``, checked."""
    key = "general.architecture"
    if key in model.skipped:
        raise ModelError(
            f"{model.path}: offset {model.offsets[key]}: {key} is {model.skipped[key].count} bytes long"
        )
    arch = model.values.get(key)
    if model.types.get(key, (STRING, 0)) != (STRING, 0):
        raise ModelError(f"{model.path}: offset {model.offsets[key]}: {key}: expected STRING")
    if not isinstance(arch, str) or not arch:
        raise ModelError(f"{model.path}: no general.architecture in the GGUF header")
    if len(arch) > 64 or not _ARCH_NAME.fullmatch(arch):
        # Every name becomes part of key names and messages: a hostile one is refused, cut short.
        raise ModelError(
            f"{model.path}: offset {model.offsets[key]}: {key}: {shown(arch, 40)} is not "
            "an architecture name (letters, digits, '_', '-', '.', at most 64)"
        )
    return arch


def vocab_size(model: GGUFFile, keys: _Keys) -> int:
    """n_vocab as llama.cpp has it: the tokenizer's token count, else ``{arch}.vocab_size``,
    else the token embedding's rows."""
    tokens = model.count("tokenizer.ggml.tokens")
    if tokens is not None:
        return tokens
    vocab = keys.u32("vocab_size", 0)
    if vocab:
        return vocab
    embd = next((t for t in model.tensors if t.name == "token_embd.weight"), None)
    return embd.shape[1] if embd is not None and len(embd.shape) >= 2 else 0


def read_hparams(model: GGUFFile) -> Hparams:
    """The hyperparameters of ``model`` (ModelError naming the key when one is wrong)."""
    arch = architecture(model)
    k = _Keys(model, arch)
    n_layer = k.u32("block_count")
    n_embd = k.u32("embedding_length")
    tokens = model.types.get("tokenizer.ggml.tokens")
    if tokens is not None and tokens != (ARRAY, STRING):
        # llama-vocab.cpp reads the token list as strings and refuses any other type
        raise k.fail("tokenizer.ggml.tokens", "must be an array of strings (llama.cpp refuses to load it)")
    if n_layer > 1 << 16:
        raise k.fail(f"{arch}.block_count", f"{n_layer} blocks (at most 65536 are read)")
    n_ctx_train = k.u32("context_length", 0)
    notes: list[str] = []
    zeros = (0,) * n_layer
    n_ff = k.per_layer("feed_forward_length", n_layer, zeros)
    n_head = k.per_layer("attention.head_count", n_layer, zeros)
    n_head_kv = k.per_layer("attention.head_count_kv", n_layer, n_head)
    head0 = n_head[0] if n_head else 0
    head_k = head_v = 0
    if head0 > 0:
        head_k = k.u32("attention.key_length", n_embd // head0)
        head_v = k.u32("attention.value_length", n_embd // head0)
    head_k_swa = k.u32("attention.key_length_swa", head_k)
    head_v_swa = k.u32("attention.value_length_swa", head_v)
    mla = bool(k.u32("attention.key_length_mla", 0) and k.u32("attention.value_length_mla", 0))

    recurrent = _recurrent_layers(model, k, arch, n_head_kv, n_ff, n_layer)
    kv_layers = tuple(not r or arch in HYBRID_EVERY_LAYER for r in recurrent)
    if arch in RECURRENT:
        kv_layers = (False,) * n_layer
    elif arch in HYBRID_BY_KV_HEADS:  # nemotron_h's feed-forward-only blocks have neither
        kv_layers = tuple(kv and n_head_kv[il] > 0 for il, kv in enumerate(kv_layers))
    for il in range(n_layer):
        if kv_layers[il] and n_head_kv[il] == 0 and n_head[il] == 0:
            raise ModelError(
                f"{model.path}: {arch}.attention.head_count is 0 for block {il}, which needs attention heads"
            )
    n_swa, swa = _sliding_window(model, k, arch, n_layer)
    conv = k.u32("ssm.conv_kernel", 0)
    inner = k.u32("ssm.inner_size", 0)
    state = k.u32("ssm.state_size", 0)
    groups = k.u32("ssm.group_count", 0)
    if arch.startswith(("rwkv", "arwkv")):
        shift = k.u32("token_shift_count", 2)
        head_size = k.u32("wkv.head_size", 0)
        n_embd_r, n_embd_s = shift * n_embd, n_embd * head_size
    elif k.u32("shortconv.l_cache", 0):  # lfm2's short convolutions: a conv state, no scan state
        n_embd_r, n_embd_s = n_embd * (k.u32("shortconv.l_cache") - 1), 0
    else:
        n_embd_r = (conv - 1 if conv > 0 else 0) * (inner + 2 * groups * state)
        n_embd_s = state * inner
    if any(recurrent) and not (n_embd_r or n_embd_s):
        raise ModelError(f"{model.path}: {arch} has recurrent layers but no {arch}.ssm.* sizes")
    if arch not in known_to_gguf():
        notes.append(
            f"architecture {arch!r} is not one the installed gguf package knows (an "
            "upgrade may know it); estimated with the generic transformer rules"
        )
    elif arch not in KNOWN:
        notes.append(
            f"architecture {arch!r}: gpuscout has no rules of its own for it yet; "
            "estimated with the generic transformer rules"
        )
    return Hparams(
        arch=arch,
        n_layer=n_layer,
        n_embd=n_embd,
        n_ctx_train=n_ctx_train,
        n_vocab=vocab_size(model, k),
        n_head=n_head,
        n_head_kv=n_head_kv,
        n_ff=n_ff,
        head_k=head_k,
        head_v=head_v,
        head_k_swa=head_k_swa,
        head_v_swa=head_v_swa,
        n_swa=n_swa,
        swa=swa,
        kv_layers=kv_layers,
        recurrent=recurrent,
        mla=mla,
        n_embd_r=n_embd_r,
        n_embd_s=n_embd_s,
        n_expert=k.u32("expert_count", 0),
        n_expert_used=k.u32("expert_used_count", 0),
        n_ff_exp=k.u32("expert_feed_forward_length", 0),
        n_dense_lead=k.u32("leading_dense_block_count", 0),
        ssm_inner=inner,
        ssm_state=state,
        ssm_groups=groups,
        ssm_heads=k.u32("ssm.time_step_rank", 0),
        notes=tuple(notes),
    )


def _recurrent_layers(
    model: GGUFFile, k: _Keys, arch: str, n_head_kv: tuple[int, ...], n_ff: tuple[int, ...], n_layer: int
) -> tuple[bool, ...]:
    if arch in RECURRENT or arch in HYBRID_EVERY_LAYER:
        return (True,) * n_layer
    if arch in HYBRID_BY_INTERVAL:
        # models/qwen3next.cpp: {arch}.attention.recurrent_layers, else every
        # full_attention_interval-th block (default 4) is attention, the rest linear attention.
        key = f"{arch}.attention.recurrent_layers"
        if model.types.get(key) == (ARRAY, BOOL) and model.count(key) == n_layer and key in model.values:
            return tuple(bool(v) for v in model.values[key])
        if key in model.types:
            return tuple(bool(v) for v in k.per_layer("attention.recurrent_layers", n_layer, None))
        interval = k.u32("full_attention_interval", 4) or 4
        return tuple((i + 1) % interval != 0 for i in range(n_layer))
    if arch in ("nemotron_h", "nemotron_h_moe"):
        return tuple(n_head_kv[i] == 0 and n_ff[i] == 0 for i in range(n_layer))
    if arch in HYBRID_BY_KV_HEADS:
        return tuple(h == 0 for h in n_head_kv)
    return (False,) * n_layer


def _sliding_window(model: GGUFFile, k: _Keys, arch: str, n_layer: int) -> tuple[int, tuple[bool, ...]]:
    """(n_swa, is_swa per layer): models/*.cpp ``load_swa_pattern`` and
    llama-hparams.cpp ``set_swa_pattern``."""
    none = (False,) * n_layer
    n_swa = k.u32("attention.sliding_window", _DEFAULT_WINDOW.get(arch, 0))
    key = f"{arch}.attention.sliding_window_pattern"
    kind = model.types.get(key)
    if n_swa == 0 or (arch not in SWA_PATTERNS and kind is None):
        return 0, none
    if kind == (ARRAY, BOOL):
        values: Any = model.values.get(key)
        if values is None or len(values) != n_layer:
            raise k.fail(key, f"expected {plural(n_layer, 'value')} (one per block), got {model.count(key)}")
        return n_swa, tuple(bool(v) for v in values)
    pattern, dense_first = SWA_PATTERNS.get(arch, (0, False))
    if kind is not None:
        if kind != (UINT32, 0):
            raise k.fail(key, f"expected UINT32 or an array of BOOL, got {_kind(kind)}")
        pattern = int(model.values[key])
    if dense_first:
        return n_swa, tuple(pattern == 0 or il % pattern != 0 for il in range(n_layer))
    return n_swa, tuple(pattern == 0 or il % pattern < pattern - 1 for il in range(n_layer))


__all__ = ["KNOWN", "RECURRENT", "SWA_PATTERNS", "Hparams", "architecture", "read_hparams", "shown"]
