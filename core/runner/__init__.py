"""Isolated discovery: a child process serves ``GET /info`` on 127.0.0.1 and the host polls it.

The seed's GetDevicesFromRunner, in four parts: the host's client (``gpuscout.runner._client``:
start the child, read its port, poll it under one deadline), the parsing of its replies
(``gpuscout.runner._reply``: bounded, every failure a RunnerError), the runner itself
(``gpuscout.runner._server``: ``gpuscout runner``) and init validation
(``gpuscout.runner._validation``: each device initialised in a child that sees only it). How a
child is started, killed and reaped is ``gpuscout._host.children``'s, as for every gpuscout child.

The names below are the public ones (README, docs/containment.md).
"""

from __future__ import annotations

from gpuscout.runner._client import POLL_INTERVAL, default_command, discover_in_child, free_port, poll_runner
from gpuscout.runner._http import TOKEN_HEADER
from gpuscout.runner._reply import MAX_BODY, MAX_HEAD, MAX_PORT_LINE, RunnerError, parse_reply, read_port_line
from gpuscout.runner._server import HOST, IDLE_EXIT, TOKEN_ENV, serve
from gpuscout.runner._validation import Progress, validate_devices, validation_progress

__all__ = [
    "HOST",
    "IDLE_EXIT",
    "MAX_BODY",
    "MAX_HEAD",
    "MAX_PORT_LINE",
    "POLL_INTERVAL",
    "TOKEN_ENV",
    "TOKEN_HEADER",
    "Progress",
    "RunnerError",
    "default_command",
    "discover_in_child",
    "free_port",
    "parse_reply",
    "poll_runner",
    "read_port_line",
    "serve",
    "validate_devices",
    "validation_progress",
]
