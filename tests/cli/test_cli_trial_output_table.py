"""The `list` table after a new user's trial (issue 22): it degrades gracefully at 50, 80 and 200
columns, says which columns it left out, never breaks a word in the summary, and shows an
unknown free figure as unknown."""

from __future__ import annotations

import re

import pytest

from gpuscout import DeviceInfo, Discovery, Dropped, SystemInfo
from gpuscout.cli._render import plain as plain_module
from gpuscout.cli._render import table as table_module
from gpuscout.cli._render.labels import UNKNOWN_LEGEND, devices_free_of_total, system_line
from gpuscout.cli._render.table import render_discovery
from gpuscout.sizes import GIB
from gpuscout.testing import CliRunner

LONG = (
    "NVIDIA GeForce RTX 4090 with a description that goes on for many words, as some "
    "drivers write them, until it fills a line"
)
CARD = DeviceInfo(
    id="GPU-8f1c2a3b-1234-5678-9abc-def012345678",
    library="CUDA",
    description=LONG,
    pci_id="0000:01:00.0",
    total_memory=24 * GIB,
    free_memory=20 * GIB,
    compute_major=8,
    compute_minor=9,
    driver_major=12,
    driver_minor=4,
)
IGPU = DeviceInfo(
    id="1",
    library="Vulkan",
    description="AMD Radeon Graphics (RADV GFX1103_R1)",
    integrated=True,
    total_memory=2 * GIB,
    free_memory=2 * GIB,
    free_memory_unknown=True,
    driver_major=1,
    driver_minor=3,
)
SOFT = DeviceInfo(
    id="2",
    library="Vulkan",
    description="llvmpipe (LLVM 17.0.6, 256 bits)",
    software=True,
    total_memory=2 * GIB,
    free_memory=2 * GIB,
)
SYSTEM = SystemInfo(total_memory=64 * GIB, free_memory=60 * GIB, free_swap=GIB)
FOUND = Discovery(devices=[CARD, IGPU], dropped=[Dropped(SOFT, "software device")], system=SYSTEM, plugins=[])
SHORT_IDS = Discovery(devices=[CARD.evolve(id="0"), IGPU], dropped=[], system=SYSTEM, plugins=[])
WIDTHS = (50, 80, 200)


def table_part(out: str) -> str:
    """The lines before the summary line."""
    return out.split("\n2 devices")[0]


@pytest.mark.parametrize("width", WIDTHS)
def test_no_line_is_wider_than_the_terminal(width: int) -> None:
    """Every line, table and the lines after it, fits the width (no id here is wider)."""
    out = render_discovery(SHORT_IDS, width)
    assert all(len(line) <= width for line in out.splitlines())


@pytest.mark.parametrize("width", WIDTHS)
def test_the_summary_never_breaks_a_word(width: int) -> None:
    """Joined again, the wrapped summary is the summary line word for word."""
    out = render_discovery(FOUND, width)
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("2 devices"))
    end = next(i for i, line in enumerate(lines) if line.startswith("dropped: "))
    summary = plain_module.summary_line(FOUND)
    assert [w for line in lines[start:end] for w in line.split()] == summary.split()


@pytest.mark.parametrize("width", WIDTHS)
def test_a_long_description_is_one_line_in_the_table(width: int) -> None:
    """The description never wraps onto more lines: each device is one row of the table."""
    out = render_discovery(SHORT_IDS, width)
    rows = [line for line in table_part(out).splitlines() if line[:1].isdigit()]
    assert len(rows) in (0, 2)  # 0: a block per device at 50 columns
    if rows:
        assert all("…" in row or LONG not in row for row in rows)


def test_a_description_takes_the_width_there_is_on_a_wide_terminal() -> None:
    """At 200 columns a long description is cut only where the terminal ends (issue 34: it was
    cut at 60 characters with 60 columns to spare)."""
    out = render_discovery(SHORT_IDS, 200)
    row = next(line for line in out.splitlines() if line.startswith("0 "))
    assert LONG[:100] in row and LONG not in row and "…" in row


def test_80_columns_name_the_columns_left_out() -> None:
    """A footer says which columns did not fit and how to see them."""
    out = render_discovery(SHORT_IDS, 80)
    footer = " ".join(out.split("columns left out at 80 columns: ")[1].split("\n2 devices")[0].split())
    assert footer.startswith("used, driver, integrated;") and "widen the terminal or use --json" in footer
    assert "description" in table_part(out).split("columns left out")[0]


def test_200_columns_leave_nothing_out() -> None:
    """A wide terminal shows every column and no footer."""
    out = render_discovery(FOUND, 200)
    assert "columns left out" not in out
    for header in ("used", "compute", "driver", "integrated"):
        assert header in table_part(out)


def test_50_columns_keep_rank_selector_and_the_shortened_id() -> None:
    """At 50 columns the table stays, with its ids shortened; rank and selector are never the
    columns that leave."""
    out = render_discovery(FOUND, 50)
    head = next(line for line in out.splitlines() if line.startswith("#"))
    assert head.split()[:3] == ["#", "selector", "id"]
    assert re.search(r"^0  cuda:0 +GPU-8f1c ", out, re.M) and "rank" not in out.split("columns left out")[1]


