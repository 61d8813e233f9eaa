"""``list --explain`` as people read it (issue 34, item 3): on a pseudo-terminal of 50, 80 and
200 columns each line of the explanation is wrapped between words to the width, never inside
one; in a pipe each is one line; the system memory note, already under the listing, is not
said again; counts take the singular for one."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.cli.test_cli_fit_output import WIDTHS, in_pipe, on_terminal, wrapped

MACHINES = Path(__file__).resolve().parent.parent / "machines"
TWO_CUDA = str(MACHINES / "wsl2_rtx4090_rtx3090")
ONE_CUDA = str(MACHINES / "wsl2_rtx4090")
WSL2_NOTE = "WSL2: this is the memory of WSL's virtual machine"


def explanation(lines: tuple[str, ...] | list[str]) -> list[str]:
    """The lines from ``Ranking:`` on (the explanation after the listing), each plugin's time
    as ``N ms`` (two runs take different times)."""
    start = next(i for i, line in enumerate(lines) if line.startswith("Ranking: "))
    return [re.sub(r"\b[0-9]+\.[0-9] ms\b", "N ms", line) for line in lines[start:]]


@pytest.mark.parametrize("columns", WIDTHS)
def test_the_explanation_stays_within_the_terminal(columns: int) -> None:
    """No line of the explanation is wider than the terminal (none of its words is)."""
    code, lines = on_terminal(columns, "--replay", TWO_CUDA, "list", "--explain")
    assert code == 0
    assert [line for line in explanation(lines) if len(line.rstrip()) > columns] == []


@pytest.mark.parametrize("columns", WIDTHS)
def test_the_explanation_wraps_between_words(columns: int) -> None:
    """Every line of the pipe's explanation comes out whole on the terminal, broken only at spaces."""
    code, lines = on_terminal(columns, "--replay", TWO_CUDA, "list", "--explain")
    _, piped = in_pipe("--replay", TWO_CUDA, "list", "--explain")
    assert code == 0
    shown = explanation(lines)
    for line in explanation(piped.splitlines()):
        assert wrapped(shown, line), f"{line!r} not whole in:\n" + "\n".join(shown)


@pytest.mark.parametrize("columns", [50, 80])
def test_a_continued_line_is_indented_under_its_own(columns: int) -> None:
    """A ranked device's line too long for the terminal goes on two spaces deeper than it starts."""
    code, lines = on_terminal(columns, "--replay", TWO_CUDA, "list", "--explain")
    shown = explanation(lines)
    first = next(i for i, line in enumerate(shown) if line.startswith("  #0 "))
    assert code == 0 and re.match(r"    \S", shown[first + 1]) and "note:" not in shown[first + 1]


def test_in_a_pipe_each_explanation_line_is_one_line() -> None:
    """In a pipe (COLUMNS 50 notwithstanding) a ranked device's reason is on its own line."""
    code, out = in_pipe("--replay", TWO_CUDA, "list", "--explain")
    lines = out.splitlines()
    assert code == 0
    assert any(
        line.startswith("  #0 cuda:0 (CUDA GPU-1a2b")
        and line.endswith("more free memory (23.5 GiB > 22.8 GiB)")
        for line in lines
    )


@pytest.mark.parametrize("where", ["terminal", "pipe"])
def test_the_system_memory_note_is_said_once(where: str) -> None:
    """WSL2's note on what system memory is comes once, under the listing, not again after it."""
    if where == "terminal":
        code, lines = on_terminal(80, "--replay", TWO_CUDA, "list", "--explain")
        text = " ".join(" ".join(lines).split())
    else:
        code, text = in_pipe("--replay", TWO_CUDA, "list", "--explain")
    assert code == 0 and text.count(WSL2_NOTE) == 1


def test_a_plugin_that_found_one_device_says_device() -> None:
    """``cuda: ok, 1 device``, and ``0 devices`` for the others: never ``device(s)``."""
    code, out = in_pipe("--replay", ONE_CUDA, "list", "--explain")
    assert code == 0 and "  cuda: ok, 1 device, " in out and "  rocm: ok, 0 devices, " in out
    assert "device(s)" not in out


def test_after_format_tsv_the_explanation_stays_one_line_each_on_a_terminal() -> None:
    """``--format tsv`` asks for plain lines: the explanation after them is not wrapped either."""
    code, lines = on_terminal(50, "--replay", TWO_CUDA, "list", "--format", "tsv", "--explain")
    assert code == 0
    reason = [line for line in lines if line.startswith("  #0 cuda:0 (CUDA GPU-1a2b")]
    assert len(reason) == 1 and reason[0].endswith("(23.5 GiB > 22.8 GiB)")
