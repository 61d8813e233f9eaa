"""gpuscout's child processes, one home for all of them: how one is started, told to end,
killed with everything it started, and reaped, and the one wording of how a child ended.

Every child gpuscout starts (the isolation child, the import probe, the runner, the cluster
driver's child) leads a session of its own, so that its process group is everything it started
that did not leave it; on Linux it is also a child subreaper (``become_subreaper``), so that what
left the group (``setsid()``, a daemon's double fork) is reparented to it and killed with it
(``kill_descendants``). ``kill_group`` ends a child the same way for every caller; ``exit_text``
says how it ended (``crashed: SIGSEGV``, ``exited with status 3``).
"""

from __future__ import annotations

import math
import os
import select
import selectors
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import IO, Any

#: Bytes of a child's stderr kept (its last words are the last line of these).
STDERR_TAIL = 8192
#: How long to wait for a killed process group to be reaped.
REAP_GRACE = 5.0
#: How long a child told to end (SIGTERM) has to kill its descendants before its group is killed.
TERM_GRACE = 1.0
#: How long a child's pipes are waited on at once (the deadline is looked at in between).
_POLL = 0.05


class Tail:
    """The last ``size`` bytes of a stream, however much is added (at most twice ``size`` held):
    a child printing a gigabyte costs nothing, and its last line says how it died."""

    def __init__(self, size: int = STDERR_TAIL) -> None:
        self.size = size
        self.data = bytearray()

    def add(self, chunk: bytes) -> None:
        self.data += chunk
        if len(self.data) > 2 * self.size:
            del self.data[: -self.size]  # only the last words matter

    def bytes(self) -> bytes:
        return bytes(self.data[-self.size :])


def boot_code(module: str, function: str) -> str:
    """The ``-c`` code of a gpuscout child: the host's ``sys.path`` (filled in by
    ``child_argv``), then ``module.function()`` as the exit status."""
    return (
        "import sys; sys.path[:] = {path!r}; "
        f"from {module} import {function}; raise SystemExit({function}())"
    )


def child_argv(code: str) -> list[str]:
    """A fresh, isolated interpreter (``-I``) with the host's ``sys.path``, running ``code``
    (a ``boot_code``, a format string: literal braces doubled)."""
    return [sys.executable, "-I", "-c", code.format(path=list(sys.path))]


_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
_PR_SET_CHILD_SUBREAPER = 36


def _prctl(option: int, arg: int) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        done = libc.prctl(
            ctypes.c_int(option), ctypes.c_ulong(arg), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0)
        )
    except (OSError, AttributeError):
        return False
    return int(done) == 0


def become_subreaper(at_exit: bool = True) -> bool:
    """Make this process a child subreaper (Linux ``PR_SET_CHILD_SUBREAPER``): a descendant
    whose parent dies, one that left the process group with ``setsid()`` included, is
    reparented to it rather than to init, so ``kill_descendants`` still finds it. With
    ``at_exit``, ``kill_descendants`` runs when the interpreter exits normally (SystemExit, a
    return from main), not after ``os._exit`` or a signal's default action. Whether the kernel
    agreed; elsewhere a no-op that answers False."""
    done = _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    if at_exit:
        import atexit

        atexit.register(kill_descendants)
    return done


