"""Isolated discovery, the host's side: every plugin's enumerate in a child process of its own.

One child (the "zygote", ``gpuscout.isolation_child``) is started from a fresh interpreter with
exactly the Scout's environment. It imports gpuscout and the plugins once, then forks one worker
per plugin before any driver is loaded; each worker calls its plugin's enumerate and writes the
records back through a pipe. A worker that crashes (a segfaulting driver), exits or hangs costs
only its plugin: the zygote reports it with the signal name or exit status and the worker's last
stderr line, or kills it at the deadline. Merge and rank stay in the host.

The zygote runs in its own session; its whole process group is killed when the call ends,
however it ends, so no worker or anything a driver started is left behind. Where ``os.fork``
does not exist (Windows) one child per plugin is started instead.

The exchange is JSON: the host writes the request on the child's stdin and reads one JSON object
from its stdout (the child moves its own stdout to stderr before importing any plugin, so
nothing a plugin prints can corrupt it).
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from gpuscout.records import DeviceInfo

#: Seconds the zygote may take for its own start (interpreter, gpuscout, the plugins' imports)
#: beyond the enumerate deadline, before the host gives up on it.
START_ALLOWANCE = 5.0
#: Most bytes of answer read from the zygote, and from one worker.
MAX_ANSWER = 32 << 20
#: Bytes of a worker's stderr kept (its last words are the last line of these).
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
            del self.data[:-self.size]  # only the last words matter

    def bytes(self) -> bytes:
        return bytes(self.data[-self.size:])

def boot_code(module: str, function: str) -> str:
    """The ``-c`` code of a gpuscout child: the host's ``sys.path`` (filled in by
    ``child_argv``), then ``module.function()`` as the exit status."""
    return ("import sys; sys.path[:] = {path!r}; "
            f"from {module} import {function}; raise SystemExit({function}())")


def child_argv(code: str) -> list[str]:
    """A fresh, isolated interpreter (``-I``) with the host's ``sys.path``, running ``code``
    (a ``boot_code``, a format string: literal braces doubled)."""
    return [sys.executable, "-I", "-c", code.format(path=list(sys.path))]


_BOOT = boot_code("gpuscout.isolation_child", "main")


class IsolationError(Exception):
    """The zygote itself failed (could not start, crashed, answered garbage, overran)."""


# -- records across the process boundary ----------------------------------------------------------


_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
_PR_SET_CHILD_SUBREAPER = 36


def _prctl(option: int, arg: int) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        done = libc.prctl(ctypes.c_int(option), ctypes.c_ulong(arg),
                          ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0))
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


def encode_device(device: DeviceInfo) -> dict[str, Any]:
    """Every field of ``device`` as JSON values (unlike the wire format, nothing is left out:
    the host must get the very record the plugin returned)."""
    out: dict[str, Any] = {}
    for f in attrs.fields(DeviceInfo):
        value = getattr(device, f.name)
        if isinstance(value, tuple):
            value = list(value)
        elif isinstance(value, Mapping):
            value = dict(value)
        out[f.name] = value
    return out


def decode_device(data: Any, where: str) -> DeviceInfo:
    """The DeviceInfo ``encode_device`` wrote; ValueError naming ``where`` for anything else."""
    if not isinstance(data, dict):
        raise ValueError(f"{where}: expected an object, got {type(data).__name__}")
    try:
        return DeviceInfo(**data)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{where}: {exc}") from None


# -- the host's side --------------------------------------------------------------------------------


@attrs.define
class PluginOutcome:
    """What became of one plugin in its child: ``status`` "ok", "failed" or "timeout", why
    (``error``), its notes, its records encoded by ``encode_device`` (the host decodes and checks
    them) and its enumerate's wall time in seconds."""

    name: str
    status: str
    error: str = ""
    notes: list[str] = attrs.field(factory=list)
    devices: list[Any] = attrs.field(factory=list)
    elapsed: float = 0.0


def enumerate_isolated(
    plugins: Sequence[str], *, env: Mapping[str, str], platform: str, root: str,
    timeout: float,
) -> dict[str, PluginOutcome]:
    """Run each named plugin's enumerate in a child process of its own, in parallel.

    ``plugins`` are names the child can load by itself (built-ins and entry points). Returns
    one outcome per plugin. Raises IsolationError when the zygote itself fails; the caller
    reports that for every plugin.
    """
    if not plugins:
        return {}
    if not hasattr(os, "fork"):
        # No fork: one child per plugin, each loading and enumerating its plugin alone.
        results: dict[str, PluginOutcome] = {}
        errors: list[BaseException] = []

        def one(name: str) -> None:
            try:
                results.update(_run_child([name], env, platform, root, timeout, fork=False))
            except BaseException as exc:  # reported below, per plugin
                errors.append(exc)
                results[name] = PluginOutcome(name, "failed", f"isolation child: {exc}")

        threads = [threading.Thread(target=one, args=(n,), daemon=True) for n in plugins]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return results
    return _run_child(list(plugins), env, platform, root, timeout, fork=True)


