"""The held-out model shapes of bench/fit_plan_sweep.py (``--held-out``): each writer gives a
header gpuscout reads with the shape its name promises, and the draws over them name only them
(the sweep itself needs llama.cpp and is not part of the suite)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("gguf")
ROOT = Path(__file__).resolve().parents[2]


def _load(name: str) -> Any:
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


SHAPES = {  # name: (arch, n_layer, n_embd, n_ff or n_ff_exp, experts)
    "u-llama1536": ("llama", 12, 1536, 4096, 0),
    "u-llama2048w": ("llama", 16, 2048, 11008, 0),
    "u-llama1024": ("llama", 24, 1024, 2816, 0),
    "u-moe16": ("qwen3moe", 16, 1536, 768, 16),
    "u-moe12": ("qwen3moe", 12, 2048, 1408, 8),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_each_held_out_writer_gives_the_shape_it_names(name: str, tmp_path: Path) -> None:
    """A sparse header (the tensor data a hole) that gpuscout's reader takes as that shape."""
    from gpuscout._fit.model import read_model

    sweep = _load("fit_plan_sweep")
    path = tmp_path / f"{name}.gguf"
    sweep.HELD_OUT[name](path)
    h = read_model(str(path)).hparams
    arch, n_layer, n_embd, n_ff, experts = SHAPES[name]
    assert (h.arch, h.n_layer, h.n_embd, h.n_expert) == (arch, n_layer, n_embd, experts)
    assert (h.n_ff_exp if experts else h.n_ff[0]) == n_ff
    assert path.stat().st_size > 100 * 2**20 > path.stat().st_blocks * 512  # sparse


def test_the_draws_over_given_models_name_only_them() -> None:
    """``random_cases(models=...)`` draws only those models; without it, the fixture's."""
    record = _load("fit_plan_record")
    held = record.random_cases(1, 50, models=sorted(SHAPES))
    assert {c["model"] for c in held} == set(SHAPES)
    assert not {c["model"] for c in record.random_cases(1, 50)} & set(SHAPES)