def descendants(pid: int | None = None) -> list[int]:
    """Every process below ``pid`` (default: this one), zombies included, parents before their
    children (Linux ``/proc``; elsewhere an empty list)."""
    root = os.getpid() if pid is None else pid
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
            ppid = int(stat.rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    found: list[int] = []
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found.append(child)
                todo.append(child)
    return found


def kill_descendants(grace: float = REAP_GRACE) -> None:
    """SIGKILL every descendant of this process and reap those that are (or become, through
    the subreaper) its children, until none is left or ``grace`` seconds passed."""
    end = time.monotonic() + grace
    me = os.getpid()
    while True:
        found = descendants(me)
        if not found:
            return
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        for pid in found:
            try:
                os.waitpid(pid, os.WNOHANG)
            except OSError:  # not (yet) our child: reaped by its parent, or once reparented
                pass
        if time.monotonic() >= end:
            return
        time.sleep(0.01)


def die_with_parent(sig: int = signal.SIGTERM) -> bool:
    """Ask Linux to send this process ``sig`` when its parent (the thread that started it) dies;
    whether the kernel agreed. Elsewhere a no-op that answers False."""
    return _prctl(_PR_SET_PDEATHSIG, sig)


def start(
    argv: list[str],
    *,
    env: Mapping[str, str],
    stdin: int | IO[bytes] | None,
    stdout: int | IO[bytes] | None,
    stderr: int | IO[bytes] | None,
) -> subprocess.Popen[bytes]:
    """Start ``argv`` as a gpuscout child: in a session (and process group) of its own, with
    exactly ``env`` and no descriptor but its three standard ones. Raises OSError, ValueError
    or TypeError as ``subprocess.Popen`` does (the caller words them)."""
    return subprocess.Popen(
        argv, stdin=stdin, stdout=stdout, stderr=stderr, env=dict(env), start_new_session=True, close_fds=True
    )


def exit_code(child: subprocess.Popen[bytes], grace: float) -> int | None:
    """The child's exit code once it has exited, waiting up to ``grace`` seconds; else None."""
    try:
        return child.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        return None


class Bounded:
    """What a child's stdout said, up to ``limit`` bytes; ``over`` once it said more (what
    came after is not kept)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.data = bytearray()
        self.over = False

    def add(self, chunk: bytes) -> None:
        if not self.over:
            self.data += chunk
            if len(self.data) > self.limit:
                self.over = True
                del self.data[:]


def wait_ready(
    readers: Iterable[int], writers: Iterable[int] = (), timeout: float = 0.0
) -> tuple[list[int], list[int]]:
    """Which of ``readers`` can be read (data, or their end) and which of ``writers`` written,
    waiting at most ``timeout`` seconds. poll(2) where there is one, else ``selectors``: never
    ``select()``, which refuses descriptors from 1024 on (FD_SETSIZE), so a host holding a
    thousand files still talks to its children; poll also opens no descriptor of its own."""
    readers, writers = set(readers), set(writers)
    if not readers and not writers:
        time.sleep(max(0.0, timeout))
        return [], []
    if hasattr(select, "poll"):
        poller = select.poll()
        for fd in readers | writers:
            poller.register(
                fd, (select.POLLIN if fd in readers else 0) | (select.POLLOUT if fd in writers else 0)
            )
        events = poller.poll(max(0, math.ceil(timeout * 1000)))
        done = select.POLLHUP | select.POLLERR | select.POLLNVAL
        return (
            [fd for fd, ev in events if fd in readers and ev & (select.POLLIN | done)],
            [fd for fd, ev in events if fd in writers and ev & (select.POLLOUT | done)],
        )
    with selectors.DefaultSelector() as chooser:  # pragma: no cover - no poll (Windows)
        for fd in readers | writers:
            chooser.register(
                fd,
                (selectors.EVENT_READ if fd in readers else 0)
                | (selectors.EVENT_WRITE if fd in writers else 0),
            )
        keys = chooser.select(max(0.0, timeout))
        return (
            [k.fd for k, ev in keys if ev & selectors.EVENT_READ],
            [k.fd for k, ev in keys if ev & selectors.EVENT_WRITE],
        )


def read_now(fd: int) -> bytes | None:
    """What the non-blocking ``fd`` holds now (at most 64 KiB): None when nothing yet, ``b""``
    at its end (a read error counts as the end)."""
    try:
        return os.read(fd, 1 << 16)
    except BlockingIOError:
        return None
    except OSError:
        return b""


def communicate(
    child: subprocess.Popen[bytes], request: bytes, deadline: float, out: Callable[[bytes], None], err: Tail
) -> None:
    """Write ``request`` on ``child``'s stdin, hand what its stdout says to ``out`` as it
    comes and keep the last bytes of its stderr in ``err``, until it has exited and its pipes
    are drained; every read and write is non-blocking and under ``deadline`` (a monotonic
    time). ``child.returncode`` is then set. Raises TimeoutError at the deadline. ``out``
    bounds what it keeps (see ``Bounded``); ``err`` keeps only the last bytes."""
    assert child.stdin is not None and child.stdout is not None and child.stderr is not None
    if os.name == "nt":  # pragma: no cover - select takes no pipes there
        return _communicate_threads(child, request, deadline, out, err)
    stdin_fd, out_fd, err_fd = (child.stdin.fileno(), child.stdout.fileno(), child.stderr.fileno())
    for fd in (stdin_fd, out_fd, err_fd):
        os.set_blocking(fd, False)
    pending = memoryview(request)
    readers = {out_fd, err_fd}
    writers = {stdin_fd} if pending else set()
    if not pending:
        child.stdin.close()

    def drain(fd: int) -> None:
        while fd in readers:
            if time.monotonic() >= deadline:
                raise TimeoutError
            chunk = read_now(fd)
            if chunk is None:
                return
            if not chunk:
                readers.discard(fd)
            elif fd == err_fd:
                err.add(chunk)
            else:
                out(chunk)

    while readers:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        if child.poll() is not None:
            # It has ended: what it wrote is in the pipes. A descendant still holding them (a
            # helper it started) must not keep the answer waiting.
            for fd in list(readers):
                drain(fd)
            break
        ready, writable = wait_ready(readers, writers, min(left, _POLL))
        if writable:
            try:
                pending = pending[os.write(stdin_fd, pending) :]
            except BlockingIOError:
                pass
            except OSError:  # it stopped reading (it died): its exit status says why
                pending = pending[:0]
            if not pending:
                writers.clear()
                try:
                    child.stdin.close()
                except OSError:
                    pass
        for fd in ready:
            drain(fd)
    try:
        child.wait(max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        raise TimeoutError from None


def _communicate_threads(
    child: subprocess.Popen[bytes], request: bytes, deadline: float, out: Callable[[bytes], None], err: Tail
) -> None:  # pragma: no cover - Windows
    """``communicate`` where pipes cannot be selected (Windows): one reader thread per pipe."""
    assert child.stdin is not None and child.stdout is not None and child.stderr is not None
    lock = threading.Lock()

    def read(stream: Any, into: Callable[[bytes], None]) -> None:
        try:
            while chunk := stream.read1(1 << 16):
                with lock:
                    into(chunk)
        except (OSError, ValueError):
            pass

    readers = [
        threading.Thread(target=read, args=(child.stdout, out), daemon=True),
        threading.Thread(target=read, args=(child.stderr, err.add), daemon=True),
    ]
    for t in readers:
        t.start()
    try:
        child.stdin.write(request)
        child.stdin.close()
    except OSError:
        pass
    for t in readers:
        t.join(max(0.0, deadline - time.monotonic()))
    try:
        child.wait(max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        raise TimeoutError from None


def kill_group(child: subprocess.Popen[bytes]) -> bool:
    """Ask ``child`` to end (SIGTERM: a gpuscout child then kills its descendants, those that
    left its group included), give it TERM_GRACE seconds, then kill its whole process group (it
    leads its own session, and the group outlives a reaped leader while any member lives),
    reap ``child`` and close its pipes. Whether it was reaped within REAP_GRACE (a process stuck
    in the kernel, in a driver, is not)."""
    if child.poll() is None:
        try:
            child.terminate()
            child.wait(TERM_GRACE)
        except (OSError, subprocess.TimeoutExpired):
            pass
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, AttributeError):
        pass
    try:
        child.kill()
    except OSError:
        pass
    try:
        child.wait(REAP_GRACE)
    except subprocess.TimeoutExpired:
        pass
    for stream in (child.stdin, child.stdout, child.stderr):
        if stream is not None:
            try:
                stream.close()
            except OSError:
                pass
    return child.returncode is not None


def exit_text(status: int) -> str:
    """``crashed: SIGSEGV`` for a death by signal (a negative status), ``exited with status
    3`` otherwise."""
    if status < 0:
        try:
            return f"crashed: {signal.Signals(-status).name}"
        except ValueError:
            return f"crashed: signal {-status}"
    return f"exited with status {status}"


def last_line(tail: bytes) -> str:
    """The last non-empty line of ``tail``, printable and at most 300 characters."""
    for line in reversed(tail.decode("utf-8", "replace").splitlines()):
        line = line.strip()
        if line:
            return ascii(line)[1:-1][:300] if not line.isprintable() else line[:300]
    return ""


def last_words(err: bytes) -> str:
    """``; last stderr: ...`` for a non-empty last line of ``err``, else ''."""
    line = last_line(err[-STDERR_TAIL:])
    return f"; last stderr: {line}" if line else ""


__all__ = [
    "REAP_GRACE",
    "STDERR_TAIL",
    "TERM_GRACE",
    "Bounded",
    "Tail",
    "become_subreaper",
    "boot_code",
    "child_argv",
    "communicate",
    "descendants",
    "die_with_parent",
    "exit_code",
    "exit_text",
    "kill_descendants",
    "kill_group",
    "last_line",
    "last_words",
    "read_now",
    "start",
]
