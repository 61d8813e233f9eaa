"""``gpuscout topology``: where each device sits and how the devices connect, for a person.

Three parts: the devices by NUMA node (with the CPUs local to each node, and each device's
PCIe link, with the note of one below its maximum), then the peers as a matrix as
``nvidia-smi topo -m`` shows it (rows and columns are rank positions, cells the kind of path),
then the legend of the kinds the matrix holds. What a pair's kind is, and which devices share
a node, is the library's decision (``gpuscout._discovery.links``); this module only lays it out.

On a terminal the text fits its width: a description is cut with ``…``, a note wraps between
words, and a matrix too wide becomes one line per device listing its peers by kind. In a pipe
nothing is cut or wrapped. ``--json`` writes the same facts as one object.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from gpuscout.cli import _common as common
from gpuscout.cli._output import output

if TYPE_CHECKING:
    from gpuscout._discovery.links import Topology
    from gpuscout._records.device import DeviceInfo
    from gpuscout.cli._common import ScoutFactory, Subcommands

DESCRIPTION = (
    "Run one discovery and show where each device sits: the devices by NUMA node with the "
    "CPUs local to each, each device's PCIe link (and a note when it runs below its "
    "maximum), and a matrix of how each pair connects, as nvidia-smi topo -m shows it: "
    "NVLink, xGMI or another direct link where a plugin reports one, else the path through "
    "the host (see the legend). Devices are named by rank position, the selector N. Exit 0 "
    "also when nothing is found, 5 when every plugin that ran failed or timed out."
)
#: Spaces between the matrix's columns, the most and the fewest tried.
GAPS = (2, 1)


def add_parser(sub: Subcommands, help: str) -> None:
    """Add ``topology`` and its options to ``gpuscout``'s parser."""
    p = common.command_parser(sub, "topology", help, DESCRIPTION, color=False)
    common.add_scout_options(p)
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")
    common.add_include_software(
        p, "place software devices (llvmpipe) too, as list --include-software ranks them"
    )


def run(args: argparse.Namespace, scout_factory: ScoutFactory) -> int:
    """Discover, then print the devices by NUMA node, the peer matrix and its legend."""
    from gpuscout._discovery.links import topology

    scout = common.open_scout(args, scout_factory)
    found = scout.discover(include_software=args.include_software, isolated=args.isolated)
    common.warn_failed_plugins(found.plugins)
    common.warn_budgets(found, args)
    shape = topology(found.devices)
    if args.json:
        common.print_json(as_json(shape))
    else:
        from gpuscout.cli._render.hints import terminal_width

        output().write(render(shape, terminal_width(output())))
    if not found.devices:
        from gpuscout.cli._render.hints import again_for, print_for

        print_for(found, scout.env, listed=False, again=again_for(scout))
    return common.PLUGINS_FAILED if common.every_plugin_failed(found.plugins) else common.SUCCESS


def as_json(shape: Topology) -> dict[str, Any]:
    """The topology as plain data: devices (rank, ids, node, CPUs, link), nodes, matrix, legend."""
    from gpuscout._machine.topology import below_maximum, describe

    def device(rank: int, d: DeviceInfo) -> dict[str, Any]:
        link = d.pcie_link
        return {
            "rank": rank,
            "library": d.library,
            "id": d.id,
            "description": d.description or d.name,
            "pci_id": d.pci_id or None,
            "numa_node": d.numa_node,
            "local_cpus": d.local_cpus or None,
            "link": (describe(link) or None) if link is not None else None,
            "link_below_maximum": below_maximum(link) if link is not None else False,
        }

    return {
        "devices": [device(i, d) for i, d in enumerate(shape.devices)],
        "numa_nodes": [
            {"node": n.node, "cpus": n.cpus or None, "devices": list(n.devices)} for n in shape.nodes
        ],
        "matrix": [list(row) for row in shape.matrix],
        "legend": dict(shape.legend),
    }


