"""Reading what a runner says: the ``{"port": N}`` line it starts its stdout with, and its HTTP
reply over a plain socket. Bounded, under one deadline.

A runner may be hostile or broken, so nothing here trusts it: the port line is capped at
MAX_PORT_LINE bytes, the status line and headers at MAX_HEAD and the body at MAX_BODY, every
blocking call gets only what is left of the caller's deadline, and every malformed reply is a
RunnerError that quotes it.
"""

from __future__ import annotations

import json
import os
import re
import selectors
import socket
import subprocess
import time
from typing import NamedTuple

from gpuscout._host.children import exit_code, exit_text
from gpuscout.errors import GpuscoutError

#: Most bytes of status line and headers the host reads from a runner.
MAX_HEAD = 64 * 1024
#: Most bytes of body the host reads from a runner (a device list is a few KiB).
MAX_BODY = 16 * 1024 * 1024

_STATUS_LINE = re.compile(rb"HTTP/[0-9]\.[0-9] ([0-9]{3})(?: [^\r\n]*)?")
_HEADER_LINE = re.compile(rb"([!#$%&'*+.^_`|~0-9A-Za-z-]+):[ \t]*([^\r\n\x00]*?)[ \t]*")
_HEAD_END = re.compile(rb"\r?\n\r?\n")
_DIGITS = re.compile(r"[0-9]+")
#: Most bytes the host reads from the runner's stdout looking for its ``{"port": N}`` line.
MAX_PORT_LINE = 4096
#: After a broken reply, how long to wait for the child to exit so that a crash is named as such.
CRASH_GRACE = 0.05

_RECV_SIZE = 64 * 1024


class RunnerError(GpuscoutError):
    """Isolated discovery failed: crash, 404, error status, or no answer before the deadline."""


class ReplyHead(NamedTuple):
    """The status line and headers of a runner's reply."""

    status: int
    #: Header names in lower case; a repeated header keeps its last value.
    headers: dict[str, str]
    #: The announced Content-Length, or None to read the body until the runner closes.
    length: int | None


def show(data: bytes | bytearray) -> str:
    """``data`` quoted as a bytes literal, cut after 80 bytes."""
    return repr(bytes(data[:80])) + ("..." if len(data) > 80 else "")


def _too_long(size: int | str) -> RunnerError:
    return RunnerError(f"runner reply body of {size} bytes is over the limit of {MAX_BODY} bytes")


def find_head_end(data: bytes | bytearray, start: int = 0) -> tuple[int, int] | None:
    """(end of headers, start of body) in ``data``, None until the blank line, RunnerError past
    MAX_HEAD. ``start``: how far an earlier call already looked."""
    match = _HEAD_END.search(data, max(0, start - 3))
    if match is None or match.start() > MAX_HEAD:
        if match is not None or len(data) > MAX_HEAD:
            raise RunnerError(f"runner reply headers are longer than {MAX_HEAD} bytes")
        return None
    return match.start(), match.end()


