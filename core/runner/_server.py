"""The runner's side of isolated discovery: ``GET /info`` on 127.0.0.1 (``gpuscout runner``).

The protocol, as gpuscout's host (``gpuscout.runner``) speaks it:

- The runner binds 127.0.0.1 itself (``--port 0``: a port the system picks, so no other process
  can take it between a check and the bind) and writes ``{"port": N}`` as the first line of its
  stdout, flushed.
- The host puts a fresh random token in the child's ``GPUSCOUT_RUNNER_TOKEN``; the runner sends
  it back in an ``X-Gpuscout-Token`` header on every reply, so the host can tell its own child
  from another process answering on that port. The body stays the bare device array.
- ``/info`` answers 200 with the device array, 500 with ``{"error": ...}`` when discovery
  fails; any other path is 404 and any other method than GET and HEAD 501, with a JSON error
  body. HEAD is answered as GET (a discovery, the same status and headers) without the body.
- Limits: a connection must deliver its whole request head (at most MAX_REQUEST_HEAD bytes)
  within READ_TIMEOUT seconds of being accepted, in total however it trickles, or it is cut off.
  Heads are read by one thread for up to MAX_PENDING connections at once (one more drops the
  oldest), so slow or silent clients hold no handler: a request gets one of MAX_CONNECTIONS
  handlers only once its head is in, and one more is answered 503 at once and closed half a
  second later. An ordinary request (the host's) is served however many slow clients wait.
- Lifetime: the runner exits (0) on SIGTERM, after ``idle_exit`` seconds without a connection,
  and when its parent dies: on Linux the kernel sends it SIGTERM then (``PR_SET_PDEATHSIG``,
  bound to the thread that started it), and everywhere it checks ``getppid()`` every 50 ms.
  Its stdin does not matter (``/dev/null``, as after a shell's ``&``, is fine).
"""

from __future__ import annotations

import atexit
import math
import os
import re
import selectors
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, HTTPServer
from types import FrameType
from typing import Any

from gpuscout._host.children import become_subreaper, die_with_parent, kill_descendants
from gpuscout._records.device import DeviceInfo
from gpuscout.errors import GpuscoutError
from gpuscout.log import get_logger
from gpuscout.runner._http import busy_reply, handler_class

_log = get_logger(__name__)

HOST = "127.0.0.1"
#: A runner nobody connects to for this long exits by itself (no orphans).
IDLE_EXIT = 60.0
#: Seconds a connection has, from its accept, to deliver its request line and headers.
READ_TIMEOUT = 5.0
#: Requests served at once; one more whose head is in is answered 503 and closed.
MAX_CONNECTIONS = 8
#: Connections whose request head is being read at once; one more drops the oldest of them.
MAX_PENDING = 256
#: Bytes of request line and headers read before a handler looks at them (over: 414/431/400).
MAX_REQUEST_HEAD = 2 * 65536
#: The environment variable through which the host hands its child the token.
TOKEN_ENV = "GPUSCOUT_RUNNER_TOKEN"
# How often the main loop looks at the idle clock, the parent and slow connections (a stop
# does not wait for it: SIGTERM sets the event the main loop waits on, and wakes the reader).
_TICK = 0.05
# Seconds the runner's exit waits for its SIGKILLed descendants to be gone.
_EXIT_GRACE = 0.1
# A connection answered 503 is closed this long after (at most this many wait at once).
_REFUSED_LINGER = 0.5
_MAX_REFUSED = 64
# Connections taken per readiness of the listening socket; bytes per recv of a request head.
_ACCEPT_BATCH = 64
_RECV_SIZE = 16384
# The blank line that ends a request head (bare LF lines are accepted, as http.server does).
_HEAD_END = re.compile(rb"\n\r?\n")


