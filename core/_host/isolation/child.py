"""Isolated discovery, the child's side (see ``gpuscout._host.isolation``): load the plugins once,
fork one worker per plugin, say what each one found or how it died as soon as it is known.

Started as ``python -I -c ...`` with the Scout's environment; reads the request (plugins, env,
platform, root, timeout) as JSON on stdin and writes one JSON line per plugin, then ``END``, on
the stdout it had at start. Everything else that writes to descriptor 1 (a plugin's print, a
driver's printf) lands on stderr. Plugins are imported on this process's main thread, so that
no other thread exists when the workers are forked.

Each plugin's worker is forked by a supervisor of its own, forked from this process: the
supervisor leads a process group of its own, waits for the worker and writes its wait status on
a pipe. A worker holds only its answer pipe and its stderr pipe (every other descriptor is
closed), so nothing it or a helper it forks does reaches another plugin's answer or the host's:
one that kills its parent kills its supervisor, one that kills its process group kills its
supervisor's group, and either costs only its plugin. A worker calls only its plugin's
enumerate and leaves with ``os._exit``.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from typing import Any

from gpuscout._host.calls import PluginHost
from gpuscout._host.children import (
    Tail,
    become_subreaper,
    die_with_parent,
    exit_text,
    kill_descendants,
    last_words,
    read_now,
    wait_ready,
)
from gpuscout._host.isolation import END, MAX_ANSWER, MAX_LINE, encode_device, outcome
from gpuscout._host.workers import set_inline
from gpuscout._machine.context import Context
from gpuscout._records.bounds import MAX_JSON_RECORDS, too_many_objects
from gpuscout._records.device import DeviceInfo
from gpuscout.errors import describe_exception

#: How long the workers' pipes are waited on at once (deadlines are looked at in between).
_POLL = 0.05


def _end_group(*_: Any) -> None:
    """Kill every descendant of this child (those that left its group included: it is their
    subreaper), then its whole process group (itself and what is still in it)."""
    try:
        kill_descendants()
    finally:
        os.killpg(0, signal.SIGKILL)


def _orphaned(parent: int | None) -> bool:
    return parent is not None and os.getppid() != parent


def start_child() -> tuple[int, dict[str, Any]]:
    """What every gpuscout child of this kind does first: die with the host, keep the stdout
    it had at start for the answer (its descriptor is returned) and send all else to stderr,
    read the request, and make the process environment exactly the request's ``env``."""
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
    answer_fd, request = start_child()
    parent: int | None = request.get("parent")
    env: dict[str, str] = request["env"]
    platform: str = request["platform"]
    root: str = request["root"]
    timeout = float(request["timeout"])
    set_inline(True)  # imports on this thread: no other thread may exist at fork time

    def context(name: str, deadline: float | None) -> Context:
        return Context(env=env, platform=platform, root=root, deadline=deadline, plugin=name)

    def say(item: dict[str, Any]) -> None:
        _write_all(answer_fd, _line(item))

    host = PluginHost(
        plugins=request["plugins"],
        disable=(),
        extra=(),
        entry_points=True,
        env=env,
        context=context,
        enumerate_timeout=timeout,
        hook_timeout=timeout,
    )
    for r in host.reports.values():
        if r.status not in ("ok", "disabled"):
            say({"name": r.name, "status": "failed", "error": r.error})
    impls = host.impls("gpuscout_enumerate", registration_order=True)
    if request.get("fork", True):
        _fork_all(impls, context, timeout, parent, answer_fd, say)
    else:
        for impl in impls:
            say(_in_process(impl, context, timeout))
    # Nothing started for this call outlives it: the descendants go before the answer ends
    # (the host kills this child's group once it has the answer).
    kill_descendants()
    say(END)
    os.close(answer_fd)
    return 0


def _line(item: dict[str, Any]) -> bytes:
    """``item`` as one line of the answer; a plugin's line over MAX_LINE bytes (an answer that
    grew in re-encoding) becomes a failure of that plugin."""
    data = json.dumps(item).encode() + b"\n"
    if len(data) > MAX_LINE:
        return _line(
            {
                "name": item.get("name", ""),
                "status": "failed",
                "error": f"its answer was over {MAX_LINE} bytes",
            }
        )
    return data


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


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
        return {
            "status": "ok",
            "devices": devices,
            "notes": [str(n) for n in ctx.notes],
            "elapsed": time.perf_counter() - start,
        }
    except BaseException as exc:  # a plugin must never end the worker without an answer
        return {
            "status": "failed",
            "error": f"raised {describe_exception(exc)}",
            "notes": [str(n) for n in ctx.notes],
            "elapsed": time.perf_counter() - start,
        }


