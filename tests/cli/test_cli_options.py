"""Global options before and after the command, logging levels, exit codes and help texts."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from typing import Any

import pytest

from gpuscout import DeviceInfo, Scout
from gpuscout.cli import COMMANDS, EPILOG, build_parser, main
from gpuscout.plugin import Context, hookimpl
from gpuscout.sizes import GIB
from gpuscout.testing import CliRunner

CARD = DeviceInfo(
    id="GPU-aaaa1111",
    library="CUDA",
    filter_id="GPU-aaaa1111",
    uuid="GPU-aaaa1111",
    pci_id="0000:01:00.0",
    free_memory=40 * GIB,
)


class _Captured(Exception):
    """Raised by the capturing factory to stop the command once the Scout options are read."""


def options_of(argv: list[str]) -> argparse.Namespace:
    """The arguments ``main(argv)`` hands its Scout factory."""
    seen: list[argparse.Namespace] = []

    def capture(args: argparse.Namespace) -> Scout:
        seen.append(args)
        raise _Captured

    with pytest.raises(_Captured):
        main(argv, scout_factory=capture)
    return seen[0]


class Broken:
    """A plugin whose enumeration raises."""

    @hookimpl
    def gpuscout_enumerate(self, context: Context) -> list[DeviceInfo]:
        """Fail, as a driver that is not there would."""
        raise RuntimeError("no driver")


# -- options before, after and on both sides of the command -----------------------------------

#: (attribute, value given before, value given after, options before, options after)
OPTIONS = [
    ("log_format", "json", "console", ["--log-format", "json"], ["--log-format", "console"]),
    ("color", "never", "always", ["--color", "never"], ["--color", "always"]),
    ("plugins", ["cuda"], ["rocm"], ["--plugins", "cuda"], ["--plugins", "rocm"]),
    ("disable", ["metal"], ["vulkan"], ["--disable", "metal"], ["--disable", "vulkan"]),
    ("root", "/tmp", "/", ["--root", "/tmp"], ["--root", "/"]),
    ("timeout", 2.0, 3.0, ["--timeout", "2"], ["--timeout", "3"]),
]


@pytest.mark.parametrize(
    ("name", "before", "after", "argv_before", "argv_after"), OPTIONS, ids=[o[0] for o in OPTIONS]
)
def test_an_option_before_the_command_reaches_the_scout(
    name: str, before: Any, after: Any, argv_before: list[str], argv_after: list[str]
) -> None:
    """A global option given before `list` survives the command's own parser."""
    assert getattr(options_of([*argv_before, "list"]), name) == before


@pytest.mark.parametrize(
    ("name", "before", "after", "argv_before", "argv_after"), OPTIONS, ids=[o[0] for o in OPTIONS]
)
def test_an_option_after_the_command_reaches_the_scout(
    name: str, before: Any, after: Any, argv_before: list[str], argv_after: list[str]
) -> None:
    """A global option given after `list` is read as well."""
    assert getattr(options_of(["list", *argv_after]), name) == after


@pytest.mark.parametrize(
    ("name", "before", "after", "argv_before", "argv_after"), OPTIONS, ids=[o[0] for o in OPTIONS]
)
def test_an_option_after_the_command_wins(
    name: str, before: Any, after: Any, argv_before: list[str], argv_after: list[str]
) -> None:
    """Given on both sides, the value after the command wins."""
    assert getattr(options_of([*argv_before, "list", *argv_after]), name) == after


@pytest.mark.parametrize(
    "argv", [["--isolated", "list"], ["list", "--isolated"], ["--isolated", "list", "--isolated"]]
)
def test_isolated_is_read_on_either_side(argv: list[str]) -> None:
    """--isolated before, after or on both sides of the command sets isolation."""
    assert options_of(argv).isolated is True


def test_defaults_hold_when_no_global_option_is_given() -> None:
    """Without global options the Scout gets the documented defaults."""
    args = options_of(["list"])
    assert (
        args.verbose,
        args.log_format,
        args.color,
        args.plugins,
        args.disable,
        args.root,
        args.timeout,
        args.isolated,
    ) == (0, "console", "auto", None, [], "/", 15.0, False)


@pytest.mark.parametrize(
    ("argv", "count"),
    [
        (["-v", "list", "-v"], 2),
        (["-vv", "list"], 2),
        (["list", "-vv"], 2),
        (["--verbose", "list", "-v", "-v"], 3),
        (["list"], 0),
    ],
)
def test_verbose_counts_add_across_the_command(argv: list[str], count: int) -> None:
    """-v before and after the command add up."""
    assert options_of(argv).verbose == count


@pytest.mark.parametrize("command", ["env", "exec", "plugins"])
def test_options_before_other_commands_are_kept(command: str) -> None:
    """`--plugins cuda` before env, exec and plugins reaches their Scout too."""
    tail = ["--", "true"] if command == "exec" else []
    assert options_of(["--plugins", "cuda", "-v", command, "-v", *tail]).plugins == ["cuda"]


def test_plugins_before_the_command_with_json_after_runs(gpuscout_cli: CliRunner) -> None:
    """`gpuscout --plugins cuda list --json` prints one JSON object."""
    run = gpuscout_cli(["--plugins", "cuda", "list", "--json"], [CARD], builtins=False)
    assert run.code == 0, run.err
    assert run.json()["devices"][0]["id"] == CARD.id


# -- logging --------------------------------------------------------------------------------------


