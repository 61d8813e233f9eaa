"""``gpuscout cluster``: every node's devices in a Ray cluster, and where Ray's view disagrees."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from gpuscout.cli import common
from gpuscout.cli.output import output

if TYPE_CHECKING:
    from gpuscout.cli.common import ScoutFactory, Subcommands
    from gpuscout.cluster.inventory import Inventory, NodeResult

DEFAULT_TIMEOUT = 60.0

DESCRIPTION = ("Run gpuscout discovery once on every alive node of a Ray cluster (a zero-CPU, "
               "zero-GPU task pinned to each node, using the gpuscout installed there) and "
               "print each node's devices, the cluster's totals per model and library, and the "
               "nodes where Ray's own view (GPU count, accelerator type) differs. Nodes that are "
               "dead, time out or lack gpuscout are listed with the reason. The scout options "
               "given before the command (--plugins, --disable, --timeout) apply on every node. "
               "Needs the extra: pip install 'gpuscout[ray]'. See docs/cluster.md.")


def add_parser(sub: Subcommands, help: str) -> None:
    """Add ``cluster`` and its options to ``gpuscout``'s parser."""
    p = common.command_parser(sub, "cluster", help, DESCRIPTION)
    p.add_argument("--ray", metavar="ADDRESS", default=None,
                   help="the Ray cluster's address (host:port of its head, 'auto', or ray://); "
                        "default: RAY_ADDRESS or the cluster started on this machine")
    p.add_argument("--json", action="store_true",
                   help='one JSON object on stdout: {"nodes": [...], "summary": {...}}')
    p.add_argument("--timeout", dest="inventory_timeout", type=common.seconds,
                   default=DEFAULT_TIMEOUT, metavar="SECONDS",
                   help=f"seconds to wait for the nodes' answers; the rest are cancelled and "
                        f"reported as timed out (default {DEFAULT_TIMEOUT:g})")
    common.add_include_software(p, "keep software devices (llvmpipe) in each node's list")


def run(args: argparse.Namespace, scout_factory: ScoutFactory) -> int:
    """Inventory the cluster and print it (``scout_factory`` is unused: the nodes build their
    own Scouts from the gpuscout installed there)."""
    from gpuscout.cluster.ray import inventory

    found = inventory(args.ray, args.inventory_timeout, include_software=args.include_software,
                      plugins=args.plugins, disable=args.disable, enumerate_timeout=args.timeout)
    if args.json:
        from gpuscout.cluster.inventory import inventory_json

        common.print_json(inventory_json(found))
    else:
        _print(found, getattr(args, "color", "auto"))
    return common.SUCCESS


def node_heading(node: NodeResult) -> str:
    """``node 3ef93a9f… on vm (127.0.0.1): ok; Ray: 8 GPU, H100`` and the reason if not ok."""
    gpus = node.ray_resources.get("GPU", 0.0)
    ray_view = f"{gpus:g} GPU" + (f", {node.accelerator_type}" if node.accelerator_type else "")
    text = (f"node {node.node_id[:12]} on {node.hostname or '?'} ({node.address or '?'}): "
            f"{node.status}; Ray: {ray_view}")
    if node.reason:
        text += f" - {node.reason}"
    return common.printable(text)


def summary_lines(found: Inventory) -> list[str]:
    """The cluster summary as lines: nodes, models, memory per library, disagreements."""
    from gpuscout.sizes import human_bytes

    s = found.summary
    states = ", ".join(f"{n} {state}" for state, n in s.nodes_by_status.items() if n)
    lines = [f"Cluster: {s.nodes} node{'' if s.nodes == 1 else 's'} ({states or 'none'}), "
             f"{s.devices} device{'' if s.devices == 1 else 's'}, {found.elapsed:.1f} s"]
    lines += [f"  {m.count}x {m.library} {m.name} on {m.nodes} node{'' if m.nodes == 1 else 's'}"
              for m in s.models]
    lines += [f"  {m.library}: {human_bytes(m.free_memory)} free of {human_bytes(m.total_memory)}"
              f" on {m.devices} device{'' if m.devices == 1 else 's'}" for m in s.memory]
    lines += [f"Ray disagrees on node {d.node_id[:12]} ({d.hostname}): {d.detail}"
              for d in s.disagreements]
    return [common.printable(line) for line in lines]


def _print(found: Inventory, color: str) -> None:
    from gpuscout.cli.table import print_discovery

    stream = output()
    for node in found.nodes:
        stream.write(f"{node_heading(node)}\n")
        for note in node.notes:
            stream.write(f"  note: {common.printable(note)}\n")
        for problem in node.problems():
            stream.write(f"  problem: {common.printable(problem)}\n")
        if node.discovery is not None:
            stream.flush()
            print_discovery(node.discovery, color=color)
        stream.write("\n")
    stream.write("".join(f"{line}\n" for line in summary_lines(found)))
