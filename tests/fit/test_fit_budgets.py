"""``gpuscout fit MODEL --cap`` (docs/budgets.md) on the recorded h200x8 machine: a cap spreads a
model that one H200 holds whole, and no card holds more than its cap less its reserve."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gpuscout.cli import main
from gpuscout.sizes import MIB

H200X8 = str(Path(__file__).parents[1] / "machines" / "h200x8")
MINIMUM = 457 * MIB


def fit_json(capsys: pytest.CaptureFixture[str], model: Path, *options: str) -> dict[str, Any]:
    capsys.readouterr()
    main(["--replay", H200X8, "fit", str(model), "--planner", "ollama", "--ctx", "4096", "--json", *options])
    document: dict[str, Any] = json.loads(capsys.readouterr().out)
    return document


def test_a_cap_spreads_a_model_over_the_cards(
    capsys: pytest.CaptureFixture[str], fit_model: Callable[[str], Path]
) -> None:
    """llama-gqa (about 36 MiB on a GPU) sits on one H200; under --cap all=490MiB (33 MiB of
    room beyond the 457 MiB reserve) it is split over two, each within its room, and fits."""
    model = fit_model("llama-gqa")
    whole = fit_json(capsys, model)
    assert len(whole["placement"]) == 1
    assert whole["memory"][0]["total"] > 490 * MIB - MINIMUM
    capped = fit_json(capsys, model, "--cap", "all=490MiB")
    assert capped["fits"] is True
    assert len(capped["placement"]) == 2
    assert sorted(n for p in capped["placement"] for n in p["layers"]) == list(range(5))
    for row in capped["memory"][:-1]:
        assert row["total"] <= 490 * MIB - MINIMUM
    assert any("budget: cap all=490MiB: usable 490.0 MiB" in note for note in capped["notes"])


def test_a_reserve_on_the_best_card_moves_the_model_elsewhere(
    capsys: pytest.CaptureFixture[str], fit_model: Callable[[str], Path]
) -> None:
    """Reserving all but about 185 MiB of the card that held the model (less than its 457 MiB
    minimum) leaves it no room: the model goes to another card, whole."""
    model = fit_model("llama-gqa")
    first = fit_json(capsys, model)["placement"][0]["id"]
    listed = json.loads(_list(capsys))
    index = sorted(d["pci_id"] for d in listed["devices"]).index(
        next(d["pci_id"] for d in listed["devices"] if d["id"] == first)
    )
    moved = fit_json(capsys, model, "--reserve", f"cuda:{index}=143000MiB")
    assert moved["fits"] is True
    assert len(moved["placement"]) == 1
    assert moved["placement"][0]["id"] != first


def _list(capsys: pytest.CaptureFixture[str]) -> str:
    capsys.readouterr()
    main(["--replay", H200X8, "list", "--json"])
    return capsys.readouterr().out


def test_scout_fit_says_which_budget_held_each_device(fit_model: Callable[[str], Path]) -> None:
    """A host calling Scout.fit gets the same budget notes as the CLI, once per device."""
    from gpuscout import Scout

    result = Scout(replay=H200X8, cap={"cuda:0": 490 * MIB}).fit(
        fit_model("llama-gqa"), planner="ollama", ctx=4096
    )
    held = [n for n in result.notes if "budget: cap cuda:0=" in n]
    assert len(held) == 1
    assert held[0].startswith("CUDA GPU-") and ": usable 490.0 MiB of 139.8 GiB" in held[0]
    assert Scout(replay=H200X8).fit(fit_model("llama-gqa"), planner="ollama", ctx=4096).notes == tuple(
        n for n in result.notes if "budget:" not in n
    )


RTX_PAIR = str(Path(__file__).parents[1] / "machines" / "rtx6000ada_a4000_x8")


def test_a_reserve_never_moves_the_compute_llama_cpp_opens_on_the_first_gpu(
    capsys: pytest.CaptureFixture[str], fit_model: Callable[[str], Path]
) -> None:
    """With no layer on a GPU llama.cpp still reserves a compute buffer on its first GPU: the
    planner's first (most free as reported), the card layers go to, even when a reserve on it
    makes the other card rank first by usable free memory."""
    model = fit_model("llama-gqa")

    def fit(*options: str) -> dict[str, Any]:
        capsys.readouterr()
        main(
            [
                "--replay",
                RTX_PAIR,
                "fit",
                str(model),
                "--planner",
                "ollama",
                "--ctx",
                "4096",
                "--json",
                *options,
            ]
        )
        document: dict[str, Any] = json.loads(capsys.readouterr().out)
        return document

    ada = fit()["placement"][0]["id"]
    reserved = ("--reserve", "cuda:0=40GiB")
    assert fit(*reserved)["placement"][0]["id"] == ada  # the layers stay on the reserved card
    for options in ((), reserved):
        none = fit(*options, "--num-gpu", "0")
        assert none["placement"] == []
        assert [(row["id"], row["weights"]) for row in none["memory"][:-1]] == [(ada, 0)]
        assert none["memory"][0]["graph"] > 0 and none["fits"] is True
    capsys.readouterr()
    main(["--replay", RTX_PAIR, *reserved, "list", "-q"])
    assert capsys.readouterr().out.split()[0] != ada  # ranked second under the reserve
