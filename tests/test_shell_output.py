"""`gpuscout env` output (gpuscout._selection.visibility.render) evaluated by real shells: whatever the values
hold, `eval` of sh output and sourcing of dotenv output give back the exact bytes and run nothing."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuscout._selection.visibility import EnvFormatError, render
from gpuscout.errors import GpuscoutError

# A marker file that a command smuggled into a value would create (relative to the shell's cwd).
MARK = "pwned"
NASTY = [
    "",
    "plain",
    "it's",
    "'",
    "''",
    "'\\''",
    '"',
    'a "b"',
    "`touch pwned`",
    "$(touch pwned)",
    "${HOME}",
    "$HOME",
    "$",
    "\\",
    "\\\\",
    "\\'",
    "a\\nb",
    "line1\nline2",
    "\n",
    "\n\n",
    "trailing\n",
    "\r",
    "cr\r\nlf",
    "\t",
    "tab\there",
    "ünïcødé ✓ 🚀",
    "!",
    "!!",
    "#comment",
    " # not a comment",
    "-n",
    "-e",
    "=",
    "==x",
    "~",
    "~/x",
    "a:~/b",
    "*",
    "?",
    "[a]",
    "{a,b}",
    "a;touch pwned",
    "a|touch pwned",
    "a&&touch pwned",
    "> pwned",
    "< /dev/null",
    "$((1+1))",
    "$'\\x41'",
    "\x01\x02\x1b[31m",
    "\x7f",
    " leading and trailing ",
    "GPU-aaaa1111,GPU-b",
]
# UTF-8-encodable text (no lone surrogates: a file holds bytes), everything but NUL.
VALUES = st.text(st.characters(codec="utf-8", exclude_characters="\0"), max_size=40)
BATCHES = st.lists(VALUES | st.sampled_from(NASTY), min_size=1, max_size=12)


def shell(name: str) -> str:
    """The path of shell ``name``; skipped when missing, except on CI where it must exist."""
    path = shutil.which(name)
    if path is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{name} is not installed; CI must install it")
        pytest.skip(f"{name} is not installed")
    return path


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("shell")


def evaluate(shell_path: str, workdir: Path, text: str, load: str, count: int) -> list[str]:
    """Run ``load`` (which reads ./env) in the shell, then print V0..V{count-1} NUL-separated."""
    (workdir / "env").write_bytes(text.encode())
    names = " ".join(f'"$V{i}"' for i in range(count))
    script = f"{load}\nprintf '%s\\0' {names}"
    out = subprocess.run(
        [shell_path, "-c", script], cwd=workdir, capture_output=True, check=True, timeout=30
    ).stdout
    assert not (workdir / MARK).exists(), "a value ran a command"
    return out.decode().split("\0")[:-1]


def numbered(values: list[str]) -> dict[str, str]:
    return {f"V{i}": v for i, v in enumerate(values)}


SH_LOAD = 'eval "$(cat ./env)"'
DOTENV_LOAD = "set -a; . ./env; set +a"


@pytest.mark.parametrize("name", ["bash", "dash"])
@settings(max_examples=100, deadline=None)
@given(values=BATCHES)
def test_sh_output_survives_eval(name: str, workdir: Path, values: list[str]) -> None:
    """`eval "$(cat file)"` of sh output gives back every value byte for byte."""
    text = render(numbered(values), "sh")
    assert evaluate(shell(name), workdir, text, SH_LOAD, len(values)) == values


@pytest.mark.parametrize("name", ["bash", "dash"])
@settings(max_examples=100, deadline=None)
@given(values=BATCHES)
def test_dotenv_output_survives_sourcing(name: str, workdir: Path, values: list[str]) -> None:
    """`set -a; . ./file` of dotenv output gives back every value byte for byte."""
    text = render(numbered(values), "dotenv")
    assert evaluate(shell(name), workdir, text, DOTENV_LOAD, len(values)) == values


@pytest.mark.parametrize(("fmt", "load"), [("sh", SH_LOAD), ("dotenv", DOTENV_LOAD)])
@pytest.mark.parametrize("name", ["bash", "dash"])
def test_every_nasty_value_round_trips_in_one_file(name: str, fmt: str, load: str, workdir: Path) -> None:
    """The hand-picked hostile values, all in one file, come back intact and run nothing."""
    text = render(numbered(NASTY), fmt)
    assert evaluate(shell(name), workdir, text, load, len(NASTY)) == NASTY


@pytest.mark.parametrize("name", ["bash", "dash"])
def test_a_backtick_device_id_in_dotenv_runs_nothing(name: str, workdir: Path) -> None:
    """A device id holding a backtick command stays text when the dotenv file is sourced."""
    value = f"GPU-`touch {MARK}`"
    text = render({"CUDA_VISIBLE_DEVICES": value}, "dotenv")
    script = f'{DOTENV_LOAD}\nprintf %s "$CUDA_VISIBLE_DEVICES"'
    (workdir / "env").write_text(text)
    out = subprocess.run(
        [shell(name), "-c", script], cwd=workdir, capture_output=True, text=True, check=True, timeout=30
    ).stdout
    assert out == value and not (workdir / MARK).exists()


def test_sh_output_exports_to_child_processes(workdir: Path) -> None:
    """Variables set by eval of sh output reach a child process's environment."""
    text = render({"GPUSCOUT_PROBE": "a'b"}, "sh")
    (workdir / "env").write_text(text)
    script = f"{SH_LOAD}\nexec printenv GPUSCOUT_PROBE"
    out = subprocess.run(
        [shell("dash"), "-c", script], cwd=workdir, capture_output=True, text=True, check=True, timeout=30
    ).stdout
    assert out == "a'b\n"