def _in_process(impl: Any, context: Any, timeout: float) -> dict[str, Any]:
    name = impl.plugin_name
    return {"name": name, **_call(impl, context(name, time.monotonic() + timeout))}


def _keep_only(keep: set[int]) -> None:
    """Close every descriptor of this process but ``keep`` and the standard three, as
    ``close_fds`` does for a new program (here, in a fork that runs no new program)."""
    try:
        open_now = [
            int(name) for name in os.listdir("/proc/self/fd" if os.path.isdir("/proc/self/fd") else "/dev/fd")
        ]
    except (OSError, ValueError):
        open_now = list(range(3, 65536))
    for fd in open_now:
        if fd > 2 and fd not in keep:
            try:
                os.close(fd)
            except OSError:  # the listing's own descriptor, closed already
                pass


class _Worker:
    """One plugin's supervisor and worker: the supervisor's pid (it leads the group both are
    in), the answer, stderr and status pipes (non-blocking), and what they said."""

    def __init__(self, name: str, pid: int, pipes: dict[str, int], deadline: float) -> None:
        self.name, self.pid, self.deadline = name, pid, deadline
        self.fds = pipes  # "answer", "stderr", "status" -> read end
        self.open = set(pipes.values())
        for fd in self.open:
            os.set_blocking(fd, False)
        self.answer = bytearray()
        self.status_text = bytearray()
        self.tail = Tail()
        self.started = time.monotonic()
        self.supervisor: int | None = None
        #: Why it was killed: "" (it was not), "timeout" or "answer too large".
        self.killed = ""

    def read(self, fd: int) -> None:
        """Take what ``fd`` holds now; close it at its end."""
        while fd in self.open:
            chunk = read_now(fd)
            if chunk is None:
                return
            if not chunk:
                self._close(fd)
                return
            if fd == self.fds["stderr"]:
                self.tail.add(chunk)
            elif fd == self.fds["status"]:
                self.status_text += chunk[:64]
                del self.status_text[64:]
            elif not self.killed:
                self.answer += chunk
                if len(self.answer) > MAX_ANSWER:
                    self.kill("answer too large")
                    del self.answer[:]

    def _close(self, fd: int) -> None:
        os.close(fd)
        self.open.discard(fd)

    def reap(self) -> bool:
        """Whether the supervisor has ended (then its status is set and the pipes drained)."""
        try:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            pid, status = self.pid, 0
        if pid == 0:
            return False
        self.supervisor = os.waitstatus_to_exitcode(status)
        # What the worker wrote before it ended is in the pipes; a helper that still holds
        # them (a driver's, or one the plugin forked) must not keep the answer waiting.
        for fd in list(self.open):
            self.read(fd)
            if fd in self.open:
                self._close(fd)
        return True

    def kill(self, why: str) -> None:
        if not self.killed:
            self.killed = why
            for kill, target in ((os.killpg, self.pid), (os.kill, self.pid)):
                try:
                    kill(target, signal.SIGKILL)
                except OSError:
                    pass

    def result(self, timeout: float) -> dict[str, Any]:
        """The plugin's line of the answer."""
        base = {"name": self.name, "elapsed": time.monotonic() - self.started}
        last = last_words(self.tail.bytes())
        if self.killed == "timeout":
            return {
                **base,
                "status": "timeout",
                "error": f"enumerate did not finish within {timeout:g} s (its child was killed)",
            }
        if self.killed:
            return {**base, "status": "failed", "error": f"its child was killed: {self.killed}"}
        try:
            status = int(bytes(self.status_text))
        except ValueError:
            # The supervisor ended without saying how the worker did: the worker (the only
            # code of the plugin's that ran there) killed it, or its process group.
            how = exit_text(self.supervisor or 0)
            return {
                **base,
                "status": "failed",
                "error": f"its child's supervisor {how} (the plugin killed its parent or "
                f"its process group?); the child went with it{last}",
            }
        if status != 0:
            return {**base, "status": "failed", "error": f"{exit_text(status)}{last}"}
        if too_many_objects(self.answer):  # counted before decoding grows it: this plugin only
            return {
                **base,
                "status": "failed",
                "error": f"its answer holds more than {MAX_JSON_RECORDS} records",
            }
        try:
            answer = json.loads(bytes(self.answer))
            if isinstance(answer, dict) and "elapsed" not in answer:
                answer["elapsed"] = base["elapsed"]
            checked = outcome({**answer, "name": self.name} if isinstance(answer, dict) else answer)
        except (ValueError, RecursionError) as exc:
            what = "without an answer" if not self.answer else f"with an unreadable answer ({exc})"
            return {**base, "status": "failed", "error": f"exited {what}{last}"}
        return {
            "name": self.name,
            "status": checked.status,
            "error": checked.error,
            "notes": checked.notes,
            "devices": checked.devices,
            "elapsed": checked.elapsed,
        }


