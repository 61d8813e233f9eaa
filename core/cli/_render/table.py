"""What ``gpuscout list`` and ``gpuscout plugins`` print for people: a rich table on a terminal,
plain tab-separated lines in a pipe (rich is imported here and in ``gpuscout.cli._render.columns``, which
fits the table to the terminal, and nowhere else).

Text from plugins and devices is data: every cell is a ``rich.text.Text``, so rich never reads
``[bold]`` or ``:emoji:`` in it, and control characters are shown escaped. The table fits the
terminal: ids are shortened to the shortest prefix that selects each device when whole ones
leave too little room, a description is one line, ended with "…" where the width runs out, then
the less important columns drop, and a line under the table names them; rank, selector, ids and
PCI ids never leave nor are cut (too narrow for even the smallest table, each device gets a
block of lines). The lines after
the table wrap between words. Unknown free memory shows as ``?`` with a legend line
(``gpuscout.cli._render.labels``).

The plain form (``render_discovery(..., terminal=False)``) is ``gpuscout.cli._render.plain``'s; its names
are importable from here as well.
"""

from __future__ import annotations

import errno
import io
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, TextIO

from rich.console import Console
from rich.table import Table
from rich.text import Text

from gpuscout._selection.numbering import selector_names
from gpuscout._selection.selectors import shortest_ids
from gpuscout.cli._common import printable
from gpuscout.cli._output import output
from gpuscout.cli._render.columns import (
    SHORT,
    SHORT_ID_LEGEND,
    WHOLE,
    WRAP,
    Column,
    cell,
    fitted_table,
    left_out_line,
)
from gpuscout.cli._render.labels import (
    UNKNOWN_LEGEND,
    compute_label,
    driver_label,
    integrated_label,
    link_label,
    memory_bar,
    memory_label,
    numa_label,
    system_line,
)
from gpuscout.cli._render.plain import dropped_lines, plain_discovery, plain_plugins, summary_line

if TYPE_CHECKING:
    from gpuscout._records.device import DeviceInfo
    from gpuscout._records.results import Discovery, PluginReport

#: ``--color`` choices; "auto" colours a terminal unless ``NO_COLOR`` is set (to anything).
COLOR_CHOICES = ("never", "auto", "always")

_STATUS_STYLE = {"ok": "green", "failed": "bold red", "timeout": "bold red", "disabled": "dim"}


def use_color(choice: str, terminal: bool) -> bool:
    """Whether to colour: ``--color`` ``never``/``always`` decide; ``auto`` colours a terminal
    unless ``NO_COLOR`` has a value."""
    if choice == "always":
        return True
    return choice == "auto" and terminal and not os.environ.get("NO_COLOR")


class _Console(Console):
    """A console that leaves a closed stdout to the CLI (rich would exit 1 on its own)."""

    def on_broken_pipe(self) -> None:
        """Raise, so the CLI handles a reader that went away the same way for every output."""
        raise BrokenPipeError(errno.EPIPE, "stdout was closed")


def stdout_console(color: bool = False, width: int | None = None) -> Console:
    """A console on gpuscout's stdout (``output()``), drawn for a terminal, that cannot fail on a
    character the terminal's encoding lacks.

    An ASCII-only terminal (``LANG=C``) or a name with undecodable bytes shows ``?`` instead.
    """
    return _Console(
        file=_stdout(),
        force_terminal=True,
        width=width,
        no_color=not color,
        color_system="auto" if color else None,
        highlight=False,
    )


def _stdout() -> TextIO:
    """``output()``, made to write ``?`` for a character its encoding lacks."""
    stdout = output()
    # Python's own choice for a C locale, surrogateescape, still fails on any non-ASCII name.
    if isinstance(stdout, io.TextIOWrapper) and stdout.errors in ("strict", "surrogateescape"):
        stdout.reconfigure(errors="replace")
    return stdout


def _on_terminal() -> bool:
    try:
        return output().isatty()
    except (AttributeError, OSError, ValueError):  # closed, or not a file at all
        return False


def _description(d: DeviceInfo) -> str:
    """The name, marked ``(software)`` and ``(unused)``; why it is unused is a note line, where
    it wraps instead of being cut."""
    text = d.description or d.name
    if d.software:
        text = f"(software) {text}"
    if d.unused_reason:
        text = f"{text} (unused)"
    return text or "-"


def _budgeted(found: Discovery) -> bool:
    """Whether any listed device has a budget (then the table has a ``usable`` column)."""
    return bool(found.budgets.applied) or any(d.usable_memory is not None for d in found.devices)


def usable_label(d: DeviceInfo) -> str:
    """``8.0/18.0 GiB``: free and total under the device's budget (docs/budgets.md), ``-``
    without one; ``?`` for a free figure the driver did not report."""
    if d.usable_memory is None:
        return "-"
    budgeted = d.evolve(free_memory=d.usable_free, total_memory=d.usable_total, usable_memory=None)
    return memory_label(budgeted)


