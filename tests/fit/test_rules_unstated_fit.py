"""Rules of ``fit`` that no test stated (issue 35): the verdict's room on a GPU under a budget,
the recurrent state kept once per sequence, and the CPU repack rule on ggml's ``ne[1]``.

The model is the synthetic llama-gqa of tests/fit/conftest.py (about 27 MB on one H200 at
--ctx 4096, every layer on the GPU), on the recorded tests/machines/h200x8; mamba2's sizes are
those its writer gives (4 blocks, d_inner 1024, d_state 64, 2 groups, conv 4).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gpuscout import Scout, SystemInfo
from gpuscout._fit.estimate import repacked
from gpuscout._fit.reader import TensorInfo
from gpuscout.cli import main
from gpuscout.sizes import GIB, MIB, parse_size

H200X8 = str(Path(__file__).parents[1] / "machines" / "h200x8")
ROOMY = SystemInfo(total_memory=64 * GIB, free_memory=64 * GIB)
Q4_0, Q8_0 = 2, 8  # ggml type ids (ggml.h)


def fit_json(capsys: pytest.CaptureFixture[str], model: Path, *options: str) -> tuple[int, dict[str, Any]]:
    capsys.readouterr()
    code = main(
        ["--replay", H200X8, "fit", str(model), "--planner", "ollama", "--ctx", "4096", "--json", *options]
    )
    document: dict[str, Any] = json.loads(capsys.readouterr().out)
    return code, document


# -- the verdict: a GPU's room is its usable free memory under the budget, less its reserve ------


def test_a_gpus_room_in_the_verdict_is_its_usable_free_memory_less_its_reserve(
    fit_model: Callable[[str], Path],
) -> None:
    """Scout.fit with num_gpu=99 under cap all=470MiB: each H200 may hold 470 MiB less its 457 MiB
    reserve (13 MiB less the runtime's share), below the model's 27 MB per card, so it does not
    fit; the card's whole free memory, or the cap without the reserve, would say it fits."""
    model = fit_model("llama-gqa")
    capped = Scout(replay=H200X8, cap={"all": 470 * MIB}).fit(model, ctx=4096, num_gpu=99, planner="ollama")
    assert capped.fits is False
    shortfalls = [n for n in capped.notes if " free after its reserve" in n]
    assert shortfalls, capped.notes
    for note in shortfalls:
        room = parse_size(note.split(" but has ")[1].split(" free")[0], what="the room a note gives")
        assert room < 470 * MIB - 457 * MIB  # to the tenth of a MiB the note is written in
    for usage in capped.usage[:-1]:
        assert usage.total > 470 * MIB - 457 * MIB
    assert Scout(replay=H200X8).fit(model, ctx=4096, num_gpu=99, planner="ollama").fits is True


def test_fit_under_a_cap_too_small_for_the_reserve_and_the_model_says_it_does_not_fit(
    capsys: pytest.CaptureFixture[str], fit_model: Callable[[str], Path]
) -> None:
    """``gpuscout --replay h200x8 fit MODEL --cap all=470MiB --num-gpu 99`` exits 1 with
    ``fits: false``; under all=600MiB it fits, each GPU holding at most its cap less its reserve."""
    model = fit_model("llama-gqa")
    code, capped = fit_json(capsys, model, "--cap", "all=470MiB", "--num-gpu", "99")
    assert (code, capped["fits"]) == (1, False)
    assert any("free after its reserve" in note for note in capped["notes"])
    code, roomy = fit_json(capsys, model, "--cap", "all=600MiB", "--num-gpu", "99")
    assert (code, roomy["fits"]) == (0, True)
    for row in roomy["memory"][:-1]:
        assert row["total"] <= 600 * MIB - 457 * MIB


# -- the estimate: recurrent state once per sequence ----------------------------------------------


def test_recurrent_state_is_kept_once_per_sequence(fit_model: Callable[[str], Path]) -> None:
    """llama-memory-recurrent keeps, per recurrent layer, f32 rows of n_embd_r + n_embd_s for each
    of max(1, n_seq_max) sequences: mamba2's n_embd_r = (conv 4 - 1) x (1024 + 2 x 2 x 64) = 3840
    and n_embd_s = 64 x 1024, over 4 layers; --parallel 4 holds four times as much."""
    model = fit_model("mamba2")
    per_sequence = 4 * (3840 + 64 * 1024) * 4

    def state(parallel: int) -> int:
        result = Scout(plugins=[], entry_points=False).fit(
            model, devices=[], system=ROOMY, ctx=4096, parallel=parallel, cpu_features=()
        )
        return result.usage[-1].kv_cache

    assert state(1) == per_sequence
    assert state(4) == 4 * per_sequence


# -- the estimate: the CPU repacks a matrix whose ne[1] is a multiple of 8 -------------------------


def _tensor(ne: tuple[int, ...], kind: int = Q4_0) -> TensorInfo:
    nbytes = ne[0] // 32 * 18 * (ne[1] if len(ne) > 1 else 1)  # Q4_0: 18 bytes per 32 elements
    return TensorInfo(name="output.weight", shape=ne, type=kind, offset=0, nbytes=nbytes)


def test_the_cpu_repack_tests_ggmls_ne1_not_the_row_length() -> None:
    """ggml_repack_get_optimal_repack_type asks ne[1] % 8 == 0: a 4096 x 32001 Q4_0 output
    (ne[0] 4096, ne[1] 32001) gets no repacked copy, its 4096 x 32000 twin one of its own size,
    and a 4100-wide matrix with 32000 rows one too."""
    odd_rows, even_rows = _tensor((4096, 32001)), _tensor((4096, 32000))
    assert repacked([odd_rows], frozenset({"avx2"})) == 0
    assert repacked([even_rows], frozenset({"avx2"})) == even_rows.nbytes == 73_728_000
    wide = TensorInfo(name="blk.0.ffn_up.weight", shape=(4100, 32000), type=Q4_0, offset=0, nbytes=1000)
    assert repacked([wide], frozenset({"avx2"})) == 1000


def test_the_cpu_repacks_only_its_types_on_its_features_and_only_matrices() -> None:
    """Only AVX2's Q4_0 / Q4_K / IQ4_NL / MXFP4 kinds (Q2_K with AVX-512 too) are repacked, only
    2-D or 3-D tensors, and without AVX2 nothing."""
    even_rows = _tensor((4096, 32000))
    assert repacked([even_rows], frozenset()) == 0
    assert repacked([_tensor((4096, 32000), Q8_0)], frozenset({"avx2", "avx512f"})) == 0
    vector = TensorInfo(name="v", shape=(4096,), type=Q4_0, offset=0, nbytes=2304)
    assert repacked([vector], frozenset({"avx2"})) == 0
