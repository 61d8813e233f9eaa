"""Human-readable tables for the CLI (rich is imported here and nowhere else).

Text from plugins and devices is data: every cell is a ``rich.text.Text``, so rich never reads
``[bold]`` or ``:emoji:`` in it, and control characters are shown escaped.
"""

from __future__ import annotations

import errno
import io
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from gpuscout.cli import output, printable

GIB = 1024**3
UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB")


def human_bytes(n: int) -> str:
    """Bytes as ``12.3 GiB`` (binary units up to YiB; beyond that the YiB figure grows).

    Integer arithmetic throughout, so no size is too large to print.
    """
    n = int(n)
    if n < 0:
        return "-" + human_bytes(-n)
    if n < 1024:
        return f"{n} B"
    for power, unit in enumerate(UNITS[1:], start=1):
        scale = 1024**power
        tenths = (n * 10 + scale // 2) // scale
        # 1023.96 KiB rounds to 1024.0: say 1.0 MiB instead.
        if tenths < 1024 * 10 or unit == UNITS[-1]:
            return f"{tenths // 10}.{tenths % 10} {unit}"
    raise AssertionError("unreachable")  # pragma: no cover


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
    """A console on gpuscout's stdout (``cli.output()``) that cannot fail on a character the
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


def print_discovery(found: Any, console: Console | None = None) -> None:
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


def print_plugins(reports: Sequence[Any], console: Console | None = None) -> None:
    """The ``gpuscout plugins`` table."""
    console = console or stdout_console()
    table = Table(title="Plugins", title_justify="left")
    for col in ("name", "status", "devices", "ms", "version", "distribution", "note"):
        table.add_column(col)
    for r in reports:
        table.add_row(*(_cell(v) for v in (r.name, r.status, r.devices, f"{r.elapsed * 1000:.1f}",
                                           r.version, r.distribution,
                                           r.error or getattr(r, "note", ""))))
    console.print(table)
