"""The cluster inventory's pure data and arithmetic (``gpuscout.cluster.inventory``): Ray's
accelerator types matched to gpuscout's models, the disagreements between the two, the summary
across nodes, the inventory's JSON, and the CLI's summary lines.

Ray is never imported here (tests/test_cluster_ray.py starts a real cluster and must import it
first).
"""

from __future__ import annotations

import json

import attrs
import pytest

from gpuscout._records.device import DeviceInfo, SystemInfo
from gpuscout._records.encode import unstructure
from gpuscout._records.results import Discovery, PluginReport, PluginStatus
from gpuscout.cli._commands.cluster import node_heading, summary_lines
from gpuscout.cluster.inventory import (
    RAY_GPU_LIBRARIES,
    Inventory,
    NodeResult,
    NodeStatus,
    disagreements,
    inventory_json,
    summarize,
    type_matches,
)
from gpuscout.sizes import GIB
from tests.cluster_inventory_kit import A100, H100, MI300X, cluster, cudas, found, gpu, node

# -- type_matches ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ray_type", "model"),
    [
        ("H100", H100),
        ("A100", A100),
        ("GeForce-RTX-4090", "NVIDIA GeForce RTX 4090"),
        ("AMD-Instinct-MI300X-OAM", MI300X),
        ("h100", "nvidia h100 80gb hbm3"),  # case does not matter either
    ],
)
def test_ray_accelerator_types_match_gpuscout_names(ray_type: str, model: str) -> None:
    """Ray's accelerator type matches gpuscout's model name, whatever the case and punctuation."""
    assert type_matches(ray_type, model)


@pytest.mark.parametrize(
    ("ray_type", "model"),
    [
        ("H100", A100),
        ("A100", H100),
        ("", H100),
        ("", ""),
        ("H100", ""),
        ("---", H100),  # nothing left after the punctuation goes
        ("MI300X", "AMD Instinct MI250X"),
    ],
)
def test_other_or_empty_types_do_not_match(ray_type: str, model: str) -> None:
    """A type of another model, an empty type or an empty model name never matches."""
    assert not type_matches(ray_type, model)


@pytest.mark.parametrize(
    ("ray_type", "model"),
    [
        ("L4", "NVIDIA L40S"),
        ("H20", "NVIDIA H200"),
        ("A10", "NVIDIA A100-SXM4-80GB"),
    ],
)
def test_a_shorter_model_number_is_not_a_prefix_match(ray_type: str, model: str) -> None:
    """A model number matches whole: an L4 is not an L40S, an H20 not an H200."""
    assert not type_matches(ray_type, model)


# -- disagreements --------------------------------------------------------------------------------


def test_ray_counting_more_gpus_than_gpuscout_is_one_gpu_count_disagreement() -> None:
    """Ray scheduling more GPUs than gpuscout finds is one gpu_count disagreement naming both counts."""
    n = node(cudas(7), gpus=8.0, kind="H100")
    [d] = disagreements(n)
    assert (d.kind, d.ray, d.gpuscout) == ("gpu_count", "8", "7")
    assert (d.node_id, d.hostname) == ("node-a", "host-a")
    assert "8 GPU" in d.detail and "finds 7" in d.detail
    assert f"7x {H100}" in d.detail


@pytest.mark.parametrize(("ray", "said"), [(1.0, "1 GPU here"), (2.0, "2 GPUs here"), (0.5, "0.5 GPUs here")])
def test_the_gpu_count_disagreement_takes_the_singular_for_one(ray: float, said: str) -> None:
    """Ray scheduling one GPU says ``1 GPU``, any other count ``GPUs``, never ``GPU(s)``."""
    [d] = disagreements(node(cudas(0 if ray == 2.0 else 3), gpus=ray, kind="H100"))
    assert f"Ray schedules {said};" in d.detail
    assert "(s)" not in d.detail


