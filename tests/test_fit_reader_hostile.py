"""Hostile GGUF files: read_gguf, read_hparams and ``gpuscout fit`` answer each one quickly with
one ModelError line (file, offset, key or tensor), never a hang, a traceback or a memory spike."""

from __future__ import annotations

import math
import os
import struct
import time
import tracemalloc
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest

from gpuscout._fit import reader
from gpuscout._fit.errors import ModelError
from gpuscout._fit.reader import MAX_TENSORS, read_gguf
from gpuscout._fit.stream import open_regular
from gpuscout.sizes import MIB
from gpuscout.testing import promptly

gguf = pytest.importorskip("gguf")

T = TypeVar("T")
UINT8, INT8, UINT16, INT16, UINT32, INT32, FLOAT32, BOOL, STRING, ARRAY, UINT64, INT64, FLOAT64 = range(13)
F32, Q8_0 = 0, 8
_CODES = {
    UINT8: "B",
    INT8: "b",
    UINT16: "H",
    INT16: "h",
    UINT32: "I",
    INT32: "i",
    FLOAT32: "f",
    BOOL: "?",
    UINT64: "Q",
    INT64: "q",
    FLOAT64: "d",
}
QUANT_SIZES = {int(k): (int(v[0]), int(v[1])) for k, v in gguf.GGML_QUANT_SIZES.items()}
LIMIT_S = 2.0
ARCH = "general.architecture"
HOSTILE_KEY = "a\nb\x1b[31m'$(rm -rf /)'\"`x`"

KV = tuple[str | bytes, int, Any]
Tensor = tuple[str | bytes, tuple[int, ...], int]

LLAMA: list[KV] = [
    ("general.architecture", STRING, "llama"),
    ("llama.block_count", UINT32, 2),
    ("llama.embedding_length", UINT32, 64),
    ("llama.attention.head_count", UINT32, 4),
    ("llama.context_length", UINT32, 128),
]
LLAMA_TENSORS: list[Tensor] = [
    ("token_embd.weight", (64, 16), F32),
    ("blk.0.attn_norm.weight", (64,), F32),
    ("blk.1.attn_norm.weight", (64,), F32),
    ("output_norm.weight", (64,), F32),
]


# -- writing GGUF by hand -------------------------------------------------------------------------


def gstring(text: str | bytes, e: str = "<") -> bytes:
    raw = text.encode() if isinstance(text, str) else text
    return struct.pack(e + "Q", len(raw)) + raw


def value(kind: int, v: Any, e: str = "<") -> bytes:
    if kind == STRING:
        return gstring(v, e)
    if kind == ARRAY:
        elem, items = v
        return struct.pack(e + "IQ", elem, len(items)) + b"".join(value(elem, x, e) for x in items)
    return struct.pack(e + _CODES[kind], v)


def kv_bytes(key: str | bytes, kind: int, v: Any, e: str = "<") -> bytes:
    return gstring(key, e) + struct.pack(e + "I", kind) + value(kind, v, e)


def gguf_bytes(
    kvs: Sequence[KV] = LLAMA,
    tensors: Sequence[Tensor] = LLAMA_TENSORS,
    *,
    version: int = 3,
    e: str = "<",
    alignment: int = 32,
    offsets: Sequence[int] = (),
    data: bool = True,
    n_tensors: int | None = None,
    n_kv: int | None = None,
) -> bytes:
    """A GGUF file: header, kv pairs, tensor infos (contiguous aligned offsets unless given) and
    zeroed tensor data (unless ``data`` is false); the counts may be overridden."""
    out = [
        b"GGUF",
        struct.pack(
            e + "IQQ",
            version,
            len(tensors) if n_tensors is None else n_tensors,
            len(kvs) if n_kv is None else n_kv,
        ),
    ]
    out += [kv_bytes(key, kind, v, e) for key, kind, v in kvs]
    at = 0
    for i, (name, dims, ggml_type) in enumerate(tensors):
        block, block_bytes = QUANT_SIZES.get(ggml_type, (1, 1))
        nbytes = math.prod(dims) // block * block_bytes
        offset = offsets[i] if offsets else at
        out += [
            gstring(name, e),
            struct.pack(e + "I", len(dims)),
            struct.pack(e + "Q" * len(dims), *dims),
            struct.pack(e + "IQ", ggml_type, offset),
        ]
        at = offset + nbytes + (-nbytes % alignment)
    head = b"".join(out)
    if tensors and data:
        head += b"\0" * (-len(head) % alignment + at)
    return head


def one_pair(key: str | bytes, tail: bytes) -> bytes:
    """A v3 file of no tensors and one kv pair: ``key``, then ``tail`` as raw bytes."""
    return b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + gstring(key) + tail


