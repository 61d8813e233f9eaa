"""Isolated discovery: a child process serves ``GET /info`` on 127.0.0.1 and the host polls it.

The seed's GetDevicesFromRunner: the host starts the child with the environment it wants the
child to have, polls every 10 ms until a deadline, and tells a crash, a 404 (a runner without
/info), another status and an unparsable reply apart. The child is always reaped. Init validation
runs each device that needs it in such a child, with only that device visible.

The child may be hostile or broken, so the host speaks HTTP over a plain socket: one deadline
covers the whole exchange, replies are bounded (MAX_HEAD, MAX_BODY), every failure is a
RunnerError, and the child's whole process group is killed when the call ends.
"""

from __future__ import annotations

import json
import math
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, NamedTuple

from gpuscout.errors import GpuscoutError
from gpuscout.log import get_logger
from gpuscout.records import DeviceInfo
from gpuscout.results import Dropped

_log = get_logger(__name__)

HOST = "127.0.0.1"
POLL_INTERVAL = 0.010
#: A runner nobody asks anything for this long exits by itself (no orphans).
IDLE_EXIT = 60.0
#: Most bytes of status line and headers the host reads from a runner.
MAX_HEAD = 64 * 1024
#: Most bytes of body the host reads from a runner (a device list is a few KiB).
MAX_BODY = 16 * 1024 * 1024
#: Longer timeouts are clamped to this, which sockets and waits still accept (about 11 days).
MAX_TIMEOUT = 1e6
#: After a broken reply, how long to wait for the child to exit so that a crash is named as such.
CRASH_GRACE = 0.05
#: How long to wait for the child to die after SIGKILL; one stuck in the kernel cannot be reaped.
REAP_GRACE = 5.0

# HTTP/1.0 so that a conforming server neither chunks the body nor keeps the connection open.
_REQUEST = "GET /info HTTP/1.0\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n\r\n"
_STATUS_LINE = re.compile(rb"HTTP/[0-9]\.[0-9] ([0-9]{3})(?: [^\r\n]*)?")
_HEADER_LINE = re.compile(rb"([!#$%&'*+.^_`|~0-9A-Za-z-]+):[ \t]*([^\r\n\x00]*?)[ \t]*")
_HEAD_END = re.compile(rb"\r?\n\r?\n")
_DIGITS = re.compile(r"[0-9]+")
_RECV_SIZE = 64 * 1024
# Python ignores SIGPIPE, but a host embedding it may not; a closed peer must be an OSError.
_SEND_FLAGS = getattr(socket, "MSG_NOSIGNAL", 0)


class RunnerError(GpuscoutError):
    """Isolated discovery failed: crash, 404, error status, or no answer before the deadline."""


class ReplyHead(NamedTuple):
    """The status line and headers of a runner's reply."""

    status: int
    #: Header names in lower case; a repeated header keeps its last value.
    headers: dict[str, str]
    #: The announced Content-Length, or None to read the body until the runner closes.
    length: int | None


def free_port() -> int:
    """A port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def default_command(port: int) -> list[str]:
    """This Python running ``gpuscout runner`` on ``port``."""
    return [sys.executable, "-m", "gpuscout", "runner", "--port", str(port)]


def describe_exit(code: int) -> str:
    """``exit code 3`` for an exit, ``SIGSEGV`` for a death by signal (a negative Popen code)."""
    if code >= 0:
        return f"exit code {code}"
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


def _show(data: bytes) -> str:
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
        raise RunnerError(f"runner reply has a bad status line: {_show(lines[0])}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        header = _HEADER_LINE.fullmatch(line)
        if header is None:
            raise RunnerError(f"runner reply has a bad header line: {_show(line)}")
        name, value = header[1].decode("ascii").lower(), header[2].decode("latin-1")
        if name == "content-length" and headers.get(name, value) != value:
            raise RunnerError(f"runner reply has two Content-Lengths: {headers[name]!r} and {value!r}")
        headers[name] = value
    if "transfer-encoding" in headers:
        # A server may not use it in reply to HTTP/1.0, so the body would be misread.
        raise RunnerError(f"runner reply uses Transfer-Encoding {headers['transfer-encoding']!r} "
                          "in reply to an HTTP/1.0 request")
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
    if not data:
        raise RunnerError("runner closed the connection without a reply")
    where = find_head_end(data)
    if where is None:
        raise RunnerError(f"runner closed the connection inside the reply headers ({len(data)} bytes)")
    head = parse_head(data[:where[0]])
    body = data[where[1]:]
    if head.length is None:
        if len(body) > MAX_BODY:
            raise _too_long(len(body))
        return head.status, body
    if len(body) < head.length:
        raise RunnerError(f"runner closed the connection after {len(body)} of {head.length} body bytes")
    return head.status, body[:head.length]


def _remaining(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("deadline passed")
    return left


def _read_reply(sock: socket.socket, deadline: float) -> tuple[int, bytes]:
    data = bytearray()
    body_at: int | None = None
    whole: int | None = None  # length of the complete reply, once a Content-Length said so
    while True:
        sock.settimeout(_remaining(deadline))
        chunk = sock.recv(_RECV_SIZE)
        if not chunk:
            if not data:  # as http.client does: a transport failure, polled past
                raise ConnectionAbortedError("runner closed the connection without a reply")
            return parse_reply(bytes(data))
        scanned = len(data)
        data += chunk
        if body_at is None:
            where = find_head_end(data, scanned)
            if where is None:
                continue
            body_at = where[1]
            length = parse_head(bytes(data[:where[0]])).length
            whole = None if length is None else body_at + length
        if whole is not None and len(data) >= whole:
            return parse_reply(bytes(data[:whole]))
        if len(data) - body_at > MAX_BODY:
            raise _too_long(f"more than {len(data) - body_at}")


def _get_info(port: int, deadline: float) -> tuple[int, bytes]:
    """One ``GET /info``. OSError: not reachable (yet); TimeoutError: deadline; RunnerError: bad reply."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # Every blocking call gets only what is left of the one deadline.
        sock.settimeout(_remaining(deadline))
        sock.connect((HOST, port))
        sock.settimeout(_remaining(deadline))
        sock.sendall(_REQUEST.format(host=HOST, port=port).encode("ascii"), _SEND_FLAGS)
        return _read_reply(sock, deadline)


