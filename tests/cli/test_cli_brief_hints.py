"""Hints after a selection of nothing say the one reason that matters and where to read the
rest (issue 34, item 7): not every plugin's note about what this machine is not."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gpuscout import DeviceInfo, Discovery, Dropped, PluginReport, SystemInfo
from gpuscout.cli._render.hints import PREFIX
from gpuscout.sizes import GIB
from gpuscout.testing import CliRunner
from tests.cli.terminal import on_terminal

NO_DRIVER = str(Path(__file__).parents[1] / "machines" / "nvidia_no_driver")
LLVMPIPE = DeviceInfo(
    id="0",
    library="Vulkan",
    description="llvmpipe (LLVM 15.0.6, 256 bits)",
    software=True,
    total_memory=2 * GIB,
    free_memory=2 * GIB,
)
#: What this issue's machine said: no NVIDIA, no AMD (amdsmi missing), not macOS, llvmpipe only.
REPORTS = [
    PluginReport(
        name="cuda",
        note="NVML cannot be loaded; no NVIDIA GPU on the PCI bus (/sys/bus/pci/devices lists none)",
    ),
    PluginReport(
        name="rocm", note="no AMD GPU; amdsmi unavailable (ModuleNotFoundError: No module named 'amdsmi')"
    ),
    PluginReport(name="metal", note="Metal: only on macOS (platform 'linux')"),
    PluginReport(
        name="vulkan", note="Vulkan: not in ggml-vulkan's default device set (GGML_VK_VISIBLE_DEVICES unset)"
    ),
]
ONLY_LLVMPIPE = Discovery(
    devices=[], dropped=[Dropped(LLVMPIPE, "software device")], system=SystemInfo(), plugins=REPORTS
)


class _Fixed:
    warnings: tuple[str, ...] = ()
    env: dict[str, str] = {}

    def discover(self, **options: Any) -> Discovery:
        return ONLY_LLVMPIPE


def test_env_best_with_only_llvmpipe_says_that_and_where_the_rest_is(gpuscout_cli: CliRunner) -> None:
    """`env best`: the error, the dropped software device with --include-software, and one line
    pointing to `gpuscout plugins` for the 4 other reasons; no `only on macOS`, no amdsmi."""
    run = gpuscout_cli(["env", "best"], scout=_Fixed())
    lines = run.err.splitlines()
    assert run.code == 1 and len(lines) == 3, run.err
    assert "llvmpipe" in lines[1] and "--include-software" in lines[1]
    assert lines[2] == PREFIX + (
        "4 more reasons: each plugin's note in 'gpuscout plugins', what was dropped and why in "
        "'gpuscout list --explain'"
    )
    assert "macOS" not in run.err and "ModuleNotFoundError" not in run.err


def test_when_only_absences_are_left_one_line_names_the_plugins(gpuscout_cli: CliRunner) -> None:
    """Nothing dropped, no hardware named: one hint naming the plugins and `gpuscout plugins`."""

    class _Nothing(_Fixed):
        def discover(self, **options: Any) -> Discovery:
            return Discovery(devices=[], dropped=[], system=SystemInfo(), plugins=REPORTS)

    run = gpuscout_cli(["env", "best"], scout=_Nothing())
    hints = [line for line in run.err.splitlines() if line.startswith(PREFIX)]
    assert hints == [
        PREFIX
        + "no plugin found a device here (cuda, rocm, metal, vulkan); each says why in 'gpuscout plugins'"
    ]


def test_a_card_without_its_driver_is_the_reason_given_in_a_pipe() -> None:
    """nvidia_no_driver: the CUDA plugin's note naming the unbound GPU leads; one line each."""
    done = subprocess.run(
        [sys.executable, "-m", "gpuscout", "--replay", NO_DRIVER, "env", "best"],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    hints = [line for line in done.stderr.splitlines() if line.startswith(PREFIX)]
    assert done.returncode == 1 and len(hints) == 2, done.stderr
    assert "0000:01:00.0" in hints[0] and "no driver bound" in hints[0]
    assert "only on macOS" not in done.stderr
    # the commands it names look at the same (replayed) machine
    assert hints[1].endswith(
        f"'gpuscout --replay {NO_DRIVER} plugins', what was dropped and why in "
        f"'gpuscout --replay {NO_DRIVER} list --explain'"
    ), hints[1]


@pytest.mark.parametrize("columns", [50, 80, 200])
def test_the_brief_hints_wrap_to_a_real_terminal(columns: int) -> None:
    """On a terminal of 50, 80 and 200 columns the two hints wrap between words to its width."""
    code, out = on_terminal(["--replay", NO_DRIVER, "env", "best"], columns)
    assert code == 1, out
    assert out.count(PREFIX) == 2 and "only on macOS" not in out
    # a word longer than the room (the recording's path) is kept whole on a line of its own
    assert all(
        len(line) <= columns or len(line.split()) == 1 for line in out.splitlines() if "error:" not in line
    ), out
    assert f"'gpuscout --replay {NO_DRIVER} plugins'" in " ".join(out.split())
