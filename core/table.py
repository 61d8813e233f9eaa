"""Human-readable tables for the CLI (rich is imported here and nowhere else)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

GIB = 1024**3


def human_bytes(n: int) -> str:
    """Bytes as ``12.3 GiB`` (binary units)."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"


def memory_bar(free: int, total: int, width: int = 10) -> str:
    """A bar of used memory: ``[###-------]`` is 30 % used."""
    if total <= 0:
        return "[" + "?" * width + "]"
    used = min(width, max(0, round(width * (total - free) / total)))
    return "[" + "#" * used + "-" * (width - used) + "]"


def print_discovery(found: Any, console: Console | None = None) -> None:
    """The ``gpuscout list`` table, then dropped devices and system memory."""
    console = console or Console()
    table = Table(title="Devices, best first", title_justify="left")
    for col in ("#", "library", "id", "description", "PCI id", "free / total", "compute",
                "driver", "integrated"):
        table.add_column(col, no_wrap=col in ("#", "free / total"))
    for rank, d in enumerate(found.devices):
        mem = f"{memory_bar(d.free_memory, d.total_memory)} {human_bytes(d.free_memory)}" \
              f"{'?' if d.free_memory_unknown else ''} / {human_bytes(d.total_memory)}"
        kind = "software" if d.software else "yes" if d.integrated else "no"
        compute = d.compute if d.compute_major >= 0 else "-"
        table.add_row(str(rank), d.library, d.id, d.description or d.name, d.pci_id or "-",
                      mem, compute, d.driver, kind)
    if found.devices:
        console.print(table)
    else:
        console.print("No accelerators found.")
    for drop in found.dropped:
        d = drop.device
        of = f" of {drop.duplicate_of.library} {drop.duplicate_of.id}" if drop.duplicate_of else ""
        console.print(f"dropped: {d.library} {d.id} {d.description or d.name} ({drop.reason}{of})",
                      highlight=False)
    s = found.system
    console.print(f"System memory: {human_bytes(s.free_memory)} free of "
                  f"{human_bytes(s.total_memory)}, swap free {human_bytes(s.free_swap)}",
                  highlight=False)


def print_plugins(reports: Sequence[Any], console: Console | None = None) -> None:
    """The ``gpuscout plugins`` table."""
    console = console or Console()
    table = Table(title="Plugins", title_justify="left")
    for col in ("name", "status", "devices", "ms", "version", "distribution", "note"):
        table.add_column(col)
    for r in reports:
        table.add_row(r.name, r.status, str(r.devices), f"{r.elapsed * 1000:.1f}", r.version,
                      r.distribution, r.error)
    console.print(table)
