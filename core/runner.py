"""Isolated discovery: a child process serves ``GET /info`` on 127.0.0.1 and the host polls it.

The seed's GetDevicesFromRunner: the host starts the child with the environment it wants the
child to have, polls every 10 ms until a deadline, and tells a crash, a 404 (a runner without
/info), another status and an unparsable reply apart. The child is always reaped. Init validation
runs each device that needs it in such a child, with only that device visible, all at once.

The child may be hostile or broken, so the host speaks HTTP over a plain socket
(``gpuscout.runner_reply``): one deadline covers the whole exchange, replies are bounded, every
failure is a RunnerError, and the child's whole process group is killed when the call ends.

gpuscout's own runner (``gpuscout runner --port 0``, see ``gpuscout.runner_server``) binds its
port itself and announces it as ``{"port": N}`` on the first line of its stdout, which the host
reads (at most MAX_PORT_LINE bytes) before polling; each child gets a fresh token in
``GPUSCOUT_RUNNER_TOKEN`` and must send it back in an ``X-Gpuscout-Token`` header, so that a
reply from another process on that port is refused.
"""

from __future__ import annotations

import hmac
import math
import os
import queue
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import IO

from gpuscout.errors import GpuscoutError
from gpuscout.isolation import TERM_GRACE, Tail, last_line
from gpuscout.log import get_logger
from gpuscout.records import DeviceInfo
from gpuscout.results import Dropped
from gpuscout.runner_reply import (
    CRASH_GRACE,
    MAX_BODY,
    MAX_HEAD,
    MAX_PORT_LINE,
    ReplyHead,
    RunnerError,
    describe_exit,
    exit_code,
    parse_reply,
    read_port_line,
    read_reply,
    remaining,
    timed_out,
)
from gpuscout.runner_server import HOST, IDLE_EXIT, TOKEN_ENV, TOKEN_HEADER, serve

_log = get_logger(__name__)

POLL_INTERVAL = 0.010
#: Longer timeouts are clamped to this, which sockets and waits still accept (about 11 days).
MAX_TIMEOUT = 1e6
#: How long to wait for the child to die after SIGKILL; one stuck in the kernel cannot be reaped.
REAP_GRACE = 5.0

# HTTP/1.0 so that a conforming server neither chunks the body nor keeps the connection open.
_REQUEST = "GET /info HTTP/1.0\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n\r\n"
# Python ignores SIGPIPE, but a host embedding it may not; a closed peer must be an OSError.
_SEND_FLAGS = getattr(socket, "MSG_NOSIGNAL", 0)
_TOKEN_KEY = TOKEN_HEADER.lower()

#: ``progress(device, state, elapsed)``: state "started", then "ok" or "failed"; elapsed seconds
#: since the validation began.
Progress = Callable[[DeviceInfo, str, float], None]
_progress: ContextVar[Progress | None] = ContextVar("gpuscout_validation_progress", default=None)


def free_port() -> int:
    """A port on 127.0.0.1 that was free a moment ago (another process may take it before the
    child binds it: only custom ``{port}`` commands use this)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def default_command() -> list[str]:
    """This Python running ``gpuscout runner --port 0`` (it binds a port and announces it)."""
    return [sys.executable, "-m", "gpuscout", "runner", "--port", "0"]


def _get_info(port: int, deadline: float) -> tuple[ReplyHead, bytes]:
    """One ``GET /info``. OSError: not reachable (yet); TimeoutError: deadline; RunnerError: bad reply."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # Every blocking call gets only what is left of the one deadline.
        sock.settimeout(remaining(deadline))
        sock.connect((HOST, port))
        sock.settimeout(remaining(deadline))
        sock.sendall(_REQUEST.format(host=HOST, port=port).encode("ascii"), _SEND_FLAGS)
        return read_reply(sock, deadline)


def _check_token(head: ReplyHead, port: int, token: str | None, required: bool) -> None:
    if token is None:
        return
    got = head.headers.get(_TOKEN_KEY)
    if got is None and not required:
        return
    if got is None or not hmac.compare_digest(got.encode("latin-1"), token.encode("ascii")):
        what = f"no {TOKEN_HEADER} header" if got is None else f"another {TOKEN_HEADER}"
        raise RunnerError(f"the answer on port {port} did not carry this child's token ({what}): "
                          "another process answered")


