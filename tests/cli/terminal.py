"""Run ``python -m gpuscout`` on a real pseudo-terminal of a given width, as a user's terminal."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios
from collections.abc import Mapping


def on_terminal(
    argv: list[str],
    columns: int,
    env: Mapping[str, str] | None = None,
    script: str | None = None,
) -> tuple[int, str]:
    """``python -m gpuscout ARGV`` (or ``python -c SCRIPT ARGV``) with stdout and stderr on a
    pseudo-terminal ``columns`` wide (``COLUMNS`` and ``LINES`` unset, so the width is the
    terminal's own): its exit code and everything it wrote there, line ends as ``\\n``."""
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
    )
    os.close(slave)
    chunks: list[bytes] = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: every writer has closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    code = child.wait(timeout=120)
    return code, b"".join(chunks).decode("utf-8", "replace").replace("\r\n", "\n")
