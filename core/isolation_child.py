"""Isolated discovery, the child's side (see ``gpuscout.isolation``): load the plugins once,
fork one worker per plugin, collect what each one found or how it died.

Started as ``python -I -c ...`` with the Scout's environment; reads the request (plugins, env,
platform, root, timeout) as JSON on stdin and writes one JSON object on the stdout it had at
start. Everything else that writes to descriptor 1 (a plugin's print, a driver's printf) lands
on stderr. Plugins are imported on this process's main thread, so that no other thread exists
when the workers are forked; a worker calls only its plugin's enumerate and leaves with
``os._exit``.
"""

from __future__ import annotations

import json
import os
import select
import signal
import sys
import time
from typing import Any

from gpuscout.context import Context
from gpuscout.host import PluginHost, describe_exception, set_inline
from gpuscout.isolation import (
    MAX_ANSWER,
    Tail,
    become_subreaper,
    die_with_parent,
    encode_device,
    exit_text,
    kill_descendants,
    last_line,
)
from gpuscout.records import DeviceInfo

#: How long a worker's pipes are read after its deadline before it is killed.
_POLL = 0.05


def _end_group(*_: Any) -> None:
    """Kill every descendant of this child (those that left its group included: it is their
    subreaper), then its whole process group (itself, its workers and what they started)."""
    try:
        kill_descendants()
    finally:
        os.killpg(0, signal.SIGKILL)


def _orphaned(parent: int | None) -> bool:
    return parent is not None and os.getppid() != parent


def _start() -> tuple[int, dict[str, Any]]:
    """What both children do first: die with the host, keep the stdout they had at start for
    the answer (its descriptor is returned) and send all else to stderr, read the request, and
    make the process environment exactly the request's ``env``."""
    # A host killed outright (SIGKILL, a Ray worker cancelled by force) runs no clean-up: the
    # kernel's SIGTERM on its death (or, elsewhere, the zygote's parent check) takes the group
    # down.
    signal.signal(signal.SIGTERM, _end_group)
    die_with_parent(signal.SIGTERM)
    # Helpers that leave the group (setsid) are reparented here, not to init, and are killed
    # with the rest when this child ends (at exit, or by _end_group).
    become_subreaper()
    answer_fd = os.dup(1)
    os.dup2(2, 1)  # from here on, what anyone prints goes to stderr
    request: dict[str, Any] = json.loads(sys.stdin.buffer.read())
    if _orphaned(request.get("parent")):  # the host died before the kernel was asked to tell
        _end_group()
    # The interpreter may have added to its environment at start (LC_CTYPE under the C
    # locale); drivers read the process environment, which must be exactly the Scout's.
    if dict(os.environ) != request["env"]:
        os.environ.clear()
        os.environ.update(request["env"])
    return answer_fd, request


def main() -> int:
    """The zygote's entry point; returns its exit status."""
    answer_fd, request = _start()
    parent: int | None = request.get("parent")
    env: dict[str, str] = request["env"]
    platform: str = request["platform"]
    root: str = request["root"]
    timeout = float(request["timeout"])
    set_inline(True)  # imports on this thread: no other thread may exist at fork time

    def context(name: str, deadline: float | None) -> Context:
        return Context(env=env, platform=platform, root=root, deadline=deadline, plugin=name)

    host = PluginHost(plugins=request["plugins"], disable=(), extra=(), entry_points=True,
                      env=env, context=context, enumerate_timeout=timeout, hook_timeout=timeout)
    outcomes: list[dict[str, Any]] = [
        {"name": r.name, "status": "failed", "error": r.error}
        for r in host.reports.values() if r.status not in ("ok", "disabled")
    ]
    impls = host.impls("gpuscout_enumerate", registration_order=True)
    if request.get("fork", True):
        outcomes += _fork_all(impls, context, timeout, parent)
    else:
        outcomes += [_in_process(impl, context, timeout) for impl in impls]
    data = json.dumps({"plugins": outcomes}).encode()
    # Nothing started for this call outlives it: the descendants go before the answer does
    # (the host kills this child's group once it has the answer).
    kill_descendants()
    with os.fdopen(answer_fd, "wb") as answer:
        answer.write(data)
    return 0


def _call(impl: Any, ctx: Context) -> dict[str, Any]:
    """The worker's job: enumerate, and the answer as JSON values (never raises)."""
    start = time.perf_counter()
    try:
        value = impl.function(*({"context": ctx}[a] for a in impl.argnames))
        if not isinstance(value, (list, tuple)):
            raise TypeError(f"returned {type(value).__name__}, expected a list of DeviceInfo")
        bad = next((i for i, d in enumerate(value) if not isinstance(d, DeviceInfo)), None)
        if bad is not None:
            raise TypeError(f"[{bad}]: expected DeviceInfo, got {type(value[bad]).__name__}")
        devices = [encode_device(d) for d in value]
        json.dumps(devices)  # what cannot cross the boundary fails here, not in the host
        return {"status": "ok", "devices": devices, "notes": list(ctx.notes),
                "elapsed": time.perf_counter() - start}
    except BaseException as exc:  # a plugin must never end the worker without an answer
        return {"status": "failed", "error": f"raised {describe_exception(exc)}",
                "notes": list(ctx.notes), "elapsed": time.perf_counter() - start}


def _in_process(impl: Any, context: Any, timeout: float) -> dict[str, Any]:
    name = impl.plugin_name
    return {"name": name, **_call(impl, context(name, time.monotonic() + timeout))}