class _Server(HTTPServer):
    """An HTTP server that reads every request head on one thread (``run``), with a deadline
    per connection, and gives a handler thread (one of ``max_connections``) only to a request
    whose head is in: a slow or silent client costs a buffer, never a slot."""

    request_queue_size = 256  # the listen backlog: bursts of reconnects wait there, not in SYN retries

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[BaseHTTPRequestHandler],
        read_timeout: float,
        max_connections: int,
        busy_reply: bytes,
        max_pending: int = MAX_PENDING,
    ) -> None:
        self.read_timeout = read_timeout
        self.busy_reply = busy_reply
        self.max_pending = max_pending
        self.slots = threading.BoundedSemaphore(max_connections)
        self.guard = threading.Lock()
        #: Connections whose request head is not in yet (in accept order): deadline, bytes so far.
        self.pending: dict[socket.socket, tuple[float, bytearray]] = {}
        #: Request heads read, waiting for their handler to pick them up.
        self.heads: dict[socket.socket, bytes] = {}
        #: Connections answered 503, with the time they are closed.
        self.refused: list[tuple[float, socket.socket]] = []
        self.active = 0  # connections pending or being handled
        self.last_activity = time.monotonic()
        # A byte here wakes the reading thread at once (``wake``): stopping waits for no tick.
        # Made first: a failed bind calls server_close, which closes the pair too.
        self.waker, self.wakee = socket.socketpair()
        self.wakee.setblocking(False)
        super().__init__(address, handler)
        self.socket.setblocking(False)
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.socket, selectors.EVENT_READ)
        self.selector.register(self.wakee, selectors.EVENT_READ)

    def wake(self) -> None:
        """Make the reading thread look at its stop event now."""
        try:
            self.waker.send(b"\0")
        except OSError:  # full (it is awake anyway) or closed
            pass

    def run(self, stop: threading.Event) -> None:
        """Accept connections and read their request heads until ``stop`` is set."""
        try:
            while not stop.is_set():
                now = time.monotonic()
                wait = min([_TICK, *(until - now for until, _ in self.pending.values())])
                for key, _ in self.selector.select(max(0.0, wait)):
                    if key.fileobj is self.socket:
                        self._accept()
                    elif key.fileobj is self.wakee:
                        self._drain_wake()
                    else:
                        self._read(key.fileobj)  # type: ignore[arg-type]
                self._cut_late(time.monotonic())
        finally:
            for conn in list(self.pending):
                self._drop(conn)
            self.selector.close()

    def server_close(self) -> None:
        """Close the listening socket and the waking pair."""
        super().server_close()
        self.waker.close()
        self.wakee.close()

    def _drain_wake(self) -> None:
        try:
            while self.wakee.recv(64):
                pass
        except OSError:  # nothing left (BlockingIOError) or closed
            pass

    def _accept(self) -> None:
        for _ in range(_ACCEPT_BATCH):
            try:
                conn, _address = self.socket.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # out of descriptors, say: try again at the next tick
                _log.debug("runner.accept_error", error=repr(exc)[:200])
                return
            if len(self.pending) >= self.max_pending:
                # The oldest is the slowest: it goes, so that newcomers are always read.
                self._drop(next(iter(self.pending)), "too many connections reading")
            conn.setblocking(False)
            self.pending[conn] = (time.monotonic() + self.read_timeout, bytearray())
            self.selector.register(conn, selectors.EVENT_READ)
            with self.guard:
                self.active += 1
                self.last_activity = time.monotonic()

    def _read(self, conn: socket.socket) -> None:
        entry = self.pending.get(conn)
        if entry is None:  # dropped earlier in this round
            return
        buf = entry[1]
        try:
            data = conn.recv(_RECV_SIZE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._drop(conn)
            return
        buf += data
        if (
            data
            and not _HEAD_END.search(buf, max(0, len(buf) - len(data) - 3))
            and len(buf) <= MAX_REQUEST_HEAD
        ):
            return
        if not buf:  # closed without a word
            self._drop(conn)
            return
        # A whole head, a client that stopped sending (read what came) or an over-long head (the
        # handler answers 414/431/400): a handler takes it from here.
        self.selector.unregister(conn)
        del self.pending[conn]
        if not self.slots.acquire(blocking=False):
            self._refuse(conn)
            self._finished()
            return
        conn.setblocking(True)
        self.heads[conn] = bytes(buf)
        try:
            threading.Thread(
                target=self._handle, args=(conn,), name="gpuscout-runner-request", daemon=True
            ).start()
        except BaseException:
            self.heads.pop(conn, None)
            self.shutdown_request(conn)
            self._done()
            raise

    def _handle(self, conn: socket.socket) -> None:
        try:
            self.finish_request(conn, conn.getpeername() if conn.fileno() >= 0 else None)
        except Exception:
            self.handle_error(conn, None)
        finally:
            self.heads.pop(conn, None)
            self.shutdown_request(conn)
            self._done()

    def _finished(self) -> None:
        with self.guard:
            self.active -= 1
            self.last_activity = time.monotonic()

    def _done(self) -> None:
        self._finished()
        self.slots.release()

    def _drop(self, conn: socket.socket, reason: str = "") -> None:
        """Close a connection whose head is not in (late, evicted, gone)."""
        self.pending.pop(conn, None)
        try:
            self.selector.unregister(conn)
        except (KeyError, ValueError):
            pass
        try:
            conn.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        conn.close()
        self._finished()
        if reason:
            _log.debug("runner.request_cut", reason=reason, read_timeout=self.read_timeout)

    def _cut_late(self, now: float) -> None:
        late = [conn for conn, (until, _) in self.pending.items() if until <= now]
        for conn in late:
            self._drop(conn, "request not read in time")

    def _refuse(self, request: socket.socket) -> None:
        # Runs on the reading thread: nothing here may block. Closing a socket with unread
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

    def idle_for(self, now: float) -> float:
        """Seconds since the last connection ended, 0 while one is open."""
        with self.guard:
            return 0.0 if self.active else now - self.last_activity

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that went away mid-reply is not worth a traceback on stderr.
        _log.debug("runner.connection_error", error=repr(sys.exc_info()[1])[:200])


def _seconds(value: object, name: str) -> float:
    # Compared before float(): an int past a double's range (10**400) would raise OverflowError.
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not 0 < value < math.inf
        or value > sys.float_info.max
    ):
        raise GpuscoutError(f"{name} must be a finite number of seconds > 0, got {value!r:.80}")
    return float(value)


