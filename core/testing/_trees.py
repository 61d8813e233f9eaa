"""Recorded trees for the plugin author's kit (``gpuscout.testing``): ``write_tree`` and the
values it takes besides text and bytes (``FIFO``, ``Symlink``), and ``in_u64``, what a parser of
such a tree may answer."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

from gpuscout._machine.context import U64_LIMIT


class _Fifo:
    def __repr__(self) -> str:
        return "gpuscout.testing.FIFO"


FIFO = _Fifo()  #: A ``write_tree`` value that makes a FIFO (opening it for reading blocks).


class Symlink(NamedTuple):
    """A ``write_tree`` value that makes a symbolic link to ``target`` (kept as written)."""

    target: str


Content = str | bytes | Symlink | _Fifo


def write_tree(root: str | os.PathLike[str], files: Mapping[str, Content]) -> Path:
    """Write ``files`` under ``root`` and return ``root`` as a Path.

    Keys are absolute-looking paths (``"/sys/class/drm/card0/device/vendor"``) taken below
    ``root``; folders on the way are made. A str value is written as UTF-8 (lone surrogates
    kept, so any Hypothesis text fits), bytes as they are, ``FIFO`` makes a FIFO and
    ``Symlink(target)`` a symbolic link. Whatever stands at a path (a file, a FIFO, a link) is
    replaced, so a recorded tree can be spoiled one file at a time.
    """
    base = Path(root)
    for path, content in files.items():
        target = base / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_symlink() or (target.exists() and not target.is_dir()):
            target.unlink()
        if isinstance(content, Symlink):
            target.symlink_to(content.target)
        elif isinstance(content, _Fifo):
            os.mkfifo(target)
        elif isinstance(content, bytes):
            target.write_bytes(content)
        elif isinstance(content, str):
            target.write_text(content, encoding="utf-8", errors="surrogatepass")
        else:
            raise TypeError(
                f"write_tree: {path}: expected str, bytes, FIFO or Symlink, got {type(content).__name__}"
            )
    return base


def in_u64(value: int | None) -> bool:
    """Whether ``value`` is None or a kernel counter could hold it (0..2**64-1): what a parser
    of sysfs or procfs text may answer, whatever the text."""
    return value is None or 0 <= value < U64_LIMIT
