"""``gpuscout runner``: the isolated-discovery child, serving ``GET /info`` on 127.0.0.1.

Its one line on stdout, ``{"port": N}`` (the port it bound; with ``--port 0`` one the system
picked), is written to ``gpuscout.cli._output.output()``, since ``sys.stdout`` leads to stderr
while it runs. The protocol (token header, limits, lifetime) is described in
``gpuscout.runner._server``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import threading
from types import FrameType
from typing import TYPE_CHECKING

from gpuscout.cli import _common as common

if TYPE_CHECKING:
    from gpuscout.cli._common import ScoutFactory, Subcommands
    from gpuscout.scout import Scout

DESCRIPTION = (
    "Serve GET /info (and HEAD) on 127.0.0.1:PORT: each request runs one discovery "
    "and answers with the ranked devices as a JSON array (the wire format of Ollama's runner). "
    "A host starts it as a child so that a crashing driver cannot take the host down. "
    'The first line on stdout is {"port": N}, the port it listens on (with --port 0, '
    "one the system picked). Every reply carries the token found in "
    "GPUSCOUT_RUNNER_TOKEN in an X-Gpuscout-Token header. It exits on SIGTERM, when "
    "its parent dies and when left idle, with exit 0 each time (Ctrl-C too: "
    "stopping is how a server ends)."
)


def add_parser(sub: Subcommands, help: str) -> None:
    """Add ``runner`` and its options to ``gpuscout``'s parser."""
    from gpuscout.runner._server import IDLE_EXIT, READ_TIMEOUT

    p = common.command_parser(sub, "runner", help, DESCRIPTION, color=False)
    common.add_scout_options(p)
    p.add_argument(
        "--port", type=int, required=True, help="port on 127.0.0.1; 0 lets the system pick a free one"
    )
    common.add_include_software(p, "serve software devices (llvmpipe) too")
    p.add_argument(
        "--idle-exit",
        type=common.seconds,
        default=IDLE_EXIT,
        metavar="SECONDS",
        help=f"exit after this long without a connection (default {IDLE_EXIT:g})",
    )
    p.add_argument(
        "--read-timeout",
        type=common.seconds,
        default=READ_TIMEOUT,
        metavar="SECONDS",
        help="cut off a connection that has not sent its whole request this long "
        f"after connecting (default {READ_TIMEOUT:g})",
    )


def _announce(port: int) -> None:
    from gpuscout.cli._output import output

    stream = output()
    stream.write(json.dumps({"port": port}) + "\n")
    stream.flush()  # a pipe is block-buffered; the parent is waiting for this line


def _leave(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0)


def _load(args: argparse.Namespace, scout_factory: ScoutFactory, parent: int) -> Scout:
    """The Scout, its plugins loaded. SIGTERM or the parent's death while plugins load (which
    may take seconds) ends the runner with 0, as it does once it serves."""
    from gpuscout._host.children import die_with_parent

    on_main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _leave) if on_main else None
    try:
        die_with_parent()
        if os.getppid() != parent:
            raise SystemExit(0)
        return common.open_scout(args, scout_factory)
    finally:
        if on_main and previous is not None:
            signal.signal(signal.SIGTERM, previous)


def run(args: argparse.Namespace, scout_factory: ScoutFactory) -> int:
    """Serve until SIGTERM, the parent's death or idleness; each request is one discovery by
    the same Scout."""
    from gpuscout.runner._server import TOKEN_ENV, check_token, serve

    parent = os.getppid()
    # The token is for the reply header alone: the Scout (os.environ) and its plugins never see it.
    token = check_token(os.environ.pop(TOKEN_ENV, None))  # before anything is served
    scout = _load(args, scout_factory, parent)
    isolated = bool(getattr(args, "isolated", False))
    return serve(
        lambda: scout.discover(include_software=args.include_software, isolated=isolated).devices,
        port=args.port,
        idle_exit=args.idle_exit,
        token=token,
        parent=parent,
        announce=_announce,
        read_timeout=args.read_timeout,
    )
