"""The notes of ``fit`` as people read them (issue 34, item 5): sizes in binary units, never a
raw byte count, two figures that differ written so that they read differently, and a note that
holds for several devices said once, naming them or, when it holds for all, their count."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest

from gpuscout._records.notes import device_label, grouped
from gpuscout.cli import main

MACHINES = Path(__file__).parent / "machines"
H200X8 = str(MACHINES / "h200x8")
GEMMA = Path(__file__).parent / "data" / "fit" / "gemma3-270m-q4_k_m.header.gguf.gz"
#: A byte count as the notes used to write one (``24762777600 bytes``): seven digits or more.
RAW_BYTES = re.compile(r"\b[0-9]{7,}\b|\bbytes\b")


@pytest.fixture(scope="module")
def gemma(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real header of Gemma 3 270M, its tensor data a hole of the right size."""
    path = tmp_path_factory.mktemp("gemma") / "gemma.gguf"
    path.write_bytes(gzip.decompress(GEMMA.read_bytes()))
    with path.open("r+b") as f:
        f.truncate(300 << 20)
    return path


def fit_notes(capsys: pytest.CaptureFixture[str], *argv: str) -> list[str]:
    capsys.readouterr()
    main(["--replay", H200X8, "fit", *argv, "--json"])
    notes: list[str] = json.loads(capsys.readouterr().out)["notes"]
    return notes


def test_a_budget_that_holds_every_device_is_one_note(
    capsys: pytest.CaptureFixture[str], gemma: Path
) -> None:
    """--cap all=16MiB on eight cards: one budget note for the eight, the cap in MiB."""
    held = [n for n in fit_notes(capsys, str(gemma), "--cap", "all=16MiB") if "budget:" in n]
    assert held == ["each of the 8 devices: budget: cap all=16MiB: usable 16.0 MiB of 139.8 GiB"]


def test_the_margin_llamacpp_leaves_is_one_note_for_the_cards_alike(
    capsys: pytest.CaptureFixture[str], gemma: Path
) -> None:
    """llama.cpp's decision leaves every capped card under its margin: said once, not eight times."""
    margin = [n for n in fit_notes(capsys, str(gemma), "--cap", "all=16MiB") if "margin" in n]
    assert len(margin) == 1 and margin[0].startswith("each of the 8 devices: llama.cpp's decision")


@pytest.mark.parametrize(
    "argv",
    [
        ["--cap", "all=16MiB"],
        ["--cap", "all=200MiB", "--num-gpu", "99"],
        ["--reserve", "all=139GiB", "--planner", "ollama"],
    ],
    ids=["cap", "forced", "ollama"],
)
def test_no_note_of_a_model_fit_holds_a_raw_byte_count(
    capsys: pytest.CaptureFixture[str], gemma: Path, argv: list[str]
) -> None:
    """Every figure in a note is in binary units (``522.0 MiB``), never ``547356672 bytes``."""
    notes = fit_notes(capsys, str(gemma), *argv)
    assert notes and [n for n in notes if RAW_BYTES.search(n)] == []


def test_no_note_of_a_layers_fit_holds_a_raw_byte_count(capsys: pytest.CaptureFixture[str]) -> None:
    """Layers forced past the cards and the CPU: the shortfalls are written in GiB."""
    notes = fit_notes(capsys, "--layers", ",".join(["200GiB"] * 12), "--num-gpu", "12")
    assert any(" needs 200.0 GiB but has " in n for n in notes)
    assert [n for n in notes if RAW_BYTES.search(n)] == []


def test_a_shortfall_names_the_card_by_library_id_and_name(capsys: pytest.CaptureFixture[str]) -> None:
    """Eight H200s: the card that is short is named by the id a selector takes, then its name."""
    notes = fit_notes(capsys, "--layers", "200GiB,1GiB", "--num-gpu", "2")
    short = next(n for n in notes if " needs " in n)
    assert re.match(
        r"CUDA GPU-[0-9a-f-]+ \(NVIDIA H200\) needs 200\.0 GiB but has 139\.4 GiB free after its reserve",
        short,
    )


def test_notes_alike_for_some_devices_name_them_once() -> None:
    """Two of three devices with the same text: one note naming both, the other apart."""
    pairs = [("CUDA 0", "full"), ("CUDA 1", "empty"), ("CUDA 2", "full")]
    assert grouped(pairs, every=3) == ["CUDA 0, CUDA 2: full", "CUDA 1: empty"]


def test_a_note_for_every_device_gives_their_count() -> None:
    """The same text for all three devices: one note, ``each of the 3 devices``."""
    assert grouped([(f"CUDA {i}", "capped") for i in range(3)], every=3) == ["each of the 3 devices: capped"]


def test_a_device_label_leaves_out_what_is_unknown() -> None:
    """Library and id, then the name when it says something the id does not."""
    assert device_label("CUDA", "GPU-1", "NVIDIA H200") == "CUDA GPU-1 (NVIDIA H200)"
    assert (device_label("ROCm", "0", ""), device_label("", "", "CPU")) == ("ROCm 0", "CPU")