def llama(*changes: KV, drop: Sequence[str] = ()) -> list[KV]:
    """The llama kv list with ``changes`` replacing (or added after) keys of the same name."""
    kvs = {key: (key, kind, v) for key, kind, v in LLAMA if key not in drop}
    kvs.update({key: (key, kind, v) for key, kind, v in changes})
    return list(kvs.values())


def write(tmp_path: Path, data: bytes, name: str = "m.gguf") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


# -- bounded calls --------------------------------------------------------------------------------


def quickly(call: Callable[[], T], limit: float = LIMIT_S) -> T:
    """``call()`` on a thread; fails when it has not answered within ``limit`` seconds."""
    start = time.monotonic()
    answer = promptly(call, seconds=limit)
    assert time.monotonic() - start < limit
    return answer


def refusal(path: Path, **options: Any) -> str:
    """The one-line ModelError read_gguf raises for ``path`` within the time limit."""
    with pytest.raises(ModelError) as info:
        quickly(lambda: read_gguf(path, **options))
    message = str(info.value)
    assert message.startswith(f"{path}: ")
    assert "\n" not in message and "\x1b" not in message
    return message


@contextmanager
def memory_peak() -> Iterator[list[int]]:
    """Yields a list that holds, after the block, the peak bytes Python allocated inside it."""
    box: list[int] = []
    tracemalloc.start()
    try:
        yield box
    finally:
        box.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()


# -- read_gguf: what it reads ---------------------------------------------------------------------


def test_the_llama_header_reads_its_values_and_tensors(tmp_path: Path) -> None:
    """The hand-written llama file (the base of every mutation here) reads back whole."""
    model = read_gguf(write(tmp_path, gguf_bytes()))
    assert model.values["llama.block_count"] == 2 and model.version == 3
    assert [(t.name, t.shape, t.nbytes) for t in model.tensors] == [
        ("token_embd.weight", (64, 16), 4096),
        ("blk.0.attn_norm.weight", (64,), 256),
        ("blk.1.attn_norm.weight", (64,), 256),
        ("output_norm.weight", (64,), 256),
    ]


def test_a_big_endian_file_reads_as_its_little_endian_twin(tmp_path: Path) -> None:
    """A big-endian v3 file gives the same values and tensor table as the little-endian one."""
    little = read_gguf(write(tmp_path, gguf_bytes(), "le.gguf"))
    big = read_gguf(write(tmp_path, gguf_bytes(e=">"), "be.gguf"))
    assert (big.values, big.tensors, big.data_offset) == (little.values, little.tensors, little.data_offset)


def test_a_version_2_file_reads(tmp_path: Path) -> None:
    """GGUF v2 (same layout as v3) is read."""
    assert read_gguf(write(tmp_path, gguf_bytes(version=2))).version == 2


def test_a_zero_element_tensor_reads_with_no_bytes(tmp_path: Path) -> None:
    """A tensor with a zero dimension is valid and holds no data."""
    model = read_gguf(write(tmp_path, gguf_bytes(tensors=[("empty.weight", (64, 0), F32)])))
    assert model.tensors[0].nbytes == 0


def test_a_63_byte_tensor_name_is_read(tmp_path: Path) -> None:
    """A name of GGML_MAX_NAME - 1 bytes is the longest ggml accepts."""
    model = read_gguf(write(tmp_path, gguf_bytes(tensors=[("n" * 63, (64,), F32)])))
    assert model.tensors[0].name == "n" * 63


def test_nan_and_infinite_floats_are_kept_as_read(tmp_path: Path) -> None:
    """The reader keeps NaN and inf float values; judging them is the caller's business."""
    kvs = llama(("llama.rope.freq_base", FLOAT32, math.nan), ("llama.rope.scale", FLOAT64, -math.inf))
    model = read_gguf(write(tmp_path, gguf_bytes(kvs)))
    assert math.isnan(model.values["llama.rope.freq_base"])
    assert model.values["llama.rope.scale"] == -math.inf


def test_a_262k_token_tokenizer_is_counted_quickly_not_built(tmp_path: Path) -> None:
    """A 262,144-string token list is skipped and counted within the time limit."""
    tokens = [f"t{i}" for i in range(1 << 18)]
    path = write(tmp_path, gguf_bytes(llama(("tokenizer.ggml.tokens", ARRAY, (STRING, tokens)))))
    model = quickly(lambda: read_gguf(path))
    assert model.count("tokenizer.ggml.tokens") == 1 << 18 and "tokenizer.ggml.tokens" not in model.values


# -- read_gguf: files that are not GGUF files -----------------------------------------------------


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")
def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    """A writer-less FIFO is refused at once as not a regular file."""
    os.mkfifo(tmp_path / "m.gguf")
    assert "not a regular file" in refusal(tmp_path / "m.gguf")


