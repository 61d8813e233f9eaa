"""Stdout kept for gpuscout alone while a command runs.

What a plugin or a vendor library prints (``print``, ``os.write(1, ...)``, a C ``printf``) goes to
stderr, so output that users parse or ``eval`` stays clean; gpuscout's own output is written to
``output()``, the real stdout.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO


class _StdoutGuard:
    """Stdout kept for gpuscout alone: while held, ``sys.stdout`` and (when it is descriptor 1)
    descriptor 1 itself lead to stderr, so neither a plugin's ``print`` nor a C library's
    ``printf`` or ``os.write(1, ...)`` lands in output that users parse or ``eval``;
    ``stream`` leads to the real stdout."""

    def __init__(self) -> None:
        self.original = self.stream = sys.stdout
        self.saved = -1  # a duplicate of the real descriptor 1 while 1 leads to stderr
        try:
            redirect = sys.stdout.fileno() == 1 and sys.stderr.fileno() >= 0
        except (AttributeError, OSError, ValueError):  # capsys and other streams without one
            redirect = False
        if redirect:
            self._redirect_descriptor()
        sys.stdout = sys.stderr

    def _redirect_descriptor(self) -> None:
        real = self.original
        real.flush()
        self.saved = os.dup(1)
        try:
            self.stream = open(
                self.saved,
                "w",
                encoding=getattr(real, "encoding", None),
                errors=getattr(real, "errors", None),
                closefd=False,
            )
            self.stream.reconfigure(
                line_buffering=getattr(real, "line_buffering", False),
                write_through=getattr(real, "write_through", False),
            )
            os.dup2(sys.stderr.fileno(), 1)
        except (OSError, ValueError):  # keep the Python-level guard only
            os.close(self.saved)
            self.saved, self.stream = -1, real

    def release(self) -> None:
        """Put stdout back as it was; what could not be flushed is dropped (a closed pipe)."""
        sys.stdout = self.original
        if self.saved < 0:
            return
        try:
            _flush_c_streams()  # what a C library buffered for descriptor 1 belongs on stderr
            self.stream.close()
        except (OSError, ValueError):
            pass
        finally:
            os.dup2(self.saved, 1)
            os.close(self.saved)


def _flush_c_streams() -> None:
    # fflush takes each C stream's lock; a runaway plugin thread blocked inside a C write could
    # hold one forever, so the flush runs on a daemon thread that is waited for briefly.
    def flush() -> None:
        try:
            import ctypes

            ctypes.CDLL(None).fflush(None)
        except (AttributeError, OSError, TypeError):  # no C library to ask (Windows)
            pass

    import threading

    worker = threading.Thread(target=flush, name="gpuscout-fflush", daemon=True)
    worker.start()
    worker.join(0.5)


_guard: _StdoutGuard | None = None


def output() -> TextIO:
    """The stream for gpuscout's own output (JSON, tables, ``env`` lines): the real stdout.

    While a command runs, ``sys.stdout`` and descriptor 1 lead to stderr, so that what a plugin
    or a vendor library prints cannot corrupt that output; everything gpuscout means to put on
    stdout (a result, a line for a parent process) is written here.
    """
    return _guard.stream if _guard is not None else sys.stdout


def release_stdout() -> None:
    """Give the real stdout back to ``sys.stdout`` and descriptor 1 early, for a child that must
    inherit it (``exec``); a no-op when it is not held."""
    global _guard
    guard, _guard = _guard, None
    if guard is not None:
        guard.release()


@contextmanager
def stdout_for_gpuscout() -> Iterator[None]:
    """Hold stdout for gpuscout while the block runs (see ``output()``), then give it back."""
    global _guard
    _guard = _StdoutGuard()
    try:
        yield
    finally:
        release_stdout()


def quiet_stdout() -> None:
    """Point stdout at the null device, so nothing written later (not even the interpreter's
    last flush) meets the closed pipe again."""
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        pass
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):
        pass
