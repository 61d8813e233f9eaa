"""Exit codes a new user's trial (issue 22) found rough: no device for `env`, empty selectors,
`fit --device`, `nfd --dry-run --name`, every plugin failing, `--validate` on a tree."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gpuscout import DeviceInfo, Scout, hookimpl
from gpuscout.cli import EPILOG, main
from gpuscout.sizes import GIB
from gpuscout.testing import CliRunner, injected, plugin_test_env, scout_of

CARD = DeviceInfo(
    id="GPU-aaaa1111",
    library="CUDA",
    filter_id="GPU-aaaa1111",
    uuid="GPU-aaaa1111",
    pci_id="0000:01:00.0",
    total_memory=48 * GIB,
    free_memory=40 * GIB,
)
README = Path(__file__).parents[2] / "README.md"


class Broken:
    """A plugin whose enumeration raises."""

    @hookimpl
    def gpuscout_enumerate(self, context: Any) -> list[DeviceInfo]:
        raise RuntimeError("driver exploded")


def python_m_gpuscout(*argv: str) -> subprocess.CompletedProcess[str]:
    """``python -m gpuscout ARGV`` with the real machine's plugins blocked."""
    env = {**plugin_test_env("cuda", "rocm", "vulkan"), "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [sys.executable, "-m", "gpuscout", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        stdin=subprocess.DEVNULL,
    )


def test_env_on_a_machine_without_devices_says_so_and_exits_1(gpuscout_cli: CliRunner) -> None:
    """`env` with no selector and no device prints nothing, says why on stderr and exits 1."""
    code, out, err = gpuscout_cli(["env"])
    assert code == 1
    assert out == "" and "no device was found" in err


def test_env_isolate_on_a_machine_without_devices_also_exits_1(gpuscout_cli: CliRunner) -> None:
    """`env --isolate all` without devices is exit 1 too, with nothing on stdout."""
    run = gpuscout_cli(["env", "--isolate", "all"])
    assert run.code == 1, run.err
    assert run.out == ""


def test_env_with_a_device_and_no_selector_still_exits_0(gpuscout_cli: CliRunner) -> None:
    """`env` with no selector selects every device there is, exit 0."""
    run = gpuscout_cli(["env"], [CARD])
    assert run.code == 0, run.err
    assert "GPU-aaaa1111" in run.out


@pytest.mark.parametrize(
    "argv",
    [["env", ""], ["env", " "], ["env", ","], ["env", "best", ""], ["exec", "--device", "", "--", "true"]],
)
def test_an_empty_selector_is_a_usage_error_naming_it(argv: list[str], gpuscout_cli: CliRunner) -> None:
    """An empty selector is exit 2 with one line naming it, not a silent "all"."""
    code, out, err = gpuscout_cli(argv, [CARD])
    assert code == 2
    assert out == "" and "empty selector" in err and len(err.splitlines()) == 1


def test_an_empty_fit_device_selector_is_a_usage_error(gpuscout_cli: CliRunner) -> None:
    """`fit --device ""` is exit 2 naming the empty selector."""
    argv = ["fit", "--layers", "1MiB,1MiB", "--device", ""]
    run = gpuscout_cli(argv, [CARD])
    assert run.code == 2, run.err
    assert "empty selector" in run.err


def test_an_empty_selector_is_refused_by_the_real_command() -> None:
    """`python -m gpuscout env ""` exits 2 before any discovery."""
    done = python_m_gpuscout("env", "")
    assert done.returncode == 2 and done.stdout == ""
    assert "empty selector ''" in done.stderr


@pytest.mark.parametrize("selector", ["fits:1TiB", "library=rocm", "cuda:5", "best"])
def test_fit_device_that_matches_nothing_exits_1(selector: str, gpuscout_cli: CliRunner) -> None:
    """`fit --device` with a well-formed selector that matches nothing is exit 1, as for env."""
    argv = ["fit", "--layers", "1MiB,1MiB", "--device", selector]
    devices = [] if selector == "best" else [CARD]
    run = gpuscout_cli(argv, devices)
    assert run.code == 1, run.err
    assert "gpuscout: error:" in run.err


def test_nfd_dry_run_checks_the_file_name_first(gpuscout_cli: CliRunner) -> None:
    """`nfd --dry-run --name .hidden` is exit 2: a dry run refuses what a real run would."""
    code, out, err = gpuscout_cli(["nfd", "--dry-run", "--name", ".hidden"], [CARD])
    assert code == 2
    assert out == "" and "file name '.hidden'" in err


def test_nfd_dry_run_name_check_needs_no_discovery() -> None:
    """The real `nfd --dry-run --name a/b` refuses the name before discovering anything."""

    def never(args: Any) -> Scout:
        raise AssertionError("discovered before checking --name")

    assert main(["nfd", "--dry-run", "--name", "a/b"], scout_factory=never) == 2


def test_list_exits_5_when_every_plugin_failed(gpuscout_cli: CliRunner) -> None:
    """`list` whose only plugin raised exits 5, naming the plugin on stderr."""
    scout = scout_of(("broken", Broken()))
    run = gpuscout_cli(["list"], scout=scout)
    assert run.code == 5, run.err
    assert "plugin broken failed" in run.err


def test_plugins_exits_5_when_every_plugin_failed(gpuscout_cli: CliRunner) -> None:
    """`plugins --json` whose only plugin raised prints the report and exits 5."""
    scout = scout_of(("broken", Broken()))
    run = gpuscout_cli(["plugins", "--json"], scout=scout)
    assert run.code == 5, run.err
    reports = {r["name"]: r["status"] for r in run.json()}
    assert reports["broken"] == "failed"


def test_list_exits_0_when_one_plugin_of_two_failed(gpuscout_cli: CliRunner) -> None:
    """One plugin failing beside one that answered is still a listing: exit 0."""
    scout = scout_of(("broken", Broken()), injected([CARD]))
    run = gpuscout_cli(["list", "--json"], scout=scout)
    assert run.code == 0, run.err
    assert len(run.json()["devices"]) == 1


def test_list_exits_0_when_plugins_are_fine_and_find_nothing(gpuscout_cli: CliRunner) -> None:
    """No device, every plugin ok: exit 0 (a machine without an accelerator is no error)."""
    assert gpuscout_cli(["list"]).code == 0


def test_list_validate_on_a_tree_keeps_the_devices_and_says_it_skipped(
    gpuscout_cli: CliRunner, tmp_path: Path
) -> None:
    """`--root TREE list --validate` skips validation with a warning instead of dropping all."""
    argv = ["--root", str(tmp_path), "list", "--json", "--validate"]
    code, out, err = gpuscout_cli(argv, [CARD])
    assert code == 0
    assert [d["id"] for d in json.loads(out)["devices"]] == ["GPU-aaaa1111"]
    assert "--validate skipped" in err


def test_the_exit_codes_of_help_and_readme_name_5_and_ctrl_c() -> None:
    """`gpuscout --help` and the README's exit-code table list 5 and what Ctrl-C gives."""
    assert "5    every plugin that ran failed or timed out" in EPILOG
    text = README.read_text(encoding="utf-8")
    assert "| 5 |" in text and "| 130 |" in text and "Ctrl-C" in text


def test_exec_without_device_on_a_machine_without_devices_runs_its_command(gpuscout_cli: CliRunner) -> None:
    """`exec -- CMD` with no device found runs CMD and passes its status through."""
    argv = ["exec", "--", sys.executable, "-c", "raise SystemExit(7)"]
    assert gpuscout_cli(argv).code == 7