def test_a_directory_is_refused(tmp_path: Path) -> None:
    """A directory is refused, named."""
    (tmp_path / "m.gguf").mkdir()
    assert refusal(tmp_path / "m.gguf").endswith("not a regular file")


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
def test_dev_zero_is_refused_without_being_read() -> None:
    """An endless character device is refused before any read."""
    assert refusal(Path("/dev/zero")).endswith("not a regular file")


def test_a_missing_file_is_refused_with_the_system_reason(tmp_path: Path) -> None:
    """A path that does not exist is a ModelError naming it and the OS error."""
    assert "No such file" in refusal(tmp_path / "absent.gguf")


def test_a_file_without_the_magic_is_refused(tmp_path: Path) -> None:
    """Bytes that do not start with GGUF are refused at offset 0."""
    assert "offset 0: not a GGUF file" in refusal(write(tmp_path, b"GGML" + gguf_bytes()[4:]))


@pytest.mark.parametrize("version", [1, 4])
def test_unread_versions_are_refused(tmp_path: Path, version: int) -> None:
    """GGUF versions other than 2 and 3 are refused, naming the version."""
    assert f"offset 4: GGUF version {version} " in refusal(write(tmp_path, gguf_bytes(version=version)))


# -- read_gguf: counts and lengths that lie -------------------------------------------------------


def test_an_array_of_2_to_the_63_elements_is_refused_without_memory_growth(tmp_path: Path) -> None:
    """A 49-byte file whose one array claims 2**63 elements is refused at once, small in memory."""
    data = one_pair("a", struct.pack("<IIQ", ARRAY, UINT8, 1 << 63))
    path = write(tmp_path, data)
    with memory_peak() as peak:
        message = refusal(path)
    assert len(data) == 49 and "offset 33: 'a': an array of 9223372036854775808 elements" in message
    assert peak[0] < 64 * MIB