class _Worker:
    """One forked worker: its pid, its answer and stderr pipes (non-blocking), what they said."""

    def __init__(self, name: str, pid: int, answer: int, stderr: int, deadline: float) -> None:
        self.name, self.pid, self.deadline = name, pid, deadline
        self.answer_fd, self.stderr_fd = answer, stderr
        self.open = {answer, stderr}
        for fd in self.open:
            os.set_blocking(fd, False)
        self.answer = bytearray()
        self.tail = Tail()
        self.started = time.monotonic()
        self.status: int | None = None
        #: Why it was killed: "" (it was not), "timeout" or "answer too large".
        self.killed = ""

    def read(self, fd: int) -> None:
        """Take what ``fd`` holds now; close it at its end."""
        while fd in self.open:
            try:
                chunk = os.read(fd, 1 << 16)
            except BlockingIOError:
                return
            except OSError:
                chunk = b""
            if not chunk:
                os.close(fd)
                self.open.discard(fd)
                return
            if fd == self.stderr_fd:
                self.tail.add(chunk)
            else:
                self.answer += chunk
                if len(self.answer) > MAX_ANSWER:
                    self.kill("answer too large")
                    del self.answer[:]

    def reap(self) -> bool:
        """Whether the worker has ended (then its status is set and its pipes drained)."""
        try:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            pid, status = self.pid, 0
        if pid == 0:
            return False
        self.status = os.waitstatus_to_exitcode(status)
        # What it wrote before it ended is in the pipes; a descendant that still holds them
        # (a driver's helper process) must not keep the answer waiting.
        for fd in list(self.open):
            self.read(fd)
            if fd in self.open:
                os.close(fd)
                self.open.discard(fd)
        return True

    def kill(self, why: str) -> None:
        if not self.killed:
            self.killed = why
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _fork_all(impls: list[Any], context: Any, timeout: float,
              parent: int | None = None) -> list[dict[str, Any]]:
    workers: list[_Worker] = []
    zygote = os.getpid()
    for impl in impls:
        name = impl.plugin_name
        answer_r, answer_w = os.pipe()
        err_r, err_w = os.pipe()
        ctx = context(name, time.monotonic() + timeout)
        pid = os.fork()
        if pid == 0:  # the worker
            try:
                # Dies with the zygote, however the zygote dies (a host's clean-up may SIGKILL
                # its direct child, which then kills nobody).
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                die_with_parent(signal.SIGKILL)
                if os.getppid() != zygote:
                    os._exit(1)
                for fd in (answer_r, err_r, *(fd for w in workers for fd in w.open)):
                    os.close(fd)
                os.dup2(err_w, 2)
                os.dup2(err_w, 1)
                data = json.dumps(_call(impl, ctx)).encode()
                view = memoryview(data)
                while view:
                    view = view[os.write(answer_w, view):]
            finally:
                os._exit(0)
        os.close(answer_w)
        os.close(err_w)
        workers.append(_Worker(name, pid, answer_r, err_r, time.monotonic() + timeout))
    pending = list(workers)
    while pending:
        if _orphaned(parent):
            _end_group()
        now = time.monotonic()
        for w in pending:
            if now >= w.deadline:
                w.kill("timeout")
        fds = [fd for w in pending for fd in w.open]
        wait = min(_POLL, max(0.0, min(w.deadline for w in pending) - now))
        ready = select.select(fds, [], [], wait)[0] if fds else []
        if not fds:
            time.sleep(wait or _POLL / 10)
        for fd in ready:
            owner = next((w for w in pending if fd in w.open), None)
            if owner is not None:
                owner.read(fd)
        pending = [w for w in pending if not w.reap()]
    return [_outcome(w, timeout) for w in workers]


def _outcome(w: _Worker, timeout: float) -> dict[str, Any]:
    base = {"name": w.name, "elapsed": time.monotonic() - w.started}
    words = last_line(w.tail.bytes())
    last = f"; last stderr: {words}" if words else ""
    if w.killed == "timeout":
        return {**base, "status": "timeout",
                "error": f"enumerate did not finish within {timeout:g} s (its child was killed)"}
    if w.killed:
        return {**base, "status": "failed", "error": f"its child was killed: {w.killed}"}
    if w.status != 0:
        return {**base, "status": "failed", "error": f"{exit_text(w.status or 0)}{last}"}
    try:
        answer = json.loads(bytes(w.answer))
    except ValueError:
        return {**base, "status": "failed", "error": f"exited without an answer{last}"}
    return {"name": w.name, **answer}


def probe_main() -> int:
    """The import probe's child (``gpuscout.import_probe``): import each named plugin alone, in
    order, saying ``{"start": name}`` before and ``{"done": name}`` after on the stdout it had
    at start. A plugin that kills this process is found by its missing ``done``."""
    answer_fd, request = _start()
    env: dict[str, str] = request["env"]
    set_inline(True)

    def say(event: dict[str, str]) -> None:
        os.write(answer_fd, (json.dumps(event) + "\n").encode())

    def context(name: str, deadline: float | None) -> Context:
        return Context(env=env, platform=sys.platform, root="/", deadline=deadline, plugin=name)

    for name in request["plugins"]:
        say({"start": name})
        try:
            PluginHost(plugins=[name], disable=(), extra=(), entry_points=True, env=env,
                       context=context, enumerate_timeout=1e9, hook_timeout=1e9)
        except Exception:  # a plugin that raises is the host's to report, not the probe's
            pass
        say({"done": name})
    return 0