def test_plain_dotenv_values_are_written_bare() -> None:
    """Ids, indices, lists and the empty string need no quotes in dotenv output."""
    env = {"A": "GPU-aaaa1111,GPU-b", "B": "-1", "C": ""}
    assert render(env, "dotenv") == "A=GPU-aaaa1111,GPU-b\nB=-1\nC=\n"


def test_other_dotenv_values_are_single_quoted() -> None:
    """A value with shell syntax is single-quoted, its own quote written as '\\''."""
    assert render({"A": "it's $x"}, "dotenv") == "A='it'\\''s $x'\n"


@settings(max_examples=200)
@given(
    env=st.dictionaries(
        st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True),
        st.text(st.characters(exclude_characters="\0")),
    )
)
def test_json_output_is_valid_json_for_any_text(env: dict[str, str]) -> None:
    """json output parses back to the same mapping, lone surrogates and controls included."""
    assert json.loads(render(env, "json")) == env


@pytest.mark.parametrize("fmt", ["sh", "dotenv", "json"])
def test_a_nul_byte_is_refused_naming_the_variable(fmt: str) -> None:
    """No environment variable can carry NUL, so rendering one is an error naming it."""
    with pytest.raises(EnvFormatError, match="variable 'BAD' holds a NUL byte") as info:
        render({"OK": "x", "BAD": "a\0b"}, fmt)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("name", ["", "1A", "A-B", "A B", "A\n", "A\nB", "Ä", "A=B", "$(x)"])
def test_an_invalid_name_is_refused_naming_it(name: str) -> None:
    """A name that is not [A-Za-z_][A-Za-z0-9_]* is a one-line error quoting it."""
    with pytest.raises(EnvFormatError) as info:
        render({name: "x"}, "sh")
    assert repr(name) in str(info.value) and "\n" not in str(info.value)


def test_an_unknown_format_is_a_gpuscout_error() -> None:
    """An unknown format is refused with the gpuscout error family, listing the formats."""
    with pytest.raises(GpuscoutError, match="expected one of sh, json, dotenv"):
        render({"A": "x"}, "yaml")
