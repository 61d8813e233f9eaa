"""What ``gpuscout list`` and ``gpuscout plugins`` print for people: the terminal table fitted to
40, 80 and 200 columns, and the plain tab-separated lines of a pipe (golden files), with colour
only where ``--color`` and ``NO_COLOR`` allow it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from gpuscout import DeviceInfo, Discovery, Dropped, PluginReport, SystemInfo
from gpuscout._records.device import DeviceID
from gpuscout.cli._render import table as table_module
from gpuscout.cli._render.table import render_discovery, render_plugins
from gpuscout.sizes import GIB
from gpuscout.testing import CliRunner

GOLDEN = Path(__file__).parent.parent / "data" / "golden"
ANSI = re.compile(r"\x1b\[")
CUDA_ID = "GPU-8f1c2a3b-1234-5678-9abc-def012345678"
LONG = "acme-very-long-device-name-" + "x" * 60

CUDA = DeviceInfo(
    id=CUDA_ID,
    library="CUDA",
    description="NVIDIA RTX 6000 Ada Generation",
    pci_id="0000:01:00.0",
    total_memory=48 * GIB,
    free_memory=46 * GIB,
    compute_major=8,
    compute_minor=9,
    driver_major=12,
    driver_minor=4,
)
ROCM = DeviceInfo(
    id="GPU-4b2e6c1a9f3d7e05",
    library="ROCm",
    description="[bold]x[/] " + LONG,
    pci_id="0000:c4:00.0",
    total_memory=64 * GIB,
    free_memory=58 * GIB,
    compute_major=0x11,
    compute_minor=0,
    driver_major=6,
    driver_minor=2,
)
TWIN = DeviceInfo(
    id="0",
    library="Vulkan",
    description="NVIDIA RTX 6000 Ada Generation",
    pci_id="0000:01:00.0",
    total_memory=48 * GIB,
    free_memory=46 * GIB,
)
FOUND = Discovery(
    devices=[CUDA, ROCM],
    dropped=[Dropped(device=TWIN, reason="duplicate", duplicate_of=DeviceID(CUDA_ID, "CUDA"))],
    system=SystemInfo(total_memory=128 * GIB, free_memory=97 * GIB, free_swap=8 * GIB),
    plugins=[
        PluginReport(name="cuda", version="0.1.0", distribution="gpuscout", devices=1, elapsed=0.0123),
        PluginReport(name="metal", note="not macOS:\tMetal needs Darwin", elapsed=0.0001),
        PluginReport(
            name="broken",
            status="failed",  # type: ignore[arg-type]
            error="driver exploded:\nlibcuda.so.1 missing",
            elapsed=0.2,
        ),
    ],
)


class _FixedScout:
    """A Scout stand-in whose every discovery is ``FOUND`` (fixed system memory and timings)."""

    warnings: tuple[str, ...] = ()
    env: dict[str, str] = {}

    def discover(self, **options: Any) -> Discovery:
        return FOUND


def run_cli(cli: CliRunner, *argv: str) -> str:
    """What ``gpuscout ARGV`` prints on stdout over ``FOUND``."""
    run = cli(list(argv), scout=_FixedScout())
    assert run.code == 0, run.err
    return run.out


def on_terminal(monkeypatch: pytest.MonkeyPatch, columns: int = 120) -> None:
    """Make stdout count as a terminal ``columns`` wide."""
    monkeypatch.setattr(table_module, "_on_terminal", lambda: True)
    monkeypatch.setenv("COLUMNS", str(columns))


@pytest.mark.parametrize("width", [40, 200])
def test_ids_and_pci_ids_are_never_cut(width: int) -> None:
    """Each id and PCI id is printed whole where the table has room for whole ids, and in the
    blocks of a narrow terminal."""
    out = render_discovery(FOUND, width)
    for text in (CUDA_ID, "GPU-4b2e6c1a9f3d7e05", "0000:01:00.0", "0000:c4:00.0"):
        assert text in out


def test_an_80_column_table_shows_each_id_as_the_prefix_that_selects_it() -> None:
    """At 80 columns the ids are their shortest selecting prefixes (a legend says so); PCI ids
    stay whole."""
    out = render_discovery(FOUND, 80)
    assert CUDA_ID not in out and "GPU-8f1c " in out and "GPU-4b2e " in out
    assert "0000:01:00.0" in out and "0000:c4:00.0" in out
    assert "id: the shortest prefix that selects each device" in out


@pytest.mark.parametrize("width", [80, 200])
def test_the_table_fits_the_width(width: int) -> None:
    """No line of the table is wider than the terminal (only the free-text lines after it)."""
    out = render_discovery(FOUND, width)
    table = out.split("2 devices")[0]
    assert all(len(line) <= width for line in table.splitlines())


def test_a_wide_terminal_shows_every_column_and_the_bar() -> None:
    """At 200 columns nothing is dropped: compute, driver, integrated and the bar show."""
    out = render_discovery(FOUND, 200)
    for text in ("compute", "driver", "integrated", "used", "gfx1100", "12.4", "[#---------]"):
        assert text in out


def test_a_long_description_shortens_before_columns_drop() -> None:
    """At 200 columns the long description is cut with an ellipsis, the columns stay."""
    out = render_discovery(FOUND, 200)
    assert LONG not in out and "…" in out and "driver" in out


def test_an_80_column_table_keeps_the_important_columns() -> None:
    """At 80 columns library, id, PCI id and free/total stay; the bar and driver go."""
    out = render_discovery(FOUND, 80)
    table = out.split("columns left out")[0]
    assert "free/total" in table and "46.0/48.0 GiB" in table and "used" not in table


def test_a_40_column_terminal_gets_one_block_per_device() -> None:
    """Too narrow for a table, each device is a block of labelled lines, nothing cut."""
    out = render_discovery(FOUND, 40)
    assert f"#0 cuda:0 {CUDA_ID}" in out and re.search(r"^  PCI id: +0000:c4:00\.0", out, re.M)


def test_markup_in_a_name_prints_literally_at_every_width() -> None:
    """`[bold]x[/]` in a description is text, not style."""
    for width in (40, 200):
        assert "[bold]x[/]" in render_discovery(FOUND, width)


def test_unknown_values_print_as_a_dash() -> None:
    """Compute -1 or 0.0, driver 0.0 and a missing PCI id show `-`."""
    device = DeviceInfo(id="0", library="Vulkan", compute_major=-1, total_memory=GIB)
    found = Discovery(devices=[device], dropped=[], system=SystemInfo(), plugins=[])
    row = next(line for line in render_discovery(found, 200).splitlines() if line.startswith("0 "))
    assert row.split() == [
        "0",
        "vulkan:0",
        "Vulkan",
        "0",
        "-",
        "-",
        "0",
        "B/1.0",
        "GiB",
        "[##########]",
        "-",
        "-",
        "no",
    ]


def test_free_memory_marks_a_guess_and_a_stale_figure() -> None:
    """An unknown free figure is `?` (never the total in its place), one not refreshed `(stale)`."""
    guess = DeviceInfo(
        id="a", library="L", total_memory=8 * GIB, free_memory=4 * GIB, free_memory_unknown=True
    )
    stale = DeviceInfo(id="b", library="L", total_memory=8 * GIB, free_memory=2 * GIB, free_memory_stale=True)
    found = Discovery(devices=[guess, stale], dropped=[], system=SystemInfo(), plugins=[])
    out = render_discovery(found, 200)
    assert "?/8.0 GiB" in out and "4.0" not in out and "2.0/8.0 GiB (stale)" in out


def test_integrated_says_yes_or_no_and_software_has_its_own_mark() -> None:
    """The integrated column holds yes/no; a software device is marked in its description."""
    soft = DeviceInfo(id="0", library="Vulkan", description="llvmpipe", integrated=True, software=True)
    found = Discovery(devices=[soft], dropped=[], system=SystemInfo(), plugins=[])
    out = render_discovery(found, 200)
    row = next(line for line in out.splitlines() if line.startswith("0 "))
    assert "(software) llvmpipe" in row and row.rstrip().endswith("yes")


def test_a_summary_line_follows_the_table() -> None:
    """Device count per library, free of total memory and the dropped count."""
    assert "2 devices: 1 CUDA, 1 ROCm; 104.0 GiB free of 112.0 GiB; 1 dropped" in render_discovery(FOUND, 80)


@pytest.mark.parametrize("width", [40, 80, 200])
def test_plugins_keep_status_devices_and_error_or_note(width: int) -> None:
    """Every width shows each plugin's status, device count and its error or note words."""
    out = render_plugins(FOUND.plugins, width)
    assert "status" in out and "devices" in out and "error/note" in out
    assert "failed" in out and "Darwin" in out


