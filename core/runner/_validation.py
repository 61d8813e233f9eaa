"""Init validation (the seed's): each device that needs it is initialised in a runner child
that sees only it (``gpuscout.runner._client``), every child at once, under one deadline."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar

from gpuscout._host.children import REAP_GRACE
from gpuscout._records.device import DeviceInfo
from gpuscout._records.results import Dropped
from gpuscout.runner._client import check_timeout, discover_under
from gpuscout.runner._reply import RunnerError

#: ``progress(device, state, elapsed)``: state "started", then "ok" or "failed"; elapsed seconds
#: since the validation began.
Progress = Callable[[DeviceInfo, str, float], None]
_progress: ContextVar[Progress | None] = ContextVar("gpuscout_validation_progress", default=None)


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
    checks: Sequence[tuple[DeviceInfo, Mapping[str, str] | None]],
    timeout: float = 30.0,
    *,
    progress: Progress | None = None,
    command: Sequence[str] | None = None,
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
    seconds = check_timeout(timeout)
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
            seen = discover_under(env, deadline, seconds, command, started)
        except RunnerError as exc:
            reason = f"init validation failed: {exc}"
        except BaseException as exc:  # the caller waits to hear from every thread
            if not isinstance(exc, _Cancelled):
                reason = f"init validation failed: {exc!r:.200}"
        else:
            seen_it = any(_same_device(device, other) for other in seen)
            reason = None if seen_it else "init validation failed: device not seen by the child"
        done.put((i, reason))

    workers = [
        threading.Thread(target=check, args=item, name="gpuscout-validate", daemon=True) for item in pending
    ]
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


__all__ = ["Progress", "validate_devices", "validation_progress"]
