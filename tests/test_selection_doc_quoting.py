"""docs/selection.md's claims about ``gpuscout env --format sh|dotenv`` quoting, read out of the
page and checked against the formatter's real output, so the page cannot drift from the code."""

from __future__ import annotations

import re
import string
import subprocess
from pathlib import Path

from gpuscout._selection.visibility import render, sh_quote

PAGE = (Path(__file__).resolve().parents[1] / "docs" / "selection.md").read_text()


def _row(fmt: str) -> str:
    """The table row of ``--format`` ``fmt``."""
    (row,) = [line for line in PAGE.splitlines() if line.startswith(f"| `{fmt}`")]
    return row


def _example() -> tuple[dict[str, str], str]:
    """The example's variables (name -> value) and the text block that follows it."""
    match = re.search(
        r"For example, a variable `(\w+)` holding `([^`]*)` and one `(\w+)` "
        r"holding `([^`]*)` are written\s+by[^\n]*\n\n```text\n(.*?)```",
        PAGE,
        re.DOTALL,
    )
    assert match, "docs/selection.md lost its quoting example"
    k, v, l_, w, block = match.groups()
    return {k: v, l_: w}, block


def test_the_documented_sh_escape_of_a_quote_is_the_one_written() -> None:
    """The sh row's "a ' inside is written X" is what sh_quote writes for a quote."""
    match = re.search(r"a `'` inside is written `([^`]+)`", _row("sh"))
    assert match
    assert sh_quote("a'b") == f"'a{match.group(1)}b'"
    assert render({"K": "'"}, "sh") == f"export K='{match.group(1)}'\n"


def test_the_documented_dotenv_plain_characters_are_the_ones_written_bare() -> None:
    """Every printable ASCII character is bare in dotenv exactly when the row's class holds it;
    any other value is single-quoted as in sh, and an empty value is ``K=``."""
    row = _row("dotenv")
    match = re.search(r"values of only `(\[[^`]+\])` are written bare", row)
    assert match and "single-quoted exactly as in `sh`" in row and "written `K=`" in row
    plain = re.compile(f"{match.group(1)}*")
    for char in string.printable:
        value = f"a{char}b"
        expected = value if plain.fullmatch(value) else sh_quote(value)
        assert render({"K": value}, "dotenv") == f"K={expected}\n", repr(char)
    assert render({"K": ""}, "dotenv") == "K=\n"


def test_the_example_block_is_the_real_output_of_both_formats() -> None:
    """The page's example lines are render()'s sh output followed by its dotenv output."""
    env, block = _example()
    assert block == render(env, "sh") + render(env, "dotenv")


def test_the_example_lines_give_the_shell_the_values_back(tmp_path: Path) -> None:
    """Evaluated by sh, the example's sh lines and its sourced dotenv lines give the values."""
    env, block = _example()
    lines = block.splitlines(keepends=True)
    (tmp_path / "sh").write_text("".join(lines[: len(env)]))
    (tmp_path / "dotenv").write_text("".join(lines[len(env) :]))
    for name in ("sh", "dotenv"):
        script = f"set -a; . ./{name}; " + "; ".join(f'printf "%s\\0" "${k}"' for k in env)
        out = subprocess.run(
            ["sh", "-c", script],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=True,
            env={"PATH": "/usr/bin:/bin"},
        ).stdout
        assert out.split("\0")[:-1] == list(env.values()), name
