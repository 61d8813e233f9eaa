"""The worker threads the plugin host runs plugin calls on, and the batch a call is handed over in.

A worker is a daemon thread that runs batches and then waits in a pool for the next one: starting
a thread costs far more than a rule hook call. The host waits for each batch with a deadline and
abandons one that overruns; its worker may stay inside the plugin for good. The host never starts
a second call into a plugin while such a call is still running: the new batch names the old one
(``after``) and its worker waits for that one first, so at most one worker per plugin is ever
stuck in plugin code.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

#: Seconds an idle worker thread waits for another call before it ends.
IDLE_EXIT = 2.0


class _Worker:
    """One daemon thread that runs calls handed to it, then waits in the pool for the next."""

    def __init__(self, pool: _Pool) -> None:
        self.pool = pool
        self.jobs: queue.SimpleQueue[Batch] = queue.SimpleQueue()

    def loop(self) -> None:
        while True:
            try:
                job = self.jobs.get(timeout=IDLE_EXIT)
            except queue.Empty:
                with self.pool.lock:
                    if self in self.pool.idle:
                        self.pool.idle.remove(self)
                        return
                continue  # taken from the pool just now: its job is on the way
            job.run()
            with self.pool.lock:
                self.pool.idle.append(self)


class _Pool:
    """Reuses idle worker threads. A worker stuck in a plugin that never returns simply never
    comes back; since no second call goes into a plugin while one is running, at most one worker
    per plugin is lost that way."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.idle: list[_Worker] = []
        #: Run every job on the caller's thread (see ``set_inline``).
        self.inline = False

    def submit(self, job: Batch, label: str) -> None:
        if self.inline:
            job.run()
            return
        with self.lock:
            worker = self.idle.pop() if self.idle else None
        if worker is None:
            worker = _Worker(self)
            threading.Thread(target=worker.loop, name=label, daemon=True).start()
        worker.jobs.put(job)


_POOL = _Pool()


def set_inline(inline: bool) -> None:
    """Run every call on the calling thread, unbounded (the isolation child does so while it
    imports the plugins, so that no other thread exists when it forks its workers; its host
    bounds it from outside)."""
    _POOL.inline = inline


class Batch:
    """Calls ``fn(item)`` for each item on a worker thread; each call is timed on its own (the
    first one from the batch's creation, so that any wait for ``after`` counts against it).

    ``after`` is an earlier batch into the same plugin that overran and may still be running:
    the worker waits for it until ``until`` (a ``time.monotonic()`` value) before it calls the
    plugin. When that one is still running then, or the host has abandoned this batch, no call
    is made: the batch ends with ``skipped`` True and no results.
    """

    def __init__(
        self,
        fn: Callable[[Any], Any],
        items: Sequence[Any],
        label: str,
        *,
        after: Batch | None = None,
        until: float | None = None,
    ) -> None:
        self.fn = fn
        self.items = items
        #: (True, answer) or (False, exception), one per finished call.
        self.results: list[tuple[bool, Any]] = []
        self.created = self.started = time.monotonic()
        self.after = after
        self.until = self.created if until is None else until
        self.skipped = False
        self._lock = threading.Lock()
        self._abandoned = False
        self._entered = after is None
        self.done = threading.Event()
        _POOL.submit(self, label)

    def run(self) -> None:
        try:
            if not self._entered and not self._wait_for_earlier():
                self.skipped = True
                return
            for index, item in enumerate(self.items):
                if index:
                    self.started = time.monotonic()
                try:
                    self.results.append((True, self.fn(item)))
                except BaseException as exc:  # a plugin must never end the host
                    self.results.append((False, exc))
        finally:
            self.done.set()

    def _wait_for_earlier(self) -> bool:
        earlier = self.after
        assert earlier is not None
        earlier.done.wait(max(0.0, self.until - time.monotonic()))
        with self._lock:
            if self._abandoned or not earlier.done.is_set():
                return False
            self._entered = True
        self.after = None  # finished: nothing to keep it for
        return True

    def abandon(self) -> bool:
        """Stop waiting for this batch (it overran): whether its thread is, or may still be,
        inside the plugin. False when it never called the plugin and now never will."""
        with self._lock:
            self._abandoned = True
            return self._entered and not self.done.is_set()

    def wait(self, limit: float, total: float | None = None) -> bool:
        """True when every call finished; False as soon as one runs past ``limit`` seconds or
        the whole batch past ``total``."""
        while not self.done.is_set():
            remaining = self.started + limit - time.monotonic()
            if total is not None:
                remaining = min(remaining, self.created + total - time.monotonic())
            if remaining <= 0:
                return self.done.is_set()
            self.done.wait(remaining)
        return True

    def wait_until(self, deadline: float) -> bool:
        """True when every call finished by ``deadline`` (a ``time.monotonic()`` value)."""
        return self.done.wait(max(0.0, deadline - time.monotonic()))


def run_inline(fn: Callable[[Any], Any], items: Sequence[Any]) -> list[tuple[bool, Any]]:
    """``fn(item)`` for each item on this thread, unbounded, as ``Batch.results``."""
    results: list[tuple[bool, Any]] = []
    for item in items:
        try:
            results.append((True, fn(item)))
        except (Exception, SystemExit) as exc:  # Ctrl-C still ends the host's call
            results.append((False, exc))
    return results


__all__ = ["IDLE_EXIT", "Batch", "run_inline", "set_inline"]