def test_ray_type_of_another_model_is_an_accelerator_type_disagreement() -> None:
    """A Ray type of another model than the one found is an accelerator_type disagreement."""
    n = node(cudas(8), gpus=8.0, kind="A100")
    [d] = disagreements(n)
    assert (d.kind, d.ray, d.gpuscout) == ("accelerator_type", "A100", f"8x {H100}")
    assert "A100" in d.detail and H100 in d.detail


def test_a_mixed_node_lists_both_models() -> None:
    """On a node with two models, the type disagreement lists both, each with its count."""
    n = node(cudas(4) + cudas(4, A100, start=4), gpus=8.0, kind="H100")
    [d] = disagreements(n)
    assert d.kind == "accelerator_type" and d.ray == "H100"
    assert d.gpuscout == f"4x {A100}, 4x {H100}"
    assert f"4x {A100}" in d.detail and f"4x {H100}" in d.detail


@pytest.mark.parametrize(
    ("devices", "gpus", "kind"),
    [
        (cudas(8), 8.0, "H100"),
        ([gpu(MI300X, "ROCm", i) for i in range(8)], 8.0, "AMD-Instinct-MI300X-OAM"),
        ([gpu("Apple M2 Max", "Metal")], 1.0, "M2"),
        ([], 0.0, ""),
        ([gpu("Intel(R) Arc(tm) A770 Graphics (DG2)", "Vulkan")], 0.0, ""),
        ([gpu("llvmpipe (LLVM 17.0.6, 256 bits)", "Vulkan", software=True)], 0.0, ""),
    ],
)
def test_agreeing_nodes_and_vulkan_only_nodes_have_no_disagreement(
    devices: list[DeviceInfo], gpus: float, kind: str
) -> None:
    """A node where Ray agrees, or whose only devices are Vulkan ones, has no disagreement."""
    assert disagreements(node(devices, gpus=gpus, kind=kind)) == []


def test_vulkan_devices_are_not_counted_as_ray_gpus() -> None:
    """Vulkan devices never count as Ray GPUs, even when they are the same cards as the CUDA ones."""
    assert "Vulkan" not in RAY_GPU_LIBRARIES
    # The same physical H100s seen through Vulkan too: only the CUDA ones count.
    devices = cudas(2) + [gpu(H100, "Vulkan", i) for i in range(2)]
    assert disagreements(node(devices, gpus=2.0, kind="H100")) == []
    [d] = disagreements(node(devices, gpus=4.0, kind="H100"))
    assert (d.kind, d.ray, d.gpuscout) == ("gpu_count", "4", "2")


@pytest.mark.parametrize("status", [s for s in NodeStatus if s is not NodeStatus.OK])
def test_a_node_without_an_answer_has_no_disagreement(status: NodeStatus) -> None:
    """A node that gave no answer (dead, timed out, missing, failed) has no disagreement."""
    assert disagreements(node(gpus=8.0, kind="H100", status=status)) == []


def test_a_ray_type_where_no_gpu_is_found_is_one_disagreement() -> None:
    """A Ray type where no GPU is found is one disagreement: the type, or the count if GPUs are scheduled."""
    [d] = disagreements(node([], gpus=0.0, kind="H100"))
    assert (d.kind, d.ray, d.gpuscout) == ("accelerator_type", "H100", "none")
    assert "no GPU" in d.detail
    # With GPUs scheduled too, the count says it (once, not twice).
    [d] = disagreements(node([], gpus=8.0, kind="H100"))
    assert (d.kind, d.ray, d.gpuscout) == ("gpu_count", "8", "0")
    assert "finds 0 (none)" in d.detail


def test_gpus_found_where_ray_has_no_type_are_a_type_disagreement() -> None:
    """GPUs found on a node that Ray gives no accelerator type are one accelerator_type disagreement."""
    kinds = [d.kind for d in disagreements(node(cudas(2), gpus=2.0, kind=""))]
    assert kinds == ["accelerator_type"]


