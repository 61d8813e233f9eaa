"""``gpuscout cluster``: every node's devices in a Ray cluster, and where Ray's view disagrees.

Exit codes (also in docs/cluster.md): 0 the inventory ran and Ray agrees with gpuscout on every
node that answered; ``RAY_DISAGREES`` (4) Ray's view differs on at least one node (``--exit-zero``
makes that 0 too); 2 the inventory could not run (Ray missing, a malformed or unreachable
address) or a usage error; 130 interrupted.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, TextIO

from gpuscout.cli import _common as common
from gpuscout.cli._output import output

if TYPE_CHECKING:
    from gpuscout.cli._common import ScoutFactory, Subcommands
    from gpuscout.cluster.inventory import Inventory, NodeResult

#: The nodes' deadline (``--node-timeout``) when none is given: this, or the plugins'
#: deadline plus ``NODE_ALLOWANCE`` when that is longer.
DEFAULT_TIMEOUT = 60.0
NODE_ALLOWANCE = 30.0
#: The exit status when Ray's view disagrees with gpuscout's on a node (unless ``--exit-zero``).
RAY_DISAGREES = 4

DESCRIPTION = (
    "Run gpuscout discovery once on every alive node of a Ray cluster (a zero-CPU, "
    "zero-GPU task pinned to each node, using the gpuscout installed there) and "
    "print each node's devices, the cluster's totals per model and library, and the "
    "nodes where Ray's own view (GPU count, accelerator type) differs. Nodes that are "
    "dead, time out or lack gpuscout are listed with the reason. The scout options "
    "(--plugins, --disable, --timeout), before or after the command, apply on every "
    "node; --node-timeout bounds the wait for the nodes' answers. Exit 0, or "
    f"{RAY_DISAGREES} when Ray disagrees on a node (0 with --exit-zero), 2 when the "
    "inventory cannot run. Needs the extra: pip install 'gpuscout[ray]'. See "
    "docs/cluster.md."
)


def add_parser(sub: Subcommands, help: str) -> None:
    """Add ``cluster`` and its options to ``gpuscout``'s parser."""
    p = common.command_parser(sub, "cluster", help, DESCRIPTION)
    common.add_scout_options(p)
    p.add_argument(
        "--ray",
        metavar="ADDRESS",
        default=None,
        help="the Ray cluster's address (host:port of its head, 'auto', or ray://); "
        "default: RAY_ADDRESS or the cluster started on this machine",
    )
    p.add_argument(
        "--json", action="store_true", help='one JSON object on stdout: {"nodes": [...], "summary": {...}}'
    )
    p.add_argument(
        "--node-timeout",
        type=common.seconds,
        default=None,
        metavar="SECONDS",
        help=f"seconds to wait for the nodes' answers; the rest are cancelled and "
        f"reported as timed out (default {DEFAULT_TIMEOUT:g}, or the plugins' "
        f"--timeout plus {NODE_ALLOWANCE:g} when longer)",
    )
    p.add_argument(
        "--exit-zero",
        action="store_true",
        help=f"exit 0 even when Ray disagrees on a node (default: exit {RAY_DISAGREES})",
    )
    common.add_include_software(p, "keep software devices (llvmpipe) in each node's list")


def node_deadline(args: argparse.Namespace) -> float:
    """``--node-timeout``, else ``DEFAULT_TIMEOUT`` or the plugins' deadline plus
    ``NODE_ALLOWANCE``, whichever is longer (a node needs its plugins' time and its start)."""
    given: float | None = getattr(args, "node_timeout", None)
    if given is not None:
        return given
    return max(DEFAULT_TIMEOUT, getattr(args, "timeout", common.DEFAULT_TIMEOUT) + NODE_ALLOWANCE)


def run(args: argparse.Namespace, scout_factory: ScoutFactory) -> int:
    """Inventory the cluster and print it (``scout_factory`` is unused: the nodes build their
    own Scouts from the gpuscout installed there)."""
    from gpuscout.cluster.ray import inventory

    root = getattr(args, "root", common.DEFAULT_ROOT)
    if getattr(args, "replay", None) is not None or root != common.DEFAULT_ROOT:
        raise common.UsageError(
            "cluster: --root and --replay describe this machine; each node discovers its own devices"
        )
    deadline = node_deadline(args)
    with _progress(sys.stderr, args.ray, deadline):
        found = inventory(
            args.ray,
            deadline,
            include_software=args.include_software,
            plugins=args.plugins,
            disable=args.disable,
            enumerate_timeout=args.timeout,
        )
    if args.json:
        from gpuscout.cluster.inventory import inventory_json

        common.print_json(inventory_json(found))
    else:
        _print(found, getattr(args, "color", "auto"))
    if found.summary.disagreements and not args.exit_zero:
        return RAY_DISAGREES
    return common.SUCCESS