def _run_child(plugins: list[str], env: Mapping[str, str], platform: str, root: str,
               timeout: float, fork: bool) -> dict[str, PluginOutcome]:
    request = json.dumps({"plugins": plugins, "env": dict(env), "platform": platform,
                          "root": root, "timeout": timeout, "fork": fork,
                          "parent": os.getpid()}).encode()
    try:
        child = subprocess.Popen(
            child_argv(_BOOT), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=dict(env), start_new_session=True, close_fds=True)
    except (OSError, ValueError) as exc:
        raise IsolationError(f"cannot start the isolation child: {exc}") from None
    try:
        limit = timeout + START_ALLOWANCE
        out, err = exchange(child, request, time.monotonic() + limit, limit)
        if child.returncode != 0:
            raise IsolationError(f"the isolation child {exit_text(child.returncode)}"
                                 f"{_last_words(err)}")
        try:
            answer = json.loads(out)
            return {item["name"]: PluginOutcome(**item) for item in answer["plugins"]}
        except (ValueError, TypeError, KeyError) as exc:
            raise IsolationError(f"the isolation child answered something unreadable: {exc}"
                                 f"{_last_words(err)}") from None
    finally:
        kill_group(child)


def exchange(child: subprocess.Popen[bytes], request: bytes, deadline: float,
             limit: float) -> tuple[bytes, bytes]:
    """Write ``request`` on ``child``'s stdin, then read its stdout (at most MAX_ANSWER bytes)
    and the last STDERR_TAIL bytes of its stderr until it has exited and its pipes are drained,
    every read and write non-blocking and under ``deadline`` (a monotonic time; ``limit`` is
    the seconds the message names). Returns (stdout, stderr's tail), ``child.returncode`` set.
    Raises IsolationError at the deadline or for an answer over MAX_ANSWER."""
    assert child.stdin is not None and child.stdout is not None and child.stderr is not None
    out = bytearray()
    err = Tail()
    if os.name == "nt":  # pragma: no cover - select takes no pipes there
        return _exchange_threads(child, request, deadline, limit)
    stdin_fd, out_fd, err_fd = (child.stdin.fileno(), child.stdout.fileno(),
                                child.stderr.fileno())
    for fd in (stdin_fd, out_fd, err_fd):
        os.set_blocking(fd, False)
    pending = memoryview(request)
    readers = {out_fd, err_fd}
    writers = {stdin_fd} if pending else set()
    if not pending:
        child.stdin.close()

    def late() -> IsolationError:
        return IsolationError(f"the isolation child did not answer within {limit:g} s"
                              f"{_last_words(err.bytes())}")

    def drain(fd: int) -> None:
        while fd in readers:
            if time.monotonic() >= deadline:
                raise late()
            try:
                chunk = os.read(fd, 1 << 16)
            except BlockingIOError:
                return
            except OSError:
                chunk = b""
            if not chunk:
                readers.discard(fd)
            elif fd == err_fd:
                err.add(chunk)
            else:
                out.extend(chunk)
                if len(out) > MAX_ANSWER:
                    raise IsolationError(f"the isolation child answered over {MAX_ANSWER} "
                                         "bytes")

    while readers:
        left = deadline - time.monotonic()
        if left <= 0:
            raise late()
        if child.poll() is not None:
            # It has ended: what it wrote is in the pipes. A descendant still holding them (a
            # helper it started) must not keep the answer waiting.
            for fd in list(readers):
                drain(fd)
            break
        ready, writable, _ = select.select(list(readers), list(writers), [], min(left, _POLL))
        if writable:
            try:
                pending = pending[os.write(stdin_fd, pending):]
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
        raise late() from None
    return bytes(out), err.bytes()


def _exchange_threads(child: subprocess.Popen[bytes], request: bytes, deadline: float,
                      limit: float) -> tuple[bytes, bytes]:  # pragma: no cover - Windows
    """``exchange`` where pipes cannot be selected (Windows): one reader thread per pipe."""
    assert child.stdin is not None and child.stdout is not None and child.stderr is not None
    out = bytearray()
    err = Tail()
    over = threading.Event()

    def read(stream: Any, into: Any) -> None:
        try:
            while chunk := stream.read1(1 << 16):
                if into is out:
                    out.extend(chunk)
                    if len(out) > MAX_ANSWER:
                        over.set()
                        return
                else:
                    err.add(chunk)
        except (OSError, ValueError):
            pass

    readers = [threading.Thread(target=read, args=(child.stdout, out), daemon=True),
               threading.Thread(target=read, args=(child.stderr, err), daemon=True)]
    for t in readers:
        t.start()
    try:
        child.stdin.write(request)
        child.stdin.close()
    except OSError:
        pass
    for t in readers:
        t.join(max(0.0, deadline - time.monotonic()))
    if over.is_set():
        raise IsolationError(f"the isolation child answered over {MAX_ANSWER} bytes")
    try:
        child.wait(max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        raise IsolationError(f"the isolation child did not answer within {limit:g} s") from None
    return bytes(out), err.bytes()


def kill_group(child: subprocess.Popen[bytes]) -> None:
    """Ask ``child`` to end (SIGTERM: a gpuscout child then kills its descendants, those that
    left its group included), give it TERM_GRACE seconds, then kill its whole process group (it
    leads its own session) and reap ``child``."""
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


def _last_words(err: bytes) -> str:
    line = last_line(err[-STDERR_TAIL:])
    return f"; last stderr: {line}" if line else ""


__all__ = [
    "IsolationError",
    "PluginOutcome",
    "Tail",
    "become_subreaper",
    "boot_code",
    "child_argv",
    "decode_device",
    "descendants",
    "encode_device",
    "enumerate_isolated",
    "exchange",
    "exit_text",
    "kill_descendants",
    "kill_group",
    "last_line",
]
