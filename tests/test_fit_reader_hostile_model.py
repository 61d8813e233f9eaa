"""Hostile GGUF files, continued: the tensor table and the size and time bounds of read_gguf,
read_hparams over a header that reads, ``gpuscout fit`` on each hostile file, and random
mutations of a valid header. The GGUF writer and the bounded calls are in
tests/test_fit_reader_hostile.py."""

from __future__ import annotations

import os
import struct
import time
from collections.abc import Callable, Sequence
from contextlib import suppress
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuscout._fit import reader
from gpuscout._fit.errors import ModelError
from gpuscout._fit.hparams import read_hparams
from gpuscout._fit.reader import MAX_TENSORS, GGUFFile, read_gguf
from gpuscout.cli import main
from gpuscout.sizes import MIB
from gpuscout.testing import injected, scout_of
from tests.test_fit_reader_hostile import (
    ARCH,
    ARRAY,
    F32,
    FLOAT32,
    HOSTILE_KEY,
    INT64,
    KV,
    LLAMA,
    LLAMA_TENSORS,
    Q8_0,
    STRING,
    UINT8,
    UINT32,
    gguf_bytes,
    llama,
    one_pair,
    quickly,
    refusal,
    write,
)

# -- read_gguf: the tensor table ------------------------------------------------------------------


def test_a_duplicate_tensor_name_is_refused(tmp_path: Path) -> None:
    """Two tensors with one name are refused, naming it."""
    tensors = [*LLAMA_TENSORS, ("output_norm.weight", (64,), F32)]
    message = refusal(write(tmp_path, gguf_bytes(tensors=tensors)))
    assert "duplicate tensor name 'output_norm.weight'" in message


def test_more_than_four_dimensions_are_refused(tmp_path: Path) -> None:
    """A 5-dimensional tensor is refused, naming it."""
    message = refusal(write(tmp_path, gguf_bytes(tensors=[("t", (1, 1, 1, 1, 1), F32)])))
    assert "tensor 't': 5 dimensions (ggml allows 4)" in message


@pytest.mark.parametrize("length", [64, 5000])
def test_a_tensor_name_of_64_bytes_or_more_is_refused(tmp_path: Path, length: int) -> None:
    """A name of GGML_MAX_NAME bytes or more is refused with its length."""
    message = refusal(write(tmp_path, gguf_bytes(tensors=[("n" * length, (64,), F32)])))
    assert f"tensor 0: its name is {length} bytes long" in message


def test_an_unknown_ggml_type_is_refused(tmp_path: Path) -> None:
    """A ggml type the gguf package does not know is refused, naming the tensor."""
    data = gguf_bytes(tensors=[("t", (64,), 9999)])
    assert "tensor 't': unknown ggml type 9999" in refusal(write(tmp_path, data))


def test_control_characters_in_a_tensor_name_are_escaped(tmp_path: Path) -> None:
    """A tensor name holding a newline and an escape is named repr-escaped."""
    name = "t\n\x1b[2J"
    message = refusal(write(tmp_path, gguf_bytes(tensors=[(name, (64, 1, 1, 1, 1), F32)])))
    assert repr(name) in message


def test_rows_that_are_not_whole_blocks_are_refused(tmp_path: Path) -> None:
    """A Q8_0 tensor whose rows are 33 elements (blocks of 32) is refused."""
    data = gguf_bytes(tensors=[("t", (33, 2), Q8_0)])
    message = refusal(write(tmp_path, data))
    assert "tensor 't': rows of 33 elements are not a whole number of Q8_0 blocks of 32" in message


def test_offsets_that_are_not_contiguous_are_refused(tmp_path: Path) -> None:
    """A second tensor that leaves a gap after the first is refused with the expected offset."""
    data = gguf_bytes(tensors=LLAMA_TENSORS[:2], offsets=[0, 8192])
    message = refusal(write(tmp_path, data))
    assert "tensor 'blk.0.attn_norm.weight': data offset 8192, expected 4096" in message


def test_tensor_data_outside_the_file_is_refused(tmp_path: Path) -> None:
    """A tensor table whose data was never written is refused, naming the first tensor."""
    message = refusal(write(tmp_path, gguf_bytes(data=False)))
    assert "tensor 'token_embd.weight': its data (4096 bytes at offset" in message


# -- read_gguf: size and time bounds --------------------------------------------------------------


@pytest.mark.parametrize("strings", [[4000] * 40, [100_000]], ids=["kept", "skipped"])
def test_a_header_over_the_cap_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, strings: list[int]
) -> None:
    """A header past MAX_HEADER_BYTES is refused, whether its long strings are kept or skipped."""
    long = [(f"general.s{i}", STRING, "x" * n) for i, n in enumerate(strings)]
    path = write(tmp_path, gguf_bytes(llama(*long)))
    monkeypatch.setattr(reader, "MAX_HEADER_BYTES", 1024)
    assert "header larger than" in refusal(path)


