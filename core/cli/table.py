"""What ``gpuscout list`` and ``gpuscout plugins`` print for people: a rich table on a terminal,
plain tab-separated lines in a pipe (rich is imported here and nowhere else).

Text from plugins and devices is data: every cell is a ``rich.text.Text``, so rich never reads
``[bold]`` or ``:emoji:`` in it, and control characters are shown escaped. The table fits the
terminal: a description is one line, ended with "…" when long (``CELL_CAP``), then the less
important columns drop, and a line under the table names them; ids and PCI ids are never cut
(too narrow for even the smallest table, each device gets a block of lines). The lines after
the table wrap between words. Unknown free memory shows as ``?`` with a legend line
(``gpuscout.cli.labels``).

The plain form (``render_discovery(..., terminal=False)``): a header line, then one line per device
or plugin, fields separated by one tab; no value holds a tab or a line break, and an unknown one is
``-``. After the devices, each dropped device is a line starting with ``# dropped``, and the last
line is ``System memory: ...``.
"""

from __future__ import annotations

import errno
import io
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, TextIO

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from gpuscout.cli.common import printable
from gpuscout.cli.labels import (
    UNKNOWN_LEGEND,
    compute_label,
    devices_free_of_total,
    driver_label,
    link_label,
    memory_bar,
    memory_label,
    numa_label,
    system_line,
)
from gpuscout.cli.output import output
from gpuscout.results import DUPLICATE_REASON
from gpuscout.sizes import human_bytes

if TYPE_CHECKING:
    from gpuscout.memory import BackendMemory
    from gpuscout.records import DeviceInfo
    from gpuscout.results import Discovery, Dropped, PluginReport

#: ``--color`` choices; "auto" colours a terminal unless ``NO_COLOR`` is set (to anything).
COLOR_CHOICES = ("never", "auto", "always")

#: The plain form's columns.
DEVICE_COLUMNS = (
    "rank",
    "library",
    "id",
    "description",
    "pci_id",
    "free",
    "total",
    "compute",
    "driver",
    "integrated",
    "numa",
    "link",
    "note",
)
DROPPED_COLUMNS = ("# dropped", "library", "id", "description", "pci_id", "reason")
PLUGIN_COLUMNS = ("name", "status", "devices", "ms", "version", "distribution", "error/note")

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


# -- values ---------------------------------------------------------------------------------------


def _plain(value: object) -> str:
    """One field of the plain form: printable, no tab, ``-`` when empty."""
    text = printable(value).replace("\t", " ")
    return text or "-"


def _description(d: DeviceInfo) -> str:
    text = d.description or d.name
    if d.software:
        text = f"(software) {text}"
    if d.unused_reason:
        text = f"{text} (unused: {d.unused_reason})"
    return text or "-"


def summary_line(found: Discovery) -> str:
    """``2 devices: 1 CUDA, 1 ROCm; 104.0 GiB free of 112.0 GiB; 1 dropped`` (a free figure
    that is unknown is never added in: see ``gpuscout.cli.labels``)."""
    devices = found.devices
    libraries: dict[str, int] = {}
    for d in devices:
        libraries[d.library] = libraries.get(d.library, 0) + 1
    parts = [f"{len(devices)} device{'' if len(devices) == 1 else 's'}"]
    if libraries:
        parts[0] += ": " + ", ".join(f"{n} {lib}" for lib, n in libraries.items())
    if devices:
        parts.append(devices_free_of_total(devices))
    if found.dropped:
        parts.append(f"{len(found.dropped)} dropped")
    return printable("; ".join(parts))


def _dropped_line(found: Discovery, index: int) -> str:
    drop = found.dropped[index]
    d = drop.device
    return printable(f"dropped: {d.library} {d.id} {d.description or d.name} ({drop.reason}{_twin_of(drop)})")


def _twin_of(drop: Dropped) -> str:
    """`` of CUDA 0`` after "duplicate"; after another reason (a hidden twin), whose twin."""
    of = drop.duplicate_of
    if of is None:
        return ""
    if drop.reason == DUPLICATE_REASON:
        return f" of {of.library} {of.id}"
    return f", the same card as {of.library} {of.id}"


