"""The runner's side of isolated discovery: ``GET /info`` on 127.0.0.1 (``gpuscout runner``).

The protocol, as gpuscout's host (``gpuscout.runner``) speaks it:

- The runner binds 127.0.0.1 itself (``--port 0``: a port the system picks, so no other process
  can take it between a check and the bind) and writes ``{"port": N}`` as the first line of its
  stdout, flushed.
- The host puts a fresh random token in the child's ``GPUSCOUT_RUNNER_TOKEN``; the runner sends
  it back in an ``X-Gpuscout-Token`` header on every reply, so the host can tell its own child
  from another process answering on that port. The body stays the bare device array.
- ``/info`` answers 200 with the device array, 500 with ``{"error": ...}`` when discovery
  fails; any other path is 404 and any other method 501, with a JSON error body.
- Limits: a connection must deliver its whole request head within READ_TIMEOUT seconds of being
  accepted (a client sending half a request is cut off); at most MAX_CONNECTIONS connections are
  served at once, and one more is answered 503 at once (without waiting for its request) and
  closed half a second later.
- Lifetime: the runner exits (0) on SIGTERM, after ``idle_exit`` seconds without a connection,
  and when its parent dies: on Linux the kernel sends it SIGTERM then (``PR_SET_PDEATHSIG``,
  bound to the thread that started it), and everywhere it checks ``getppid()`` every 50 ms.
  Its stdin does not matter (``/dev/null``, as after a shell's ``&``, is fine).
"""

from __future__ import annotations

import json
import math
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import FrameType
from typing import Any

from gpuscout.errors import GpuscoutError
from gpuscout.isolation import become_subreaper, die_with_parent
from gpuscout.log import get_logger
from gpuscout.records import DeviceInfo

_log = get_logger(__name__)

HOST = "127.0.0.1"
#: A runner nobody connects to for this long exits by itself (no orphans).
IDLE_EXIT = 60.0
#: Seconds a connection has, from its accept, to deliver its request line and headers.
READ_TIMEOUT = 5.0
#: Connections served at once; one more is answered 503 and closed.
MAX_CONNECTIONS = 8
#: The environment variable through which the host hands its child the token.
TOKEN_ENV = "GPUSCOUT_RUNNER_TOKEN"
#: The reply header that carries the token back.
TOKEN_HEADER = "X-Gpuscout-Token"
# How often the main loop looks at the idle clock, the parent and slow connections.
_TICK = 0.05
# A connection answered 503 is closed this long after (at most this many wait at once).
_REFUSED_LINGER = 0.5
_MAX_REFUSED = 64


def _json_error(text: str) -> bytes:
    return json.dumps({"error": text}).encode()


class _Server(ThreadingHTTPServer):
    """ThreadingHTTPServer with a bounded number of handler threads and a watchdog for requests
    that are not read in time (driven by ``serve``'s main loop)."""

    daemon_threads = True
    request_queue_size = 64

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler],
                 read_timeout: float, max_connections: int, busy_reply: bytes) -> None:
        self.read_timeout = read_timeout
        self.busy_reply = busy_reply
        self.slots = threading.BoundedSemaphore(max_connections)
        self.guard = threading.Lock()
        #: Connections whose request head is not read yet, with the time they are cut off.
        self.reading: dict[socket.socket, float] = {}
        #: Connections answered 503, with the time they are closed.
        self.refused: list[tuple[float, socket.socket]] = []
        self.active = 0
        self.last_activity = time.monotonic()
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.slots.acquire(blocking=False):
            self._refuse(request)
            return
        with self.guard:
            self.active += 1
            self.last_activity = time.monotonic()
            self.reading[request] = self.last_activity + self.read_timeout
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._done(request)
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._done(request)

    def _done(self, request: socket.socket) -> None:
        with self.guard:
            self.reading.pop(request, None)
            self.active -= 1
            self.last_activity = time.monotonic()
        self.slots.release()

    def _refuse(self, request: socket.socket) -> None:
        # Runs on the accepting thread: nothing here may block. Closing a socket with unread
        # bytes sends RST, which can overtake the 503, so the socket is closed a moment later.
        try:
            request.setblocking(False)
            request.send(self.busy_reply)
            request.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        with self.guard:
            if len(self.refused) < _MAX_REFUSED:
                self.refused.append((time.monotonic() + _REFUSED_LINGER, request))
                return
        self.close_request(request)

    def close_refused(self, now: float | None = None) -> None:
        """Close the refused connections whose moment has passed (all of them without ``now``)."""
        with self.guard:
            due = [conn for until, conn in self.refused if now is None or until <= now]
            self.refused = [(until, conn) for until, conn in self.refused if conn not in due]
        for conn in due:
            try:
                conn.recv(65536)  # the request, so that close sends FIN rather than RST
            except OSError:
                pass
            self.close_request(conn)

    def request_read(self, request: socket.socket) -> bool:
        """The request head of ``request`` is in: stop its clock. False if it was cut off."""
        with self.guard:
            return self.reading.pop(request, None) is not None

    def cut_slow(self, now: float) -> None:
        """Shut down every connection whose request head is late."""
        with self.guard:
            late = [conn for conn, until in self.reading.items() if until <= now]
            for conn in late:
                del self.reading[conn]
        for conn in late:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            _log.debug("runner.request_cut", reason="request not read in time",
                       read_timeout=self.read_timeout)

    def idle_for(self, now: float) -> float:
        """Seconds since the last connection ended, 0 while one is being served."""
        with self.guard:
            return 0.0 if self.active else now - self.last_activity

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that went away mid-reply is not worth a traceback on stderr.
        _log.debug("runner.connection_error", error=repr(sys.exc_info()[1])[:200])


