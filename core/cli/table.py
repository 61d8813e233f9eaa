"""What ``gpuscout list`` and ``gpuscout plugins`` print for people: a rich table on a terminal,
plain tab-separated lines in a pipe (rich is imported here and nowhere else).

Text from plugins and devices is data: every cell is a ``rich.text.Text``, so rich never reads
``[bold]`` or ``:emoji:`` in it, and control characters are shown escaped. The table fits the
terminal: descriptions wrap and shorten first, then the less important columns drop; ids and PCI
ids are never cut (too narrow for even the smallest table, each device gets a block of lines).

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
DEVICE_COLUMNS = ("rank", "library", "id", "description", "pci_id", "free", "total", "compute",
                  "driver", "integrated", "note")
DROPPED_COLUMNS = ("# dropped", "library", "id", "description", "pci_id", "reason")
PLUGIN_COLUMNS = ("name", "status", "devices", "ms", "version", "distribution", "error/note")

_STATUS_STYLE = {"ok": "green", "failed": "bold red", "timeout": "bold red", "disabled": "dim"}


def memory_bar(free: int, total: int, width: int = 10) -> str:
    """A bar of used memory: ``[###-------]`` is 30 % used."""
    if total <= 0:
        return "[" + "?" * width + "]"
    used = min(width, max(0, round(width * (total - free) / total)))
    return "[" + "#" * used + "-" * (width - used) + "]"


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
    return _Console(file=_stdout(), force_terminal=True, width=width, no_color=not color,
                    color_system="auto" if color else None, highlight=False)


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


def compute_label(d: DeviceInfo) -> str:
    """The compute version, ``-`` when unknown (major -1, or 0.0 from a library without one)."""
    unknown = d.compute_major < 0 or (d.compute_major == 0 and d.compute_minor == 0)
    return "-" if unknown else d.compute


def driver_label(d: DeviceInfo) -> str:
    """The driver version, ``-`` when unknown (0.0)."""
    return "-" if d.driver_major == 0 and d.driver_minor == 0 else d.driver


def memory_label(d: DeviceInfo) -> str:
    """``20.0/24.0 GiB`` (free/total, the unit once when both share it), ``?`` after a free
    figure that is a guess, `` (stale)`` after one that is not fresh."""
    free, total = human_bytes(d.free_memory), human_bytes(d.total_memory)
    mark = "?" if d.free_memory_unknown else ""
    free_number, _, free_unit = free.partition(" ")
    if free_unit == total.partition(" ")[2]:
        text = f"{free_number}{mark}/{total}"
    else:
        text = f"{free}{mark}/{total}"
    return text + (" (stale)" if d.free_memory_stale else "")


def _description(d: DeviceInfo) -> str:
    text = d.description or d.name
    if d.software:
        text = f"(software) {text}"
    if d.unused_reason:
        text = f"{text} (unused: {d.unused_reason})"
    return text or "-"


def summary_line(found: Discovery) -> str:
    """``2 devices: 1 CUDA, 1 ROCm; 104.0 GiB free of 112.0 GiB; 1 dropped``."""
    devices = found.devices
    libraries: dict[str, int] = {}
    for d in devices:
        libraries[d.library] = libraries.get(d.library, 0) + 1
    parts = [f"{len(devices)} device{'' if len(devices) == 1 else 's'}"]
    if libraries:
        parts[0] += ": " + ", ".join(f"{n} {lib}" for lib, n in libraries.items())
    if devices:
        free = sum(d.free_memory for d in devices)
        total = sum(d.total_memory for d in devices)
        guess = "?" if any(d.free_memory_unknown for d in devices) else ""
        parts.append(f"{human_bytes(free)}{guess} free of {human_bytes(total)}")
    if found.dropped:
        parts.append(f"{len(found.dropped)} dropped")
    return printable("; ".join(parts))


def _system_line(found: Discovery) -> str:
    s = found.system
    return (f"System memory: {human_bytes(s.free_memory)} free of {human_bytes(s.total_memory)}, "
            f"swap free {human_bytes(s.free_swap)}")


def _dropped_line(found: Discovery, index: int) -> str:
    drop = found.dropped[index]
    d = drop.device
    return printable(f"dropped: {d.library} {d.id} {d.description or d.name} "
                     f"({drop.reason}{_twin_of(drop)})")


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
        notes = [n for n in ("software" if d.software else "",
                             f"unused: {d.unused_reason}" if d.unused_reason else "") if n]
        rows.append((str(rank), d.library, d.id, d.description or d.name, d.pci_id, free,
                     human_bytes(d.total_memory), compute_label(d), driver_label(d),
                     "yes" if d.integrated else "no", "; ".join(notes)))
    for drop in found.dropped:
        d = drop.device
        rows.append(("# dropped", d.library, d.id, d.description or d.name, d.pci_id,
                     f"{drop.reason}{_twin_of(drop)}"))
    lines = ["\t".join(_plain(v) for v in row) for row in rows]
    return "".join(f"{line}\n" for line in [*lines, _system_line(found)])


def plain_plugins(reports: Sequence[PluginReport]) -> str:
    """The plain form of ``gpuscout plugins``: a header line, then one line per plugin."""
    rows: list[tuple[str, ...]] = [PLUGIN_COLUMNS]
    rows += [(r.name, str(r.status), str(r.devices), f"{r.elapsed * 1000:.1f}", r.version,
              r.distribution, r.error or r.note) for r in reports]
    return "".join("\t".join(_plain(v) for v in row) + "\n" for row in rows)


# -- terminal tables ------------------------------------------------------------------------------


def _cell(value: object, style: str = "") -> Text:
    return Text(printable(value), style=style)


def _fitted_table(title: str, columns: Sequence[tuple[str, list[Text], bool]],
                  drop_order: Sequence[str], width: int) -> Table | None:
    """The table of ``columns`` (header, cells, wrappable) that fits ``width``: the wrappable
    ones shorten first, then columns leave in ``drop_order``; None when even the smallest set
    would cut a cell that must stay whole."""
    dropped: list[str] = []
    for leave in [None, *drop_order]:
        if leave is not None:
            dropped.append(leave)
        kept = [c for c in columns if c[0] not in dropped]
        # Each kept column at its narrowest (a wrappable one at most 12 wide), two spaces apart.
        needed = sum(min(12, _natural(c)) if c[2] else _natural(c) for c in kept)
        if needed + 2 * (len(kept) - 1) > width:
            continue
        table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, show_edge=False,
                      pad_edge=False, collapse_padding=True)
        for name, cells, wrap in kept:
            table.add_column(name, no_wrap=not wrap, overflow="ellipsis" if wrap else "ignore",
                             min_width=min(12, _natural((name, cells, wrap))) if wrap else None)
        for i in range(len(kept[0][1]) if kept else 0):
            table.add_row(*(cells[i] for _, cells, _ in kept))
        if _fits(table, [c for c in kept if not c[2]], width):
            return table
    return None


