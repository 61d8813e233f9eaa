"""Terminal tables fitted to a width: the columns of a table (``Column``), how each gives way
to a narrow terminal (``WHOLE``, ``SHORT``, ``WRAP``), ``fitted_table``, which shrinks and then
leaves out columns until the table fits, and the line that names what it left out."""

from __future__ import annotations

import io
from collections.abc import Sequence

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from gpuscout.cli._common import printable

#: How a column gives way to a narrow terminal: ``whole`` never (its cells are printed entire),
#: ``short`` by ending its one line in "…" when the width the other columns leave it runs out
#: (the whole text is in the plain form, ``--json`` and ``--explain``), ``wrap`` by wrapping onto
#: more lines (a word longer than the column is folded, never cut).
WHOLE, SHORT, WRAP = "whole", "short", "wrap"
#: The narrowest a ``short`` or ``wrap`` column gets.
_NARROWEST = 12
#: The line under a table whose ids are cut to their shortest selecting prefixes.
SHORT_ID_LEGEND = "id: the shortest prefix that selects each device (whole: in a pipe, --json)"

#: A column of a terminal table: header, cells, how it gives way (``WHOLE``, ``SHORT``, ``WRAP``).
Column = tuple[str, list[Text], str]


def cell(value: object, style: str = "") -> Text:
    """``value`` as a table cell: printable text that rich never reads markup in."""
    return Text(printable(value), style=style)


def fitted_table(
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
        short_width = spare // len(shorts) if shorts else 0
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