# -- plain lines ----------------------------------------------------------------------------------


def plain_discovery(found: Discovery) -> str:
    """The plain form of ``gpuscout list`` (see the module docstring)."""
    rows: list[tuple[str, ...]] = [DEVICE_COLUMNS]
    for rank, d in enumerate(found.devices):
        free = "-" if d.free_memory_unknown else human_bytes(d.free_memory)
        if d.free_memory_stale and not d.free_memory_unknown:
            free += " (stale)"
        notes = [
            n
            for n in (
                "software" if d.software else "",
                f"unused: {d.unused_reason}" if d.unused_reason else "",
                *d.notes,
            )
            if n
        ]
        rows.append(
            (
                str(rank),
                d.library,
                d.id,
                d.description or d.name,
                d.pci_id,
                free,
                human_bytes(d.total_memory),
                compute_label(d),
                driver_label(d),
                "yes" if d.integrated else "no",
                numa_label(d),
                link_label(d),
                "; ".join(notes),
            )
        )
    for drop in found.dropped:
        d = drop.device
        rows.append(
            (
                "# dropped",
                d.library,
                d.id,
                d.description or d.name,
                d.pci_id,
                f"{drop.reason}{_twin_of(drop)}",
            )
        )
    lines = ["\t".join(_plain(v) for v in row) for row in rows]
    return "".join(f"{line}\n" for line in [*lines, system_line(found.system)])


def plain_plugins(reports: Sequence[PluginReport]) -> str:
    """The plain form of ``gpuscout plugins``: a header line, then one line per plugin."""
    rows: list[tuple[str, ...]] = [PLUGIN_COLUMNS]
    rows += [
        (
            r.name,
            str(r.status),
            str(r.devices),
            f"{r.elapsed * 1000:.1f}",
            r.version,
            r.distribution,
            r.error or r.note,
        )
        for r in reports
    ]
    return "".join("\t".join(_plain(v) for v in row) + "\n" for row in rows)


# -- terminal tables ------------------------------------------------------------------------------

#: How a column gives way to a narrow terminal: ``whole`` never (its cells are printed entire),
#: ``short`` by ending its one line in "…" (at most ``CELL_CAP`` wide: the whole text is in the
#: plain form, ``--json`` and ``--explain``), ``wrap`` by wrapping onto more lines (a word longer
#: than the column is folded, never cut).
WHOLE, SHORT, WRAP = "whole", "short", "wrap"
#: The widest a ``short`` column is drawn, and the narrowest a ``short`` or ``wrap`` one gets.
CELL_CAP = 60
_NARROWEST = 12

#: A column of a terminal table: header, cells, how it gives way (``WHOLE``, ``SHORT``, ``WRAP``).
Column = tuple[str, list[Text], str]


def _cell(value: object, style: str = "") -> Text:
    return Text(printable(value), style=style)


