"""Off macOS the Metal plugin finds nothing and imports nothing Apple (checked in a child)."""

from __future__ import annotations

import json
import subprocess
import sys

CHILD = """
import json, sys
from gpuscout import Scout
s = Scout(plugins=["metal"], entry_points=False, env={}, platform="linux")
found = s.discover(include_software=True)
report = next(r for r in s.reports if r.name == "metal")
apple = sorted(m for m in sys.modules
               if m.split(".")[0] in ("Metal", "objc", "Foundation", "CoreFoundation", "AppKit"))
print(json.dumps({"devices": len(found.devices), "status": report.status,
                  "note": report.note, "apple": apple}))
"""


def run_child() -> dict[str, object]:
    proc = subprocess.run(
        [sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=60, check=True
    )
    result: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def test_linux_finds_no_metal_device_and_imports_nothing_apple() -> None:
    """platform="linux": zero devices, status ok, no Metal/objc module loaded."""
    result = run_child()
    assert (result["devices"], result["status"], result["apple"]) == (0, "ok", [])


def test_linux_says_why_there_is_no_metal_device() -> None:
    """The report's note says Metal exists only on macOS."""
    assert "only on macOS" in str(run_child()["note"])
