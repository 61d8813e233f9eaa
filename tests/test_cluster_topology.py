"""`gpuscout cluster` carries where each device sits: a node's answer holds the topology by its
wire keys, reads back into the records, and the node's ``--json`` entry writes it again."""

from __future__ import annotations

import json

from gpuscout._records.device import DeviceInfo, SystemInfo
from gpuscout._records.encode import unstructure
from gpuscout._records.fields import PcieLink, PeerLink
from gpuscout._records.results import Discovery
from gpuscout.cluster.inventory import NodeResult, NodeStatus, node_json
from gpuscout.cluster.ray import read_answer
from gpuscout.sizes import GIB

BASE = NodeResult(node_id="node-x", ray_resources={"GPU": 2.0}, accelerator_type="H200")
PLACED = [
    DeviceInfo(
        id=f"GPU-{i}",
        library="CUDA",
        name="NVIDIA H200",
        pci_id=f"0000:{0x19 + i:02x}:00.0",
        total_memory=140 * GIB,
        numa_node=i,
        local_cpus=f"{48 * i}-{48 * i + 47}",
        pcie_link=PcieLink(speed=32.0, width=16, max_speed=32.0, max_width=16),
        peers=[PeerLink(f"GPU-{1 - i}", "CUDA", "nvlink")],
    )
    for i in range(2)
]


def test_a_nodes_topology_survives_its_answer_and_the_inventory_json() -> None:
    """NUMA nodes, CPU lists, links and peers read back equal and are written in --json."""
    discovery = Discovery(devices=PLACED, dropped=[], system=SystemInfo(), plugins=[])
    text = json.dumps({"format": 1, "node_id": "node-x", "discovery": unstructure(discovery)})
    result = read_answer(BASE, text, 0.1)
    assert result.status is NodeStatus.OK and result.discovery is not None
    assert result.discovery.devices == PLACED
    devices = node_json(result)["devices"]
    assert [d["numa_node"] for d in devices] == [0, 1]
    assert devices[1]["local_cpus"] == "48-95"
    assert devices[0]["peers"] == [{"id": "GPU-1", "backend": "CUDA", "link": "nvlink"}]


def test_a_node_answer_with_a_bad_topology_fails_that_node_naming_the_key() -> None:
    """A node that writes a CPU list no kernel prints is failed, with the key's path."""
    doc = unstructure(Discovery(devices=PLACED[:1], dropped=[], system=SystemInfo(), plugins=[]))
    doc["devices"][0]["local_cpus"] = "0-3:1/2"
    result = read_answer(BASE, json.dumps({"format": 1, "node_id": "node-x", "discovery": doc}), 0.1)
    assert result.status is NodeStatus.FAILED and "devices[0].local_cpus" in result.reason
