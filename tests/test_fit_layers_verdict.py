"""``gpuscout fit --layers`` judges a placement as ``fit MODEL`` does (``fit.verdict``): a
forced ``--num-gpu`` may overfill a card, and then it does not fit."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gpuscout.cli import main

# RTX 3090 (24 GiB) and RTX 3060 (12 GiB), docs: tests/machines/desktop_gpu_x4_slot/README.md.
DESKTOP = str(Path(__file__).parent / "machines" / "desktop_gpu_x4_slot")


def _fit(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, object]]:
    capsys.readouterr()
    code = main(["--replay", DESKTOP, "fit", *args, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_a_forced_layer_count_that_overfills_a_card_does_not_fit(capsys: pytest.CaptureFixture[str]) -> None:
    """Three 20 GiB layers forced onto two cards of 24 and 12 GiB: exit 1, each card named."""
    code, document = _fit(capsys, "--layers", "20GiB,20GiB,20GiB", "--num-gpu", "3")
    assert (code, document["fits"]) == (1, False)
    notes = document["notes"]
    assert isinstance(notes, list)
    assert any(
        re.fullmatch(
            r"CUDA \S+ \(NVIDIA GeForce RTX 3090\) needs 40\.0 GiB but has .* free after its reserve", n
        )
        for n in notes
    )
    assert any(
        re.fullmatch(
            r"CUDA \S+ \(NVIDIA GeForce RTX 3060\) needs 20\.0 GiB but has .* free after its reserve", n
        )
        for n in notes
    )


def test_the_planners_own_placement_fits_with_the_rest_on_the_cpu(capsys: pytest.CaptureFixture[str]) -> None:
    """Unforced, the planner keeps each card within its room and the CPU takes what is left."""
    code, document = _fit(capsys, "--layers", "20GiB,20GiB,20GiB")
    assert (code, document["fits"]) == (0, True)
    assert document["notes"] == []
    assert document["cpu_layers"] != []


def test_a_cpu_share_over_free_memory_is_said_in_binary_units(capsys: pytest.CaptureFixture[str]) -> None:
    """Layers left on the CPU beyond free memory and swap: the note gives the figures as people
    read them, never a raw byte count."""
    code, document = _fit(capsys, "--layers", ",".join(["20GiB"] * 40))
    assert (code, document["fits"]) == (1, False)
    notes = document["notes"]
    assert isinstance(notes, list)
    share = next(n for n in notes if n.startswith("the CPU's share ("))
    assert re.fullmatch(
        r"the CPU's share \([0-9.]+ GiB\) is more than free system memory "
        r"\([0-9.]+ GiB( plus [0-9.]+ [KMG]iB of swap)?\)",
        share,
    ), share
