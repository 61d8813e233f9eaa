"""What ``gpuscout fit`` prints for people: on a terminal, what was planned, then a table with a
row per device that holds anything and one for the CPU (layers, weights, KV cache, compute, total,
free memory), fitted to the width as ``list``'s table is (sizes and ids are never cut: the less
important columns leave, and a line names them; too narrow for even the smallest table, each
row is a block of lines), then the one total and what it holds, the notes and the verdict,
every line wrapped between words. In a pipe (stdout not a terminal): plain lines, one per row,
never wrapped (``grep`` finds each whole).

The sentences are the library's (``gpuscout._fit.document``: ``headline``, ``total_line``, the
notes); this module only lays them out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from gpuscout._fit.document import headline, total_line
from gpuscout._records.layers import layer_ranges
from gpuscout._selection.selectors import shortest_ids
from gpuscout.cli._common import printable
from gpuscout.cli._render.columns import (
    SHORT_ID_LEGEND,
    WHOLE,
    WRAP,
    Column,
    cell,
    fitted_table,
    left_out_line,
)
from gpuscout.sizes import human_bytes

if TYPE_CHECKING:
    from gpuscout._records.device import DeviceInfo

#: The bar's width in the plain lines, and in the table's ``used`` column.
BAR_WIDTH, TABLE_BAR_WIDTH = 30, 10
#: Columns in the order they leave a table too wide for the terminal (never library, id,
#: layers, total or free: what a fit is about).
DROP_ORDER = ("used", "name", "compute", "KV cache", "weights")


def bar(used: int, total: int, width: int = BAR_WIDTH) -> str:
    """``[####......]``: ``used`` of ``total``; ``?`` throughout when ``total`` is unknown."""
    if total <= 0:
        return "[" + "?" * width + "]"
    filled = min(width, round(width * used / total))
    return "[" + "#" * filled + "." * (width - filled) + "]"


class _Row:
    """One backend of the document: a device (or the CPU), its layers, memory and room."""

    def __init__(self, memory: dict[str, Any], layers: Sequence[int], device: DeviceInfo | None) -> None:
        self.cpu = not memory["id"]
        self.library = "CPU" if self.cpu else memory["backend"]
        self.id = memory["id"]
        self.name = device.name if device and device.name else ""
        self.layers = layer_ranges(sorted(layers))
        self.memory = memory
        self.unknown = device is not None and device.free_memory_unknown
        self.budget = device is not None and device.usable_memory is not None
        self.room = device.usable_free if device else 0  # under the device's budget (docs/budgets.md)

    def free_text(self) -> str:
        """``23.5 GiB`` (free, under a budget when the device has one), ``unknown``, or ``-``."""
        if self.cpu:
            return "-"
        return "unknown" if self.unknown else human_bytes(self.room)

    def bar(self, width: int) -> str:
        return "" if self.cpu else bar(self.memory["total"], 0 if self.unknown else self.room, width)


def _rows(document: dict[str, Any], devices: Sequence[DeviceInfo]) -> list[_Row]:
    """A row per ``memory`` entry (every device that holds anything, the CPU last), with the
    layers the placement gives it."""
    by_key = {(d.library, d.id): d for d in devices}
    layers = {(g["backend"], g["id"]): g["layers"] for g in document["placement"]}
    rows = []
    for m in document["memory"]:
        key = (m["backend"], m["id"])
        held = document["cpu_layers"] if not m["id"] else layers.get(key, [])
        rows.append(_Row(m, held, None if not m["id"] else by_key.get(key)))
    # A placed device without a memory entry (none today) still gets its row.
    rows[-1:-1] = [
        _Row(
            {"id": g["id"], "backend": g["backend"], "weights": 0, "kv_cache": 0, "graph": 0, "total": 0},
            g["layers"],
            by_key.get((g["backend"], g["id"])),
        )
        for g in document["placement"]
        if not any((m["backend"], m["id"]) == (g["backend"], g["id"]) for m in document["memory"])
    ]
    return rows


def plain_fit(document: dict[str, Any], devices: Sequence[DeviceInfo]) -> str:
    """The text form for a pipe: the headline, a line per placed device (its name as ``list``
    shows it, layers, need against free memory), the CPU's, a line per backend's weights, KV
    cache, compute and total, the total, the notes, then ``fits`` or ``does not fit``; one line
    each, never wrapped."""
    p = printable
    rows = _rows(document, devices)
    lines = [p(headline(document))]
    for r in rows[:-1]:
        if r.layers == "-":
            continue  # holds only a compute buffer or moved tensors: its breakdown line says so
        name = r.name or r.id
        usable = "usable " if r.budget else ""
        free = "unknown free" if r.unknown else f"{human_bytes(r.room)} {usable}free"
        lines.append(
            f"  {p(r.library)} {p(name)} ({p(r.id)})  layers {r.layers}  "
            f"{human_bytes(r.memory['total'])} / {free}  {r.bar(BAR_WIDTH)}"
        )
    lines.append(f"  CPU  layers {rows[-1].layers}  {human_bytes(rows[-1].memory['total'])}")
    for r in rows:
        m = r.memory
        who = "CPU" if r.cpu else p(f"{r.library} {r.id}")
        lines.append(
            f"  {who}: weights {human_bytes(m['weights'])}, KV cache {human_bytes(m['kv_cache'])}, "
            f"compute {human_bytes(m['graph'])}, total {human_bytes(m['total'])}"
        )
    lines.append(f"  {total_line(document)}")
    lines += [p(f"note: {note}") for note in document["notes"]]
    lines.append("fits" if document["fits"] else "does not fit")
    return "".join(f"{line}\n" for line in lines)


def _columns(rows: Sequence[_Row], ids: Sequence[str]) -> list[Column]:
    def size(key: str) -> list[Text]:
        return [cell(human_bytes(r.memory[key])) for r in rows]

    over = [not r.cpu and not r.unknown and r.memory["total"] > r.room for r in rows]
    free_head = "usable" if any(r.budget for r in rows) else "free"  # list's name for it
    return [
        ("library", [cell(r.library, "bold") for r in rows], WHOLE),
        ("id", [cell(i or "-", "cyan") for i in ids], WHOLE),
        ("name", [cell(r.name or "-") for r in rows], WRAP),
        ("layers", [cell(r.layers) for r in rows], WRAP),
        ("weights", size("weights"), WHOLE),
        ("KV cache", size("kv_cache"), WHOLE),
        ("compute", size("graph"), WHOLE),
        (
            "total",
            [
                cell(human_bytes(r.memory["total"]), "bold red" if o else "")
                for r, o in zip(rows, over, strict=True)
            ],
            WHOLE,
        ),
        (free_head, [cell(r.free_text(), "yellow" if r.unknown else "") for r in rows], WHOLE),
        ("used", [cell(r.bar(TABLE_BAR_WIDTH), "magenta") for r in rows], WHOLE),
    ]


def _blocks(rows: Sequence[_Row], console: Console) -> None:
    """Each row as a few lines, for a terminal narrower than the smallest table: the first
    (library and id) never cut, the rest wrapped between words, indented."""
    for r in rows:
        head = Text.assemble((printable(r.library), "bold"))
        if r.id:
            head.append(" ")
            head.append(printable(r.id), "cyan")
        console.print(head, soft_wrap=True)
        block = Table.grid(padding=(0, 1), pad_edge=True)
        block.add_column(no_wrap=True)
        block.add_column(overflow="fold")
        m = r.memory
        needs = human_bytes(m["total"]) + ("" if r.cpu else f" of {r.free_text()} free")
        for label, value in (
            *((("name", r.name),) if r.name else ()),
            ("layers", r.layers),
            ("needs", needs),
            ("weights", human_bytes(m["weights"])),
            ("KV cache", human_bytes(m["kv_cache"])),
            ("compute", human_bytes(m["graph"])),
        ):
            block.add_row(cell(f" {label}:"), cell(value))
        console.print(block)


def print_fit(document: dict[str, Any], devices: Sequence[DeviceInfo], console: Console) -> None:
    """The text form on ``console`` (a terminal, or ``--color always``), fitted to its width."""
    rows = _rows(document, devices)
    console.print(Text(printable(headline(document))))
    whole = [r.id for r in rows]
    fitted = fitted_table("Placement and memory", _columns(rows, whole), (), console.width)
    shortened = False
    if fitted is None:
        # As list does: each id cut to its shortest selecting prefix before any column leaves.
        cut = dict(zip(((d.library, d.id) for d in devices), shortest_ids(devices), strict=True))
        short = [cut.get((r.library, r.id), r.id) if r.id else "" for r in rows]
        fitted = fitted_table("Placement and memory", _columns(rows, short), DROP_ORDER, console.width)
        shortened = short != whole
    if fitted is None:
        _blocks(rows, console)
    else:
        console.print(fitted[0])
        if shortened:
            console.print(Text(SHORT_ID_LEGEND, style="dim"))
        if fitted[1]:
            console.print(Text(left_out_line(fitted[1], console.width), style="dim"))
    console.print(Text(total_line(document), style="bold"))
    for note in document["notes"]:
        console.print(Text(printable(f"note: {note}"), style="yellow"))
    verdict = "fits" if document["fits"] else "does not fit"
    console.print(Text(verdict, style="bold green" if document["fits"] else "bold red"))


__all__ = ["BAR_WIDTH", "DROP_ORDER", "bar", "plain_fit", "print_fit"]