def test_a_2_mb_file_claiming_2m_strings_answers_quickly_in_little_memory(tmp_path: Path) -> None:
    """2,000,000 strings cannot fit in 2 MB: refused within the limit, without building them."""
    head = b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + gstring("tokenizer.ggml.tokens")
    data = head + struct.pack("<IIQ", ARRAY, STRING, 2_000_000) + gstring("x") * (2 * MIB // 9)
    path = write(tmp_path, data)
    with memory_peak() as peak:
        assert "cannot fit" in refusal(path)
    assert peak[0] < 64 * MIB


def test_a_key_value_count_of_2_to_the_63_is_refused_at_once(tmp_path: Path) -> None:
    """A kv count the file cannot hold is refused before any pair is read."""
    assert "key-value pairs, more than" in refusal(write(tmp_path, gguf_bytes(n_kv=1 << 63)))


def test_a_tensor_count_over_the_limit_is_refused(tmp_path: Path) -> None:
    """More than MAX_TENSORS tensors is refused at offset 8."""
    message = refusal(write(tmp_path, gguf_bytes(n_tensors=MAX_TENSORS + 1)))
    assert f"offset 8: the header lists {MAX_TENSORS + 1} tensors" in message


@pytest.mark.parametrize("claimed", [1 << 20, 100_000])
def test_a_sparse_gigabyte_claiming_many_tensors_answers_quickly(tmp_path: Path, claimed: int) -> None:
    """A 1 GiB sparse file whose header claims many tensors is refused within the limit."""
    path = write(tmp_path, b"GGUF" + struct.pack("<IQQ", 3, claimed, 0))
    with open(path, "r+b") as f:
        f.truncate(1 << 30)
    assert "offset" in refusal(path)


def test_a_string_longer_than_the_file_is_refused_at_its_offset(tmp_path: Path) -> None:
    """A string length past the end of the file is refused where the length lies."""
    data = one_pair("k", struct.pack("<IQ", STRING, 1 << 40) + b"abc")
    message = refusal(write(tmp_path, data))
    assert "offset 37: 'k': a string of 1099511627776 bytes runs past the end of the file" in message


def test_a_file_cut_mid_header_is_refused(tmp_path: Path) -> None:
    """A header cut inside the tensor table is refused, naming the size and what was being read."""
    cut = len(gguf_bytes(data=False)) - 4
    message = refusal(write(tmp_path, gguf_bytes()[:cut]))
    assert (
        f"file ends after {cut} bytes while reading the data offset of tensor 'output_norm.weight'" in message
    )


def test_a_file_that_shrinks_while_read_is_refused_as_shrunk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file cut to 100 bytes after it is opened is refused as having shrunk."""
    tokens = [f"t{i}" for i in range(50_000)]
    path = write(tmp_path, gguf_bytes(llama(("tokenizer.ggml.tokens", ARRAY, (STRING, tokens)))))

    def open_then_cut(name: str) -> tuple[int, int]:
        opened = open_regular(name)  # the reader's own, which this replaces
        os.truncate(name, 100)
        return opened

    monkeypatch.setattr(reader, "open_regular", open_then_cut)
    assert "(it shrank while being read)" in refusal(path)


def test_a_read_that_ends_early_is_refused_as_shrunk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An os.read that returns nothing before the size fstat gave is reported as a shrink."""
    tokens = [f"t{i}" for i in range(50_000)]
    path = write(tmp_path, gguf_bytes(llama(("tokenizer.ggml.tokens", ARRAY, (STRING, tokens)))))
    real_read, calls = os.read, []

    def read_once(fd: int, n: int) -> bytes:
        calls.append(n)
        return real_read(fd, n) if len(calls) == 1 else b""

    monkeypatch.setattr("gpuscout._fit.reader.os.read", read_once)
    assert "(it shrank while being read)" in refusal(path)


# -- read_gguf: values that are wrong -------------------------------------------------------------


def test_invalid_utf8_in_a_key_is_refused_at_the_bad_byte(tmp_path: Path) -> None:
    """A key with a stray continuation byte is refused at that byte's offset."""
    message = refusal(write(tmp_path, gguf_bytes([(b"gen\x80", UINT32, 1)], [])))
    assert "offset 35: key 0: not valid UTF-8 (byte 3 of the string)" in message


def test_invalid_utf8_in_a_string_value_is_refused_at_the_bad_byte(tmp_path: Path) -> None:
    """A string value with invalid UTF-8 is refused at the bad byte, naming the key."""
    message = refusal(write(tmp_path, gguf_bytes([("general.name", STRING, b"ok\xff")], [])))
    start = 24 + 8 + len("general.name") + 4
    assert f"offset {start + 8 + 2}: 'general.name': not valid UTF-8" in message


def test_an_unknown_value_type_is_refused(tmp_path: Path) -> None:
    """A value type above FLOAT64 is refused, naming the key and the type."""
    data = one_pair("k", struct.pack("<IQ", 13, 0))
    assert "offset 33: 'k': unknown GGUF value type 13" in refusal(write(tmp_path, data))


def test_nested_arrays_are_refused(tmp_path: Path) -> None:
    """An array of arrays is refused as ggml refuses it."""
    data = one_pair("k", struct.pack("<IIQ", ARRAY, ARRAY, 1) + bytes(16))
    assert "'k': nested arrays are not valid GGUF" in refusal(write(tmp_path, data))


def test_a_duplicate_key_is_refused_at_its_second_occurrence(tmp_path: Path) -> None:
    """The second pair with the same key is refused, at its own offset."""
    kvs = [*LLAMA, ("llama.block_count", UINT32, 3)]
    second = len(gguf_bytes(LLAMA, [], n_kv=len(kvs)))
    message = refusal(write(tmp_path, gguf_bytes(kvs)))
    assert f"offset {second}: duplicate key 'llama.block_count'" in message


@pytest.mark.parametrize("alignment", [48, 0])
def test_an_alignment_not_a_power_of_two_is_refused(tmp_path: Path, alignment: int) -> None:
    """general.alignment must be a power of two."""
    message = refusal(write(tmp_path, gguf_bytes(llama(("general.alignment", UINT32, alignment)))))
    assert f"general.alignment {alignment} is not a power of two" in message


def test_an_alignment_of_the_wrong_type_is_refused(tmp_path: Path) -> None:
    """general.alignment must be a UINT32."""
    message = refusal(write(tmp_path, gguf_bytes(llama(("general.alignment", UINT64, 64)))))
    assert "general.alignment: expected UINT32, got UINT64" in message


def test_a_long_key_is_not_echoed_whole(tmp_path: Path) -> None:
    """A 4000-byte key with an unknown value type gives an error line under 300 characters."""
    data = one_pair("k" * 4000, struct.pack("<IQ", 13, 0))
    assert len(refusal(write(tmp_path, data))) < 300


@pytest.mark.parametrize(
    "tail",
    [struct.pack("<IQ", 13, 0), struct.pack("<IIQ", ARRAY, ARRAY, 0), b"\x04"],
    ids=["unknown-type", "nested-array", "cut-after-key"],
)
def test_control_characters_in_a_key_are_escaped(tmp_path: Path, tail: bytes) -> None:
    """A key holding a newline, an escape and shell quotes appears repr-escaped on one line."""
    data = one_pair(HOSTILE_KEY, tail)
    assert repr(HOSTILE_KEY) in refusal(write(tmp_path, data))


def test_control_characters_in_a_duplicate_key_are_escaped(tmp_path: Path) -> None:
    """A duplicate hostile key is named repr-escaped."""
    message = refusal(write(tmp_path, gguf_bytes([(HOSTILE_KEY, UINT8, 1)] * 2, [])))
    assert repr(HOSTILE_KEY)[:40] in message
