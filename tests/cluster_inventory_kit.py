"""Shared by tests/test_cluster_inventory_*.py: GPU records, discoveries and Ray's node results
built in a line (``gpu``, ``found``, ``node``, ``cudas``), and a five-node ``cluster`` of mixed
models and statuses.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpuscout._records.device import DeviceInfo, SystemInfo
from gpuscout._records.results import Discovery, PluginReport
from gpuscout.cluster.inventory import NodeResult, NodeStatus
from gpuscout.sizes import GIB

H100 = "NVIDIA H100 80GB HBM3"
A100 = "NVIDIA A100-SXM4-80GB"
MI300X = "AMD Instinct MI300X"


def gpu(
    name: str = H100,
    library: str = "CUDA",
    index: int = 0,
    total: int = 80 * GIB,
    free: int = 70 * GIB,
    **more: Any,
) -> DeviceInfo:
    return DeviceInfo(
        id=str(index),
        library=library,
        name=name,
        description=name,
        total_memory=total,
        free_memory=free,
        **more,
    )


def found(
    devices: Sequence[DeviceInfo], plugins: Sequence[PluginReport] = (), system: SystemInfo | None = None
) -> Discovery:
    return Discovery(devices=list(devices), dropped=[], system=system or SystemInfo(), plugins=list(plugins))


def node(
    devices: Sequence[DeviceInfo] = (),
    *,
    gpus: float = 0.0,
    kind: str = "",
    node_id: str = "node-a",
    hostname: str = "host-a",
    status: NodeStatus = NodeStatus.OK,
    **more: Any,
) -> NodeResult:
    return NodeResult(
        node_id=node_id,
        hostname=hostname,
        address="10.0.0.1",
        status=status,
        ray_resources={"CPU": 96.0, "GPU": gpus},
        accelerator_type=kind,
        discovery=found(devices) if status is NodeStatus.OK else None,
        **more,
    )


def cudas(n: int, name: str = H100, start: int = 0) -> list[DeviceInfo]:
    return [gpu(name, index=start + i) for i in range(n)]


def cluster() -> list[NodeResult]:
    return [
        node(cudas(8), gpus=8.0, kind="H100", node_id="n1", hostname="h1"),
        node(cudas(6) + cudas(2, A100, start=6), gpus=8.0, kind="H100", node_id="n2", hostname="h2"),
        node(
            [gpu(MI300X, "ROCm", 0, total=192 * GIB, free=190 * GIB)],
            gpus=2.0,
            kind="AMD-Instinct-MI300X-OAM",
            node_id="n3",
            hostname="h3",
        ),
        node(gpus=8.0, kind="H100", node_id="n4", hostname="", status=NodeStatus.DEAD, reason="gone"),
        node(node_id="n5", status=NodeStatus.TIMEOUT),
    ]
