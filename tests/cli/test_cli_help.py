"""A command's `--help` (issue 34, item 9): its own options first, the global options it also
takes named in one paragraph that points to `gpuscout --help`, every one still accepted."""

from __future__ import annotations

import argparse

import pytest

from gpuscout.cli import COMMANDS, build_parser
from gpuscout.cli._common import GLOBAL_OPTIONS
from tests.cli.terminal import on_terminal


def command_parser(command: str) -> argparse.ArgumentParser:
    parser, _ = build_parser(command)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    found: argparse.ArgumentParser = sub.choices[command]
    return found


def global_options() -> list[str]:
    """The long options of `gpuscout` itself, before any command (--version is its own)."""
    top = build_parser(None)[0]
    return [
        o
        for a in top._actions
        if a.option_strings and a.dest not in ("help", "version")
        for o in a.option_strings
        if o.startswith("--")
    ]


@pytest.mark.parametrize("columns", [50, 80, 200])
def test_exec_help_shows_device_within_its_first_20_lines(
    monkeypatch: pytest.MonkeyPatch, columns: int
) -> None:
    """`exec --help` at 50, 80 and 200 columns names `--device` in its first 20 lines."""
    monkeypatch.setenv("COLUMNS", str(columns))
    lines = command_parser("exec").format_help().splitlines()
    assert any(line.lstrip().startswith("--device") for line in lines[:20]), "\n".join(lines[:24])


def test_exec_help_on_a_50_column_terminal_shows_device_early() -> None:
    """On a real 50-column terminal `exec --help` names `--device` in its first 20 lines, and no
    line is wider than the terminal but the usage line argparse will not break."""
    code, out = on_terminal(["exec", "--help"], 50)
    assert code == 0, out
    lines = out.splitlines()
    assert any(line.lstrip().startswith("--device") for line in lines[:20]), out
    global_part = out.split(f"{GLOBAL_OPTIONS}:", 1)[1].split("\n\n", 1)[0]
    assert all(len(line) <= 50 for line in global_part.splitlines()), global_part


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_command_help_names_the_global_options_after_its_own(
    monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    """Each command's help ends its options with one paragraph naming the global options and
    pointing to `gpuscout --help`, without their descriptions."""
    monkeypatch.setenv("COLUMNS", "200")
    text = command_parser(command).format_help()
    own, _, rest = text.partition(f"\n{GLOBAL_OPTIONS}:\n")
    paragraph = rest.split("\n\n", 1)[0]
    assert "gpuscout --help" in paragraph
    for option in ("--plugins", "--timeout", "--replay", "--isolated", "--cap"):
        assert option in paragraph.replace(",", " ").split(), (option, paragraph)
    assert "comma list of plugins to use" not in text  # --plugins' own help is gpuscout's
    assert "--plugins NAMES" not in own


@pytest.mark.parametrize("columns", [50, 80, 200])
def test_the_global_paragraph_breaks_between_words_only(
    monkeypatch: pytest.MonkeyPatch, columns: int
) -> None:
    """The paragraph keeps every option whole (`--replay-env`, never `--replay-⏎env`)."""
    monkeypatch.setenv("COLUMNS", str(columns))
    text = command_parser("list").format_help()
    paragraph = text.split(f"\n{GLOBAL_OPTIONS}:\n", 1)[1].split("\n\n", 1)[0]
    words = paragraph.replace(",", " ").split()
    assert {"--replay-env", "--replay-set", "--log-format"} <= set(words), paragraph


def test_the_top_help_still_describes_each_global_option() -> None:
    """`gpuscout --help`, where the paragraph points, keeps each global option's description."""
    text = build_parser(None)[0].format_help()
    assert "comma list of plugins to use" in text and f"{GLOBAL_OPTIONS}:" not in text


@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_global_option_is_still_accepted_after_each_command(command: str) -> None:
    """A command's parser takes every option `gpuscout` takes before it (the help only names them)."""
    own = {o for a in command_parser(command)._actions for o in a.option_strings}
    assert set(global_options()) <= own


def test_the_help_leaves_each_option_help_as_it_was(monkeypatch: pytest.MonkeyPatch) -> None:
    """Printing a command's help hides the global options' help only while it is formatted."""
    parser = command_parser("list")
    before = {a.dest: a.help for a in parser._actions}
    parser.format_help()
    assert {a.dest: a.help for a in parser._actions} == before
