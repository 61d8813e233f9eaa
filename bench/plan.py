"""Benchmark of the layer planner: 200 layers over 16 GPUs.

Times whole plans (``gpuscout._layout.plan.plan``) and counts capacity steps (greedyFit calls) to give
the time per step. Usage: ``python bench/plan.py [--runs N]``.
"""

from __future__ import annotations

import argparse
import statistics
import time

from gpuscout import DeviceInfo, SystemInfo
from gpuscout._layout import plan as planner

MIB = 1024**2
GIB = 1024**3


def machine() -> tuple[list[int], list[DeviceInfo]]:
    """200 layers of 90-130 MiB (output 600 MiB) and 16 GPUs of 4-19 GiB free."""
    layers = [(90 + (i * 37) % 41) * MIB for i in range(199)] + [600 * MIB]
    gpus = [
        DeviceInfo(id=f"gpu{i}", library="CUDA", free_memory=(4 + i) * GIB, total_memory=24 * GIB)
        for i in range(16)
    ]
    return layers, gpus


def scenario(name: str, runs: int, **options: object) -> None:
    layers, gpus = machine()
    system = SystemInfo(total_memory=256 * GIB, free_memory=256 * GIB, free_swap=0)
    times, steps = [], 0
    for _ in range(runs):
        counter = planner.Counter()
        start = time.perf_counter()
        result = planner.plan(layers, gpus, system, lambda d: 457 * MIB, counter=counter, **options)  # type: ignore[arg-type]
        times.append(time.perf_counter() - start)
        steps = counter.steps
    per_plan = statistics.median(times)
    print(
        f"{name:<28} layers placed {result.sum():>3}  gpus used {len(result):>2}  "
        f"plan {per_plan * 1e3:8.2f} ms  steps {steps:>4}  "
        f"per step {per_plan / steps * 1e6:7.1f} us"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=21)
    runs = parser.parse_args().runs
    scenario("auto (fits on few GPUs)", runs)
    scenario("spread", runs, spread=True)
    scenario("num_gpu=200", runs, num_gpu=200)
    # Backoff 0.9 leaves too little: every k is tried, twice (output layer dropped).
    scenario("auto, backoff 0.9 (tight)", runs, backoff=0.9)


if __name__ == "__main__":
    main()