def parse_head(head: bytes) -> ReplyHead:
    """Status line and header lines (without the blank line) of a reply; RunnerError if malformed."""
    lines = [line.removesuffix(b"\r") for line in head.split(b"\n")]
    status = _STATUS_LINE.fullmatch(lines[0])
    if status is None:
        raise RunnerError(f"runner reply has a bad status line: {show(lines[0])}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        header = _HEADER_LINE.fullmatch(line)
        if header is None:
            raise RunnerError(f"runner reply has a bad header line: {show(line)}")
        name, value = header[1].decode("ascii").lower(), header[2].decode("latin-1")
        if name == "content-length" and headers.get(name, value) != value:
            raise RunnerError(f"runner reply has two Content-Lengths: {headers[name]!r} and {value!r}")
        headers[name] = value
    if "transfer-encoding" in headers:
        # A server may not use it in reply to HTTP/1.0, so the body would be misread.
        raise RunnerError(
            f"runner reply uses Transfer-Encoding {headers['transfer-encoding']!r} "
            "in reply to an HTTP/1.0 request"
        )
    return ReplyHead(int(status[1]), headers, _content_length(headers.get("content-length")))


def _content_length(value: str | None) -> int | None:
    if value is None:
        return None
    if _DIGITS.fullmatch(value) is None:
        raise RunnerError(f"runner reply has a bad Content-Length: {value[:40]!r}")
    digits = value.lstrip("0") or "0"
    # Checked before int(): Python refuses to convert over 4300 digits.
    if len(digits) > 12 or int(digits) > MAX_BODY:
        raise _too_long(digits if len(digits) <= 40 else digits[:40] + "...")
    return int(digits)


def parse_reply(data: bytes) -> tuple[int, bytes]:
    """Status and body of a reply read until the runner closed or the body was whole; bytes past
    the Content-Length are ignored. Raises RunnerError, and only that, for anything else."""
    head, body = parse_whole_reply(data)
    return head.status, body


def parse_whole_reply(data: bytes) -> tuple[ReplyHead, bytes]:
    """``parse_reply`` with the whole head (status and headers)."""
    if not data:
        raise RunnerError("runner closed the connection without a reply")
    where = find_head_end(data)
    if where is None:
        raise RunnerError(f"runner closed the connection inside the reply headers ({len(data)} bytes)")
    head = parse_head(data[: where[0]])
    body = data[where[1] :]
    if head.length is None:
        if len(body) > MAX_BODY:
            raise _too_long(len(body))
        return head, body
    if len(body) < head.length:
        raise RunnerError(f"runner closed the connection after {len(body)} of {head.length} body bytes")
    return head, body[: head.length]


def remaining(deadline: float) -> float:
    """Seconds left until ``deadline`` (monotonic); TimeoutError once it has passed."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("deadline passed")
    return left


def read_reply(sock: socket.socket, deadline: float) -> tuple[ReplyHead, bytes]:
    """A whole reply from ``sock`` (a monotonic ``deadline`` for all of it). TimeoutError: the
    deadline passed; ConnectionAbortedError: closed before a byte; RunnerError: a bad reply."""
    data = bytearray()
    body_at: int | None = None
    whole: int | None = None  # length of the complete reply, once a Content-Length said so
    while True:
        sock.settimeout(remaining(deadline))
        chunk = sock.recv(_RECV_SIZE)
        if not chunk:
            if not data:  # as http.client does: a transport failure, polled past
                raise ConnectionAbortedError("runner closed the connection without a reply")
            return parse_whole_reply(bytes(data))
        scanned = len(data)
        data += chunk
        if body_at is None:
            where = find_head_end(data, scanned)
            if where is None:
                continue
            body_at = where[1]
            length = parse_head(bytes(data[: where[0]])).length
            whole = None if length is None else body_at + length
        if whole is not None and len(data) >= whole:
            return parse_whole_reply(bytes(data[:whole]))
        if len(data) - body_at > MAX_BODY:
            raise _too_long(f"more than {len(data) - body_at}")


def timed_out(timeout: float, last_problem: str) -> RunnerError:
    """The error for a deadline passed, naming the last problem seen."""
    last = f"; last attempt: {last_problem}" if last_problem else ""
    return RunnerError(f"failed to finish discovery before timeout ({timeout:g} s){last}")


def read_port_line(child: subprocess.Popen[bytes], deadline: float, timeout: float) -> int:
    """The port in the ``{"port": N}`` line that starts the child's stdout (a pipe), read under
    ``deadline`` (a monotonic time; ``timeout`` is what the message names). Raises RunnerError
    for a child that exits, closes its stdout or prints anything else first."""
    assert child.stdout is not None
    fd = child.stdout.fileno()
    data = bytearray()
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while (end := data.find(b"\n")) < 0:
            if len(data) > MAX_PORT_LINE:
                raise RunnerError(
                    f"runner's first stdout line is longer than {MAX_PORT_LINE} bytes: {show(data)}"
                )
            left = deadline - time.monotonic()
            if left <= 0 or not selector.select(left):
                if time.monotonic() >= deadline:
                    printed = f" (it printed {show(data)})" if data else ""
                    raise timed_out(timeout, f"no port announced on stdout{printed}")
                continue
            chunk = os.read(fd, MAX_PORT_LINE + 1 - len(data))
            if not chunk:
                code = exit_code(child, CRASH_GRACE)
                what = "runner closed its stdout" if code is None else f"runner {exit_text(code)}"
                raise RunnerError(f"{what} before announcing its port; it printed {show(data)}")
            data += chunk
    line = bytes(data[:end]).removesuffix(b"\r")
    try:
        announced = json.loads(line)
    except (ValueError, RecursionError):
        announced = None
    port = announced.get("port") if isinstance(announced, dict) else None
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise RunnerError(f'runner\'s first stdout line is not {{"port": N}} with N in 1-65535: {show(line)}')
    return port


__all__ = [
    "CRASH_GRACE",
    "MAX_BODY",
    "MAX_HEAD",
    "MAX_PORT_LINE",
    "ReplyHead",
    "RunnerError",
    "find_head_end",
    "parse_head",
    "parse_reply",
    "parse_whole_reply",
    "read_port_line",
    "read_reply",
    "remaining",
    "show",
    "timed_out",
]
