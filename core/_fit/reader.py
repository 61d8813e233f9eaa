"""A GGUF header and tensor table read so that no file can hurt the reader.

Why not ``gguf.GGUFReader``: it maps the whole file (a file truncated while mapped kills the
process with SIGBUS), builds every array as numpy objects (the 262k-entry tokenizer of a small
model costs seconds and hundreds of MiB), trusts every count (an array of 2**63 elements grows
without bound) and opens FIFOs. This reader streams the header through a small buffer:

- regular files only, opened without blocking (a FIFO or a device is refused, never waited on);
- every count is checked against the bytes left before anything is allocated (an element takes
  at least one byte, a key-value pair at least 14, a tensor info at least 24);
- the header is capped (``MAX_HEADER_BYTES``) and so is the time (``deadline``);
- strings are decoded strictly, with the offset named on error; only the metadata an estimate
  needs is kept (numbers, short strings, short numeric arrays); long arrays (the tokenizer) are
  counted and skipped, never built;
- the tensor table follows ggml's own checks (``ggml/src/gguf.cpp``, ``gguf_init_from_file_impl``):
  versions 2 and 3, no duplicate keys or tensor names, names under 64 bytes, at most 4
  dimensions, rows a whole number of blocks, offsets aligned and contiguous, data inside the file.

Everything wrong is one ``ModelError`` naming the file, the byte offset and the key or tensor.
The ``gguf`` package still supplies what it is good at: the quantisation block sizes
(``GGML_QUANT_SIZES``) and type names, so new types arrive with a ``gguf`` upgrade.
"""

from __future__ import annotations

import os
import struct
import time
from collections.abc import Mapping
from typing import Any

import attrs

from gpuscout._fit.errors import ModelError, shown
from gpuscout._fit.stream import Stream, open_regular

#: The largest header (metadata and tensor table) read: bigger than any real model's.
MAX_HEADER_BYTES = 256 << 20
#: The most tensors a file may list (a large MoE model has a few thousand).
MAX_TENSORS = 1 << 17
#: Strings up to this length are kept as values; longer ones are skipped and their length kept.
MAX_KEPT_STRING = 1 << 12
#: Numeric arrays up to this length are kept (per-layer hyperparameters); longer ones counted.
MAX_KEPT_ARRAY = 1 << 14
#: ggml's GGML_MAX_NAME: a tensor name is shorter than this many bytes.
MAX_TENSOR_NAME = 64
#: ggml's GGML_MAX_DIMS.
MAX_DIMS = 4
DEFAULT_ALIGNMENT = 32
_INT64_MAX = (1 << 63) - 1

# GGUF value types: (name, struct code, size); STRING and ARRAY are read by hand.
STRING, ARRAY = 8, 9
_SCALARS: dict[int, tuple[str, str, int]] = {
    0: ("UINT8", "B", 1),
    1: ("INT8", "b", 1),
    2: ("UINT16", "H", 2),
    3: ("INT16", "h", 2),
    4: ("UINT32", "I", 4),
    5: ("INT32", "i", 4),
    6: ("FLOAT32", "f", 4),
    7: ("BOOL", "B", 1),
    10: ("UINT64", "Q", 8),
    11: ("INT64", "q", 8),
    12: ("FLOAT64", "d", 8),
}
TYPE_NAMES = {**{k: v[0] for k, v in _SCALARS.items()}, STRING: "STRING", ARRAY: "ARRAY"}


@attrs.frozen
class TensorInfo:
    """One entry of the tensor table: ``shape`` is ggml's ne (innermost first)."""

    name: str
    shape: tuple[int, ...]
    type: int
    offset: int
    nbytes: int

    @property
    def elements(self) -> int:
        """The number of elements (1 for a 0-dimensional tensor)."""
        n = 1
        for dim in self.shape:
            n *= dim
        return n


@attrs.frozen
class Skipped:
    """A value not kept: its GGUF type (for arrays the element type) and element count or
    string length."""

    type: int
    count: int
    array: bool


@attrs.frozen
class GGUFFile:
    """What the header says: kept metadata (``values``), the GGUF type of every key
    (``types``: for arrays ``(ARRAY, element type)``), skipped values, and the tensor table."""

    path: str
    version: int
    alignment: int
    data_offset: int
    file_size: int
    values: Mapping[str, Any]
    types: Mapping[str, tuple[int, int]]
    skipped: Mapping[str, Skipped]
    tensors: tuple[TensorInfo, ...]
    offsets: Mapping[str, int]

    def count(self, key: str) -> int | None:
        """The element count of array ``key``, kept or skipped; None when absent or scalar."""
        if key in self.skipped and self.skipped[key].array:
            return self.skipped[key].count
        value = self.values.get(key)
        return len(value) if isinstance(value, tuple) else None