def _device_columns(found: Discovery, ids: Sequence[str]) -> list[Column]:
    """The table's columns, the devices' ids written as ``ids`` (whole, or their shortest
    selecting prefixes)."""
    devices = found.devices
    usable: list[Column] = []
    if _budgeted(found):
        usable = [("usable", [cell(usable_label(d), "yellow") for d in devices], WHOLE)]
    return [
        ("#", [cell(rank) for rank in range(len(devices))], WHOLE),
        ("selector", [cell(name, "green") for name in selector_names(devices, found.numbering)], WHOLE),
        ("library", [cell(d.library, "bold") for d in devices], WHOLE),
        ("id", [cell(ident, "cyan") for ident in ids], WHOLE),
        ("description", [cell(_description(d)) for d in devices], SHORT),
        ("PCI id", [cell(d.pci_id or "-") for d in devices], WHOLE),
        (
            "free/total",
            [
                cell(memory_label(d), "yellow" if d.free_memory_stale or d.free_memory_unknown else "")
                for d in devices
            ],
            WHOLE,
        ),
        *usable,
        ("used", [cell(_bar(d), "magenta") for d in devices], WHOLE),
        ("compute", [cell(compute_label(d)) for d in devices], WHOLE),
        ("driver", [cell(driver_label(d)) for d in devices], WHOLE),
        ("integrated", [cell(integrated_label(d)) for d in devices], WHOLE),
        # Only where the kernel said where a device sits (a Mac says nothing of the kind).
        *([("NUMA", [cell(numa_label(d)) for d in devices], WHOLE)] if _any_numa(devices) else []),
        *([("link", [_link_cell(d) for d in devices], WHOLE)] if _any_link(devices) else []),
    ]


def _any_numa(devices: Sequence[DeviceInfo]) -> bool:
    return any(d.numa_node >= 0 for d in devices)


def _any_link(devices: Sequence[DeviceInfo]) -> bool:
    return any(d.pcie_link is not None for d in devices)


def _link_cell(d: DeviceInfo) -> Text:
    from gpuscout._machine.topology import below_maximum

    slow = d.pcie_link is not None and below_maximum(d.pcie_link)
    return cell(link_label(d), "yellow" if slow else "")


def _notes(d: DeviceInfo) -> list[str]:
    """What the table says of ``d`` under it: why it is unused, then its notes."""
    return [*([f"unused: {d.unused_reason}"] if d.unused_reason else []), *d.notes]


def _note_lines(found: Discovery) -> list[str]:
    """``note: #0 cuda:1: running at PCIe Gen3 x4 of Gen4 x16 (...)``: each device named by the
    rank and selector the table shows (columns that never leave); a note that holds for several
    devices (WSL2's ``/dev/dxg`` on every card) said once, naming them."""
    from gpuscout._records.notes import grouped

    selectors = selector_names(found.devices, found.numbering)
    pairs = [
        (f"#{rank} {selectors[rank]}", note) for rank, d in enumerate(found.devices) for note in _notes(d)
    ]
    return [printable(f"note: {line}") for line in grouped(pairs, every=len(found.devices))]


def _bar(d: DeviceInfo) -> str:
    return memory_bar(d.free_memory, d.total_memory, unknown=d.free_memory_unknown)


#: Device columns in the order they leave a table too wide for the terminal; ``#``,
#: ``selector``, ``id``, ``PCI id`` and ``free/total`` never do (the notes name devices by the
#: first two; narrower still, each device is a block of lines).
_DEVICE_DROP_ORDER = (
    "used",
    "link",
    "NUMA",
    "integrated",
    "driver",
    "compute",
    "usable",
    "library",
    "description",
)
_PLUGIN_DROP_ORDER = ("distribution", "version", "ms")


def _device_blocks(found: Discovery, console: Console) -> None:
    """Each device as a few lines, for a terminal narrower than the smallest table: the first
    line (rank, selector, id) is never cut; a long value wraps between words, indented."""
    console.print(Text("Devices, best first", style="italic"))
    selectors = selector_names(found.devices, found.numbering)
    for rank, d in enumerate(found.devices):
        console.print(
            Text.assemble(f"#{rank} ", (printable(selectors[rank]), "green"), " ", (printable(d.id), "cyan")),
            soft_wrap=True,
        )
        block = Table.grid(padding=(0, 1), pad_edge=True)
        block.add_column(no_wrap=True)
        block.add_column(overflow="fold")
        for label, value in (
            ("library", d.library),
            ("description", _description(d)),
            ("PCI id", d.pci_id or "-"),
            ("free/total", memory_label(d)),
            *((("usable", usable_label(d)),) if d.usable_memory is not None else ()),
            ("used", _bar(d)),
            ("compute", compute_label(d)),
            ("driver", driver_label(d)),
            ("integrated", integrated_label(d)),
            *([("NUMA", numa_label(d))] if d.numa_node >= 0 else []),
            *([("link", link_label(d))] if d.pcie_link is not None else []),
            *(("note", note) for note in _notes(d)),
        ):
            block.add_row(cell(f" {label}:"), cell(value))
        console.print(block)


