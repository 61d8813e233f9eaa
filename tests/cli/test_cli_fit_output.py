"""What ``gpuscout fit`` prints for people (issue 34, items 3 and 4), through a real
pseudo-terminal of 50, 80 and 200 columns and through a pipe: every line within the width,
wrapped between words, never inside one; sizes never cut (columns leave instead, and too
narrow for a table each row is a block); one total, the one ``--json`` has, with what it holds
said once; in a pipe one line each, nothing wrapped."""

from __future__ import annotations

import functools
import gzip
import json
import os
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from gpuscout._fit.document import headline, total_line
from gpuscout.sizes import human_bytes
from tests.cli import terminal

TESTS = Path(__file__).resolve().parent.parent
TWO_CUDA = str(TESTS / "machines" / "wsl2_rtx4090_rtx3090")
H200X8 = str(TESTS / "machines" / "h200x8")
GEMMA = TESTS / "data" / "fit" / "gemma3-270m-q4_k_m.header.gguf.gz"
WIDTHS = (50, 80, 200)


@pytest.fixture(scope="module")
def gemma(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Gemma 3 270M's real header, its tensor data a hole of the right size, as a path relative
    to the folder the commands run in (a 60-character temporary path is one word wider than 50
    columns, which no wrapping can keep whole)."""
    global WORKDIR
    WORKDIR = tmp_path_factory.mktemp("gemma")
    path = WORKDIR / "gemma.gguf"
    path.write_bytes(gzip.decompress(GEMMA.read_bytes()))
    with path.open("r+b") as f:
        f.truncate(300 << 20)
    return Path(path.name)


WORKDIR: Path | None = None


def _env() -> dict[str, str]:
    # No COLUMNS: the width is the terminal's own. No colour: the text is compared as text.
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "FORCE_COLOR")}
    return {**env, "NO_COLOR": "1", "TERM": "xterm"}


@functools.cache  # each command is run once per width, whatever the tests ask of its output
def on_terminal(columns: int, *argv: str) -> tuple[int, tuple[str, ...]]:
    """``gpuscout ARGV`` with stdout and stderr on a pseudo-terminal ``columns`` wide: its exit
    status and its lines (stdout and stderr together, as a terminal shows them)."""
    code, text = terminal.on_terminal(list(argv), columns, env=_env(), cwd=WORKDIR)
    return code, tuple(text.splitlines())


@functools.cache
def in_pipe(*argv: str) -> tuple[int, str]:
    """``gpuscout ARGV`` with stdout a pipe, under a COLUMNS that must not matter."""
    run = subprocess.run(
        [sys.executable, "-m", "gpuscout", *argv],
        capture_output=True,
        text=True,
        env={**_env(), "COLUMNS": "50"},
        cwd=WORKDIR,
    )
    return run.returncode, run.stdout


def document(*argv: str) -> dict[str, Any]:
    code, out = in_pipe(*argv, "--json")
    assert code in (0, 1), out
    data: dict[str, Any] = json.loads(out)
    return data


def wrapped(lines: Sequence[str], sentence: str) -> bool:
    """Whether ``sentence`` is printed whole on consecutive ``lines``, broken only between words."""
    words = sentence.split()
    for start, line in enumerate(lines):
        if not line.strip() or not sentence.strip().startswith(line.strip()):
            continue
        seen: list[str] = []
        for following in lines[start:]:
            seen += following.split()
            if len(seen) >= len(words):
                return seen[: len(words)] == words
    return False


@pytest.mark.parametrize("columns", WIDTHS)
def test_every_line_of_fit_stays_within_the_terminal(gemma: Path, columns: int) -> None:
    """On a terminal of 50, 80 or 200 columns no line of fit's output is wider than it."""
    code, lines = on_terminal(columns, "--replay", TWO_CUDA, "fit", str(gemma))
    assert code == 0, lines
    assert [line for line in lines if len(line.rstrip()) > columns] == []


@pytest.mark.parametrize("columns", WIDTHS)
def test_fit_wraps_its_sentences_between_words(gemma: Path, columns: int) -> None:
    """The headline, the total and every note come out whole, broken only where a space was."""
    code, lines = on_terminal(columns, "--replay", TWO_CUDA, "fit", str(gemma))
    data = document("--replay", TWO_CUDA, "fit", str(gemma))
    assert code == 0
    for sentence in [headline(data), total_line(data), *(f"note: {n}" for n in data["notes"])]:
        assert wrapped(lines, sentence), f"{sentence!r} not whole in:\n" + "\n".join(lines)


@pytest.mark.parametrize("columns", WIDTHS)
def test_fit_never_cuts_a_size(gemma: Path, columns: int) -> None:
    """Each backend's total is printed whole, and each card's id whole or, under the legend that
    says so, as a prefix that selects it (``GPU-1a2b``): nothing ends in an ellipsis."""
    code, lines = on_terminal(columns, "--replay", TWO_CUDA, "fit", str(gemma))
    text = "\n".join(lines)
    data = document("--replay", TWO_CUDA, "fit", str(gemma))
    assert code == 0 and "…" not in text
    shortened = "id: the shortest prefix that selects each device" in text
    for row in data["memory"]:
        assert human_bytes(row["total"]) in text
        assert row["id"] in text or (shortened and row["id"][:8] in text)


@pytest.mark.parametrize("columns", WIDTHS)
def test_fit_says_one_total_the_one_json_has(gemma: Path, columns: int) -> None:
    """One ``total memory`` on a terminal, and it is --json's total (the output buffer in it)."""
    code, lines = on_terminal(columns, "--replay", TWO_CUDA, "fit", str(gemma))
    data = document("--replay", TWO_CUDA, "fit", str(gemma))
    totals = [line for line in lines if "total memory" in line]
    assert code == 0 and len(totals) == 1
    assert totals[0].startswith(f"total memory {human_bytes(data['total'])}")
    assert data["total"] == sum(row["total"] for row in data["memory"])


def test_a_narrow_terminal_gets_a_block_per_device_with_every_figure(gemma: Path) -> None:
    """At 40 columns, too narrow for a table even with short ids, each device is a block: its id
    whole on the first line, then its figures."""
    code, lines = on_terminal(40, "--replay", TWO_CUDA, "fit", str(gemma))
    data = document("--replay", TWO_CUDA, "fit", str(gemma))
    assert code == 0
    for row in data["memory"][:-1]:
        first = lines.index(f"CUDA {row['id']}")
        block = " ".join(lines[first : first + 7])
        assert f"compute: {human_bytes(row['graph'])}" in re.sub(r"\s+", " ", block)


def test_a_mid_width_terminal_names_the_columns_it_left_out(gemma: Path) -> None:
    """At 50 columns the breakdown leaves, the total and free figures stay, and a line says so."""
    code, lines = on_terminal(50, "--replay", TWO_CUDA, "fit", str(gemma))
    text = " ".join(lines)
    assert code == 0 and "columns left out at 50 columns:" in text and "compute" in text
    assert any(re.search(r"GPU-1a2b\S*\s+0-9\s+\S+ MiB\s+23\.5 GiB", line) for line in lines)


def test_in_a_pipe_fit_wraps_nothing_and_says_one_total(gemma: Path) -> None:
    """In a pipe each sentence is one line whatever COLUMNS says, and the total is --json's."""
    code, out = in_pipe("--replay", TWO_CUDA, "fit", str(gemma))
    data = document("--replay", TWO_CUDA, "fit", str(gemma))
    lines = out.splitlines()
    assert code == 0 and headline(data) == lines[0] and f"  {total_line(data)}" in lines
    assert [line for line in lines if "total memory" in line] == [f"  {total_line(data)}"]
    assert all(f"note: {note}" in lines for note in data["notes"]) and lines[-1] == "fits"


def test_a_capped_machine_says_each_budget_note_once_on_a_terminal(gemma: Path) -> None:
    """Eight H200s under --cap all=16MiB at 80 columns: the budget is one note, in MiB."""
    code, lines = on_terminal(80, "--replay", H200X8, "fit", str(gemma), "--cap", "all=16MiB")
    text = " ".join(" ".join(lines).split())
    assert code == 1 and text.count("budget: cap all=16MiB") == 1
    assert "each of the 8 devices: budget: cap all=16MiB: usable 16.0 MiB of 139.8 GiB" in text


def test_given_layers_say_what_their_total_is(tmp_path: Path) -> None:
    """--layers: one block, in the singular, and the total is the given sizes'."""
    code, out = in_pipe("--replay", TWO_CUDA, "fit", "--layers", "1GiB,512MiB")
    lines = out.splitlines()
    assert code == 0 and lines[0] == "given layers: 1 block + output layer (layer 1)"
    assert "  total memory 1.5 GiB: the given layers' sizes" in lines


def test_under_a_budget_the_free_column_is_usable_and_eight_cards_stay_a_table(gemma: Path) -> None:
    """Eight H200s capped at 200 MiB, 80 columns: a table whose free column reads ``usable``."""
    code, lines = on_terminal(80, "--replay", H200X8, "fit", str(gemma), "--cap", "all=200MiB")
    assert code == 1
    header = next(line for line in lines if line.startswith("library "))
    assert header.split()[-1] == "usable"
    assert sum(bool(re.match(r"CUDA +GPU-\S+ .* MiB +199\.0 MiB *$", line)) for line in lines) >= 1


def test_fit_cuts_ids_to_their_shortest_selecting_prefix_before_a_figure_leaves(gemma: Path) -> None:
    """At 80 columns eight H200s' UUIDs become ``GPU-05d9`` (as in list, with its legend line)
    so that the weights, KV cache and compute columns stay; a pipe keeps whole ids."""
    code, lines = on_terminal(80, "--replay", H200X8, "fit", str(gemma), "--cap", "all=16MiB")
    header = next(line for line in lines if line.startswith("library "))
    assert code == 1 and header.split()[:4] == ["library", "id", "layers", "weights"]
    assert any(re.match(r"CUDA +GPU-05d9 +- ", line) for line in lines)
    assert any(line.startswith("id: the shortest prefix that selects each device") for line in lines)
    _, out = in_pipe("--replay", H200X8, "fit", str(gemma), "--cap", "all=16MiB")
    assert "GPU-05d9e6c2-8b3f-47a1-ac54-7e1b9f20d6a3" in out
