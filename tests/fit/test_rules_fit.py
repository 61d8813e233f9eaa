"""Rules of how a GGUF model's tensors are split into layers (``gpuscout._fit.estimate``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuscout._fit.errors import ModelError
from gpuscout._fit.estimate import split_tensors
from gpuscout._fit.hparams import read_hparams
from gpuscout._fit.reader import read_gguf
from tests.test_fit_reader_hostile import F32, LLAMA, LLAMA_TENSORS, gguf_bytes, write


def split(tmp_path: Path, extra: str) -> list[int]:
    model = read_gguf(str(write(tmp_path, gguf_bytes(LLAMA, [*LLAMA_TENSORS, (extra, (64,), F32)]))))
    return list(split_tensors(model, read_hparams(model)).blocks)


def test_a_tensor_of_the_last_block_counts_in_that_block(tmp_path: Path) -> None:
    """With block_count = 2, ``blk.1.*`` is the second block's weight."""
    assert split(tmp_path, "blk.1.ffn_norm.weight") == [256, 512]


def test_a_tensor_of_the_block_numbered_block_count_is_refused(tmp_path: Path) -> None:
    """Blocks are numbered below block_count: ``blk.2.*`` in a 2-block model is a ModelError."""
    with pytest.raises(ModelError, match=r"blk\.2\.ffn_norm\.weight.*block_count = 2"):
        split(tmp_path, "blk.2.ffn_norm.weight")
