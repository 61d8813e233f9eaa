"""Human-readable tables for the CLI (rich is imported here and nowhere else).

Text from plugins and devices is data: every cell is a ``rich.text.Text``, so rich never reads
``[bold]`` or ``:emoji:`` in it, and control characters are shown escaped.
"""

from __future__ import annotations

import errno
import io
from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table
from rich.text import Text

from gpuscout.cli.common import printable
from gpuscout.cli.output import output
from gpuscout.cli.sizes import human_bytes

if TYPE_CHECKING:
    from gpuscout.results import Discovery, PluginReport


def memory_bar(free: int, total: int, width: int = 10) -> str:
    """A bar of used memory: ``[###-------]`` is 30 % used."""
    if total <= 0:
        return "[" + "?" * width + "]"
    used = min(width, max(0, round(width * (total - free) / total)))
    return "[" + "#" * used + "-" * (width - used) + "]"


class _Console(Console):
    """A console that leaves a closed stdout to the CLI (rich would exit 1 on its own)."""

    def on_broken_pipe(self) -> None:
        """Raise, so the CLI handles a reader that went away the same way for every output."""
        raise BrokenPipeError(errno.EPIPE, "stdout was closed")


def stdout_console() -> Console:
    """A console on gpuscout's stdout (``output()``) that cannot fail on a character the
    terminal's encoding lacks.

    An ASCII-only terminal (``LANG=C``) or a name with undecodable bytes shows ``?`` instead.
    """
    stdout = output()
    # Python's own choice for a C locale, surrogateescape, still fails on any non-ASCII name.
    if isinstance(stdout, io.TextIOWrapper) and stdout.errors in ("strict", "surrogateescape"):
        stdout.reconfigure(errors="replace")
    return _Console(file=stdout)


def _cell(value: object) -> Text:
    return Text(printable(value))


def print_discovery(found: Discovery, console: Console | None = None) -> None:
    """The ``gpuscout list`` table, then dropped devices and system memory."""
    console = console or stdout_console()
    table = Table(title="Devices, best first", title_justify="left")
    for col in ("#", "library", "id", "description", "PCI id", "free / total", "compute",
                "driver", "integrated"):
        table.add_column(col, no_wrap=col in ("#", "free / total"))
    for rank, d in enumerate(found.devices):
        mem = f"{memory_bar(d.free_memory, d.total_memory)} {human_bytes(d.free_memory)}" \
              f"{'?' if d.free_memory_unknown else ''} / {human_bytes(d.total_memory)}"
        kind = "software" if d.software else "yes" if d.integrated else "no"
        compute = d.compute if d.compute_major >= 0 else "-"
        table.add_row(*(_cell(v) for v in (rank, d.library, d.id, d.description or d.name,
                                           d.pci_id or "-", mem, compute, d.driver, kind)))
    if found.devices:
        console.print(table)
    else:
        console.print(Text("No accelerators found."))
    for drop in found.dropped:
        d = drop.device
        of = f" of {drop.duplicate_of.library} {drop.duplicate_of.id}" if drop.duplicate_of else ""
        console.print(_cell(f"dropped: {d.library} {d.id} {d.description or d.name} "
                            f"({drop.reason}{of})"))
    s = found.system
    console.print(Text(f"System memory: {human_bytes(s.free_memory)} free of "
                       f"{human_bytes(s.total_memory)}, swap free {human_bytes(s.free_swap)}"))


def print_plugins(reports: Sequence[PluginReport], console: Console | None = None) -> None:
    """The ``gpuscout plugins`` table."""
    console = console or stdout_console()
    table = Table(title="Plugins", title_justify="left")
    for col in ("name", "status", "devices", "ms", "version", "distribution", "note"):
        table.add_column(col)
    for r in reports:
        table.add_row(*(_cell(v) for v in (r.name, r.status, r.devices, f"{r.elapsed * 1000:.1f}",
                                           r.version, r.distribution, r.error or r.note)))
    console.print(table)
