"""`gpuscout record` counts every device the recording holds, kept and dropped (issue 34)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_a_recording_of_llvmpipe_counts_it_as_dropped(tmp_path: Path, lavapipe_env: dict[str, str]) -> None:
    """Only lavapipe here: `recorded 1 device (0 kept, 1 dropped)`, not `0 device(s)`."""
    done = subprocess.run(
        [sys.executable, "-m", "gpuscout", "record", str(tmp_path / "rec"), "--plugins", "vulkan"],
        capture_output=True,
        text=True,
        timeout=120,
        env=lavapipe_env,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    assert "gpuscout: recorded 1 device (0 kept, 1 dropped), " in done.stderr, done.stderr
    assert "path" in done.stderr and "(s)" not in done.stderr