def _handler(devices: Callable[[], Sequence[DeviceInfo]], token: str | None,
             read_timeout: float) -> type[BaseHTTPRequestHandler]:
    from gpuscout.wire_encode import to_json

    class Handler(BaseHTTPRequestHandler):
        timeout = read_timeout  # each read and write on the connection
        server: _Server

        def parse_request(self) -> bool:
            parsed = super().parse_request()  # reads the headers too
            on_time = self.server.request_read(self.connection)
            return parsed and on_time

        def do_GET(self) -> None:
            if self.path.split("?", 1)[0] != "/info":
                self._reply(404, _json_error(f"not found: {self.path[:200]}"))
                return
            try:
                body = to_json(list(devices())).encode()
            except Exception as exc:  # the host must hear about it, not a dropped connection
                self._reply(500, _json_error(str(exc)))
                return
            self._reply(200, body)

        def send_error(self, code: int, message: str | None = None,
                       explain: str | None = None) -> None:
            # Bad request lines, unknown methods (501), over-long lines: JSON like the rest.
            self.close_connection = True
            self._reply(code, _json_error(message or self.responses.get(code, ("error",))[0]))

        def _reply(self, status: int, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            if token:
                self.send_header(TOKEN_HEADER, token)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            _log.debug("runner.request", line=format % args)

    return Handler


def _busy_reply(token: str | None, max_connections: int) -> bytes:
    body = _json_error(f"busy: {max_connections} connections are being served")
    head = ["HTTP/1.0 503 Service Unavailable", "Content-Type: application/json",
            f"Content-Length: {len(body)}"] + ([f"{TOKEN_HEADER}: {token}"] if token else [])
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body


def _seconds(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
        raise GpuscoutError(f"{name} must be a finite number of seconds > 0, got {value!r:.80}")
    return float(value)


def serve(devices: Callable[[], Sequence[DeviceInfo]], port: int, idle_exit: float = IDLE_EXIT,
          *, token: str | None = None, parent: int | None = None,
          announce: Callable[[int], object] | None = None, read_timeout: float = READ_TIMEOUT,
          max_connections: int = MAX_CONNECTIONS) -> int:
    """Serve ``GET /info`` on 127.0.0.1:``port`` (0: a port the system picks): the wire array of
    what ``devices()`` (one discovery) returns at each request. Returns 0 when it stops.

    ``token`` goes back in an ``X-Gpuscout-Token`` header on every reply; ``announce(port)`` is
    called with the bound port before the first connection is served; with ``parent`` (a pid,
    the parent when the process started) the runner stops when its parent is no longer that
    one, and on Linux asks for SIGTERM at its death. It stops on SIGTERM (handled when called
    on the main thread, the previous handler put back after), on KeyboardInterrupt, and after
    ``idle_exit`` seconds without a connection. See the module docstring for the limits.

    Raises GpuscoutError for a port outside 0-65535 or one that cannot be bound."""
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise GpuscoutError(f"port {port} is out of range 0-65535")
    idle_exit = _seconds(idle_exit, "idle_exit")
    read_timeout = _seconds(read_timeout, "read_timeout")
    if isinstance(max_connections, bool) or not isinstance(max_connections, int) or max_connections < 1:
        raise GpuscoutError(f"max_connections must be an int >= 1, got {max_connections!r:.80}")
    try:
        server = _Server((HOST, port), _handler(devices, token, read_timeout), read_timeout,
                         max_connections, _busy_reply(token, max_connections))
    except OSError as exc:  # in use, or not allowed: one line for the CLI, not a traceback
        raise GpuscoutError(f"cannot listen on {HOST}:{port}: {exc.strerror or exc}") from None
    stop = threading.Event()

    def on_term(signum: int, frame: FrameType | None) -> None:
        stop.set()

    on_main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, on_term) if on_main else None
    thread: threading.Thread | None = None
    try:
        if parent is not None:
            die_with_parent()
            # What its plugins start and leave behind (setsid() included) is killed at its exit.
            become_subreaper()
        if announce is not None:
            announce(int(server.server_address[1]))
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": _TICK},
                                  name="gpuscout-runner", daemon=True)
        thread.start()
        # The parent is checked after die_with_parent, so a death before it is not missed.
        while not stop.is_set():
            now = time.monotonic()
            if server.idle_for(now) >= idle_exit:
                _log.debug("runner.exit", reason="idle", idle_exit=idle_exit)
                break
            if parent is not None and os.getppid() != parent:
                _log.debug("runner.exit", reason="parent gone", parent=parent)
                break
            server.cut_slow(now)
            server.close_refused(now)
            time.sleep(_TICK)
    except KeyboardInterrupt:
        pass
    finally:
        if thread is not None:
            server.shutdown()
        server.close_refused()
        server.server_close()
        if on_main and previous is not None:
            signal.signal(signal.SIGTERM, previous)
    return 0


__all__ = ["HOST", "IDLE_EXIT", "MAX_CONNECTIONS", "READ_TIMEOUT", "TOKEN_ENV", "TOKEN_HEADER",
           "die_with_parent", "serve"]
