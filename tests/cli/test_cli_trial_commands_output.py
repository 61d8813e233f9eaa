"""Output a new user's trial (issue 22) found rough: `env --format json` lines, `exec --help`,
`--color` where it does nothing, the verify report's numbering, "did you mean", `list -q`,
`list --format csv|tsv`, and a timestamp on every `--watch` listing."""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import json
import re
import subprocess
import sys

import pytest

from gpuscout import DeviceInfo
from gpuscout._records import encode as wire
from gpuscout._selection import verify
from gpuscout._suggest import did_you_mean, suggest
from gpuscout.cli import build_parser
from gpuscout.cli._commands.list import watch
from gpuscout.sizes import GIB
from gpuscout.testing import CliRunner, injected, plugin_test_env, scout_of

CUDA_A = DeviceInfo(
    id="GPU-aaaa1111",
    library="CUDA",
    filter_id="GPU-aaaa1111",
    uuid="GPU-aaaa1111",
    pci_id="0000:01:00.0",
    description="Card, big",
    total_memory=48 * GIB,
    free_memory=40 * GIB,
)
CUDA_B = DeviceInfo(
    id="GPU-bbbb2222",
    library="CUDA",
    filter_id="GPU-bbbb2222",
    uuid="GPU-bbbb2222",
    pci_id="0000:02:00.0",
    total_memory=24 * GIB,
    free_memory=20 * GIB,
)
VK_TWIN = DeviceInfo(
    id="0",
    library="Vulkan",
    filter_id="0",
    pci_id="0000:01:00.0",
    description="Card, big",
    total_memory=48 * GIB,
    free_memory=40 * GIB,
)
VK_OTHER = DeviceInfo(
    id="1",
    library="Vulkan",
    filter_id="1",
    pci_id="0000:00:02.0",
    description="Other",
    integrated=True,
    total_memory=8 * GIB,
    free_memory=4 * GIB,
)
RFC3339_UTC = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


def python_m_gpuscout(*argv: str) -> subprocess.CompletedProcess[str]:
    """``python -m gpuscout ARGV`` with the real machine's plugins kept from its devices."""
    env = {**plugin_test_env("cuda", "rocm", "vulkan"), "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [sys.executable, "-m", "gpuscout", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        stdin=subprocess.DEVNULL,
    )


def command_parser(name: str) -> argparse.ArgumentParser:
    parser = build_parser(name)[0]
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    found: argparse.ArgumentParser = sub.choices[name]
    return found


# -- env --format json ----------------------------------------------------------------------------


def test_env_json_is_one_object_on_one_line(gpuscout_cli: CliRunner) -> None:
    """`env --format json` prints the object on a single line, as the docs show it."""
    code, out, _ = gpuscout_cli(["env", "--format", "json", "library=cuda"], [CUDA_A, CUDA_B])
    assert code == 0
    assert out.count("\n") == 1 and out.endswith("}\n")
    assert json.loads(out) == {"CUDA_VISIBLE_DEVICES": "GPU-aaaa1111,GPU-bbbb2222"}


# -- help -----------------------------------------------------------------------------------------


def test_exec_help_shows_the_command_after_the_double_dash() -> None:
    """`exec --help` names `-- CMD [ARG ...]` and ends with an example, not a bare `...`."""
    done = python_m_gpuscout("exec", "--help")
    assert done.returncode == 0
    assert "-- CMD [ARG ...]" in done.stdout
    last = done.stdout.rstrip().splitlines()[-1]
    assert last.strip() != "..." and "gpuscout exec" in last


@pytest.mark.parametrize("command", ["env", "exec", "runner", "nfd", "record"])
def test_color_is_not_offered_where_it_changes_nothing(command: str) -> None:
    """A command that draws no table leaves `--color` out of its --help."""
    assert "--color" not in command_parser(command).format_help()


@pytest.mark.parametrize("command", ["list", "plugins", "fit"])
def test_color_is_offered_where_tables_are_drawn(command: str) -> None:
    """`list`, `plugins` and `fit` still offer `--color`."""
    assert "--color" in command_parser(command).format_help()


def test_color_after_env_still_works_for_scripts(gpuscout_cli: CliRunner) -> None:
    """`env --color never` is accepted (a global option), its output unchanged."""
    run = gpuscout_cli(["env", "--color", "never", "best"], [CUDA_A])
    assert run.code == 0, run.err
    assert run.out == "export CUDA_VISIBLE_DEVICES='GPU-aaaa1111'\n"


# -- the verify report ----------------------------------------------------------------------------