def _broken_reply(exc: RunnerError, child: subprocess.Popen[bytes]) -> RunnerError:
    # A reply cut short is often a child dying mid-write: say so when it has exited.
    try:
        code = child.wait(timeout=CRASH_GRACE)
    except subprocess.TimeoutExpired:
        return exc
    return RunnerError(f"runner crashed ({describe_exit(code)}): {exc}") if code else exc


def poll_runner(port: int, child: subprocess.Popen[bytes], deadline: float,
                timeout: float) -> list[DeviceInfo]:
    """Poll ``/info`` every 10 ms until an answer, a crash or ``deadline`` (a monotonic time);
    ``timeout`` is the limit the timeout message names. Raises RunnerError."""
    from gpuscout.wire import from_json

    log = _log
    last_problem = ""
    while True:
        if time.monotonic() >= deadline:
            last = f"; last attempt: {last_problem}" if last_problem else ""
            raise RunnerError(f"failed to finish discovery before timeout ({timeout:g} s){last}")
        try:
            status, body = _get_info(port, deadline)
        except TimeoutError:  # the deadline passed mid-exchange
            # An earlier parse error says more than this; a refusal before it is stale.
            if not last_problem.startswith("unparsable"):
                last_problem = "no complete reply"
            continue
        except RunnerError as exc:
            raise _broken_reply(exc, child) from None
        except OSError as exc:
            code = child.poll()
            if code is not None:
                raise RunnerError(f"runner crashed ({describe_exit(code)})") from None
            last_problem = exc.strerror or str(exc)
            time.sleep(max(0.0, min(POLL_INTERVAL, deadline - time.monotonic())))
            continue
        if status == 404:
            raise RunnerError("runner does not report devices (/info answered 404)")
        if status != 200:
            raise RunnerError(f"runner error (status {status}): {body[:200].decode(errors='replace')}")
        try:
            devices: list[DeviceInfo] = from_json(body, list[DeviceInfo])
        except (GpuscoutError, RecursionError) as exc:  # json.loads recurses on deep nesting
            # The seed keeps polling on an unparsable reply; so do we, until the deadline.
            last_problem = f"unparsable reply: {str(exc)[:200]}"
            log.warning("runner.unparsable_reply", error=str(exc)[:200])
            time.sleep(max(0.0, min(POLL_INTERVAL, deadline - time.monotonic())))
            continue
        return devices


def _check_timeout(timeout: object) -> float:
    # NaN fails both comparisons; min() before float() keeps a huge int from overflowing.
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout < math.inf:
        raise RunnerError(f"timeout must be a finite number of seconds > 0, got {timeout!r:.80}")
    return float(min(timeout, MAX_TIMEOUT))


def _argv(command: Sequence[str] | None, port: int) -> list[str]:
    if command is None:
        return default_command(port)
    # A bare string is a Sequence[str] too, but never an argv.
    if (isinstance(command, str | bytes) or not isinstance(command, Sequence)
            or not all(isinstance(part, str) for part in command)):
        raise RunnerError(f"runner command must be a sequence of str, got {command!r:.200}")
    if not command:
        raise RunnerError("runner command is empty")
    return [part.replace("{port}", str(port)) for part in command]