@contextmanager
def _progress(stream: TextIO, address: str | None, deadline: float) -> Iterator[None]:
    """While the block runs, one line on ``stream`` redrawn each second, when it is a terminal:
    ``gpuscout: cluster: waiting for the nodes' answers (3 s, at most 60 s)``; erased after.
    The line stays narrower than the terminal (the address left out, then a shorter wording,
    then cut): a line the terminal wraps is not redrawn by a carriage return, and its start
    stays behind."""
    from gpuscout.cli._render.hints import terminal_width

    width = terminal_width(stream)
    if width is None:
        yield
        return
    where = f" of {common.printable(address)}" if address else ""
    done = threading.Event()
    start = time.monotonic()

    def draw() -> None:
        while True:
            elapsed = time.monotonic() - start
            times = f" ({elapsed:.0f} s, at most {deadline:g} s)"
            forms = (
                f"gpuscout: cluster: waiting for the nodes{where}{times}",
                f"gpuscout: cluster: waiting for the nodes{times}",
                f"gpuscout: waiting for the nodes ({elapsed:.0f} s of {deadline:g} s)",
            )
            line = next((form for form in forms if len(form) < width), forms[-1][: max(width - 2, 0)] + "…")
            stream.write(f"\r{line}\x1b[K")
            stream.flush()
            if done.wait(1.0):
                return

    drawer = threading.Thread(target=draw, name="gpuscout-cluster-progress", daemon=True)
    drawer.start()
    try:
        yield
    finally:
        done.set()
        drawer.join(2.0)
        stream.write("\r\x1b[K")
        stream.flush()


def node_heading(node: NodeResult) -> str:
    """``node 3ef93a9f… on vm (127.0.0.1): ok; Ray: 8 GPU, H100`` and the reason if not ok."""
    gpus = node.ray_resources.get("GPU", 0.0)
    ray_view = f"{gpus:g} GPU" + (f", {node.accelerator_type}" if node.accelerator_type else "")
    text = (
        f"node {node.node_id[:12]} on {node.hostname or '?'} ({node.address or '?'}): "
        f"{node.status}; Ray: {ray_view}"
    )
    if node.reason:
        text += f" - {node.reason}"
    return common.printable(text)


def summary_lines(found: Inventory) -> list[str]:
    """The cluster summary as lines: nodes, models, memory per library (an unknown free figure
    never counted as free), disagreements."""
    from gpuscout.cli._render.labels import free_of_total

    s = found.summary
    states = ", ".join(f"{n} {state}" for state, n in s.nodes_by_status.items() if n)
    lines = [
        f"Cluster: {s.nodes} node{'' if s.nodes == 1 else 's'} ({states or 'none'}), "
        f"{s.devices} device{'' if s.devices == 1 else 's'}, {found.elapsed:.1f} s"
    ]
    lines += [
        f"  {m.count}x {m.library} {m.name} on {m.nodes} node{'' if m.nodes == 1 else 's'}" for m in s.models
    ]
    for m in s.memory:
        memory = free_of_total(
            m.free_memory, m.total_memory, m.free_unknown_devices, m.free_unknown_total_memory
        )
        lines.append(f"  {m.library}: {memory} on {m.devices} device{'' if m.devices == 1 else 's'}")
    lines += [f"Ray disagrees on node {d.node_id[:12]} ({d.hostname}): {d.detail}" for d in s.disagreements]
    return [common.printable(line) for line in lines]


def _print(found: Inventory, color: str) -> None:
    from gpuscout.cli._render.hints import terminal_width
    from gpuscout.cli._render.table import print_discovery

    stream = output()
    width = terminal_width(stream)
    for node in found.nodes:
        stream.write(_fit(node_heading(node), width, "  "))
        for note in node.notes:
            stream.write(_fit(f"  note: {common.printable(note)}", width, "        "))
        for problem in node.problems():
            stream.write(_fit(f"  problem: {common.printable(problem)}", width, "           "))
        if node.discovery is not None:
            stream.flush()
            print_discovery(node.discovery, color=color)
        stream.write("\n")
    stream.write("".join(_fit(line, width, "    ") for line in summary_lines(found)))


def _fit(line: str, width: int | None, indent: str) -> str:
    """``line`` and its newline; on a terminal (``width``) wrapped between words to it, so that
    the terminal never breaks a word (``Ray: 0 GP⏎U``), continuation lines under ``indent``."""
    if width is None or len(line) <= width:
        return line + "\n"
    from gpuscout.cli._render.wrap import wrap_words

    return "\n".join(wrap_words(line, width, indent)) + "\n"
