"""Bounded waits for the plugin author's kit (``gpuscout.testing``): a call that must return
(``promptly``), a condition that must come true (``eventually``), and the processes a plugin's
children leave behind (``running``, ``processes_with_env``)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


def promptly(call: Callable[[], T], seconds: float = 10.0) -> T:
    """``call()`` run on a daemon thread: its answer (or its exception), or an AssertionError
    when it has not returned after ``seconds``, so a hang fails the test instead of the run."""
    box: list[tuple[bool, Any]] = []

    def run() -> None:
        try:
            box.append((True, call()))
        except BaseException as exc:
            box.append((False, exc))

    thread = threading.Thread(target=run, name="gpuscout-promptly", daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive() or not box:
        raise AssertionError(f"still running after {seconds} s")
    ok, value = box[0]
    if not ok:
        raise value
    result: T = value
    return result


def running(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie (Linux ``/proc``)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def processes_with_env(name: str, value: str) -> list[int]:
    """Running processes whose environment holds ``name=value`` (Linux ``/proc``): put a fresh
    value into the environment a plugin's children inherit, then check none is left."""
    needle = f"{name}={value}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if needle in environ.split(b"\0") and running(int(entry.name)):
            found.append(int(entry.name))
    return found


def eventually(predicate: Callable[[], bool], within: float = 5.0) -> bool:
    """Whether ``predicate()`` holds at some point in the next ``within`` seconds."""
    end = time.monotonic() + within
    while not predicate():
        if time.monotonic() > end:
            return False
        time.sleep(0.02)
    return True