def _fitted_table(
    title: str, columns: Sequence[Column], drop_order: Sequence[str], width: int
) -> tuple[Table, list[str]] | None:
    """The table of ``columns`` that fits ``width``, and the headers of the columns left out:
    ``short`` and ``wrap`` columns shrink first, then columns leave in ``drop_order``; None when
    even the smallest set would cut a cell that must stay whole."""
    dropped: list[str] = []
    for leave in [None, *drop_order]:
        if leave is not None:
            dropped.append(leave)
        kept = [c for c in columns if c[0] not in dropped]
        # Each kept column at its narrowest, two spaces apart.
        needed = sum(_natural(c) if c[2] == WHOLE else min(_NARROWEST, _natural(c)) for c in kept)
        if needed + 2 * (len(kept) - 1) > width:
            continue
        # A short column takes what the others leave (rich would squeeze every column alike).
        shorts = [c for c in kept if c[2] == SHORT]
        spare = (
            width
            - 2 * (len(kept) - 1)
            - sum(
                _natural(c) if c[2] == WHOLE else min(_NARROWEST, _natural(c)) for c in kept if c[2] != SHORT
            )
        )
        short_width = min(CELL_CAP, spare // len(shorts)) if shorts else 0
        table = Table(
            title=title,
            title_justify="left",
            box=box.SIMPLE_HEAD,
            show_edge=False,
            pad_edge=False,
            collapse_padding=True,
        )
        for column in kept:
            name, _, kind = column
            table.add_column(
                name,
                no_wrap=kind != WRAP,
                overflow="ignore" if kind == WHOLE else "ellipsis" if kind == SHORT else "fold",
                min_width=None if kind == WHOLE else min(_NARROWEST, _natural(column)),
                max_width=short_width if kind == SHORT else None,
            )
        for i in range(len(kept[0][1]) if kept else 0):
            table.add_row(*(cells[i] for _, cells, _ in kept))
        if _fits(table, [c for c in kept if c[2] == WHOLE], width):
            return table, [name for name, _, _ in columns if name in dropped]
    return None


def _natural(column: Column) -> int:
    name, cells, _ = column
    return max(len(name), *(c.cell_len for c in cells)) if cells else len(name)


def _fits(table: Table, whole: Sequence[Column], width: int) -> bool:
    """Whether ``table`` drawn at ``width`` keeps every cell of the ``whole`` columns uncut."""
    probe = Console(file=io.StringIO(), width=width, force_terminal=False, color_system=None)
    with probe.capture() as capture:
        probe.print(table)
    text = capture.get()
    return all(len(line) <= width for line in text.splitlines()) and all(
        cell.plain in text and name in text for name, cells, _ in whole for cell in cells
    )


def left_out_line(columns: Sequence[str], width: int, how: str = "use --json") -> str:
    """``columns left out at 80 columns: used, compute; widen the terminal or use --json``."""
    names = ", ".join("rank" if name == "#" else name for name in columns)
    return f"columns left out at {width} columns: {names}; widen the terminal or {how}"


def _device_columns(found: Discovery) -> list[Column]:
    devices = found.devices
    return [
        ("#", [_cell(rank) for rank in range(len(devices))], WHOLE),
        ("library", [_cell(d.library, "bold") for d in devices], WHOLE),
        ("id", [_cell(d.id, "cyan") for d in devices], WHOLE),
        ("description", [_cell(_description(d)) for d in devices], SHORT),
        ("PCI id", [_cell(d.pci_id or "-") for d in devices], WHOLE),
        (
            "free/total",
            [
                _cell(memory_label(d), "yellow" if d.free_memory_stale or d.free_memory_unknown else "")
                for d in devices
            ],
            WHOLE,
        ),
        ("used", [_cell(_bar(d), "magenta") for d in devices], WHOLE),
        ("compute", [_cell(compute_label(d)) for d in devices], WHOLE),
        ("driver", [_cell(driver_label(d)) for d in devices], WHOLE),
        ("integrated", [_cell("yes" if d.integrated else "no") for d in devices], WHOLE),
        # Only where the kernel said where a device sits (a Mac says nothing of the kind).
        *([("NUMA", [_cell(numa_label(d)) for d in devices], WHOLE)] if _any_numa(devices) else []),
        *([("link", [_link_cell(d) for d in devices], WHOLE)] if _any_link(devices) else []),
    ]


def _any_numa(devices: Sequence[DeviceInfo]) -> bool:
    return any(d.numa_node >= 0 for d in devices)


def _any_link(devices: Sequence[DeviceInfo]) -> bool:
    return any(d.pcie_link is not None for d in devices)


def _link_cell(d: DeviceInfo) -> Text:
    from gpuscout.topology import below_maximum

    slow = d.pcie_link is not None and below_maximum(d.pcie_link)
    return _cell(link_label(d), "yellow" if slow else "")


def _note_lines(found: Discovery) -> list[str]:
    """``note: #0 CUDA GPU-1: running at PCIe Gen3 x4 of Gen4 x16 (...)``, one per note."""
    return [
        printable(f"note: #{rank} {d.library} {d.id}: {note}")
        for rank, d in enumerate(found.devices)
        for note in d.notes
    ]


def _bar(d: DeviceInfo) -> str:
    return memory_bar(d.free_memory, d.total_memory, unknown=d.free_memory_unknown)


#: Device columns in the order they leave a table too wide for the terminal.
_DEVICE_DROP_ORDER = ("used", "link", "NUMA", "integrated", "driver", "compute", "description", "#")
_PLUGIN_DROP_ORDER = ("distribution", "version", "ms")


def _device_blocks(found: Discovery, console: Console) -> None:
    """Each device as a few lines, for a terminal narrower than the smallest table: the first
    line (rank, library, id) is never cut; a long value wraps between words, indented."""
    console.print(Text("Devices, best first", style="italic"))
    for rank, d in enumerate(found.devices):
        console.print(
            Text.assemble(f"#{rank} ", (printable(d.library), "bold"), " ", (printable(d.id), "cyan")),
            soft_wrap=True,
        )
        block = Table.grid(padding=(0, 1), pad_edge=True)
        block.add_column(no_wrap=True)
        block.add_column(overflow="fold")
        for label, value in (
            ("description", _description(d)),
            ("PCI id", d.pci_id or "-"),
            ("free/total", memory_label(d)),
            ("used", _bar(d)),
            ("compute", compute_label(d)),
            ("driver", driver_label(d)),
            ("integrated", "yes" if d.integrated else "no"),
            *([("NUMA", numa_label(d))] if d.numa_node >= 0 else []),
            *([("link", link_label(d))] if d.pcie_link is not None else []),
            *(("note", note) for note in d.notes),
        ):
            block.add_row(_cell(f" {label}:"), _cell(value))
        console.print(block)


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
    if found.devices:
        fitted = _fitted_table(
            "Devices, best first", _device_columns(found), _DEVICE_DROP_ORDER, console.width
        )
        if fitted is None:
            _device_blocks(found, console)
        else:
            console.print(fitted[0])
        if any(d.free_memory_unknown for d in found.devices) and (
            fitted is None or "free/total" not in fitted[1]
        ):
            console.print(Text(UNKNOWN_LEGEND, style="dim"))
        if fitted is not None and fitted[1]:
            console.print(Text(left_out_line(fitted[1], console.width), style="dim"))
        if fitted is not None:  # the blocks hold each device's notes already
            for line in _note_lines(found):
                console.print(Text(line, style="yellow"))
    else:
        console.print(Text("No accelerators found."))
    console.print(Text(summary_line(found), style="bold"))
    for i in range(len(found.dropped)):
        console.print(Text(_dropped_line(found, i), style="dim"))
    console.print(Text(system_line(found.system)))


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
        ("name", [_cell(r.name, "bold") for r in reports], WHOLE),
        ("status", [_cell(r.status, _STATUS_STYLE.get(str(r.status), "")) for r in reports], WHOLE),
        ("devices", [_cell(r.devices) for r in reports], WHOLE),
        ("ms", [_cell(f"{r.elapsed * 1000:.1f}") for r in reports], WHOLE),
        ("version", [_cell(r.version or "-") for r in reports], WHOLE),
        ("distribution", [_cell(r.distribution or "-") for r in reports], WHOLE),
        ("error/note", [_cell(r.error or r.note or "-", "red" if r.error else "dim") for r in reports], WRAP),
    ]
    fitted = _fitted_table("Plugins", columns, _PLUGIN_DROP_ORDER, console.width)
    if fitted is None:  # a plugin name wider than the terminal: one line each, never cut
        for r in reports:
            console.print(
                _cell(
                    f"{r.name} {r.status} {r.devices} {r.elapsed * 1000:.1f} ms {r.error or r.note or '-'}"
                ),
                soft_wrap=True,
            )
        return
    console.print(fitted[0])
    if fitted[1]:
        console.print(Text(left_out_line(fitted[1], console.width), style="dim"))


def print_memory(memory: BackendMemory, *, color: str = "auto") -> bool:
    """On a terminal, ``memory``'s summary (weights, KV cache and graph per device, and the
    total, binary units) as a rich table; returns False, printing nothing, in a pipe."""
    terminal = _on_terminal()
    if not terminal and color != "always":
        return False
    table = Table(title="Memory", title_justify="left", box=None, header_style="bold")
    for name, justify in (("what", "left"), ("device", "left"), ("size", "right")):
        table.add_column(name, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    for what, device, size in memory.summary_rows():
        table.add_row(_cell(what), _cell(device or "-"), _cell(human_bytes(size)))
    stdout_console(color=use_color(color, terminal)).print(table)
    return True


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
