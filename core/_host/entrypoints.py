"""Finding the ``gpuscout`` entry points of installed distributions, cheaply.

``importlib.metadata`` costs about 12 ms to import (email, zipfile, csv, pathlib), a tenth of the
whole start-up budget, to read a few small files. This reads the same files directly: for each
folder on ``sys.path``, every ``*.dist-info`` (or ``*.egg-info``) with an ``entry_points.txt``,
first occurrence of a distribution name winning, as importlib.metadata does. Zipped paths, which
have no folders to scan, fall back to importlib.metadata.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from collections.abc import Iterable
from typing import Any

import attrs


@attrs.frozen
class EntryPoint:
    """One ``name = module[:attr]`` line of a distribution's entry-point group."""

    name: str
    value: str
    distribution: str = ""
    version: str = ""

    def load(self) -> Any:
        """Import the module and return the named attribute (or the module itself)."""
        module, _, attr = self.value.partition(":")
        obj: Any = importlib.import_module(module.strip())
        for part in filter(None, attr.strip().split(".")):
            obj = getattr(obj, part)
        return obj


_SECTION = re.compile(r"^\s*\[(?P<name>[^\]]+)\]\s*$")


def parse_entry_points(text: str, group: str) -> list[tuple[str, str]]:
    """The ``(name, value)`` pairs of ``group`` in an entry_points.txt (an INI file)."""
    pairs: list[tuple[str, str]] = []
    current = None
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith(("#", ";")):
            continue
        match = _SECTION.match(line)
        if match:
            current = match["name"].strip()
            continue
        if current == group and "=" in line:
            name, _, value = line.partition("=")
            pairs.append((name.strip(), value.strip()))
    return pairs


def _metadata_field(folder: str, field: str) -> str:
    for filename in ("METADATA", "PKG-INFO"):
        try:
            with open(os.path.join(folder, filename), encoding="utf-8", errors="replace") as f:
                for line in f:
                    if not line.strip():
                        break  # the headers end at the first blank line
                    key, _, value = line.partition(":")
                    if key.strip().lower() == field:
                        return value.strip()
        except OSError:
            continue
    return ""


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def entry_points(group: str, path: Iterable[str] | None = None) -> list[EntryPoint]:
    """Every entry point of ``group`` over ``path`` (default ``sys.path``), in path order."""
    found: list[EntryPoint] = []
    seen: set[str] = set()
    for entry in list(sys.path if path is None else path):
        folder = entry or "."
        if not os.path.isdir(folder):
            if os.path.isfile(folder):  # a zip on sys.path
                found.extend(_zip_entry_points(group, folder, seen))
            continue
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        for name in names:
            if not name.endswith((".dist-info", ".egg-info")):
                continue
            meta = os.path.join(folder, name)
            dist = _metadata_field(meta, "name") or name.split("-")[0]
            key = _normalize(dist)
            if key in seen:
                continue
            seen.add(key)
            try:
                with open(os.path.join(meta, "entry_points.txt"), encoding="utf-8") as f:
                    text = f.read()
            except OSError:
                continue
            version = _metadata_field(meta, "version")
            found.extend(EntryPoint(n, v, dist, version) for n, v in parse_entry_points(text, group))
    return found


def _zip_entry_points(group: str, archive: str, seen: set[str]) -> list[EntryPoint]:
    from importlib.metadata import distributions

    out: list[EntryPoint] = []
    for dist in distributions(path=[archive]):
        key = _normalize(dist.metadata["Name"] or "")
        if key in seen:
            continue
        seen.add(key)
        out.extend(
            EntryPoint(ep.name, ep.value, dist.metadata["Name"] or "", dist.version)
            for ep in dist.entry_points
            if ep.group == group
        )
    return out