def test_vv_logs_debug_events_to_stderr_only(gpuscout_cli: CliRunner) -> None:
    """`-vv list` writes debug events on stderr and none on stdout."""
    code, out, err = gpuscout_cli(["-vv", "--log-format", "json", "list", "--json"], [CARD], builtins=False)
    assert code == 0
    json.loads(out)
    events = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    assert any(e["level"] == "debug" and e["event"] == "discovery.done" for e in events), err


def test_v_shows_info_but_not_debug(gpuscout_cli: CliRunner) -> None:
    """`-v` shows warning events (a failed plugin) and no debug events."""
    run = gpuscout_cli(
        ["-v", "--log-format", "json", "list"], [CARD], plugins=[("broken", Broken())], builtins=False
    )
    assert run.code == 0
    events = [json.loads(line) for line in run.err.splitlines() if line.startswith("{")]
    assert "discovery.plugin_failed" in {e["event"] for e in events}
    assert all(e["level"] != "debug" for e in events)


def test_a_failing_plugin_is_one_line_by_default(gpuscout_cli: CliRunner) -> None:
    """Without -v a plugin that fails costs exactly one `gpuscout: plugin` line on stderr."""
    code, _, err = gpuscout_cli(["list"], [CARD], plugins=[("broken", Broken())], builtins=False)
    assert code == 0
    assert err.splitlines() == [line for line in err.splitlines() if line.strip()]
    assert len(err.splitlines()) == 1, err
    assert err.startswith("gpuscout: plugin broken failed: ") and "no driver" in err


# -- exit codes -----------------------------------------------------------------------------------


def test_list_without_accelerators_exits_0(gpuscout_cli: CliRunner) -> None:
    """`list` on a machine without devices succeeds."""
    run = gpuscout_cli(["list", "--json"], builtins=False)
    assert (run.code, run.json()["devices"]) == (0, [])


@pytest.mark.parametrize("selector", ["fits:1TiB", "library=rocm", "7", "GPU-ffff", "cuda:3"])
def test_a_selector_matching_nothing_exits_1(selector: str, gpuscout_cli: CliRunner) -> None:
    """A well-formed selector with no matching device is exit 1 and one line on stderr."""
    code, out, err = gpuscout_cli(["env", selector], [CARD], builtins=False)
    assert code == 1
    assert out == "" and err.count("\n") == 1 and err.startswith("gpuscout: error: ")


@pytest.mark.parametrize("selector", ["frobnicate", "fits:lots", "library="])
def test_a_word_that_is_no_selector_exits_2(selector: str, gpuscout_cli: CliRunner) -> None:
    """A malformed selector is a usage error: exit 2, one line."""
    code, out, err = gpuscout_cli(["env", selector], [CARD], builtins=False)
    assert code == 2
    assert out == "" and err.count("\n") == 1


def test_an_unknown_option_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    """An unknown option is exit 2 with one line."""
    with pytest.raises(SystemExit) as info:
        main(["--no-such-option", "list"])
    assert info.value.code == 2 and capsys.readouterr().err.count("\n") == 1


@pytest.mark.parametrize("argv", [[], ["-v"], ["--color", "never"]])
def test_no_command_is_one_line_of_usage_and_exit_2(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """A bare `gpuscout` prints one usage line pointing to --help on stderr and exits 2."""
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert err.startswith("usage: gpuscout") and "gpuscout --help" in err


# -- help -----------------------------------------------------------------------------------------


def parsers() -> Iterator[argparse.ArgumentParser]:
    """The top parser and each command's full parser."""
    yield build_parser(None)[0]
    for command in COMMANDS:
        parser, _ = build_parser(command)
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        yield sub.choices[command]


@pytest.mark.parametrize("parser", list(parsers()), ids=["gpuscout", *COMMANDS])
def test_every_option_and_argument_has_a_one_line_help(parser: argparse.ArgumentParser) -> None:
    """Each option and positional argument of every parser says what it is for."""
    for action in parser._actions:
        name = "/".join(action.option_strings) or action.dest
        if action.dest == "color" and action.help is argparse.SUPPRESS:
            continue  # accepted by a command that draws no table, not offered in its --help
        assert action.help and action.help is not argparse.SUPPRESS, f"{parser.prog}: {name}"
        assert "\n" not in action.help, f"{parser.prog}: {name}"


def test_every_command_has_a_one_line_help() -> None:
    """`gpuscout --help` lists every command with a line of help."""
    text = build_parser(None)[0].format_help()
    for command, line in COMMANDS.items():
        assert line and "\n" not in line
        assert command in text


def test_top_help_ends_with_examples_and_exit_codes() -> None:
    """`gpuscout --help` ends with examples and the exit codes 0, 1, 2, 3 and 130."""
    text = build_parser(None)[0].format_help()
    assert text.rstrip().endswith(EPILOG.rstrip())
    examples, _, codes = EPILOG.partition("exit codes:")
    assert examples.count("\n  gpuscout ") >= 2
    for code in ("0", "1", "2", "3", "130"):
        assert f"\n  {code} " in codes


@pytest.mark.parametrize(("argv", "code"), [(["env", "all"], 0), (["env", "GPU-ffff"], 1)])
def test_env_names_a_failing_plugin_in_one_line(argv: list[str], code: int, gpuscout_cli: CliRunner) -> None:
    """`env` also says in one line which plugin failed, whether or not a device matched."""
    run = gpuscout_cli(argv, [CARD], plugins=[("broken", Broken())], builtins=False)
    assert run.code == code
    failed = [line for line in run.err.splitlines() if "broken" in line]
    assert len(failed) == 1 and failed[0].startswith("gpuscout: plugin broken failed: "), failed