def test_verify_report_numbers_a_device_the_same_in_every_line(
    gpuscout_cli: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Vulkan device the child sees second is C1 under "child sees" and under "not selected"."""
    seen = json.dumps({"devices": wire.unstructure([CUDA_A, VK_OTHER])})
    monkeypatch.setattr(verify, "child_command", lambda *a: [sys.executable, "-c", f"print({seen!r})"])
    run = gpuscout_cli(["env", "--verify", "cuda:0"], [CUDA_A, VK_OTHER])
    assert run.code == 3, run.err
    err = run.err
    sees = next(line for line in err.splitlines() if "child sees:" in line)
    extra = next(line for line in err.splitlines() if "seen but not selected:" in line)
    assert "C1=Vulkan 'Other'" in sees and "C1=Vulkan 'Other'" in extra
    assert "S0, S1" in err and "C0, C1" in err  # the numbering is explained


# -- did you mean ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("word", "choices", "expected"),
    [
        ("lsit", ["list", "plugins", "env"], "list"),
        ("--jsn", ["--json", "--watch"], "--json"),
        ("vulkn", ["cuda", "rocm", "metal", "vulkan"], "vulkan"),
        ("VULKN", ["cuda", "vulkan"], "vulkan"),
        ("zzzz", ["list", "env"], None),
        ("list", ["list", "env"], None),
        ("", ["list"], None),
    ],
)
def test_suggest_offers_the_closest_known_word(word: str, choices: list[str], expected: str | None) -> None:
    """`suggest` returns the close choice, None for an unrelated word or an exact one."""
    assert suggest(word, choices) == expected


def test_did_you_mean_is_empty_without_a_close_word() -> None:
    """The phrase to append is empty when nothing is close."""
    assert did_you_mean("vulkn", ["vulkan"]) == "; did you mean 'vulkan'?"
    assert did_you_mean("qqq", ["vulkan"]) == ""


@pytest.mark.parametrize(
    ("argv", "hint"),
    [
        (["lsit"], "did you mean 'list'?"),
        (["list", "--jsn"], "did you mean '--json'?"),
        (["env", "--format", "jsn"], "did you mean 'json'?"),
        (["--color", "nevr", "list"], "did you mean 'never'?"),
    ],
)
def test_a_misspelling_is_answered_with_did_you_mean(argv: list[str], hint: str) -> None:
    """The real command names the closest spelling of a mistyped command, option or choice."""
    done = python_m_gpuscout(*argv)
    assert done.returncode == 2 and done.stdout == ""
    assert hint in done.stderr and len(done.stderr.splitlines()) == 1


# -- list -q and --format -------------------------------------------------------------------------


def test_list_quiet_prints_only_selectors_best_first(gpuscout_cli: CliRunner) -> None:
    """`list -q` is one selector per line in rank order, each the runtime's own number (the
    plugin enumerated B first, so B is cuda:0 though A ranks first), nothing else on stdout."""
    run = gpuscout_cli(["list", "-q"], [CUDA_B, CUDA_A])
    assert run.code == 0, run.err
    assert run.out == "cuda:1\ncuda:0\n"


def test_list_quiet_on_an_empty_machine_prints_nothing(gpuscout_cli: CliRunner) -> None:
    """`list -q` without devices prints nothing and exits 0."""
    run = gpuscout_cli(["list", "-q"])
    assert run.code == 0, run.err
    assert run.out == ""


def test_list_csv_has_the_tsv_columns_and_quotes_commas(gpuscout_cli: CliRunner) -> None:
    """`--format csv` rows parse with csv: the header, each device, a dropped twin last."""
    run = gpuscout_cli(["list", "--format", "csv"], [CUDA_A, VK_TWIN])
    assert run.code == 0, run.err
    rows = list(csv.DictReader(io.StringIO(run.out)))
    assert [(r["rank"], r["library"], r["id"]) for r in rows] == [
        ("0", "CUDA", "GPU-aaaa1111"),
        ("dropped", "Vulkan", "0"),
    ]
    assert rows[0]["description"] == "Card, big" and rows[0]["free"] == "40.0 GiB"
    assert rows[1]["note"].startswith("duplicate")


def test_list_format_tsv_is_the_pipe_form(gpuscout_cli: CliRunner) -> None:
    """`--format tsv` prints the tab-separated header and rows."""
    run = gpuscout_cli(["list", "--format", "tsv"], [CUDA_A])
    assert run.code == 0, run.err
    lines = run.out.splitlines()
    assert lines[0].split("\t")[:3] == ["rank", "library", "id"]
    assert lines[1].split("\t")[:3] == ["0", "CUDA", "GPU-aaaa1111"]


@pytest.mark.parametrize(
    "argv",
    [
        ["list", "-q", "--json"],
        ["list", "--json", "--format", "csv"],
        ["list", "--format", "csv", "--explain"],
    ],
)
def test_list_forms_that_cannot_combine_are_a_usage_error(argv: list[str], gpuscout_cli: CliRunner) -> None:
    """Two output forms at once are exit 2 with one line."""
    run = gpuscout_cli(argv, [CUDA_A])
    assert run.code == 2, run.err
    assert len(run.err.splitlines()) == 1


# -- --watch timestamps ---------------------------------------------------------------------------


def list_args(*argv: str) -> argparse.Namespace:
    parser = build_parser("list")[0]
    return parser.parse_args(["list", *argv])


def test_every_watch_json_line_carries_a_utc_timestamp() -> None:
    """Each `list --watch --json` line has an RFC 3339 UTC "timestamp", later ones not earlier."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert watch(list_args("--json"), scout_of(injected([CUDA_A])), 0.01, rounds=3) == 0
    stamps = [json.loads(line)["timestamp"] for line in out.getvalue().splitlines()]
    assert len(stamps) == 3 and all(RFC3339_UTC.fullmatch(s) for s in stamps)
    assert stamps == sorted(stamps)


def test_every_plain_watch_listing_starts_with_its_timestamp() -> None:
    """In a pipe each listing starts with a `# TIMESTAMP` line."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert watch(list_args("--watch"), scout_of(injected([CUDA_A])), 0.01, rounds=2) == 0
    frames = out.getvalue().split("\n\n")
    assert len(frames) == 2
    for frame in frames:
        first = frame.splitlines()[0]
        assert first.startswith("# ") and RFC3339_UTC.fullmatch(first[2:])