def quant_sizes() -> Mapping[int, tuple[int, int]]:
    """ggml type id -> (block size, bytes per block), from the installed ``gguf`` package."""
    try:
        import gguf
    except ImportError as exc:
        raise ModelError("reading GGUF files needs the gguf package: pip install 'gpuscout[gguf]'") from exc
    return {int(k): (int(v[0]), int(v[1])) for k, v in gguf.GGML_QUANT_SIZES.items()}


def type_name(ggml_type: int) -> str:
    """The ggml type's name (``Q4_K``), or its number when the installed ``gguf`` lacks it."""
    try:
        import gguf

        return str(gguf.GGMLQuantizationType(ggml_type).name)
    except (ImportError, ValueError):
        return str(ggml_type)


def read_gguf(
    path: str | os.PathLike[str], *, deadline: float | None = None, timeout: float | None = 30.0
) -> GGUFFile:
    """Read ``path``'s GGUF header and tensor table (see the module's docstring).

    ``deadline`` is a ``time.monotonic()`` value; without one, ``timeout`` seconds from now.
    Raises ``ModelError`` for anything that is not a GGUF file llama.cpp could load.
    """
    name = os.fspath(path)
    if deadline is None and timeout is not None:
        deadline = time.monotonic() + timeout
    sizes = quant_sizes()
    fd, size = open_regular(name)
    try:
        return _read(Stream(fd, name, size, deadline, MAX_HEADER_BYTES), sizes)
    finally:
        os.close(fd)


def _read(s: Stream, sizes: Mapping[int, tuple[int, int]]) -> GGUFFile:
    if s.size < 4 or s.take(4, "the magic") != b"GGUF":
        raise s.fail("not a GGUF file (no GGUF magic)", 0)
    version = s.u32("the version")
    if version & 0xFFFF == 0 and version:
        s.little = False
        version = struct.unpack("<I", struct.pack(">I", version))[0]
    if version not in (2, 3):
        raise s.fail(f"GGUF version {version} (versions 2 and 3 are read)", 4)
    n_tensors = s.u64("the tensor count")
    n_kv = s.u64("the key-value count")
    if n_tensors > MAX_TENSORS:
        raise s.fail(f"the header lists {n_tensors} tensors (at most {MAX_TENSORS} are read)", 8)
    if n_tensors * 24 + n_kv * 14 > s.left():
        raise s.fail(
            f"the header lists {n_tensors} tensors and {n_kv} key-value pairs, more than "
            f"the {s.left()} bytes left can hold",
            8,
        )
    values: dict[str, Any] = {}
    types: dict[str, tuple[int, int]] = {}
    skipped: dict[str, Skipped] = {}
    offsets: dict[str, int] = {}
    for i in range(n_kv):
        at = s.offset
        key = s.string(f"key {i}", MAX_KEPT_STRING)
        if isinstance(key, int):
            raise s.fail(f"key {i} is {key} bytes long", at)
        if not key:
            raise s.fail(f"key {i} is empty", at)
        if key in types:
            raise s.fail(f"duplicate key {shown(key)}", at)
        offsets[key] = at
        _read_value(s, key, values, types, skipped)
    alignment = DEFAULT_ALIGNMENT
    if "general.alignment" in types:
        if types["general.alignment"] != (4, 0):
            raise ModelError(
                f"{s.path}: offset {offsets['general.alignment']}: general.alignment: "
                f"expected UINT32, got {_type_text(types['general.alignment'])}"
            )
        alignment = int(values["general.alignment"])
        if alignment <= 0 or alignment & (alignment - 1):
            raise ModelError(
                f"{s.path}: offset {offsets['general.alignment']}: general.alignment "
                f"{alignment} is not a power of two"
            )
    tensors = _read_tensors(s, n_tensors, sizes, alignment)
    data_offset = s.offset
    if tensors:
        data_offset += -data_offset % alignment
    end = data_offset
    for t in tensors:
        end = data_offset + t.offset + t.nbytes
        if end > s.size:
            raise ModelError(
                f"{s.path}: tensor {shown(t.name)}: its data ({t.nbytes} bytes at offset "
                f"{data_offset + t.offset}) lies outside the file ({s.size} bytes)"
            )
    return GGUFFile(
        path=s.path,
        version=version,
        alignment=alignment,
        data_offset=data_offset,
        file_size=s.size,
        values=values,
        types=types,
        skipped=skipped,
        tensors=tensors,
        offsets=offsets,
    )


def _type_text(t: tuple[int, int]) -> str:
    kind, elem = t
    return f"an array of {TYPE_NAMES.get(elem, elem)}" if kind == ARRAY else TYPE_NAMES.get(kind, str(kind))