def test_a_passed_deadline_is_refused_as_too_slow(tmp_path: Path) -> None:
    """A deadline already in the past stops the read with a message saying it took too long."""
    path = write(tmp_path, gguf_bytes())
    assert "reading the header took too long" in refusal(path, deadline=time.monotonic() - 1)


# -- read_hparams ---------------------------------------------------------------------------------


def hparams_refusal(tmp_path: Path, kvs: Sequence[KV]) -> str:
    """The ModelError message read_hparams raises for a llama file with ``kvs``."""
    model = read_gguf(write(tmp_path, gguf_bytes(kvs)))
    with pytest.raises(ModelError) as info:
        read_hparams(model)
    return str(info.value)


def test_the_llama_header_gives_its_hyperparameters(tmp_path: Path) -> None:
    """The base llama file reads as 2 blocks of 64 with 4 heads and 16 head dimensions."""
    h = read_hparams(read_gguf(write(tmp_path, gguf_bytes())))
    assert (h.n_layer, h.n_embd, h.n_head, h.n_head_kv, h.head_k) == (2, 64, (4, 4), (4, 4), 16)


@pytest.mark.parametrize("key", ["llama.block_count", "llama.embedding_length"])
def test_a_missing_required_key_is_refused(tmp_path: Path, key: str) -> None:
    """block_count and embedding_length are required, and the message names the missing one."""
    assert f"missing {key} (llama.cpp requires it)" in hparams_refusal(tmp_path, llama(drop=[key]))


@pytest.mark.parametrize(("kind", "v", "name"), [(FLOAT32, 2.0, "FLOAT32"), (INT64, 2, "INT64")])
def test_a_block_count_of_the_wrong_type_is_refused(tmp_path: Path, kind: int, v: Any, name: str) -> None:
    """block_count must be UINT32, as llama-model-loader demands."""
    message = hparams_refusal(tmp_path, llama(("llama.block_count", kind, v)))
    assert f"llama.block_count: expected UINT32, got {name}" in message


def test_zero_attention_heads_in_a_llama_model_are_refused(tmp_path: Path) -> None:
    """head_count 0 leaves a llama block without attention and is refused."""
    message = hparams_refusal(tmp_path, llama(("llama.attention.head_count", UINT32, 0)))
    assert "llama.attention.head_count is 0 for block 0" in message


def test_a_per_layer_array_of_the_wrong_length_is_refused(tmp_path: Path) -> None:
    """head_count_kv with 3 entries for 2 blocks is refused, naming the key and both counts."""
    message = hparams_refusal(tmp_path, llama(("llama.attention.head_count_kv", ARRAY, (UINT32, [1, 2, 4]))))
    assert "llama.attention.head_count_kv: expected 2 values (one per block), got 3" in message


def test_a_per_layer_array_for_one_block_counts_one_value(tmp_path: Path) -> None:
    """A one-block model's head_count_kv of 2 entries: "expected 1 value", not "1 values"."""
    model = llama(
        ("llama.block_count", UINT32, 1), ("llama.attention.head_count_kv", ARRAY, (UINT32, [1, 2]))
    )
    message = hparams_refusal(tmp_path, model)
    assert "llama.attention.head_count_kv: expected 1 value (one per block), got 2" in message


def test_a_10_mb_architecture_name_is_not_echoed(tmp_path: Path) -> None:
    """A 10 MB general.architecture is refused in a message under 300 characters."""
    message = hparams_refusal(tmp_path, llama(("general.architecture", STRING, "a" * (10 * MIB))))
    assert "general.architecture is 10485760 bytes long" in message and len(message) < 300


def test_a_long_hostile_architecture_name_is_escaped_and_cut(tmp_path: Path) -> None:
    """A 4000-byte architecture of newlines (kept: under MAX_KEPT_STRING) is not echoed whole."""
    message = hparams_refusal(tmp_path, llama(("general.architecture", STRING, "\n" * 4000)))
    assert "\n" not in message and len(message) < 300


# -- gpuscout fit ---------------------------------------------------------------------------------


def _fifo(tmp_path: Path) -> Path:
    os.mkfifo(tmp_path / "m.gguf")
    return tmp_path / "m.gguf"


def _directory(tmp_path: Path) -> Path:
    (tmp_path / "m.gguf").mkdir()
    return tmp_path / "m.gguf"


def _sparse(tmp_path: Path) -> Path:
    path = write(tmp_path, b"GGUF" + struct.pack("<IQQ", 3, 1 << 20, 0))
    with open(path, "r+b") as f:
        f.truncate(1 << 30)
    return path