def _broken_reply(exc: RunnerError, child: subprocess.Popen[bytes]) -> RunnerError:
    # A reply cut short is often a child dying mid-write: say so when it has exited.
    code = exit_code(child, CRASH_GRACE)
    return RunnerError(f"runner crashed ({describe_exit(code)}): {exc}") if code else exc


def poll_runner(port: int, child: subprocess.Popen[bytes], deadline: float, timeout: float, *,
                token: str | None = None, require_token: bool = False) -> list[DeviceInfo]:
    """Poll ``/info`` every 10 ms until an answer, a crash or ``deadline`` (a monotonic time);
    ``timeout`` is the limit the timeout message names. A reply whose ``X-Gpuscout-Token`` is
    not ``token`` (or is missing, with ``require_token``) is refused; a 503 (busy) is polled
    past. Raises RunnerError."""
    from gpuscout.wire import from_json

    last_problem = ""
    while True:
        if time.monotonic() >= deadline:
            raise timed_out(timeout, last_problem)
        try:
            head, body = _get_info(port, deadline)
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
        _check_token(head, port, token, require_token)
        status = head.status
        if status == 404:
            raise RunnerError("runner does not report devices (/info answered 404)")
        if status == 503:  # more connections than it serves at once: ask again
            last_problem = "runner busy (status 503)"
            time.sleep(max(0.0, min(POLL_INTERVAL, deadline - time.monotonic())))
            continue
        if status != 200:
            raise RunnerError(f"runner error (status {status}): {body[:200].decode(errors='replace')}")
        try:
            devices: list[DeviceInfo] = from_json(body, list[DeviceInfo])
        except (GpuscoutError, RecursionError) as exc:  # json.loads recurses on deep nesting
            # The seed keeps polling on an unparsable reply; so do we, until the deadline.
            last_problem = f"unparsable reply: {str(exc)[:200]}"
            _log.warning("runner.unparsable_reply", error=str(exc)[:200])
            time.sleep(max(0.0, min(POLL_INTERVAL, deadline - time.monotonic())))
            continue
        return devices


def _check_timeout(timeout: object) -> float:
    # NaN fails both comparisons; min() before float() keeps a huge int from overflowing.
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout < math.inf:
        raise RunnerError(f"timeout must be a finite number of seconds > 0, got {timeout!r:.80}")
    return float(min(timeout, MAX_TIMEOUT))


def _check_command(command: object) -> list[str]:
    # A bare string is a Sequence[str] too, but never an argv.
    if (isinstance(command, str | bytes) or not isinstance(command, Sequence)
            or not all(isinstance(part, str) for part in command)):
        raise RunnerError(f"runner command must be a sequence of str, got {command!r:.200}")
    if not command:
        raise RunnerError("runner command is empty")
    return list(command)


def _kill_group(child: subprocess.Popen[bytes]) -> None:
    # Asked to end first, gpuscout's runner kills its descendants (it is their subreaper, so
    # those that left its group with setsid() too) before it exits.
    if child.poll() is None:
        try:
            child.terminate()
            child.wait(TERM_GRACE)
        except (OSError, subprocess.TimeoutExpired):
            pass
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
    if child.stdout is not None:
        child.stdout.close()


def discover_in_child(
    env: Mapping[str, str], timeout: float = 30.0, command: Sequence[str] | None = None
) -> list[DeviceInfo]:
    """Devices as a child process with environment ``env`` sees them.

    By default the child is ``python -m gpuscout runner --port 0``: it binds a port itself and
    announces it as ``{"port": N}`` on its first stdout line, so no other process can take the
    port first, and every reply must carry the token this call hands it in
    ``GPUSCOUT_RUNNER_TOKEN`` (header ``X-Gpuscout-Token``), or it is refused as another
    process's. ``command`` is another runner's argv: ``{port}`` in it is replaced by a port that
    was free a moment before the child starts, which another process may take between that
    check and the child's bind (a race only the default command avoids); its child gets the
    token too, and a reply with another token is refused, but one without the header is
    accepted (runners other than gpuscout's, such as Ollama's, do not send it).

    ``timeout`` (seconds, finite, > 0) bounds the whole exchange. The child runs in its own
    process group, which is killed with SIGKILL when the call ends, however it ends (an answer,
    an error, the timeout, KeyboardInterrupt); the child is reaped. Installs no signal handler,
    so any thread may call it. Raises RunnerError, and only that.
    """
    seconds = _check_timeout(timeout)
    return _discover(env, time.monotonic() + seconds, seconds, command)


