"""Plugins imported in a child first, so that one that crashes or hangs on import costs only
itself (``Scout(isolate_imports=True)``, the command line's ``--isolated``).

The host must import its plugins to call their rule hooks, so isolated enumeration alone does
not protect it from a plugin whose import segfaults (a C extension, a driver library loaded at
import time). Before the host imports anything, one child from a fresh interpreter, with the
Scout's environment, imports the plugins one after another and says so on a pipe
(``{"start": name}`` then ``{"done": name}``). A child that dies names its culprit (the plugin
started and not done), one that stays in a plugin past the import deadline is killed; the rest
are probed again in a new child. The host then loads only the plugins that came through.

A Python exception on import is not the probe's business: the host reports it when it imports
the plugin itself, as it always does.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Mapping, Sequence

from gpuscout._host import children
from gpuscout._host.children import (
    STDERR_TAIL,
    boot_code,
    child_argv,
    exit_text,
    kill_group,
    last_line,
    wait_ready,
)
from gpuscout._host.isolation import START_ALLOWANCE

_BOOT = boot_code("gpuscout._host.isolation.child", "probe_main")
#: How often the host looks at the child while it imports.
_POLL = 0.05


def probe_imports(names: Sequence[str], env: Mapping[str, str], timeout: float) -> dict[str, tuple[str, str]]:
    """Import ``names`` (built-ins and entry points, loadable by name) in child processes; for
    each plugin whose import killed its child or ran past ``timeout`` seconds, ``name ->
    (status, reason)`` with status ``failed`` or ``timeout``. A probe that cannot run at all
    (its child does not start, answers garbage or ends early) fails every plugin it had not
    yet probed: none of them is imported unprobed. Plugins not named here came through (or
    failed in a way the host reports itself)."""
    bad: dict[str, tuple[str, str]] = {}
    remaining = list(names)
    while remaining:
        done, culprit, broken = _probe_once(remaining, env, timeout)
        if broken:
            for name in remaining:
                if name not in done:
                    bad[name] = ("failed", f"import not probed: {broken} (the plugin was not imported here)")
            break
        if culprit is None:
            break
        name, status, reason = culprit
        bad[name] = (status, reason)
        remaining = [n for n in remaining if n not in done and n != name]
    return bad


def _probe_once(
    names: list[str], env: Mapping[str, str], timeout: float
) -> tuple[set[str], tuple[str, str, str] | None, str]:
    """One child over ``names``: the plugins it got through, the culprit that stopped it (None
    when it finished), and why the probe itself could not run ('' when it could)."""
    try:
        child = children.start(
            child_argv(_BOOT), env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
    except (OSError, ValueError) as exc:
        return set(), None, f"the import probe's child could not be started: {exc}"
    assert child.stdin is not None and child.stdout is not None and child.stderr is not None
    done: set[str] = set()
    current: str | None = None
    err = b""
    status: int | None = None
    try:
        child.stdin.write(json.dumps({"plugins": names, "env": dict(env), "parent": os.getpid()}).encode())
        child.stdin.close()
        out_fd, err_fd = child.stdout.fileno(), child.stderr.fileno()
        buffer = b""
        open_fds = {out_fd, err_fd}
        # The interpreter's own start has its allowance; each plugin then has the deadline.
        deadline = time.monotonic() + START_ALLOWANCE + timeout
        while open_fds:
            left = deadline - time.monotonic()
            if left <= 0:
                if current is None:  # the child itself is stuck: no plugin to blame, none passes
                    return done, None, f"the import probe's child did not answer within {timeout:g} s"
                return (
                    done,
                    (
                        current,
                        "timeout",
                        f"import did not finish within {timeout:g} s (in a child, "
                        f"which was killed; the plugin was not imported here)",
                    ),
                    "",
                )
            for fd in wait_ready(open_fds, (), min(left, _POLL))[0]:
                chunk = os.read(fd, 65536)
                if not chunk:
                    open_fds.discard(fd)
                elif fd == err_fd:
                    err = (err + chunk)[-STDERR_TAIL:]
                else:
                    buffer += chunk
                    *lines, buffer = buffer.split(b"\n")
                    if len(buffer) > MAX_EVENT:
                        raise ValueError("the probe child's line is too long")
                    for line in lines:
                        event = json.loads(line)
                        if not isinstance(event, dict):
                            raise ValueError(f"the probe child wrote {line[:80]!r}, not an event")
                        if "start" in event:
                            current = str(event["start"])
                            deadline = time.monotonic() + timeout
                        elif "done" in event:
                            done.add(str(event["done"]))
                            current = None
        status = child.wait(REAP_WAIT)
    except (OSError, ValueError, subprocess.TimeoutExpired) as exc:
        status = child.poll()
        if status is None or current is None:
            words = last_line(err)
            return done, None, f"the import probe failed: {exc}{'; last stderr: ' + words if words else ''}"
    finally:
        kill_group(child)
    if current is None:
        if set(names) - done:
            return done, None, f"the import probe's child {exit_text(status or 0)} before it probed them"
        return done, None, ""
    words = last_line(err)
    return (
        done,
        (
            current,
            "failed",
            f"import {exit_text(status or 0)} in a child (the plugin was "
            f"not imported here){'; last stderr: ' + words if words else ''}",
        ),
        "",
    )


#: Most bytes of one line the probe child writes (``{"start": name}``).
MAX_EVENT = 64 << 10
#: Seconds to wait for the child's exit once its pipes closed.
REAP_WAIT = 5.0

__all__ = ["probe_imports"]