def render(shape: Topology, width: int | None) -> str:
    """The text of ``shape`` for a terminal ``width`` columns wide (None: a pipe, never cut)."""
    from gpuscout._discovery.links import SELF

    if not shape.devices:
        return "no devices found\n"
    lines = ["Devices by NUMA node"]
    lines += _nodes(shape, width)
    lines += ["", "Peers (rows and columns: rank positions)"]
    matrix = _matrix(shape, width)
    lines += matrix or _peer_lines(shape, width)
    lines += ["", "Legend"]
    legend = [(code, meaning) for code, meaning in shape.legend if matrix or code != SELF]
    code_width = max(len(code) for code, _ in legend)
    for code, meaning in legend:
        lines += _wrap(f"  {code.ljust(code_width)}  {meaning}", width, " " * (code_width + 4))
    return "".join(f"{common.printable(line)}\n" for line in lines)


def _nodes(shape: Topology, width: int | None) -> list[str]:
    from gpuscout._machine.topology import link_note
    from gpuscout.cli._render.labels import link_label

    devices = shape.devices
    rows = [
        [str(i), d.library, d.pci_id or "-", link_label(d), d.description or d.name or "-"]
        for i, d in enumerate(devices)
    ]
    header = ["#", "library", "PCI id", "link", "description"]
    widths = [max(len(row[c]) for row in (header, *rows)) for c in range(4)]
    head = "  " + "  ".join(header[c].ljust(widths[c]) for c in range(4))
    lines = [head + "  " + header[4] if width is None or len(head) + 13 <= width else head.rstrip()]
    for node in shape.nodes:
        if node.node < 0:
            lines.append(
                "NUMA node not known" if len(shape.nodes) > 1 else "NUMA node not known (one node or none)"
            )
        else:
            lines.append(f"NUMA node {node.node}, CPUs {node.cpus or 'not known'}")
        for i in node.devices:
            row = rows[i]
            head = "  " + "  ".join(row[c].ljust(widths[c]) for c in range(4)) + "  "
            if width is None or len(head) + len(row[4]) <= width:
                lines.append(head + row[4])
            else:  # the description on a line of its own rather than cut to a few letters
                lines += [head.rstrip(), "     " + _cut(row[4], width - 5)]
            note = link_note(devices[i].pcie_link)
            if note:
                lines += _wrap(f"     note: {note}", width, " " * 11)
    return lines


def _matrix(shape: Topology, width: int | None) -> list[str]:
    """The matrix, or [] when it is wider than ``width`` even with one space between columns."""
    n = len(shape.devices)
    label = len(str(n - 1))
    cell = max(max(len(kind) for row in shape.matrix for kind in row), label)
    for gap in GAPS:
        if width is None or label + n * (gap + cell) <= width:
            pad = " " * gap
            header = " " * label + "".join(pad + str(j).ljust(cell) for j in range(n))
            body = [
                str(i).rjust(label) + "".join(pad + kind.ljust(cell) for kind in row)
                for i, row in enumerate(shape.matrix)
            ]
            return [line.rstrip() for line in (header, *body)]
    return []


def _peer_lines(shape: Topology, width: int | None) -> list[str]:
    """One line per device: the other devices by kind of path (``0: NVLINK 1 2 3; SYS 4``)."""
    lines: list[str] = []
    label = len(str(len(shape.devices) - 1))
    for i, row in enumerate(shape.matrix):
        by_kind: dict[str, list[str]] = {}
        for j, kind in enumerate(row):
            if j != i:
                by_kind.setdefault(kind, []).append(str(j))
        text = (
            "; ".join(f"{kind} {' '.join(others)}" for kind, others in by_kind.items()) or "no other device"
        )
        lines += _wrap(f"{str(i).rjust(label)}: {text}", width, " " * (label + 2))
    return lines


def _cut(text: str, room: int | None) -> str:
    """``text`` in ``room`` characters, cut with ``…``; whole when there is no limit."""
    if room is None or len(text) <= room:
        return text
    return text[: max(room - 1, 0)] + "…" if room > 1 else ""


def _wrap(text: str, width: int | None, indent: str) -> list[str]:
    """``text`` wrapped between words to ``width`` (None: one line), continuations indented."""
    if width is None or len(text) <= width:
        return [text]
    from gpuscout.cli._render.wrap import wrap_words

    return wrap_words(text, width, indent, narrowest=10)