def _natural(column: tuple[str, list[Text], bool]) -> int:
    name, cells, _ = column
    return max(len(name), *(c.cell_len for c in cells)) if cells else len(name)


def _fits(table: Table, whole: Sequence[tuple[str, list[Text], bool]], width: int) -> bool:
    """Whether ``table`` drawn at ``width`` keeps every cell of the ``whole`` columns uncut."""
    probe = Console(file=io.StringIO(), width=width, force_terminal=False, color_system=None)
    with probe.capture() as capture:
        probe.print(table)
    text = capture.get()
    return all(len(line) <= width for line in text.splitlines()) and all(
        cell.plain in text and name in text for name, cells, _ in whole for cell in cells)


def _device_columns(found: Discovery) -> list[tuple[str, list[Text], bool]]:
    devices = found.devices
    return [
        ("#", [_cell(rank) for rank in range(len(devices))], False),
        ("library", [_cell(d.library, "bold") for d in devices], False),
        ("id", [_cell(d.id, "cyan") for d in devices], False),
        ("description", [_cell(_description(d)) for d in devices], True),
        ("PCI id", [_cell(d.pci_id or "-") for d in devices], False),
        ("free/total", [_cell(memory_label(d), "yellow" if d.free_memory_stale
                              or d.free_memory_unknown else "") for d in devices], False),
        ("used", [_cell(memory_bar(d.free_memory, d.total_memory), "magenta") for d in devices],
         False),
        ("compute", [_cell(compute_label(d)) for d in devices], False),
        ("driver", [_cell(driver_label(d)) for d in devices], False),
        ("integrated", [_cell("yes" if d.integrated else "no") for d in devices], False),
    ]


#: Device columns in the order they leave a table too wide for the terminal.
_DEVICE_DROP_ORDER = ("used", "driver", "integrated", "compute", "description", "#")
_PLUGIN_DROP_ORDER = ("distribution", "version", "ms")