def test_40_columns_give_a_block_per_device_with_wrapped_values() -> None:
    """Too narrow for a table: labelled lines, a long value wrapped between words."""
    out = render_discovery(FOUND, 40)
    assert f"#0 cuda:0 {CARD.id}" in out
    words = re.search(r"description: (.*?)\n  PCI id", out, re.S)
    assert words is not None and words.group(1).split() == LONG.split()


@pytest.mark.parametrize("width", WIDTHS)
def test_unknown_free_memory_is_a_question_mark_with_a_legend(width: int) -> None:
    """`?/2.0 GiB`, never `2.0?/2.0 GiB`, and a legend line says what `?` means."""
    out = render_discovery(FOUND, width)
    assert "?/2.0 GiB" in out and "2.0?/" not in out
    assert " ".join(UNKNOWN_LEGEND.split()) in " ".join(out.split())


def test_no_legend_without_an_unknown_figure() -> None:
    """The legend appears only when a `?` is shown."""
    found = Discovery(devices=[CARD], dropped=[], system=SYSTEM, plugins=[])
    assert "free memory unknown" not in render_discovery(found, 200)


def test_the_unknown_bar_is_all_question_marks() -> None:
    """The used bar of a device with unknown free memory claims nothing."""
    assert "[??????????]" in render_discovery(FOUND, 200)


def test_a_sum_of_free_memory_leaves_an_unknown_figure_out() -> None:
    """20 GiB known free of 24 GiB, and the 2 GiB device said apart."""
    assert devices_free_of_total([CARD, IGPU]) == (
        "20.0 GiB free of 24.0 GiB (1 more device, 2.0 GiB, free unknown)"
    )


def test_a_sum_with_only_unknown_figures_says_so() -> None:
    """No free figure known: the total and `free unknown`."""
    assert devices_free_of_total([IGPU]) == "2.0 GiB, free unknown"


def test_system_memory_of_a_recorded_tree_is_unknown() -> None:
    """All zeros (no /proc/meminfo under the root) reads `unknown`, not `0 B free of 0 B`."""
    assert system_line(SystemInfo()).startswith("System memory: unknown")
    assert "0 B free of 0 B" not in render_discovery(
        Discovery(devices=[], dropped=[], system=SystemInfo(), plugins=[]), 80
    )


def test_a_pipe_writes_unknown_free_memory_as_a_dash(
    gpuscout_cli: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`list | cat`: the `free` field of an unknown figure is `-`, system memory `unknown`."""
    found = Discovery(devices=[IGPU], dropped=[], system=SystemInfo(), plugins=[])

    class Fixed:
        warnings: tuple[str, ...] = ()
        env: dict[str, str] = {}

        def discover(self, **options: object) -> Discovery:
            return found

    monkeypatch.setenv("COLUMNS", "50")
    run = gpuscout_cli(["list"], scout=Fixed())
    assert run.code == 0, run.err
    lines = run.out.splitlines()
    header, row = lines[0].split("\t"), lines[1].split("\t")
    assert row[header.index("free")] == "-" and row[header.index("total")] == "2.0 GiB"
    assert lines[-1].startswith("System memory: unknown")


def test_the_table_follows_columns_on_a_terminal(
    gpuscout_cli: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a terminal `COLUMNS=80` sets the width the table is fitted to."""

    class Fixed:
        warnings: tuple[str, ...] = ()
        env: dict[str, str] = {}

        def discover(self, **options: object) -> Discovery:
            return SHORT_IDS

    monkeypatch.setattr(table_module, "_on_terminal", lambda: True)
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = gpuscout_cli(["list", "--color", "never"], scout=Fixed())
    assert code == 0
    assert "columns left out at 80 columns" in out
    assert all(len(line) <= 80 for line in out.splitlines())


def test_explain_says_an_unknown_free_figure_is_unknown() -> None:
    """`--explain` writes `free memory unknown`, never `2.0 GiB?`, and what the ranking counted."""
    from gpuscout.cli._render.explain import explain, explain_lines

    lines = explain_lines(explain(FOUND))
    [igpu] = [line for line in lines if line.startswith("  #1 ")]
    assert "free memory unknown, ranked as 2.0 GiB" in igpu and "GiB?" not in igpu


def test_plugins_at_50_columns_name_what_they_left_out_and_keep_the_whole_error() -> None:
    """The plugins table says which columns left; a long path in an error is folded, not cut."""
    from gpuscout import PluginReport
    from gpuscout.cli._render.table import render_plugins

    path = "/sys/bus/pci/devices/0000:01:00.0/driver"
    out = render_plugins(
        [
            PluginReport(
                name="cuda",
                version="0.1.0",
                distribution="gpuscout",
                note=f"no NVIDIA GPU at {path} (lists none)",
            )
        ],
        50,
    )
    assert "columns left out at 50 columns:" in out and "…" not in out
    assert path in "".join(line.strip() for line in out.splitlines())
