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
import signal
import subprocess
import sys
import threading
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


def die_with_parent(sig: int = signal.SIGTERM) -> bool:
    """Ask Linux to send this process ``sig`` when its parent (the thread that started it) dies;
    whether the kernel agreed. Elsewhere a no-op that answers False."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        done = libc.prctl(ctypes.c_int(_PR_SET_PDEATHSIG), ctypes.c_ulong(sig),
                          ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0))
    except (OSError, AttributeError):
        return False
    return int(done) == 0


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
        try:
            out, err = child.communicate(request, timeout=timeout + START_ALLOWANCE)
        except subprocess.TimeoutExpired:
            raise IsolationError(
                f"the isolation child did not answer within {timeout + START_ALLOWANCE:g} s") \
                from None
        if child.returncode != 0:
            raise IsolationError(f"the isolation child {exit_text(child.returncode)}"
                                 f"{_last_words(err)}")
        if len(out) > MAX_ANSWER:
            raise IsolationError(f"the isolation child answered {len(out)} bytes, over "
                                 f"{MAX_ANSWER}")
        try:
            answer = json.loads(out)
            return {item["name"]: PluginOutcome(**item) for item in answer["plugins"]}
        except (ValueError, TypeError, KeyError) as exc:
            raise IsolationError(f"the isolation child answered something unreadable: {exc}"
                                 f"{_last_words(err)}") from None
    finally:
        kill_group(child)


def kill_group(child: subprocess.Popen[bytes]) -> None:
    """Kill ``child``'s whole process group (it leads its own session) and reap ``child``."""
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
    "boot_code",
    "child_argv",
    "decode_device",
    "encode_device",
    "enumerate_isolated",
    "exit_text",
    "kill_group",
    "last_line",
]
