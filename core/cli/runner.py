"""``gpuscout runner``: the isolated-discovery child, serving ``GET /info`` on 127.0.0.1.

It writes nothing on stdout itself; a line meant for the parent (say, the port it bound) must be
written to ``gpuscout.cli.output.output()``, since ``sys.stdout`` leads to stderr while it runs.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from gpuscout.cli import common

if TYPE_CHECKING:
    from gpuscout.cli.common import ScoutFactory, Subcommands

DESCRIPTION = ("Serve GET /info on 127.0.0.1:PORT: each request runs one discovery and answers "
               "with the ranked devices as a JSON array (the wire format of Ollama's runner). "
               "A host starts it as a child so that a crashing driver cannot take the host down; "
               "it exits when left idle.")


def add_parser(sub: Subcommands, help: str) -> None:
    """Add ``runner`` and its options to ``gpuscout``'s parser."""
    p = common.command_parser(sub, "runner", help, DESCRIPTION)
    common.add_scout_options(p)
    p.add_argument("--port", type=int, required=True, help="port on 127.0.0.1")
    p.add_argument("--include-software", action="store_true",
                   help="serve software devices (llvmpipe) too")


def run(args: argparse.Namespace, scout_factory: ScoutFactory) -> int:
    """Serve until idle; each request is one discovery by the same Scout."""
    from gpuscout.runner import serve

    scout = common.open_scout(args, scout_factory)
    return serve(lambda: scout.discover(include_software=args.include_software).devices,
                 port=args.port)
