"""The command line: `gpuscout list`, `gpuscout plugins`, usage errors, logging on stderr."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from gpuscout.testing import CliRunner

BUILTINS = ["cuda", "rocm", "metal", "vulkan"]
REPORT_KEYS = ["name", "version", "distribution", "hooks", "status", "error", "note", "devices", "elapsed_ms"]


def gpuscout(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpuscout", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


def test_list_json_prints_one_object_of_the_documented_shape() -> None:
    """`list --json` prints devices, dropped, system and plugins, and exits 0 without a GPU."""
    out = gpuscout("list", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert list(doc) == ["devices", "dropped", "system", "plugins"]
    assert list(doc["system"]) == ["total_memory", "free_memory", "free_swap"]
    assert doc["system"]["total_memory"] > 0
    assert [p["name"] for p in doc["plugins"]] == BUILTINS
    assert all(list(p) == REPORT_KEYS for p in doc["plugins"])
    for entry in doc["dropped"]:
        assert list(entry) == ["device", "reason", "duplicate_of"]


def test_list_prints_a_table_and_system_memory() -> None:
    """Plain `list` prints a human table ending with system memory."""
    out = gpuscout("list")
    assert out.returncode == 0, out.stderr
    assert "System memory:" in out.stdout


def test_plugins_json_lists_the_four_builtins_with_reasons() -> None:
    """`plugins --json` reports each built-in; one that found nothing says why."""
    out = gpuscout("plugins", "--json")
    assert out.returncode == 0, out.stderr
    reports = json.loads(out.stdout)
    assert [r["name"] for r in reports] == BUILTINS
    cuda = reports[0]
    assert cuda["status"] == "ok" and cuda["devices"] == 0 and cuda["note"] != ""


def test_disabled_plugins_are_reported_as_disabled() -> None:
    """--disable and GPUSCOUT_DISABLE_PLUGINS mark plugins disabled."""
    out = gpuscout("plugins", "--json", "--disable", "cuda", env={"GPUSCOUT_DISABLE_PLUGINS": "metal"})
    status = {r["name"]: r["status"] for r in json.loads(out.stdout)}
    assert status["cuda"] == status["metal"] == "disabled" and status["rocm"] == "ok"


def test_a_usage_error_is_one_line_and_exit_code_2() -> None:
    """An unknown option exits 2 with one clear line on stderr and nothing on stdout."""
    out = gpuscout("list", "--no-such-option")
    assert out.returncode == 2 and out.stdout == ""
    assert len(out.stderr.strip().splitlines()) == 1 and "--no-such-option" in out.stderr


def test_no_command_is_a_usage_error() -> None:
    """`gpuscout` alone prints a one-line usage on stderr and exits 2."""
    assert gpuscout().returncode == 2


def test_json_logs_go_to_stderr_and_stdout_stays_clean() -> None:
    """With -vv and --log-format json, stderr holds JSON lines and stdout one JSON object."""
    out = gpuscout("list", "--json", "-vv", "--log-format", "json")
    json.loads(out.stdout)
    lines = [line for line in out.stderr.splitlines() if line.startswith("{")]
    assert lines and all("event" in json.loads(line) for line in lines)


def test_global_options_before_the_command_are_kept() -> None:
    """`-vv --log-format json` before `list` log JSON lines, as they do after it."""
    out = gpuscout("-vv", "--log-format", "json", "list", "--json")
    json.loads(out.stdout)
    lines = [line for line in out.stderr.splitlines() if line.startswith("{")]
    assert lines and all("event" in json.loads(line) for line in lines)


def test_an_unknown_command_is_one_line_naming_the_commands() -> None:
    """`gpuscout frobnicate` exits 2 with one line that lists the commands."""
    out = gpuscout("frobnicate")
    assert out.returncode == 2 and out.stdout == ""
    assert len(out.stderr.splitlines()) == 1, out.stderr
    assert "'frobnicate'" in out.stderr and "'list'" in out.stderr and "'runner'" in out.stderr


def test_a_command_help_page_has_a_description() -> None:
    """`list`, `plugins` and `runner` explain themselves beyond their one-line help."""
    for command, words in (("list", "best first"), ("plugins", "each plugin"), ("runner", "GET /info")):
        out = gpuscout(command, "--help", env={"COLUMNS": "300"})
        assert out.returncode == 0, out.stderr
        description = out.stdout.split("\n\n")[1]
        assert words in description and not description.startswith("options:"), out.stdout


def test_an_unconfigured_host_gets_nothing_on_stdout() -> None:
    """A host that never configured structlog sees no gpuscout log lines on its stdout."""
    code = (
        "from gpuscout import Scout, DeviceInfo;"
        "s = Scout(entry_points=False);"
        "s.discover();"
        "s.flash_attention_supported([DeviceInfo(library='CUDA', compute_major=8)])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout == ""
    assert "rules.cuda_driver_unknown" in out.stderr


def test_the_table_marks_software_devices_and_unknown_compute(
    gpuscout_cli: CliRunner, monkeypatch: Any
) -> None:
    """A software device shows as such, an unknown compute capability as a dash."""
    from gpuscout import DeviceInfo

    monkeypatch.setenv("COLUMNS", "200")
    llvmpipe = DeviceInfo(
        id="0",
        library="Vulkan",
        description="llvmpipe",
        software=True,
        compute_major=-1,
        compute_minor=-1,
        total_memory=2**31,
        free_memory=2**31,
    )
    code, out, _ = gpuscout_cli(["list", "--include-software"], [llvmpipe])
    assert code == 0
    row = next(line for line in out.splitlines() if "llvmpipe" in line)
    fields = row.split("\t")  # in a pipe: tab-separated, unknown values as "-"
    # The note column, then the selector the device answers to (last, so columns keep places).
    assert fields[-2:] == ["software", "vulkan:0"] and "-" in fields and "-1.-1" not in row