def test_fractional_gpu_resource_is_a_count_disagreement() -> None:
    """A fractional GPU resource never equals a count of devices: it is a gpu_count disagreement."""
    [d] = disagreements(node(cudas(1), gpus=0.5, kind="H100"))
    assert (d.kind, d.ray, d.gpuscout) == ("gpu_count", "0.5", "1")


# -- summarize ------------------------------------------------------------------------------------


def test_summary_counts_models_per_library_with_their_nodes() -> None:
    """The summary counts each model per library with the number of nodes holding it, sorted."""
    s = summarize(cluster())
    assert s.nodes == 5 and s.devices == 17
    got = {(m.library, m.name): (m.count, m.nodes) for m in s.models}
    assert got == {("CUDA", H100): (14, 2), ("CUDA", A100): (2, 1), ("ROCm", MI300X): (1, 1)}
    assert [(m.library, m.name) for m in s.models] == sorted(got)


def test_summary_sums_memory_per_library() -> None:
    """The summary sums the devices, total memory and free memory of each library."""
    s = summarize(cluster())
    memory = {m.library: (m.devices, m.total_memory, m.free_memory) for m in s.memory}
    assert memory == {"CUDA": (16, 16 * 80 * GIB, 16 * 70 * GIB), "ROCm": (1, 192 * GIB, 190 * GIB)}


def test_summary_counts_every_status_zeros_included() -> None:
    """The summary counts nodes by every status, a status no node has included as zero."""
    s = summarize(cluster())
    assert dict(s.nodes_by_status) == {"ok": 3, "dead": 1, "timeout": 1, "missing": 0, "failed": 0}
    assert set(summarize([]).nodes_by_status) == {str(v) for v in NodeStatus}
    assert set(summarize([]).nodes_by_status.values()) == {0}


def test_summary_collects_every_nodes_disagreements() -> None:
    """The summary collects the disagreements of every node, in node order."""
    s = summarize(cluster())
    assert [(d.node_id, d.kind) for d in s.disagreements] == [("n2", "accelerator_type"), ("n3", "gpu_count")]


def test_the_summary_of_no_nodes_is_empty() -> None:
    """The summary of no nodes counts nothing and lists nothing."""
    s = summarize([])
    assert (s.nodes, s.devices, s.models, s.memory, s.disagreements) == (0, 0, (), (), ())


# -- inventory_json -------------------------------------------------------------------------------


NODE_KEYS = {
    "node_id",
    "hostname",
    "address",
    "status",
    "reason",
    "ray",
    "gpuscout_version",
    "ran_on",
    "pid",
    "devices",
    "dropped",
    "system",
    "problems",
    "notes",
    "visible_env",
    "elapsed_ms",
}


def test_the_inventory_json_has_fixed_keys_and_wire_devices() -> None:
    """The inventory's JSON has fixed keys per node and in the summary, devices as list --json writes them."""
    nodes = tuple(cluster())
    doc = inventory_json(Inventory(nodes=nodes, summary=summarize(nodes), elapsed=1.5))
    assert set(doc) == {"nodes", "summary"}
    assert json.loads(json.dumps(doc)) == doc
    assert [n["node_id"] for n in doc["nodes"]] == ["n1", "n2", "n3", "n4", "n5"]
    for entry in doc["nodes"]:
        assert set(entry) == NODE_KEYS
    first = doc["nodes"][0]
    assert first["status"] == "ok"
    assert first["ray"] == {"resources": {"CPU": 96.0, "GPU": 8.0}, "accelerator_type": "H100"}
    assert first["system"] == {"total_memory": 0, "free_memory": 0, "free_swap": 0}
    device = first["devices"][0]
    # The wire keys, as `gpuscout list --json` writes them.
    assert device["backend"] == "CUDA" and "library" not in device
    assert device["name"] == H100 and device["total_memory"] == 80 * GIB
    assert nodes[0].discovery is not None
    assert first["devices"] == unstructure(nodes[0].discovery.devices)
    summary = doc["summary"]
    assert set(summary) == {
        "elapsed_ms",
        "nodes",
        "nodes_by_status",
        "devices",
        "models",
        "memory",
        "disagreements",
    }
    assert summary["memory"]["ROCm"] == {
        "devices": 1,
        "total_memory": 192 * GIB,
        "free_memory": 190 * GIB,
        "free_unknown_devices": 0,
        "free_unknown_total_memory": 0,
    }
    assert {"library": "CUDA", "name": H100, "count": 14, "nodes": 2} in summary["models"]
    assert summary["disagreements"][0]["node_id"] == "n2"
    assert set(summary["disagreements"][0]) == {"node_id", "hostname", "kind", "ray", "gpuscout", "detail"}