def _discover(env: Mapping[str, str], deadline: float, seconds: float,
              command: Sequence[str] | None,
              started: Callable[[subprocess.Popen[bytes]], None] | None = None) -> list[DeviceInfo]:
    """``discover_in_child`` under a given ``deadline``; ``started(child)`` is called once the
    child runs (it may raise to abandon the call, which still kills the child)."""
    argv = None if command is None else _check_command(command)
    port: int | None = None
    if argv is not None:
        try:
            port = free_port()
        except OSError as exc:
            raise RunnerError(f"cannot pick a port on {HOST}: {exc}") from None
        argv = [part.replace("{port}", str(port)) for part in argv]
    else:
        argv = default_command()
    token = secrets.token_hex(16)
    try:
        child = subprocess.Popen(argv, env={**env, TOKEN_ENV: token}, stdin=subprocess.DEVNULL,
                                 stdout=subprocess.PIPE if port is None else subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, start_new_session=True)
    except (OSError, ValueError, TypeError, subprocess.SubprocessError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise RunnerError(f"cannot start runner: {argv[0]!r}: {reason}") from None
    tail = _StderrTail(child)
    try:
        if started is not None:
            started(child)
        if port is None:
            port = read_port_line(child, deadline, seconds)
        return poll_runner(port, child, deadline, seconds, token=token,
                           require_token=command is None)
    except RunnerError as exc:
        # A child that died says why on stderr: its last words go with the error.
        words = tail.last_words() if child.poll() is not None else ""
        if words:
            raise RunnerError(f"{exc}; last stderr: {words}") from None
        raise
    finally:
        _kill_group(child)


class _StderrTail:
    """Drains a child's stderr on a daemon thread, keeping the last bytes (a child printing
    megabytes must neither block nor cost memory); the thread ends when the pipe closes."""

    def __init__(self, child: subprocess.Popen[bytes]) -> None:
        self.data = Tail()
        self.done = threading.Event()
        stream = child.stderr
        if stream is None:
            self.done.set()
            return
        threading.Thread(target=self._drain, args=(stream,), name="gpuscout-runner-stderr",
                         daemon=True).start()

    def _drain(self, stream: IO[bytes]) -> None:
        try:
            fd = stream.fileno()
            while chunk := os.read(fd, 1 << 16):
                self.data.add(chunk)
        except (OSError, ValueError):
            pass
        finally:
            self.done.set()

    def last_words(self) -> str:
        """The last non-empty line the child wrote (waiting briefly for the pipe's end)."""
        self.done.wait(CRASH_GRACE)
        return last_line(self.data.bytes())


@contextmanager
def validation_progress(progress: Progress | None) -> Iterator[None]:
    """While the block runs, ``validate_devices`` calls without a ``progress`` of their own (as
    ``Scout.discover(validate=True)`` makes) report to ``progress``. Scoped to the calling
    context (thread or task), so it is no global state."""
    mark = _progress.set(progress)
    try:
        yield
    finally:
        _progress.reset(mark)


class _Cancelled(Exception):
    pass


def validate_devices(
    checks: Sequence[tuple[DeviceInfo, Mapping[str, str] | None]], timeout: float = 30.0, *,
    progress: Progress | None = None, command: Sequence[str] | None = None,
) -> tuple[list[DeviceInfo], list[Dropped]]:
    """Initialise each device in a child process that sees only it, all devices at once.

    ``checks`` pairs each device with the whole environment of its child, or None for a device
    that needs no check (kept as it is). Every child starts at once (one thread each) and
    ``timeout`` covers the whole validation (``Scout.discover(validate=True)`` passes its
    ``enumerate_timeout`` plus the child's ``START_ALLOWANCE``: each child initialises a driver
    in a discovery of its own): a child still running then is killed. A crash, a
    timeout or an answer without the device drops it, with the reason; the kept devices and the
    dropped ones keep the order of ``checks``. ``progress(device, state, elapsed)`` (default:
    the one ``validation_progress`` set) hears "started" for each checked device, then "ok" or
    "failed"; it is called on the calling thread. ``command`` is the runner, as for
    ``discover_in_child``. Every child's process group is killed, also on KeyboardInterrupt.
    """
    seconds = _check_timeout(timeout)
    start = time.monotonic()
    deadline = start + seconds
    report = progress if progress is not None else _progress.get()
    pending = [(i, device, env) for i, (device, env) in enumerate(checks) if env is not None]
    reasons: dict[int, str | None] = {}
    done: queue.SimpleQueue[tuple[int, str | None]] = queue.SimpleQueue()
    lock = threading.Lock()
    children: list[subprocess.Popen[bytes]] = []
    cancelled = False

    def started(child: subprocess.Popen[bytes]) -> None:
        with lock:
            if cancelled:
                raise _Cancelled
            children.append(child)

    def check(i: int, device: DeviceInfo, env: Mapping[str, str]) -> None:
        reason: str | None = "init validation failed: cancelled"
        try:
            seen = _discover(env, deadline, seconds, command, started)
        except RunnerError as exc:
            reason = f"init validation failed: {exc}"
        except BaseException as exc:  # the caller waits to hear from every thread
            if not isinstance(exc, _Cancelled):
                reason = f"init validation failed: {exc!r:.200}"
        else:
            seen_it = any(_same_device(device, other) for other in seen)
            reason = None if seen_it else "init validation failed: device not seen by the child"
        done.put((i, reason))

    workers = [threading.Thread(target=check, args=item, name="gpuscout-validate", daemon=True)
               for item in pending]
    try:
        for _, device, _ in pending:
            if report is not None:
                report(device, "started", 0.0)
        for worker in workers:
            worker.start()
        # Every worker answers by the deadline plus the time to kill and reap its child.
        give_up = deadline + REAP_GRACE + 1.0
        while len(reasons) < len(pending):
            try:
                i, reason = done.get(timeout=max(0.01, min(0.1, give_up - time.monotonic())))
            except queue.Empty:
                if time.monotonic() < give_up:
                    continue
                for i, _, _ in pending:
                    reasons.setdefault(i, f"failed to finish validation before timeout ({seconds:g} s)")
                break
            reasons[i] = reason
            if report is not None:
                report(checks[i][0], "ok" if reason is None else "failed", time.monotonic() - start)
    except BaseException:
        with lock:
            cancelled = True
            victims = list(children)
        for child in victims:
            try:
                os.killpg(child.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        for worker in workers:
            if worker.is_alive():
                worker.join(REAP_GRACE)
        raise
    kept: list[DeviceInfo] = []
    dropped: list[Dropped] = []
    for i, (device, env) in enumerate(checks):
        reason = reasons.get(i)
        if env is None or reason is None:
            kept.append(device)
        else:
            dropped.append(Dropped(device, reason))
    return kept, dropped


def _same_device(a: DeviceInfo, b: DeviceInfo) -> bool:
    if a.library != b.library:
        return False
    if a.uuid and b.uuid:
        return a.uuid.lower() == b.uuid.lower()
    if a.pci_id and b.pci_id:
        return a.pci_id.lower() == b.pci_id.lower()
    return a.id == b.id


__all__ = ["HOST", "IDLE_EXIT", "MAX_BODY", "MAX_HEAD", "MAX_PORT_LINE", "TOKEN_ENV",
           "TOKEN_HEADER", "Progress", "RunnerError", "default_command", "discover_in_child",
           "parse_reply", "poll_runner", "read_port_line", "serve", "validate_devices",
           "validation_progress"]
