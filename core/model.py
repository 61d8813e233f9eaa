"""Model sizes from a GGUF file's header and tensor table, for ``gpuscout fit`` and ``Scout.plan``.

Pure: ``model_sizes`` reads an open ``gguf.GGUFReader`` (duck-typed: ``fields`` and ``tensors``)
and never touches a device. See docs/fit.md for what is counted and how.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

import attrs

from gpuscout.errors import GpuscoutError

#: Bytes per cache element for each ``--kv-type`` (q8_0: 34-byte blocks of 32, q4_0: 18 of 32).
KV_TYPES: dict[str, float] = {"f16": 2.0, "q8_0": 34 / 32, "q4_0": 18 / 32}

#: Tokens per compute batch in the graph estimate (llama.cpp's default ubatch).
GRAPH_BATCH = 512

_BLOCK = re.compile(r"blk\.(\d+)\.")
_OUTPUT = ("output.weight", "output_norm.weight", "output.bias", "output_norm.bias")


class ModelError(GpuscoutError):
    """The model file cannot be read as a GGUF model (one line naming the problem)."""


def _ints(value: Iterable[int]) -> tuple[int, ...]:
    return tuple(int(v) for v in value)


@attrs.frozen
class ModelSizes:
    """What a model needs, in bytes: weights per repeating block, the output layer, the input
    weights (token embeddings, always on the CPU), the KV cache per block and a graph estimate."""

    architecture: str = ""
    layer_weights: tuple[int, ...] = attrs.field(default=(), converter=_ints)
    output_weights: int = 0
    input_weights: int = 0
    kv_cache_per_layer: tuple[int, ...] = attrs.field(default=(), converter=_ints)
    graph: int = 0
    context_length: int = 0
    path: str = ""

    @property
    def blocks(self) -> int:
        """Number of repeating blocks (the output layer is layer ``blocks``)."""
        return len(self.layer_weights)

    def layers(self) -> list[int]:
        """Per-layer sizes for ``Scout.plan``: each block's weights plus its cache, then the
        output layer last."""
        kv = list(self.kv_cache_per_layer) + [0] * (self.blocks - len(self.kv_cache_per_layer))
        return [w + c for w, c in zip(self.layer_weights, kv, strict=False)] + [self.output_weights]


def given_layers(sizes: Sequence[int]) -> ModelSizes:
    """Sizes given on the command line (``--layers``): blocks, then the output layer last."""
    if not sizes:
        raise ModelError("--layers: expected at least one size")
    return ModelSizes(layer_weights=tuple(sizes[:-1]), output_weights=sizes[-1])


def _value(reader: Any, key: str) -> Any:
    """The value of header field ``key``: a scalar, a str, a list, or None when absent."""
    field = reader.fields.get(key)
    if field is None:
        return None
    contents = getattr(field, "contents", None)
    if callable(contents):
        return contents()
    # Older gguf: decode from parts/data by hand.
    values = [field.parts[i] for i in field.data]
    if field.types and int(field.types[0]) == 8:  # STRING
        return bytes(values[0]).decode("utf-8", "replace")
    scalars = [v.tolist()[0] if hasattr(v, "tolist") else v for v in values]
    return scalars if field.types and int(field.types[0]) == 9 else scalars[0]


def _int(value: Any, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ModelError(f"{key}: expected a non-negative number, got {value!r:.40}")
    return int(value)


def _per_layer(value: Any, blocks: int, key: str) -> list[int]:
    if isinstance(value, list):
        numbers = [_int(v, key) for v in value]
        if len(numbers) < blocks:
            raise ModelError(f"{key}: {len(numbers)} values for {blocks} blocks")
        return numbers[:blocks]
    return [_int(value, key)] * blocks


def known_architectures() -> set[str]:
    """The architecture names the installed ``gguf`` package knows."""
    import gguf

    return set(gguf.MODEL_ARCH_NAMES.values())


def model_sizes(reader: Any, *, ctx: int | None = None, kv_type: str = "f16",
                architectures: Iterable[str] | None = None, path: str = "") -> ModelSizes:
    """The sizes of the model ``reader`` holds (see docs/fit.md).

    Block weights are the ``n_bytes`` of every ``blk.N.*`` tensor, whatever its type; the output
    layer is ``output.weight`` and ``output_norm.weight``; every other tensor (token embeddings)
    is an input weight. The KV cache of block i is ctx * head_count_kv[i] * (key_length +
    value_length) * bytes per element of ``kv_type``; an architecture without attention heads
    has none. Raises ``ModelError`` for an unknown architecture or a malformed header.
    """
    if kv_type not in KV_TYPES:
        raise ModelError(f"unknown cache type {kv_type!r} (choose from {', '.join(KV_TYPES)})")
    arch = _value(reader, "general.architecture")
    if not isinstance(arch, str) or not arch:
        raise ModelError("no general.architecture in the GGUF header")
    known = set(architectures) if architectures is not None else known_architectures()
    if arch not in known:
        raise ModelError(f"unknown architecture {arch!r}")
    block_count = _value(reader, f"{arch}.block_count")
    blocks = _int(block_count, f"{arch}.block_count") if block_count is not None else 0

    weights = [0] * blocks
    output = input_weights = 0
    vocab_rows = 0
    for tensor in reader.tensors:
        name = str(tensor.name)
        size = int(tensor.n_bytes)
        match = _BLOCK.match(name)
        if match and int(match.group(1)) < blocks:
            weights[int(match.group(1))] += size
        elif match:
            raise ModelError(f"tensor {name} is past {arch}.block_count = {blocks}")
        elif name in _OUTPUT:
            output += size
        else:
            input_weights += size
            if name == "token_embd.weight" and len(tensor.shape) >= 2:
                vocab_rows = int(tensor.shape[-1])

    context = ctx if ctx is not None else _value(reader, f"{arch}.context_length")
    context = _int(context, f"{arch}.context_length") if context is not None else 0
    embd = _value(reader, f"{arch}.embedding_length")
    embd = _int(embd, f"{arch}.embedding_length") if embd is not None else 0
    heads_value = _value(reader, f"{arch}.attention.head_count")
    kv = [0] * blocks
    if heads_value is not None and blocks:
        heads = _per_layer(heads_value, blocks, f"{arch}.attention.head_count")
        kv_value = _value(reader, f"{arch}.attention.head_count_kv")
        kv_heads = (_per_layer(kv_value, blocks, f"{arch}.attention.head_count_kv")
                    if kv_value is not None else heads)
        key_len = _value(reader, f"{arch}.attention.key_length")
        value_len = _value(reader, f"{arch}.attention.value_length")
        per_element = KV_TYPES[kv_type]
        for i in range(blocks):
            head_size = embd // heads[i] if heads[i] else 0
            k = _int(key_len, f"{arch}.attention.key_length") if key_len is not None else head_size
            v = (_int(value_len, f"{arch}.attention.value_length") if value_len is not None
                 else head_size)
            kv[i] = int(context * kv_heads[i] * (k + v) * per_element)
    vocab = _value(reader, f"{arch}.vocab_size")
    tokens = _value(reader, "tokenizer.ggml.tokens")
    if vocab is not None:
        n_vocab = _int(vocab, f"{arch}.vocab_size")
    elif isinstance(tokens, list):
        n_vocab = len(tokens)
    else:
        n_vocab = vocab_rows
    graph = 4 * GRAPH_BATCH * (4 * embd + n_vocab)
    return ModelSizes(architecture=arch, layer_weights=tuple(weights), output_weights=output,
                      input_weights=input_weights, kv_cache_per_layer=tuple(kv), graph=graph,
                      context_length=context, path=path)


def read_model(path: str, *, ctx: int | None = None, kv_type: str = "f16") -> ModelSizes:
    """Open ``path`` with ``gguf.GGUFReader`` and return its sizes; ``ModelError`` (one line)
    when it is missing, not GGUF, truncated or of an unknown architecture. Needs ``gguf``."""
    import gguf

    try:
        reader = gguf.GGUFReader(path)
    except OSError as exc:
        raise ModelError(f"{path}: {exc.strerror or exc}") from exc
    except Exception as exc:  # the reader raises ValueError, IndexError, struct errors...
        raise ModelError(f"{path}: not a readable GGUF file ({_reason(exc)})") from exc
    try:
        return model_sizes(reader, ctx=ctx, kv_type=kv_type, path=path)
    except ModelError as exc:
        raise ModelError(f"{path}: {exc}") from exc


def _reason(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:200]


__all__ = ["GRAPH_BATCH", "KV_TYPES", "ModelError", "ModelSizes", "given_layers", "known_architectures",
           "model_sizes", "read_model"]