def _device_blocks(found: Discovery, console: Console) -> None:
    """Each device as a few lines, for a terminal narrower than the smallest table: lines are
    never cut (the terminal wraps them)."""
    console.print(Text("Devices, best first", style="italic"), soft_wrap=True)
    for rank, d in enumerate(found.devices):
        console.print(Text.assemble(f"#{rank} ", (printable(d.library), "bold"), " ",
                                    (printable(d.id), "cyan")), soft_wrap=True)
        for label, value in (("description", _description(d)), ("PCI id", d.pci_id or "-"),
                             ("free/total", memory_label(d)),
                             ("used", memory_bar(d.free_memory, d.total_memory)),
                             ("compute", compute_label(d)), ("driver", driver_label(d)),
                             ("integrated", "yes" if d.integrated else "no")):
            console.print(_cell(f"  {label}: {value}"), soft_wrap=True)


def print_discovery(found: Discovery, console: Console | None = None, *,
                    color: str = "auto") -> None:
    """The ``gpuscout list`` output: on a terminal (or a given ``console``) the table fitted to
    its width, a summary line, dropped devices and system memory; in a pipe the plain form.

    ``color`` is ``--color``: ``always`` also draws the terminal table in a pipe (``less -R``).
    """
    if console is None:
        terminal = _on_terminal()
        if not terminal and color != "always":
            _stdout().write(plain_discovery(found))
            return
        console = stdout_console(use_color(color, terminal))
    if found.devices:
        table = _fitted_table("Devices, best first", _device_columns(found), _DEVICE_DROP_ORDER,
                              console.width)
        if table is None:
            _device_blocks(found, console)
        else:
            console.print(table)
    else:
        console.print(Text("No accelerators found."))
    console.print(Text(summary_line(found), style="bold"), soft_wrap=True)
    for i in range(len(found.dropped)):
        console.print(Text(_dropped_line(found, i), style="dim"), soft_wrap=True)
    console.print(Text(_system_line(found)), soft_wrap=True)


def print_plugins(reports: Sequence[PluginReport], console: Console | None = None, *,
                  color: str = "auto") -> None:
    """The ``gpuscout plugins`` output: a table fitted to the terminal (or a given ``console``),
    or in a pipe one plain line per plugin. ``color`` as for ``print_discovery``."""
    if console is None:
        terminal = _on_terminal()
        if not terminal and color != "always":
            _stdout().write(plain_plugins(reports))
            return
        console = stdout_console(use_color(color, terminal))
    columns = [
        ("name", [_cell(r.name, "bold") for r in reports], False),
        ("status", [_cell(r.status, _STATUS_STYLE.get(str(r.status), "")) for r in reports],
         False),
        ("devices", [_cell(r.devices) for r in reports], False),
        ("ms", [_cell(f"{r.elapsed * 1000:.1f}") for r in reports], False),
        ("version", [_cell(r.version or "-") for r in reports], False),
        ("distribution", [_cell(r.distribution or "-") for r in reports], False),
        ("error/note", [_cell(r.error or r.note or "-", "red" if r.error else "dim")
                        for r in reports], True),
    ]
    table = _fitted_table("Plugins", columns, _PLUGIN_DROP_ORDER, console.width)
    if table is None:  # a plugin name wider than the terminal: one line each, never cut
        for r in reports:
            console.print(_cell(f"{r.name} {r.status} {r.devices} {r.elapsed * 1000:.1f} ms "
                                f"{r.error or r.note or '-'}"), soft_wrap=True)
    else:
        console.print(table)


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


def render_discovery(found: Discovery, width: int = 80, terminal: bool = True,
                     color: bool = False) -> str:
    """What ``gpuscout list`` prints, as text: on a terminal ``width`` wide (``color``: with
    ANSI colours), or in a pipe (the plain form). For tests and notes."""
    if not terminal:
        return plain_discovery(found)
    console = _recording_console(width, color)
    print_discovery(found, console)
    return console.file.getvalue()  # type: ignore[attr-defined,no-any-return]


def render_plugins(reports: Sequence[PluginReport], width: int = 80, terminal: bool = True,
                   color: bool = False) -> str:
    """What ``gpuscout plugins`` prints, as text (see ``render_discovery``)."""
    if not terminal:
        return plain_plugins(reports)
    console = _recording_console(width, color)
    print_plugins(reports, console)
    return console.file.getvalue()  # type: ignore[attr-defined,no-any-return]


def _recording_console(width: int, color: bool) -> Console:
    return Console(file=io.StringIO(), width=width, force_terminal=True, no_color=not color,
                   color_system="standard" if color else None, highlight=False,
                   legacy_windows=False)
