"""Wrapping text for a terminal between words, never inside one: the one rule every command's
sentences follow there (in a pipe nothing is wrapped)."""

from __future__ import annotations

import os
import sys


def wrap_words(
    text: str, width: int, indent: str, *, initial: str | None = None, narrowest: int = 20
) -> list[str]:
    """``text`` as lines of at most ``width`` characters, broken only at spaces (a word longer
    than the width stays whole, a hyphenated one too): the first led by ``text``'s own leading
    spaces, after ``initial`` when given, the rest by ``indent``; never narrower than ``indent``
    plus ``narrowest``. An empty ``text`` is one empty line."""
    import textwrap  # only on a terminal: its import builds regular expressions (0.6 ms)

    body = text.lstrip(" ")
    lead = (initial or "") + " " * (len(text) - len(body))
    lines = textwrap.wrap(
        body,
        width=max(width, len(indent) + narrowest),
        initial_indent=lead,
        subsequent_indent=indent,
        break_long_words=False,
        break_on_hyphens=False,
    )
    return lines or [lead.rstrip()]


def terminal_columns() -> int:
    """``shutil.get_terminal_size().columns`` without importing ``shutil`` (and the compression
    modules it pulls in, about 2 ms of a command): ``COLUMNS`` when a positive number, else the
    width of the terminal ``sys.__stdout__`` is, else 80."""
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns if sys.__stdout__ else 0
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


__all__ = ["terminal_columns", "wrap_words"]
