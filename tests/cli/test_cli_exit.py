"""The ``gpuscout`` process skips the interpreter's last collections at exit (about 9 ms of
``list --json``, bench/RESULTS.md 2026-12-02); a host that calls ``main`` with arguments keeps
its collector as it was."""

from __future__ import annotations

import os
import subprocess
import sys

# Registered before gpuscout's own handlers, so it runs after them (atexit is last in, first
# out) and sees what they left: whether the collector was frozen.
DRIVER = """
import atexit, gc, os, sys
atexit.register(lambda: os.write(2, b"\\nFROZEN %d\\n" % (gc.get_freeze_count() > 0)))
from gpuscout.cli import main
if sys.argv[1] == "process":
    sys.argv = ["gpuscout", "list", "--json", "--plugins", "cuda"]
    code = main()
else:
    code = main(["list", "--json", "--plugins", "cuda"])
sys.exit(code)
"""


def _frozen_at_exit(how: str) -> bool:
    env = {**os.environ, "VK_DRIVER_FILES": "/nonexistent/gpuscout-test.json"}
    out = subprocess.run(
        [sys.executable, "-c", DRIVER, how], capture_output=True, text=True, timeout=120, env=env
    )
    assert out.returncode == 0, out.stderr
    assert '"devices"' in out.stdout
    last = out.stderr.rstrip("\n").rsplit("\n", 1)[-1]
    assert last.startswith("FROZEN "), out.stderr
    return last == "FROZEN 1"


def test_the_command_process_freezes_the_collector_at_exit() -> None:
    """``main()`` reading ``sys.argv`` (the console script, ``python -m gpuscout``) freezes the
    collector once the process exits, after its output is written."""
    assert _frozen_at_exit("process")


def test_main_with_arguments_leaves_the_collector_alone() -> None:
    """``main([...])``, as a host or a test calls it, registers nothing at exit."""
    assert not _frozen_at_exit("host")
