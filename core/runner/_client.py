"""Isolated discovery: a child process serves ``GET /info`` on 127.0.0.1 and the host polls it.

The seed's GetDevicesFromRunner: the host starts the child with the environment it wants the
child to have, polls every 10 ms until a deadline, and tells a crash, a 404 (a runner without
/info), another status and an unparsable reply apart. The child is always reaped. Init validation
runs each device that needs it in such a child, with only that device visible, all at once.

The child may be hostile or broken, so the host speaks HTTP over a plain socket
(``gpuscout.runner._reply``): one deadline covers the whole exchange, replies are bounded, every
failure is a RunnerError, and the child's whole process group is killed when the call ends.

gpuscout's own runner (``gpuscout runner --port 0``, see ``gpuscout.runner._server``) binds its
port itself and announces it as ``{"port": N}`` on the first line of its stdout, which the host
reads (at most MAX_PORT_LINE bytes) before polling; each child gets a fresh token in
``GPUSCOUT_RUNNER_TOKEN`` and must send it back in an ``X-Gpuscout-Token`` header, so that a
reply from another process on that port is refused.
"""

from __future__ import annotations

import hmac
import math
import os
import secrets
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import IO

from gpuscout._host import children
from gpuscout._host.children import Tail, exit_code, exit_text, kill_group, last_line
from gpuscout._records.device import DeviceInfo
from gpuscout.errors import GpuscoutError
from gpuscout.log import get_logger
from gpuscout.runner._http import TOKEN_HEADER
from gpuscout.runner._reply import (
    CRASH_GRACE,
    ReplyHead,
    RunnerError,
    read_port_line,
    read_reply,
    remaining,
    timed_out,
)
from gpuscout.runner._server import HOST, TOKEN_ENV

_log = get_logger(__name__)

POLL_INTERVAL = 0.010
#: Longer timeouts are clamped to this, which sockets and waits still accept (about 11 days).
MAX_TIMEOUT = 1e6

# HTTP/1.0 so that a conforming server neither chunks the body nor keeps the connection open.
_REQUEST = "GET /info HTTP/1.0\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n\r\n"
# Python ignores SIGPIPE, but a host embedding it may not; a closed peer must be an OSError.
_SEND_FLAGS = getattr(socket, "MSG_NOSIGNAL", 0)
_TOKEN_KEY = TOKEN_HEADER.lower()


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
        raise RunnerError(
            f"the answer on port {port} did not carry this child's token ({what}): another process answered"
        )


def _broken_reply(exc: RunnerError, child: subprocess.Popen[bytes]) -> RunnerError:
    # A reply cut short is often a child dying mid-write: say so when it has exited.
    code = exit_code(child, CRASH_GRACE)
    return RunnerError(f"runner {exit_text(code)}: {exc}") if code else exc


def poll_runner(
    port: int,
    child: subprocess.Popen[bytes],
    deadline: float,
    timeout: float,
    *,
    token: str | None = None,
    require_token: bool = False,
) -> list[DeviceInfo]:
    """Poll ``/info`` every 10 ms until an answer, a crash or ``deadline`` (a monotonic time);
    ``timeout`` is the limit the timeout message names. A reply whose ``X-Gpuscout-Token`` is
    not ``token`` (or is missing, with ``require_token``) is refused; a 503 (busy) is polled
    past. Raises RunnerError."""
    from gpuscout._records.decode import from_json

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
                raise RunnerError(f"runner {exit_text(code)}") from None
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
            # Bounded in records as well as bytes, and decoded under the exchange's deadline.
            devices: list[DeviceInfo] = from_json(body, list[DeviceInfo], deadline=deadline)
        except TimeoutError:
            raise timed_out(timeout, "the reply was still being decoded") from None
        except (GpuscoutError, RecursionError) as exc:  # json.loads recurses on deep nesting
            # The seed keeps polling on an unparsable reply; so do we, until the deadline.
            last_problem = f"unparsable reply: {str(exc)[:200]}"
            _log.warning("runner.unparsable_reply", error=str(exc)[:200])
            time.sleep(max(0.0, min(POLL_INTERVAL, deadline - time.monotonic())))
            continue
        return devices


def check_timeout(timeout: object) -> float:
    # NaN fails both comparisons; min() before float() keeps a huge int from overflowing.
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout < math.inf:
        raise RunnerError(f"timeout must be a finite number of seconds > 0, got {timeout!r:.80}")
    return float(min(timeout, MAX_TIMEOUT))


def _check_command(command: object) -> list[str]:
    # A bare string is a Sequence[str] too, but never an argv.
    if (
        isinstance(command, str | bytes)
        or not isinstance(command, Sequence)
        or not all(isinstance(part, str) for part in command)
    ):
        raise RunnerError(f"runner command must be a sequence of str, got {command!r:.200}")
    if not command:
        raise RunnerError("runner command is empty")
    return list(command)


def _end(child: subprocess.Popen[bytes]) -> None:
    # Asked to end first, gpuscout's runner kills its descendants (it is their subreaper, so
    # those that left its group with setsid() too) before it exits.
    if not kill_group(child):  # stuck in the kernel (a driver): nothing more to do
        _log.warning("runner.not_reaped", pid=child.pid)


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
    seconds = check_timeout(timeout)
    return discover_under(env, time.monotonic() + seconds, seconds, command)


def discover_under(
    env: Mapping[str, str],
    deadline: float,
    seconds: float,
    command: Sequence[str] | None,
    started: Callable[[subprocess.Popen[bytes]], None] | None = None,
) -> list[DeviceInfo]:
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
        child = children.start(
            argv,
            env={**env, TOKEN_ENV: token},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE if port is None else subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
    except (OSError, ValueError, TypeError, subprocess.SubprocessError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise RunnerError(f"cannot start runner: {argv[0]!r}: {reason}") from None
    tail = _StderrTail(child)
    try:
        if started is not None:
            started(child)
        if port is None:
            port = read_port_line(child, deadline, seconds)
        return poll_runner(port, child, deadline, seconds, token=token, require_token=command is None)
    except RunnerError as exc:
        # A child that died says why on stderr: its last words go with the error.
        words = tail.last_words() if child.poll() is not None else ""
        if words:
            raise RunnerError(f"{exc}; last stderr: {words}") from None
        raise
    finally:
        _end(child)


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
        threading.Thread(
            target=self._drain, args=(stream,), name="gpuscout-runner-stderr", daemon=True
        ).start()

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


__all__ = ["POLL_INTERVAL", "default_command", "discover_in_child", "free_port", "poll_runner"]