def _bytes(data: Callable[[], bytes]) -> Callable[[Path], Path]:
    return lambda tmp_path: write(tmp_path, data())


HOSTILE: dict[str, Callable[[Path], Path]] = {
    "array-2-to-the-63": _bytes(lambda: one_pair("a", struct.pack("<IIQ", ARRAY, UINT8, 1 << 63))),
    "fifo": _fifo,
    "directory": _directory,
    "dev-zero": lambda tmp_path: Path("/dev/zero"),
    "cut-mid-header": _bytes(lambda: gguf_bytes()[:60]),
    "string-past-eof": _bytes(lambda: one_pair("k", struct.pack("<IQ", STRING, 1 << 40))),
    "bad-utf8-key": _bytes(lambda: gguf_bytes([(b"gen\x80", UINT32, 1)], [])),
    "nested-array": _bytes(lambda: one_pair("k", struct.pack("<IIQ", ARRAY, ARRAY, 1))),
    "duplicate-key": _bytes(lambda: gguf_bytes([*LLAMA, ("llama.block_count", UINT32, 3)])),
    "duplicate-tensor": _bytes(lambda: gguf_bytes(tensors=[*LLAMA_TENSORS, LLAMA_TENSORS[-1]])),
    "five-dims": _bytes(lambda: gguf_bytes(tensors=[("t", (1, 1, 1, 1, 1), F32)])),
    "long-tensor-name": _bytes(lambda: gguf_bytes(tensors=[("n" * 64, (64,), F32)])),
    "data-outside": _bytes(lambda: gguf_bytes(data=False)),
    "alignment-48": _bytes(lambda: gguf_bytes(llama(("general.alignment", UINT32, 48)))),
    "version-4": _bytes(lambda: gguf_bytes(version=4)),
    "hostile-key": _bytes(lambda: one_pair(HOSTILE_KEY, struct.pack("<IQ", 13, 0))),
    "10-mb-architecture": _bytes(lambda: gguf_bytes(llama((ARCH, STRING, "a" * (10 * MIB))))),
    "4k-hostile-architecture": _bytes(lambda: gguf_bytes(llama((ARCH, STRING, "\n" * 4000)))),
    "zero-heads": _bytes(lambda: gguf_bytes(llama(("llama.attention.head_count", UINT32, 0)))),
    "sparse-gigabyte": _sparse,
}


@pytest.mark.parametrize("make", HOSTILE.values(), ids=HOSTILE.keys())
def test_fit_answers_a_hostile_file_with_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], make: Callable[[Path], Path]
) -> None:
    """gpuscout fit exits 2 with one "gpuscout: error:" line, no traceback, never the input whole."""
    path = make(tmp_path)
    if not path.exists():
        pytest.skip(f"{path} is not on this system")
    code = quickly(lambda: main(["fit", str(path)], scout_factory=lambda args: scout_of(injected(()))), 10.0)
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("gpuscout: error: ") and err.count("\n") == 1 and len(err) < 500


# -- any mutation ---------------------------------------------------------------------------------


VALID = gguf_bytes()
HUGE = [1 << 63, (1 << 64) - 1, 1 << 32, 1 << 40, MAX_TENSORS + 1, 0xFFFFFFFF]
COUNTS = [8, 16, 24]  # the tensor count, the kv count, the first key's length

mutation = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, 1 << 16), st.integers(1, 255)),
    st.tuples(st.just("cut"), st.integers(0, 1 << 16)),
    st.tuples(st.just("insert"), st.integers(0, 1 << 16), st.binary(min_size=1, max_size=16)),
    st.tuples(st.just("u64"), st.sampled_from(COUNTS) | st.integers(0, 1 << 16), st.sampled_from(HUGE)),
)


def mutate(data: bytes, changes: Sequence[tuple[Any, ...]]) -> bytes:
    buf = bytearray(data)
    for kind, where, *rest in changes:
        at = where % (len(buf) + 1)
        if kind == "flip" and at < len(buf):
            buf[at] ^= rest[0]
        elif kind == "cut":
            del buf[at:]
        elif kind == "insert":
            buf[at:at] = rest[0]
        elif kind == "u64":
            buf[at : at + 8] = struct.pack("<Q", rest[0])
    return bytes(buf)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(changes=st.lists(mutation, min_size=1, max_size=5))
def test_a_mutated_header_reads_or_raises_model_error_quickly(
    tmp_path: Path, changes: list[tuple[Any, ...]]
) -> None:
    """Any mutation of a valid file gives a GGUFFile or a ModelError, within a second."""
    path = write(tmp_path, mutate(VALID, changes))
    with suppress(ModelError):
        assert isinstance(quickly(lambda: read_gguf(path), 1.0), GGUFFile)
