"""The compute-buffer rules the llama.cpp planner's oracle follows, each held to the breakdown
llama.cpp's own fit printed (``--fit-print``, recorded in tests/data/fit_plan/cases.json) for
the case that shows it, through bench/fit_probes.py's replay of that decision."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("gguf")
ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("fit_probes_bench", ROOT / "bench" / "fit_probes.py")
assert _spec and _spec.loader
probes: Any = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(probes)
MiB = 1 << 20


@pytest.fixture(scope="module")
def replay(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Rows of bench/fit_probes.py for one recorded case (models written once per module)."""
    bench = probes._bench()
    fixture = bench.load()
    by_name = {c["name"]: c for c in fixture["cases"]}
    folder = tmp_path_factory.mktemp("fit-rules")

    def rows(name: str) -> list[dict[str, Any]]:
        return probes.rows(fixture, by_name[name], folder, bench)

    return rows


def compute(rows: list[dict[str, Any]], device: str) -> tuple[float, int]:
    """gpuscout's and llama.cpp's compute buffer (MiB) of ``device`` at llama.cpp's decision."""
    row = next(r for r in rows if r["kind"] == "print" and r["device"] == device)
    return row["mine"][2], row["theirs"][2]


def test_a_gpu_that_runs_no_attention_holds_no_mask(replay: Any) -> None:
    """A GPU that runs no attention (every KQ left on the host) holds no attention mask."""
    mine, theirs = compute(replay("llama-gqa-1dev-c-32768-fitt-2000-fa-off"), "Vulkan0")
    assert abs(mine - theirs) < 2, (mine, theirs)  # 13 MiB; with the 64 MiB mask: 78


def test_a_gpu_holds_only_the_masks_of_the_attention_it_runs(replay: Any) -> None:
    """A GPU holds only the masks of the attention kinds it runs (gemma2: the window's, not the full one)."""
    mine, theirs = compute(replay("gemma2-1dev-c-16384-fitt-1990-fa-off"), "Vulkan0")
    assert abs(mine - theirs) < 2, (mine, theirs)  # 34 MiB; with the full mask too: 66