def test_plugins_read_well_at_80_columns() -> None:
    """At 80 columns no column is dropped and the table stays inside the width."""
    out = render_plugins(FOUND.plugins, 80)
    assert all(len(line) <= 80 for line in out.splitlines())
    for column in ("name", "status", "devices", "ms", "version", "distribution", "error/note"):
        assert column in out.splitlines()[1]


def test_list_in_a_pipe_matches_the_golden_file(
    gpuscout_cli: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`list | cat` prints the plain tab-separated lines, whatever COLUMNS says."""
    monkeypatch.setenv("COLUMNS", "20")
    assert run_cli(gpuscout_cli, "list") == (GOLDEN / "list_plain.txt").read_text()


def test_plugins_in_a_pipe_matches_the_golden_file(
    gpuscout_cli: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`plugins | cat` prints one plain line per plugin, tabs and line breaks escaped."""
    monkeypatch.setenv("COLUMNS", "20")
    assert run_cli(gpuscout_cli, "plugins") == (GOLDEN / "plugins_plain.txt").read_text()


def test_plain_lines_split_into_the_header_columns(gpuscout_cli: CliRunner) -> None:
    """Every device line has as many tab-separated fields as the header, no box drawing."""
    lines = run_cli(gpuscout_cli, "list").splitlines()
    header = lines[0].split("\t")
    devices = [line for line in lines[1:] if line[:1].isdigit()]
    assert len(devices) == 2 and all(len(line.split("\t")) == len(header) for line in devices)
    assert not any(c in "".join(lines) for c in "─│┃━")


def test_list_json_is_unchanged_by_the_plain_form(gpuscout_cli: CliRunner) -> None:
    """`--json` still prints the JSON document."""
    assert run_cli(gpuscout_cli, "list", "--json").lstrip().startswith("{")


@pytest.mark.parametrize(("argv", "env"), [(["--color", "never"], {}), ([], {"NO_COLOR": "1"})])
@pytest.mark.parametrize("command", ["list", "plugins"])
def test_no_color_and_color_never_give_no_escapes_on_a_terminal(
    gpuscout_cli: CliRunner,
    monkeypatch: pytest.MonkeyPatch,
    command: str,
    argv: list[str],
    env: dict[str, str],
) -> None:
    """A terminal table without colour when asked, by option or by NO_COLOR."""
    on_terminal(monkeypatch)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    out = run_cli(gpuscout_cli, command, *argv)
    assert "─" in out and not ANSI.search(out)


@pytest.mark.parametrize("command", ["list", "plugins"])
def test_a_terminal_is_coloured_by_default(
    gpuscout_cli: CliRunner, monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    """`--color auto` colours a terminal when NO_COLOR is unset."""
    on_terminal(monkeypatch)
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    assert ANSI.search(run_cli(gpuscout_cli, command))


@pytest.mark.parametrize("command", ["list", "plugins"])
def test_color_always_colours_even_in_a_pipe(
    gpuscout_cli: CliRunner, monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    """`--color always` draws the coloured table in a pipe (for `less -R`), NO_COLOR or not."""
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("TERM", "xterm-256color")
    assert ANSI.search(run_cli(gpuscout_cli, command, "--color", "always"))


def test_a_pipe_never_gets_escapes_by_default(gpuscout_cli: CliRunner) -> None:
    """`--color auto` in a pipe prints plain text."""
    assert not ANSI.search(run_cli(gpuscout_cli, "list") + run_cli(gpuscout_cli, "plugins"))
