"""Merge and rank cost when one plugin reports thousands of devices.

One in-process plugin reports N devices; every built-in rule plugin is loaded (the Vulkan one
answers the duplicate keys and the heuristic), the real Vulkan loader is kept away from drivers.
Prints the discovery wall time (median of --runs) for each shape and N, and the ratio of each N
to half of it (the target: 20,000 devices in under 5 s, doubling costs at most 2.5x).

Shapes:
- no-pci: one library, same description, no PCI ids (DeviceID decides; keys all equal)
- unique-pci: one library, a PCI id each
- same-pci: one library, one PCI id shared by all (partitions of one card, kept)
- many-libraries: a library each, no PCI ids, distinct descriptions
- twins: alternating CUDA and Vulkan records of the same cards, same description, memory
  growing with the index, no PCI ids (half are heuristic twins: the heuristic's worst case)

    python bench/merge.py [--sizes 10000 20000 40000] [--runs 3] [--shapes no-pci twins]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

from gpuscout import DeviceInfo, Scout, hookimpl

GIB = 1 << 30


def _pci(i: int) -> str:
    return f"{i >> 16:04x}:{(i >> 8) & 0xFF:02x}:{(i >> 3) & 0x1F:02x}.{i & 7}"


SHAPES: dict[str, Callable[[int], DeviceInfo]] = {
    "no-pci": lambda i: DeviceInfo(
        id=f"d{i}", library="Many", description="Acme GPU", total_memory=8 * GIB, free_memory=(i % 8) * GIB
    ),
    "unique-pci": lambda i: DeviceInfo(
        id=f"d{i}", library="Many", description="Acme GPU", pci_id=_pci(i), total_memory=8 * GIB
    ),
    "same-pci": lambda i: DeviceInfo(
        id=f"d{i}", library="Many", description="Acme GPU", pci_id="0000:01:00.0", total_memory=8 * GIB
    ),
    "many-libraries": lambda i: DeviceInfo(
        id=f"d{i}", library=f"L{i}", description=f"gpu {i}", total_memory=8 * GIB
    ),
    "twins": lambda i: DeviceInfo(
        id=f"d{i}", library=("CUDA", "Vulkan")[i % 2], description="Acme GPU", total_memory=(i // 2 + 1) * GIB
    ),
}


class Reports:
    """An in-process backend that reports a fixed list of devices."""

    def __init__(self, devices: list[DeviceInfo]) -> None:
        self.devices = devices

    @hookimpl
    def gpuscout_enumerate(self, context: Any) -> list[DeviceInfo]:
        return self.devices


def discover_seconds(shape: str, n: int) -> tuple[float, int, int]:
    """(wall seconds of one discover, survivors, dropped) for ``n`` devices of ``shape``."""
    devices = [SHAPES[shape](i) for i in range(n)]
    scout = Scout(
        plugins=["cuda", "rocm", "metal", "vulkan", "many"],
        extra=[("many", Reports(devices))],
        entry_points=False,
        env={"VK_DRIVER_FILES": "/nonexistent/gpuscout-bench.json"},
        enumerate_timeout=60.0,
    )
    start = time.perf_counter()
    found = scout.discover()
    return time.perf_counter() - start, len(found.devices), len(found.dropped)


def main() -> None:
    """Print one line per shape and size."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 20_000, 40_000])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--shapes", nargs="+", choices=sorted(SHAPES), default=list(SHAPES))
    args = parser.parse_args()
    print(f"{'shape':<16}{'devices':>9}{'median s':>10}{'x half':>8}{'kept':>8}{'dropped':>9}")
    for shape in args.shapes:
        last: tuple[int, float] | None = None
        for n in sorted(args.sizes):
            runs = [discover_seconds(shape, n) for _ in range(args.runs)]
            median = statistics.median(r[0] for r in runs)
            ratio = f"{median / last[1]:.2f}" if last and last[0] * 2 == n else ""
            print(f"{shape:<16}{n:>9}{median:>10.2f}{ratio:>8}{runs[0][1]:>8}{runs[0][2]:>9}", flush=True)
            last = (n, median)


if __name__ == "__main__":
    main()
