"""Run ``python -m gpuscout`` on a real pseudo-terminal of a given width, as a user's terminal."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Mapping
from pathlib import Path

#: Longest a command on the terminal may take before the test gives up on it.
DEADLINE = 120.0


def on_terminal(
    argv: list[str],
    columns: int,
    env: Mapping[str, str] | None = None,
    script: str | None = None,
    cwd: Path | None = None,
) -> tuple[int, str]:
    """``python -m gpuscout ARGV`` (or ``python -c SCRIPT ARGV``) with stdout and stderr on a
    pseudo-terminal ``columns`` wide (``COLUMNS`` and ``LINES`` unset, so the width is the
    terminal's own), run in ``cwd``: its exit code and everything it wrote there, line ends as
    ``\\n``. A command still writing after ``DEADLINE`` seconds is killed (exit code -9)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    base = dict(os.environ if env is None else env)
    for name in ("COLUMNS", "LINES"):
        base.pop(name, None)
    child = subprocess.Popen(
        [sys.executable, *(["-c", script] if script is not None else ["-m", "gpuscout"]), *argv],
        stdin=subprocess.DEVNULL,
        stdout=slave,
        stderr=slave,
        env=base,
        cwd=cwd,
    )
    os.close(slave)
    chunks: list[bytes] = []
    deadline = time.monotonic() + DEADLINE
    try:
        while time.monotonic() < deadline:
            if not select.select([master], [], [], 0.5)[0]:
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: every writer has closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
        else:
            child.kill()
    finally:
        os.close(master)
    code = child.wait(timeout=30)
    return code, b"".join(chunks).decode("utf-8", "replace").replace("\r\n", "\n")
