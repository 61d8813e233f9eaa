"""The command line loads only what the command used needs: one command module, no rich for
JSON, and a help page that still lists every command."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import gpuscout.cli
from gpuscout.cli import COMMANDS

COMMAND_MODULES = [f"gpuscout.cli._commands.{name}" for name in COMMANDS]


# Runs ``python -m gpuscout ARGS``, then reports every module loaded (on its last stderr line):
# sys.modules sees imports that ``-X importtime`` misses (importlib.import_module).
DRIVER = """
import json, os, runpy, sys
sys.argv[0] = "gpuscout"
try:
    runpy.run_module("gpuscout", run_name="__main__", alter_sys=True)
finally:
    os.write(2, ("\\nMODULES " + json.dumps(sorted(sys.modules)) + "\\n").encode())
"""


def run_gpuscout(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m gpuscout ARGS`` in a fresh interpreter, with wide help pages."""
    env = {**os.environ, "COLUMNS": "200", "VK_DRIVER_FILES": "/nonexistent/gpuscout-test.json"}
    return subprocess.run(
        [sys.executable, "-c", DRIVER, *args], capture_output=True, text=True, timeout=120, env=env
    )


def imported(out: subprocess.CompletedProcess[str]) -> set[str]:
    """The modules the run had loaded when it ended."""
    last = out.stderr.rstrip("\n").rsplit("\n", 1)[-1]
    assert last.startswith("MODULES "), out.stderr
    return set(json.loads(last.removeprefix("MODULES ")))


def test_list_json_imports_only_the_list_command() -> None:
    """`list --json --plugins cuda` loads gpuscout.cli._commands.list, and neither env, exec, rich nor
    cattrs (writing JSON needs no converter) nor structlog (nothing was logged)."""
    out = run_gpuscout("list", "--json", "--plugins", "cuda")
    assert out.returncode == 0, out.stderr
    assert "devices" in json.loads(out.stdout)
    modules = imported(out)
    assert "gpuscout.cli._commands.list" in modules
    unwanted = {
        "gpuscout.cli._commands.env",
        "gpuscout.cli._commands.exec",
        "gpuscout.cli._selection",
        "gpuscout.cli._commands.plugins",
        "gpuscout.cli._commands.runner",
        "gpuscout.cli._render.table",
        "rich",
        "cattrs",
        "gpuscout._records.decode",
        "structlog",
    }
    assert modules & unwanted == set()


@pytest.mark.parametrize("fmt", ["tsv", "csv"])
def test_the_plain_formats_import_no_rich(fmt: str) -> None:
    """`list --format tsv` and `--format csv` write text rows: neither rich nor the terminal table."""
    out = run_gpuscout("list", "--format", fmt, "--plugins", "cuda")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("rank\tlibrary" if fmt == "tsv" else "rank,library")
    assert imported(out) & {"rich", "gpuscout.cli._render.table"} == set()


def test_help_lists_every_command_with_its_help_line() -> None:
    """`gpuscout --help` names every command with its one-line help."""
    out = run_gpuscout("--help")
    assert out.returncode == 0, out.stderr
    assert sorted(COMMANDS) == [
        "cluster",
        "env",
        "exec",
        "fit",
        "list",
        "nfd",
        "plugins",
        "record",
        "runner",
        "topology",
    ]
    for name, line in COMMANDS.items():
        assert any(row.split() == [name, *line.split()] for row in out.stdout.splitlines()), name


def test_help_imports_no_command_module() -> None:
    """The top-level help page is built without importing any command's code."""
    out = run_gpuscout("--help")
    assert imported(out) & set(COMMAND_MODULES) == set()


def test_a_command_help_page_imports_that_command_alone() -> None:
    """`gpuscout env --help` loads the env module and no other command."""
    out = run_gpuscout("env", "--help")
    assert out.returncode == 0 and "--isolate" in out.stdout, out.stderr
    assert imported(out) & set(COMMAND_MODULES) == {"gpuscout.cli._commands.env"}


def test_cluster_help_does_not_import_ray() -> None:
    """Ray takes seconds to import: only an inventory that runs imports it."""
    out = run_gpuscout("cluster", "--help")
    assert out.returncode == 0 and "--ray" in out.stdout, out.stderr
    modules = imported(out)
    assert "gpuscout.cli._commands.cluster" in modules
    assert {"ray", "gpuscout.cluster.ray"} & modules == set()


def _named_modules(path: Path) -> set[str]:
    """The modules named by the import statements of a source file, anywhere in it
    (``from X import y`` names X)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


@pytest.mark.parametrize("module", ["_common", "_output", "_render/table", "_render/explain"])
def test_shared_modules_import_no_command_and_not_the_package(module: str) -> None:
    """What the commands share never imports a command, ``gpuscout.cli`` or ``gpuscout``."""
    path = Path(gpuscout.cli.__file__).parent / f"{module}.py"
    named = _named_modules(path)
    assert named & {*COMMAND_MODULES, "gpuscout.cli._selection", "gpuscout.cli", "gpuscout"} == set()


def test_list_json_imports_neither_shutil_nor_subprocess() -> None:
    """`list --json` (the Vulkan plugin probing in this process) loads neither shutil (argparse's
    formatter would, for a width only help needs) nor subprocess (only a child probe needs it)."""
    out = run_gpuscout("list", "--json")
    assert out.returncode == 0, out.stderr
    assert imported(out) & {"shutil", "subprocess", "bz2", "lzma"} == set()


def test_help_is_as_wide_as_argparse_makes_it() -> None:
    """Without shutil the formatter still takes ``COLUMNS``: a 200-column help page is one whose
    widest line is past 80, a 60-column one's within 60."""
    wide = run_gpuscout("list", "--help")
    narrow = subprocess.run(
        [sys.executable, "-m", "gpuscout", "list", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "60"},
    )
    assert max(map(len, wide.stdout.splitlines())) > 80
    assert max(map(len, narrow.stdout.splitlines())) <= 60
