"""The hyperparameters llama.cpp reads, per architecture: which blocks hold a KV cache, which a
recurrent state, which a sliding window (src/models/*.cpp load_arch_hparams)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpuscout._fit.hparams import read_hparams
from gpuscout._fit.reader import read_gguf

gguf = pytest.importorskip("gguf")
np = pytest.importorskip("numpy")


def header(path: Path, arch: str, keys: dict[str, Any]) -> Path:
    """A model file with ``keys`` (u32 unless a list, bool or float) and one tensor."""
    w = gguf.GGUFWriter(str(path), arch)
    for key, value in {"block_count": 4, "embedding_length": 64, "context_length": 1024, **keys}.items():
        name = f"{arch}.{key}"
        if isinstance(value, list):
            w.add_array(name, value)
        elif isinstance(value, float):
            w.add_float32(name, value)
        else:
            w.add_uint32(name, value)
    w.add_tensor("token_embd.weight", np.ones((16, 64), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_nemotron_h_feed_forward_blocks_hold_neither_cache_nor_state(tmp_path: Path) -> None:
    """nemotron_h: no KV heads and no n_ff is Mamba, n_ff alone is a feed-forward block."""
    path = header(
        tmp_path / "m.gguf",
        "nemotron_h",
        {
            "attention.head_count": [0, 0, 8, 0],
            "attention.head_count_kv": [0, 0, 2, 0],
            "feed_forward_length": [0, 256, 0, 256],
            "ssm.conv_kernel": 4,
            "ssm.inner_size": 128,
            "ssm.state_size": 16,
            "ssm.group_count": 1,
            "ssm.time_step_rank": 4,
        },
    )
    h = read_hparams(read_gguf(path))
    assert h.recurrent == (True, False, False, False)
    assert h.kv_layers == (False, False, True, False)
    assert h.n_embd_r == 3 * (128 + 2 * 16) and h.n_embd_s == 16 * 128


def test_lfm2_short_convolutions_keep_a_conv_state(tmp_path: Path) -> None:
    """lfm2: blocks without KV heads hold n_embd x (l_cache - 1) floats of state, no scan."""
    path = header(
        tmp_path / "m.gguf",
        "lfm2",
        {"attention.head_count": 4, "attention.head_count_kv": [0, 2, 0, 2], "shortconv.l_cache": 3},
    )
    h = read_hparams(read_gguf(path))
    assert h.recurrent == (True, False, True, False) and h.kv_layers == (False, True, False, True)
    assert (h.n_embd_r, h.n_embd_s) == (64 * 2, 0)


def test_qwen3next_attends_every_interval_th_block(tmp_path: Path) -> None:
    """qwen3next: full_attention_interval 2 makes blocks 1 and 3 attention, 0 and 2 recurrent."""
    path = header(
        tmp_path / "m.gguf",
        "qwen3next",
        {
            "attention.head_count": 4,
            "attention.head_count_kv": 2,
            "full_attention_interval": 2,
            "ssm.conv_kernel": 4,
            "ssm.inner_size": 128,
            "ssm.state_size": 16,
            "ssm.group_count": 2,
            "ssm.time_step_rank": 4,
        },
    )
    h = read_hparams(read_gguf(path))
    assert h.recurrent == (True, False, True, False) and h.kv_layers == (False, True, False, True)


def test_gemma2_slides_every_other_block_with_its_default_window(tmp_path: Path) -> None:
    """gemma2 without sliding_window: llama.cpp's 4096, pattern 2 (even blocks slide)."""
    path = header(tmp_path / "m.gguf", "gemma2", {"attention.head_count": 4})
    h = read_hparams(read_gguf(path))
    assert h.n_swa == 4096 and h.swa == (True, False, True, False)


def test_a_per_layer_sliding_window_pattern_wins(tmp_path: Path) -> None:
    """An array sliding_window_pattern is the per-block answer, whatever the default."""
    path = header(
        tmp_path / "m.gguf",
        "gemma3",
        {
            "attention.head_count": 4,
            "attention.sliding_window": 128,
            "attention.sliding_window_pattern": [False, True, True, False],
        },
    )
    h = read_hparams(read_gguf(path))
    assert h.n_swa == 128 and h.swa == (False, True, True, False)


def test_a_model_without_sliding_window_has_none(tmp_path: Path) -> None:
    """gemma3 with no window key: every block attends the whole context."""
    h = read_hparams(read_gguf(header(tmp_path / "m.gguf", "gemma3", {"attention.head_count": 4})))
    assert h.n_swa == 0 and not any(h.swa)


def test_an_architecture_gguf_does_not_know_is_said_so(tmp_path: Path) -> None:
    """A name the installed gguf package lacks is estimated generically, with a note naming gguf."""
    h = read_hparams(read_gguf(header(tmp_path / "m.gguf", "brandnew", {"attention.head_count": 4})))
    assert any("installed gguf package" in n for n in h.notes)
    known = read_hparams(read_gguf(header(tmp_path / "k.gguf", "llama", {"attention.head_count": 4})))
    assert known.notes == ()
