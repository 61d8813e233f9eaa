"""The plain form of ``gpuscout list`` and ``gpuscout plugins`` (what a pipe gets): a header
line, then one line per device or plugin, fields separated by one tab; no value holds a tab or a
line break, and an unknown one is ``-``. After the devices, each dropped device is a line starting
with ``# dropped``, and the last line is ``System memory: ...``. Also the summary and dropped-device
lines that the terminal table prints under it (``gpuscout.cli._render.table``). No rich here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from gpuscout._records.results import DUPLICATE_REASON
from gpuscout._selection.numbering import selector_names
from gpuscout.cli._common import printable
from gpuscout.cli._render.labels import (
    compute_label,
    devices_free_of_total,
    driver_label,
    integrated_label,
    link_label,
    numa_label,
    system_line,
)
from gpuscout.sizes import human_bytes

if TYPE_CHECKING:
    from gpuscout._records.results import Discovery, Dropped, PluginReport

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
    # Last, so that the columns before it keep their places for cut and awk.
    "selector",
)
DROPPED_COLUMNS = ("# dropped", "library", "id", "description", "pci_id", "reason")
PLUGIN_COLUMNS = ("name", "status", "devices", "ms", "version", "distribution", "error/note")


# -- values ---------------------------------------------------------------------------------------


def _plain(value: object) -> str:
    """One field of the plain form: printable, no tab, ``-`` when empty."""
    text = printable(value).replace("\t", " ")
    return text or "-"


def summary_line(found: Discovery) -> str:
    """``2 devices: 1 CUDA, 1 ROCm; 104.0 GiB free of 112.0 GiB; 1 dropped`` (a free figure
    that is unknown is never added in: see ``gpuscout.cli._render.labels``)."""
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


def dropped_lines(found: Discovery) -> list[str]:
    """A line per dropped device, ``dropped: Vulkan 1 NVIDIA GeForce RTX 4090 (duplicate of #0
    cuda:0)``, its twin named as the table names it (rank and selector) when the twin is listed;
    those of one library, name and reason said once (``dropped: ROCm 0, 1, 4 AMD Instinct MI300X
    OAM (hidden by ROCR_VISIBLE_DEVICES=2,3)``), in the order each first appears."""
    groups: dict[tuple[str, str, str], list[str]] = {}
    for index in range(len(found.dropped)):
        library, ident, what, why = _dropped_parts(found, index)
        groups.setdefault((library, what, why), []).append(ident)
    return [
        printable(f"dropped: {library} {', '.join(idents)} {what} ({why})")
        for (library, what, why), idents in groups.items()
    ]


def _dropped_parts(found: Discovery, index: int) -> tuple[str, str, str, str]:
    """(library, id, description, reason with its twin) of ``found.dropped[index]``."""
    drop = found.dropped[index]
    d = drop.device
    of = drop.duplicate_of
    listed = [i for i, t in enumerate(found.devices) if of is not None and t.device_id == of]
    if listed:
        twin = f"#{listed[0]} {selector_names(found.devices, found.numbering)[listed[0]]}"
        said = f" of {twin}" if drop.reason == DUPLICATE_REASON else f", the same card as {twin}"
    else:
        said = _twin_of(drop)
    return d.library, d.id, d.description or d.name, f"{drop.reason}{said}"


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
    selectors = selector_names(found.devices, found.numbering)
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
                integrated_label(d),
                numa_label(d),
                link_label(d),
                "; ".join(notes),
                selectors[rank],
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
    notes = [_plain(f"System memory note: {n}") for n in found.system.notes]
    return "".join(f"{line}\n" for line in [*lines, system_line(found.system), *notes])


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
