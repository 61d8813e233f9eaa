"""Wall time of a Ray cluster inventory against one local discovery.

Starts a local Ray cluster of ``--nodes`` nodes (one CPU each, no GPU, bound to 127.0.0.1),
each pinned to lavapipe like the tests, then times ``gpuscout.cluster.ray.inventory`` (which
runs Ray's side in a child process that attaches, sends one isolated discovery per node and
detaches; or runs it in-process when this process is already attached) against ``Scout.discover`` here, both
isolated and in-process, over ``--runs`` runs each. Needs the extra ``ray`` and lavapipe.

    python bench/cluster.py [--nodes 3] [--runs 7]
"""

from __future__ import annotations

import argparse
import glob
import os
import statistics
import time
from collections.abc import Callable
from typing import Any


def timed(call: Callable[[], Any], runs: int) -> tuple[float, list[float]]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times), times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    icd = sorted(glob.glob("/usr/share/vulkan/icd.d/lvp_icd.*.json"))
    env = {"GPUSCOUT_PLUGINS": "vulkan", **({"VK_DRIVER_FILES": icd[0]} if icd else {})}
    os.environ.update(env)

    import ray
    from ray.cluster_utils import Cluster

    from gpuscout import Scout
    from gpuscout.cluster.ray import inventory

    start = time.perf_counter()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "num_gpus": 0, "env_vars": env})
    for _ in range(args.nodes - 1):
        cluster.add_node(num_cpus=1, num_gpus=0, env_vars=env)
    cluster.wait_for_nodes()
    print(f"cluster of {args.nodes} nodes up in {time.perf_counter() - start:.1f} s (ray {ray.__version__})")
    try:
        first = time.perf_counter()
        found = inventory(cluster.address, 60.0, include_software=True)
        print(
            f"first inventory (workers start): {(time.perf_counter() - first) * 1000:.0f} ms, "
            f"{[str(n.status) for n in found.nodes]}"
        )
        cold, _ = timed(lambda: inventory(cluster.address, 60.0, include_software=True), args.runs)
        ray.init(address=cluster.address, log_to_driver=False, logging_level="WARNING")
        warm, _ = timed(lambda: inventory(None, 60.0, include_software=True), args.runs)
        ray.shutdown()
        scout = Scout(env=dict(os.environ))
        isolated, _ = timed(lambda: scout.discover(include_software=True, isolated=True), args.runs)
        local, _ = timed(lambda: scout.discover(include_software=True), args.runs)
    finally:
        if ray.is_initialized():
            ray.shutdown()
        cluster.shutdown()
    print(
        f"inventory, not attached (a child attaches, runs, detaches): {cold * 1000:7.0f} ms "
        f"(median of {args.runs})"
    )
    print(f"inventory, already attached:         {warm * 1000:7.0f} ms")
    print(f"one local discovery, isolated:       {isolated * 1000:7.0f} ms")
    print(f"one local discovery, in-process:     {local * 1000:7.0f} ms")
    print(
        f"overhead of the attached inventory over one isolated local discovery: "
        f"{(warm - isolated) * 1000:.0f} ms ({warm / isolated:.1f}x)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