def _read_value(
    s: Stream,
    key: str,
    values: dict[str, Any],
    types: dict[str, tuple[int, int]],
    skipped: dict[str, Skipped],
) -> None:
    at = s.offset
    name = shown(key)  # keys reach messages escaped and cut: they may hold anything
    kind = s.u32(f"the type of {name}")
    if kind == STRING:
        types[key] = (STRING, 0)
        value = s.string(name, MAX_KEPT_STRING)
        if isinstance(value, int):
            skipped[key] = Skipped(STRING, value, False)
        else:
            values[key] = value
        return
    if kind in _SCALARS:
        _, code, size = _SCALARS[kind]
        types[key] = (kind, 0)
        value = s.scalar(code, size, name)
        values[key] = bool(value) if kind == 7 else value
        return
    if kind != ARRAY:
        raise s.fail(f"{name}: unknown GGUF value type {kind}", at)
    elem = s.u32(f"the element type of {name}")
    count = s.u64(f"the element count of {name}")
    if elem == ARRAY:
        raise s.fail(f"{name}: nested arrays are not valid GGUF (ggml refuses them)", at)
    if elem != STRING and elem not in _SCALARS:
        raise s.fail(f"{name}: unknown GGUF array element type {elem}", at)
    least = 8 if elem == STRING else _SCALARS[elem][2]
    if count > s.left() // least:
        raise s.fail(f"{name}: an array of {count} elements cannot fit in the {s.left()} bytes left", at)
    types[key] = (ARRAY, elem)
    if elem == STRING:
        s.skip_strings(count, name)
        skipped[key] = Skipped(STRING, count, True)
        return
    _, code, size = _SCALARS[elem]
    if count > MAX_KEPT_ARRAY or key.startswith("tokenizer."):
        s.skip(count * size, name)
        skipped[key] = Skipped(elem, count, True)
        return
    raw = s.take(count * size, name)
    items = struct.unpack(("<" if s.little else ">") + code * count, raw)
    values[key] = tuple(bool(v) for v in items) if elem == 7 else items


def _read_tensors(
    s: Stream, n: int, sizes: Mapping[int, tuple[int, int]], alignment: int
) -> tuple[TensorInfo, ...]:
    tensors: list[TensorInfo] = []
    seen: set[str] = set()
    expected = 0
    for i in range(n):
        at = s.offset
        name = s.string(f"the name of tensor {i}", MAX_TENSOR_NAME)
        if isinstance(name, int) or len(name.encode()) >= MAX_TENSOR_NAME:
            raise s.fail(
                f"tensor {i}: its name is {name if isinstance(name, int) else len(name.encode())} "
                f"bytes long (ggml allows {MAX_TENSOR_NAME - 1})",
                at,
            )
        if name in seen:
            raise s.fail(f"duplicate tensor name {shown(name)}", at)
        seen.add(name)
        label = shown(name)
        n_dims = s.u32(f"the dimension count of tensor {label}")
        if n_dims > MAX_DIMS:
            raise s.fail(f"tensor {label}: {n_dims} dimensions (ggml allows {MAX_DIMS})", at)
        shape = tuple(s.u64(f"the shape of tensor {label}") for _ in range(n_dims))
        elements = 1
        for dim in shape:
            if dim > _INT64_MAX:
                raise s.fail(f"tensor {label}: dimension {dim} is not a valid int64", at)
            elements *= dim
        if elements > _INT64_MAX:
            raise s.fail(f"tensor {label}: shape {list(shape)} has more than 2**63-1 elements", at)
        ggml_type = s.u32(f"the type of tensor {label}")
        if ggml_type not in sizes:
            raise s.fail(
                f"tensor {label}: unknown ggml type {ggml_type} (the installed gguf "
                "package does not know it)",
                at,
            )
        block, block_bytes = sizes[ggml_type]
        row = shape[0] if shape else 1
        if row % block:
            raise s.fail(
                f"tensor {label}: rows of {row} elements are not a whole number of "
                f"{type_name(ggml_type)} blocks of {block}",
                at,
            )
        offset = s.u64(f"the data offset of tensor {label}")
        nbytes = elements // block * block_bytes
        if offset != expected:
            raise s.fail(
                f"tensor {label}: data offset {offset}, expected {expected} (ggml reads "
                "tensors in order, each aligned)",
                at,
            )
        expected = offset + nbytes + (-nbytes % alignment)
        tensors.append(TensorInfo(name=name, shape=shape, type=ggml_type, offset=offset, nbytes=nbytes))
    return tuple(tensors)


__all__ = [
    "ARRAY",
    "MAX_HEADER_BYTES",
    "MAX_TENSORS",
    "STRING",
    "GGUFFile",
    "ModelError",
    "Skipped",
    "TensorInfo",
    "quant_sizes",
    "read_gguf",
    "shown",
    "type_name",
]