def _fitted_devices(found: Discovery, width: int) -> tuple[tuple[Table, list[str]] | None, bool]:
    """The device table fitted to ``width`` and whether its ids are shortened: whole ids when
    every column fits beside them, else each id's shortest selecting prefix, before any column
    leaves (``selectors.shortest_ids``)."""
    whole = [d.id for d in found.devices]
    fitted = fitted_table("Devices, best first", _device_columns(found, whole), (), width)
    if fitted is not None:
        return fitted, False
    short = shortest_ids(found.devices)
    columns = _device_columns(found, short)
    fitted = fitted_table("Devices, best first", columns, _DEVICE_DROP_ORDER, width)
    return fitted, fitted is not None and short != whole


def print_discovery(found: Discovery, console: Console | None = None, *, color: str = "auto") -> None:
    """The ``gpuscout list`` output: on a terminal (or a given ``console``) the table fitted to
    its width, what it left out, a summary line, dropped devices and system memory, each line
    wrapped between words; in a pipe the plain form.

    ``color`` is ``--color``: ``always`` also draws the terminal table in a pipe (``less -R``).
    """
    if console is None:
        terminal = _on_terminal()
        if not terminal and color != "always":
            _stdout().write(plain_discovery(found))
            return
        console = stdout_console(use_color(color, terminal))
    shortened = False
    if found.devices:
        fitted, shortened = _fitted_devices(found, console.width)
        if fitted is None:
            _device_blocks(found, console)
        else:
            console.print(fitted[0])
        if any(d.free_memory_unknown for d in found.devices) and (
            fitted is None or "free/total" not in fitted[1]
        ):
            console.print(Text(UNKNOWN_LEGEND, style="dim"))
        if shortened:
            console.print(Text(SHORT_ID_LEGEND, style="dim"))
        if fitted is not None and fitted[1]:
            console.print(Text(left_out_line(fitted[1], console.width), style="dim"))
        if fitted is not None:  # the blocks hold each device's notes already
            for line in _note_lines(found):
                console.print(Text(line, style="yellow"))
    else:
        console.print(Text("No accelerators found."))
    console.print(Text(summary_line(found), style="bold"))
    for line in dropped_lines(found):
        console.print(Text(line, style="dim"))
    console.print(Text(system_line(found.system)))
    for note in found.system.notes:  # what the figures are (WSL2's VM, macOS's VM statistics)
        console.print(Text(printable(f"  {note}"), style="dim"))


def print_plugins(
    reports: Sequence[PluginReport], console: Console | None = None, *, color: str = "auto"
) -> None:
    """The ``gpuscout plugins`` output: a table fitted to the terminal (or a given ``console``),
    saying which columns it left out, or in a pipe one plain line per plugin. ``color`` as for
    ``print_discovery``."""
    if console is None:
        terminal = _on_terminal()
        if not terminal and color != "always":
            _stdout().write(plain_plugins(reports))
            return
        console = stdout_console(use_color(color, terminal))
    columns: list[Column] = [
        ("name", [cell(r.name, "bold") for r in reports], WHOLE),
        ("status", [cell(r.status, _STATUS_STYLE.get(str(r.status), "")) for r in reports], WHOLE),
        ("devices", [cell(r.devices) for r in reports], WHOLE),
        ("ms", [cell(f"{r.elapsed * 1000:.1f}") for r in reports], WHOLE),
        ("version", [cell(r.version or "-") for r in reports], WHOLE),
        ("distribution", [cell(r.distribution or "-") for r in reports], WHOLE),
        ("error/note", [cell(r.error or r.note or "-", "red" if r.error else "dim") for r in reports], WRAP),
    ]
    fitted = fitted_table("Plugins", columns, _PLUGIN_DROP_ORDER, console.width)
    if fitted is None:  # a plugin name wider than the terminal: one line each, never cut
        for r in reports:
            console.print(
                cell(f"{r.name} {r.status} {r.devices} {r.elapsed * 1000:.1f} ms {r.error or r.note or '-'}"),
                soft_wrap=True,
            )
        return
    console.print(fitted[0])
    if fitted[1]:
        console.print(Text(left_out_line(fitted[1], console.width), style="dim"))


def render_discovery(found: Discovery, width: int = 80, terminal: bool = True, color: bool = False) -> str:
    """What ``gpuscout list`` prints, as text: on a terminal ``width`` wide (``color``: with
    ANSI colours), or in a pipe (the plain form). For tests and notes."""
    if not terminal:
        return plain_discovery(found)
    console = _recording_console(width, color)
    print_discovery(found, console)
    return console.file.getvalue()  # type: ignore[attr-defined,no-any-return]


def render_plugins(
    reports: Sequence[PluginReport], width: int = 80, terminal: bool = True, color: bool = False
) -> str:
    """What ``gpuscout plugins`` prints, as text (see ``render_discovery``)."""
    if not terminal:
        return plain_plugins(reports)
    console = _recording_console(width, color)
    print_plugins(reports, console)
    return console.file.getvalue()  # type: ignore[attr-defined,no-any-return]


def _recording_console(width: int, color: bool) -> Console:
    return Console(
        file=io.StringIO(),
        width=width,
        force_terminal=True,
        no_color=not color,
        color_system="standard" if color else None,
        highlight=False,
        legacy_windows=False,
    )