def test_a_dead_node_in_json_has_no_devices_and_no_system() -> None:
    """A dead node in the JSON keeps its reason and has no devices, no system and no problems."""
    dead = node(gpus=8.0, kind="H100", node_id="n4", status=NodeStatus.DEAD, reason="gone")
    doc = inventory_json(Inventory(nodes=(dead,), summary=summarize([dead])))
    [entry] = doc["nodes"]
    assert (entry["status"], entry["reason"]) == ("dead", "gone")
    assert entry["devices"] == [] and entry["dropped"] == [] and entry["system"] is None
    assert entry["problems"] == []
    json.dumps(doc)


def test_json_ray_type_is_null_when_ray_has_none_and_problems_are_listed() -> None:
    """A Ray type Ray did not give is null in the JSON, and a failing plugin is listed as a problem."""
    failing = PluginReport(name="cuda", status=PluginStatus.FAILED, error="NVML exploded")
    n = attrs.evolve(node(node_id="p"), discovery=found([], plugins=[failing]))
    [entry] = inventory_json(Inventory(nodes=(n,), summary=summarize([n])))["nodes"]
    assert entry["ray"]["accelerator_type"] is None
    assert entry["problems"] == ["cuda failed: NVML exploded"]


# -- summary_lines --------------------------------------------------------------------------------


def test_the_summary_lines_count_nodes_models_and_disagreements() -> None:
    """The summary lines count nodes by status, devices and models, one line per disagreement."""
    nodes = tuple(cluster())
    lines = summary_lines(Inventory(nodes=nodes, summary=summarize(nodes), elapsed=3.25))
    assert lines[0] == "Cluster: 5 nodes (3 ok, 1 dead, 1 timeout), 17 devices, 3.2 s"
    assert f"  14x CUDA {H100} on 2 nodes" in lines
    assert f"  1x ROCm {MI300X} on 1 node" in lines
    assert sum(line.startswith("Ray disagrees on node n2 (h2)") for line in lines) == 1
    heading = node_heading(nodes[3])
    assert heading == "node n4 on ? (10.0.0.1): dead; Ray: 8 GPU, H100 - gone"


def test_devices_named_by_position_count_by_their_description() -> None:
    """ROCm's records are named ROCm0, ROCm1 with the model in the description: the summary
    and Ray's accelerator type are compared on the description."""
    cards = [
        DeviceInfo(
            id=f"GPU-{i}",
            library="ROCm",
            name=f"ROCm{i}",
            description="AMD Instinct MI300X",
            total_memory=192 << 30,
        )
        for i in range(2)
    ]
    node = NodeResult(
        node_id="n1",
        status=NodeStatus.OK,
        ray_resources={"GPU": 2.0},
        accelerator_type="AMD-Instinct-MI300X-OAM",
        discovery=Discovery(devices=cards, dropped=[], system=SystemInfo(), plugins=[]),
    )
    assert disagreements(node) == []
    s = summarize([node])
    assert [(m.name, m.count, m.nodes) for m in s.models] == [("AMD Instinct MI300X", 2, 1)]