def _supervise(impl: Any, ctx: Context, zygote: int, answer_w: int, err_w: int, status_w: int) -> None:
    """The supervisor, in a process group of its own: fork the worker, wait for it, write its
    wait status on ``status_w``. Never returns."""
    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        # Dies with the zygote, however the zygote dies (a host's clean-up may SIGKILL its
        # direct child, which then kills nobody).
        die_with_parent(signal.SIGKILL)
        if os.getppid() != zygote:
            os._exit(1)
        os.setpgid(0, 0)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(err_w, 1)
        os.dup2(err_w, 2)
        _keep_only({answer_w, err_w, status_w})
        me = os.getpid()
        worker = os.fork()
        if worker == 0:
            try:
                die_with_parent(signal.SIGKILL)
                if os.getppid() != me:
                    os._exit(1)
                os.close(status_w)
                os.close(err_w)  # it is descriptors 1 and 2 now
                _write_all(answer_w, json.dumps(_call(impl, ctx)).encode())
            finally:
                os._exit(0)
        os.close(answer_w)
        while True:
            try:
                _, status = os.waitpid(worker, 0)
                break
            except InterruptedError:
                continue
        _write_all(status_w, str(os.waitstatus_to_exitcode(status)).encode())
    finally:
        os._exit(0)


def _fork_all(
    impls: list[Any], context: Any, timeout: float, parent: int | None, answer_fd: int, say: Any
) -> None:
    """Fork each plugin's supervisor and worker; say each plugin's line as soon as it is
    known."""
    workers: list[_Worker] = []
    zygote = os.getpid()
    for impl in impls:
        name = impl.plugin_name
        pipes = {key: os.pipe() for key in ("answer", "stderr", "status")}
        ctx = context(name, time.monotonic() + timeout)
        pid = os.fork()
        if pid == 0:
            _supervise(impl, ctx, zygote, pipes["answer"][1], pipes["stderr"][1], pipes["status"][1])
        try:
            os.setpgid(pid, pid)  # as the supervisor does itself: whichever runs first
        except OSError:
            pass
        for _, write_end in pipes.values():
            os.close(write_end)
        workers.append(_Worker(name, pid, {k: r for k, (r, _) in pipes.items()}, time.monotonic() + timeout))
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
        ready = wait_ready(fds, (), wait)[0] if fds else []
        if not fds:
            time.sleep(wait or _POLL / 10)
        for fd in ready:
            owner = next((w for w in pending if fd in w.open), None)
            if owner is not None:
                owner.read(fd)
        still = []
        for w in pending:
            if w.reap():
                say(w.result(timeout))
            else:
                still.append(w)
        pending = still


def probe_main() -> int:
    """The import probe's child (``gpuscout._host.isolation.probe``): import each named plugin alone, in
    order, saying ``{"start": name}`` before and ``{"done": name}`` after on the stdout it had
    at start. A plugin that kills this process is found by its missing ``done``."""
    answer_fd, request = start_child()
    env: dict[str, str] = request["env"]
    set_inline(True)

    def say(event: dict[str, str]) -> None:
        os.write(answer_fd, (json.dumps(event) + "\n").encode())

    def context(name: str, deadline: float | None) -> Context:
        return Context(env=env, platform=sys.platform, root="/", deadline=deadline, plugin=name)

    for name in request["plugins"]:
        say({"start": name})
        try:
            PluginHost(
                plugins=[name],
                disable=(),
                extra=(),
                entry_points=True,
                env=env,
                context=context,
                enumerate_timeout=1e9,
                hook_timeout=1e9,
            )
        except Exception:  # a plugin that raises is the host's to report, not the probe's
            pass
        say({"done": name})
    return 0
