"""Refresh cost against a full discovery, for the devices found on this machine.

One Scout per mode (all built-in plugins, entry points off) discovers with
``include_software=True`` (so a software device such as lavapipe, which a plain discovery
drops, is refreshed too), then alternates ``discover()`` and ``refresh(devices)`` for --runs
rounds. Prints the median wall time of each, the refresh time per device, their ratio, and
which devices came back stale (a plugin could not read their free memory again).

Modes:
- in-process: ``env`` is this process's environment, so the Vulkan loader is asked here;
- child: ``env`` differs by one variable, so the Vulkan probe runs in a child process (what a
  host that passes its own ``env`` pays).

    python bench/refresh.py [--runs 21] [--modes in-process child]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any

from gpuscout import Scout

MODES = {
    "in-process": lambda: None,
    # Any variable outside GPUSCOUT_* and GGML_VK_VISIBLE_DEVICES makes the loader's view differ.
    "child": lambda: {**os.environ, "BENCH_REFRESH_CHILD": "1"},
}


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


def measure(mode: str, runs: int) -> dict[str, Any]:
    """Median discover and refresh wall times of ``mode`` over ``runs`` rounds."""
    start = time.perf_counter()
    scout = Scout(entry_points=False, env=MODES[mode]())
    devices = scout.discover(include_software=True).devices
    first_discover = time.perf_counter() - start
    start = time.perf_counter()
    refreshed = scout.refresh(devices)
    first_refresh = time.perf_counter() - start
    discover_times: list[float] = []
    refresh_times: list[float] = []
    for _ in range(runs):
        start = time.perf_counter()
        scout.discover(include_software=True)
        discover_times.append(time.perf_counter() - start)
        start = time.perf_counter()
        refreshed = scout.refresh(devices)
        refresh_times.append(time.perf_counter() - start)
    discover = statistics.median(discover_times)
    refresh = statistics.median(refresh_times)
    return {
        "mode": mode,
        "devices": [f"{d.library}:{d.id} {d.name}" for d in devices],
        "first_discover": first_discover,
        "first_refresh": first_refresh,
        "discover": discover,
        "refresh": refresh,
        "per_device": refresh / len(devices) if devices else 0.0,
        "ratio": refresh / discover if discover else 0.0,
        "stale": [f"{d.library}:{d.id}" for d in refreshed if d.free_memory_stale],
    }


def main() -> None:
    """Measure each mode and print one line per mode."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--modes", nargs="+", choices=sorted(MODES), default=list(MODES))
    args = parser.parse_args()
    print(f"runs: {args.runs} (medians; the first, cold call of each shown apart)")
    for mode in args.modes:
        r = measure(mode, args.runs)
        print(f"\n{mode}: {len(r['devices'])} device(s): {'; '.join(r['devices']) or 'none'}")
        print(f"  discover: {_ms(r['discover'])} (first {_ms(r['first_discover'])})")
        print(
            f"  refresh:  {_ms(r['refresh'])} (first {_ms(r['first_refresh'])}), "
            f"{_ms(r['per_device'])} per device, {r['ratio']:.2f} x discover"
        )
        print(f"  stale after refresh: {', '.join(r['stale']) or 'none'}")


if __name__ == "__main__":
    main()
