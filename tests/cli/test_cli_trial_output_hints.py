"""Hints after a trial on a machine without a GPU (issue 22): they say only what the output did
not, each once, wrapped to a terminal's width and one line each in a pipe."""

from __future__ import annotations

import contextlib
import io
from typing import Any

import pytest

from gpuscout import DeviceInfo, Discovery, Dropped, PluginReport, PluginStatus, SystemInfo
from gpuscout.cli._render.hints import PREFIX, brief_hints, format_hints, hints, print_for, terminal_width
from gpuscout.sizes import GIB
from gpuscout.testing import CliRunner

SOFT = DeviceInfo(
    id="0",
    library="Vulkan",
    description="llvmpipe (LLVM 17.0.6, 256 bits)",
    software=True,
    total_memory=2 * GIB,
    free_memory=2 * GIB,
)
NOTE = (
    "NVML library libnvidia-ml.so.1 cannot be loaded (is the NVIDIA driver installed?): "
    "cannot open shared object file; no NVIDIA GPU on the PCI bus"
)
REPORTS = [
    PluginReport(name="cuda", note=NOTE),
    PluginReport(name="metal", note="Metal: only on macOS (platform 'linux')"),
    PluginReport(name="rocm", status=PluginStatus.TIMEOUT, error="enumerate did not finish within 0.001 s"),
    PluginReport(name="twin", note=NOTE),
]
EMPTY = Discovery(
    devices=[], dropped=[Dropped(SOFT, "software device")], system=SystemInfo(), plugins=REPORTS
)


class _Tty(io.StringIO):
    """A stderr that says it is a terminal."""

    def isatty(self) -> bool:
        return True


class _Fixed:
    warnings: tuple[str, ...] = ()
    env: dict[str, str] = {}

    def discover(self, **options: Any) -> Discovery:
        return EMPTY


def test_a_timed_out_plugin_is_named_once_not_again_as_a_hint(gpuscout_cli: CliRunner) -> None:
    """`--timeout 0.001`: the plugin's timeout line is printed, and no hint repeats it."""
    err = gpuscout_cli(["list"], scout=_Fixed()).err
    assert err.count("enumerate did not finish within 0.001 s") == 1
    assert "gpuscout: plugin rocm timeout:" in err and "hint: plugin rocm" not in err


def test_the_same_hint_is_given_once() -> None:
    """Two plugins with one note give two hints, but a line never repeats word for word."""
    lines = hints(EMPTY, {})
    assert len(lines) == len(set(lines))


def test_a_note_does_not_repeat_its_plugin_name() -> None:
    """`plugin metal: only on macOS`, not `plugin metal: Metal: only on macOS`."""
    assert "plugin metal: only on macOS (platform 'linux')" in hints(EMPTY, {})


def test_after_a_listing_the_dropped_device_is_not_described_again() -> None:
    """`listed=True` keeps the option, not the description the listing showed."""
    [software] = [line for line in hints(EMPTY, {}, listed=True) if "software" in line]
    assert "llvmpipe" not in software and "--include-software" in software


def test_without_a_listing_the_dropped_device_is_named() -> None:
    """`env best` printed no table: the hint names the dropped device."""
    [software] = [line for line in hints(EMPTY, {}) if "software" in line]
    assert "llvmpipe" in software and "--include-software" in software


@pytest.mark.parametrize("width", [50, 80, 200])
def test_hints_wrap_to_the_width_between_words(width: int) -> None:
    """Each hint wraps at `width`, continuation lines indented, no word cut."""
    text = format_hints(hints(EMPTY, {}), width)
    assert all(
        len(line) <= width
        for line in text.splitlines()
        if all(len(word) < width - len(PREFIX) for word in line.split())
    )
    hints_again = text.split(PREFIX)[1:]
    assert [" ".join(h.split()) for h in hints_again] == hints(EMPTY, {})


def test_in_a_pipe_each_hint_is_one_line(gpuscout_cli: CliRunner) -> None:
    """Not a terminal: no wrapping, so `grep hint:` finds each hint whole."""
    err = gpuscout_cli(["list"], scout=_Fixed()).err
    hint_lines = [line for line in err.splitlines() if line.startswith(PREFIX)]
    assert hint_lines == [PREFIX + line for line in brief_hints(EMPTY, {}, listed=True)]
    assert len(hint_lines) == 2 and "gpuscout plugins" in hint_lines[1]


def test_on_a_terminal_hints_follow_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    """A terminal's width comes from `COLUMNS` first; the hints are wrapped to it."""
    monkeypatch.setenv("COLUMNS", "60")
    stream = _Tty()
    assert terminal_width(stream) == 60
    monkeypatch.setattr("sys.stderr", stream)
    print_for(EMPTY, {})
    lines = stream.getvalue().splitlines()
    assert len(lines) > len(hints(EMPTY, {})) and all(len(line) <= 60 for line in lines)


def test_a_pipe_has_no_width() -> None:
    """A stream that is no terminal is not wrapped."""
    assert terminal_width(io.StringIO()) is None


def test_a_ranked_device_means_no_hint() -> None:
    """Hints explain an empty list only."""
    found = Discovery(devices=[SOFT.evolve(software=False)], dropped=[], system=SystemInfo(), plugins=REPORTS)
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        print_for(found, {})
    assert err.getvalue() == ""
