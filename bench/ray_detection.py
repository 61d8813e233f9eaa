"""``gpuscout list --json`` against Ray's own accelerator detection, paired, fresh processes.

Ray's detection is what a raylet runs at start: every accelerator manager's
``get_current_node_num_accelerators()`` (``ray._private.accelerators``), NVIDIA (pynvml),
AMD, Intel, TPU, Neuron and the rest. gpuscout's run is the whole command line: start-up,
every plugin, merge, JSON. Each pair runs the two back to back (alternating which goes first),
so both see the same machine state; the figure that counts is the median of the per-pair
ratios gpuscout / Ray (the issue asks for at most 0.30).

    .venv/bin/python bench/ray_detection.py [--runs 20]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

RAY_DETECTION = """
from ray._private.accelerators import get_all_accelerator_managers
found = {}
for manager in get_all_accelerator_managers():
    try:
        found[manager.get_resource_name()] = manager.get_current_node_num_accelerators()
    except Exception as exc:
        found[manager.get_resource_name()] = repr(exc)
print(found)
"""


def timed(argv: list[str]) -> float:
    """Wall seconds of one fresh process running ``argv`` (its output discarded)."""
    start = time.perf_counter()
    done = subprocess.run(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False, env=dict(os.environ)
    )
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{argv[:3]} failed ({done.returncode}): {done.stderr.decode()[-300:]}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    gpuscout = [sys.executable, "-m", "gpuscout", "list", "--json"]
    ray = [sys.executable, "-c", RAY_DETECTION]
    timed(gpuscout), timed(ray)  # warm the page cache for both
    ours: list[float] = []
    theirs: list[float] = []
    for i in range(args.runs):
        if i % 2:
            theirs.append(timed(ray))
            ours.append(timed(gpuscout))
        else:
            ours.append(timed(gpuscout))
            theirs.append(timed(ray))
    ratios = [a / b for a, b in zip(ours, theirs, strict=True)]
    print(
        f"gpuscout list --json: median {statistics.median(ours) * 1000:.1f} ms (min {min(ours) * 1000:.1f})"
    )
    print(
        f"Ray accelerator detection: median {statistics.median(theirs) * 1000:.1f} ms "
        f"(min {min(theirs) * 1000:.1f})"
    )
    print(
        f"paired ratio gpuscout / Ray over {args.runs} pairs: median "
        f"{statistics.median(ratios):.3f}, max {max(ratios):.3f} (target <= 0.30)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