def _kill_group(child: subprocess.Popen[bytes]) -> None:
    # The child leads its own session, so its pid is the group of everything it started that
    # did not leave it. The group outlives a reaped leader while any member lives.
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        child.wait(timeout=REAP_GRACE)
    except subprocess.TimeoutExpired:  # stuck in the kernel (a driver): nothing more to do
        _log.warning("runner.not_reaped", pid=child.pid)


def discover_in_child(
    env: Mapping[str, str], timeout: float = 30.0, command: Sequence[str] | None = None
) -> list[DeviceInfo]:
    """Devices as a child process with environment ``env`` sees them.

    ``command`` is the child's argv; ``{port}`` in it is replaced by the chosen port (default:
    ``python -m gpuscout runner --port {port}``). ``timeout`` (seconds, finite, > 0) bounds the
    whole exchange. The child runs in its own process group, which is killed with SIGKILL when
    the call ends, however it ends; the child is reaped. Installs no signal handler, so any
    thread may call it. Raises RunnerError, and only that.
    """
    seconds = _check_timeout(timeout)
    deadline = time.monotonic() + seconds
    try:
        port = free_port()
    except OSError as exc:
        raise RunnerError(f"cannot pick a port on {HOST}: {exc}") from None
    argv = _argv(command, port)
    try:
        child = subprocess.Popen(argv, env=dict(env), stdin=subprocess.DEVNULL,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                 start_new_session=True)
    except (OSError, ValueError, TypeError, subprocess.SubprocessError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise RunnerError(f"cannot start runner: {argv[0]!r}: {reason}") from None
    try:
        return poll_runner(port, child, deadline, timeout=seconds)
    finally:
        _kill_group(child)


def validate_devices(
    checks: Sequence[tuple[DeviceInfo, Mapping[str, str] | None]], timeout: float = 30.0
) -> tuple[list[DeviceInfo], list[Dropped]]:
    """Initialise each device in a child process that sees only it.

    ``checks`` pairs each device with the whole environment of its child, or None for a device
    that needs no check (kept as it is). A crash, a timeout or an answer without the device
    drops it, with the reason.
    """
    kept: list[DeviceInfo] = []
    dropped: list[Dropped] = []
    for device, env in checks:
        if env is None:
            kept.append(device)
            continue
        try:
            seen = discover_in_child(env, timeout=timeout)
        except RunnerError as exc:
            dropped.append(Dropped(device, f"init validation failed: {exc}"))
            continue
        if not any(_same_device(device, other) for other in seen):
            dropped.append(Dropped(device, "init validation failed: device not seen by the child"))
            continue
        kept.append(device)
    return kept, dropped


def _same_device(a: DeviceInfo, b: DeviceInfo) -> bool:
    if a.library != b.library:
        return False
    if a.uuid and b.uuid:
        return a.uuid.lower() == b.uuid.lower()
    if a.pci_id and b.pci_id:
        return a.pci_id.lower() == b.pci_id.lower()
    return a.id == b.id


def serve(devices: Callable[[], Sequence[DeviceInfo]], port: int,
          idle_exit: float = IDLE_EXIT) -> int:
    """Serve ``GET /info`` on 127.0.0.1:``port`` until idle: the wire array of what
    ``devices()`` (one discovery) returns at each request.

    Raises GpuscoutError for a port outside 0-65535 or one that cannot be bound."""
    from gpuscout.wire_encode import to_json

    last_request = [time.monotonic()]

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            last_request[0] = time.monotonic()
            if self.path != "/info":
                self._reply(404, b'{"error":"not found"}')
                return
            try:
                body = to_json(list(devices())).encode()
            except Exception as exc:  # the host must hear about it, not a dropped connection
                self._reply(500, json.dumps({"error": str(exc)}).encode())
                return
            self._reply(200, body)

        def _reply(self, status: int, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            _log.debug("runner.request", line=format % args)

    if not 0 <= port <= 65535:
        raise GpuscoutError(f"port {port} is out of range 0-65535")
    try:
        server = ThreadingHTTPServer((HOST, port), Handler)
    except OSError as exc:  # in use, or not allowed: one line for the CLI, not a traceback
        raise GpuscoutError(f"cannot listen on {HOST}:{port}: {exc.strerror or exc}") from None
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        while time.monotonic() - last_request[0] < idle_exit:
            time.sleep(0.1)
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()
        server.server_close()
    return 0


__all__ = ["RunnerError", "discover_in_child", "parse_reply", "serve", "validate_devices"]