#: What a token may hold: visible ASCII, so that it is one header value (no CR LF, no space).
TOKEN_TEXT = re.compile(r"[!-~]{1,256}")


def check_token(token: object) -> str | None:
    """``token`` when it can go into a reply header as it is (1 to 256 visible ASCII
    characters), None for no token; GpuscoutError for anything else (a CR LF would let it
    write headers of its own)."""
    if token is None or token == "":
        return None
    if not isinstance(token, str) or TOKEN_TEXT.fullmatch(token) is None:
        raise GpuscoutError(
            f"the runner token ({TOKEN_ENV}) must be 1 to 256 visible ASCII characters, got {token!r:.80}"
        )
    return token


def serve(
    devices: Callable[[], Sequence[DeviceInfo]],
    port: int,
    idle_exit: float = IDLE_EXIT,
    *,
    token: str | None = None,
    parent: int | None = None,
    announce: Callable[[int], object] | None = None,
    read_timeout: float = READ_TIMEOUT,
    max_connections: int = MAX_CONNECTIONS,
) -> int:
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
    token = check_token(token)
    idle_exit = _seconds(idle_exit, "idle_exit")
    read_timeout = _seconds(read_timeout, "read_timeout")
    if isinstance(max_connections, bool) or not isinstance(max_connections, int) or max_connections < 1:
        raise GpuscoutError(f"max_connections must be an int >= 1, got {max_connections!r:.80}")
    try:
        server = _Server(
            (HOST, port),
            handler_class(devices, token, read_timeout),
            read_timeout,
            max_connections,
            busy_reply(token, max_connections),
        )
    except OSError as exc:  # in use, or not allowed: one line for the CLI, not a traceback
        raise GpuscoutError(f"cannot listen on {HOST}:{port}: {exc.strerror or exc}") from None
    stop = threading.Event()
    stopped = threading.Event()  # tells the reading thread to end

    def on_term(signum: int, frame: FrameType | None) -> None:
        stop.set()  # wakes the main loop's stop.wait at once

    on_main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, on_term) if on_main else None
    thread: threading.Thread | None = None
    try:
        if parent is not None:
            die_with_parent()
            # What its plugins start and leave behind (setsid() included) is killed at its exit,
            # without waiting long for a descendant stuck in a driver call (one SIGKILL cannot
            # end until the call returns): the runner's exit stays prompt, init reaps it later.
            become_subreaper(at_exit=False)
            atexit.register(kill_descendants, _EXIT_GRACE)
        # The reading thread runs before the port is announced: a Ctrl-C that follows the
        # announcement finds it started, so the clean-up below can always join it.
        thread = threading.Thread(target=server.run, args=(stopped,), name="gpuscout-runner", daemon=True)
        thread.start()
        if announce is not None:
            announce(int(server.server_address[1]))
        # The parent is checked after die_with_parent, so a death before it is not missed.
        while not stop.is_set():
            now = time.monotonic()
            if server.idle_for(now) >= idle_exit:
                _log.debug("runner.exit", reason="idle", idle_exit=idle_exit)
                break
            if not thread.is_alive():
                _log.debug("runner.exit", reason="the reading thread ended")
                break
            if parent is not None and os.getppid() != parent:
                _log.debug("runner.exit", reason="parent gone", parent=parent)
                break
            server.close_refused(now)
            stop.wait(_TICK)
    except KeyboardInterrupt:
        pass
    finally:
        if thread is not None:
            stopped.set()
            server.wake()
            try:
                thread.join()
            except RuntimeError:  # Ctrl-C inside thread.start(): it ends on `stopped` alone
                pass
        server.close_refused()
        server.server_close()
        if on_main and previous is not None:
            signal.signal(signal.SIGTERM, previous)
    return 0


__all__ = [
    "HOST",
    "IDLE_EXIT",
    "MAX_CONNECTIONS",
    "READ_TIMEOUT",
    "TOKEN_ENV",
    "TOKEN_TEXT",
    "check_token",
    "die_with_parent",
    "serve",
]
