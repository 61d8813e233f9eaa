"""The cluster inventory without a cluster: the pure data and arithmetic of
``gpuscout.cluster.inventory``, the reading of a node's answer (``gpuscout.cluster.ray.read_answer``,
fed as an attacker would), the node side (``gpuscout.cluster.node``: the environment it restores,
and one real in-process ``report`` over lavapipe) and the CLI's text lines.

Ray is never imported here (tests/test_cluster_ray.py starts a real cluster and must import it
first); ``import_ray`` is only driven with ``ray`` blocked in ``sys.modules``.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest

from gpuscout.cli.cluster import node_heading, summary_lines
from gpuscout.cluster import node as cluster_node
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
from gpuscout.cluster.node import RAY_OVERRIDE_ON_ZERO, node_env, report, start_environ
from gpuscout.cluster.ray import (
    DEFAULT_PORT,
    MAX_ANSWER,
    RAY_LOOPBACK_ENV,
    RayMissing,
    import_ray,
    read_answer,
)
from gpuscout.cluster.ray_driver import _is_loopback, _split
from gpuscout.errors import GpuscoutError
from gpuscout.records import DeviceInfo, SystemInfo
from gpuscout.results import Discovery, PluginReport, PluginStatus
from gpuscout.sizes import GIB
from gpuscout.wire_encode import unstructure

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


# -- read_answer ----------------------------------------------------------------------------------


BASE = NodeResult(node_id="node-x", ray_resources={"GPU": 1.0}, accelerator_type="H100")
GOOD_DEVICES = [
    gpu(
        H100,
        index=0,
        uuid="GPU-1234",
        pci_id="0000:18:00.0",
        compute_major=9,
        compute_minor=0,
        driver_major=12,
        driver_minor=4,
        library_path=("/usr/lib/x86_64-linux-gnu",),
    )
]


def answer(**fields: Any) -> str:
    doc: dict[str, Any] = {
        "format": 1,
        "node_id": "node-x",
        "hostname": "gpu-07",
        "pid": 4242,
        "python": "/usr/bin/python3",
    }
    doc.update(fields)
    return json.dumps(doc)


def good_discovery() -> dict[str, Any]:
    doc: dict[str, Any] = unstructure(
        found(
            GOOD_DEVICES,
            plugins=[PluginReport(name="cuda", devices=1)],
            system=SystemInfo(total_memory=512 * GIB, free_memory=400 * GIB),
        )
    )
    return doc


def read(text: Any) -> NodeResult:
    return read_answer(BASE, text, 0.25)


def assert_failed(result: NodeResult, *words: str) -> None:
    assert result.status is NodeStatus.FAILED, result
    assert result.discovery is None and result.devices == []
    assert result.elapsed == 0.25
    for word in words:
        assert word in result.reason, result.reason


def test_a_good_answer_is_ok_with_the_devices_notes_and_env() -> None:
    """A good answer reads as OK with its devices, notes, visible env and process, keeping Ray's view."""
    r = read(
        answer(
            version="9.9",
            notes=["restored CUDA_VISIBLE_DEVICES"],
            visible_env={"CUDA_VISIBLE_DEVICES": "0"},
            discovery=good_discovery(),
        )
    )
    assert r.status is NodeStatus.OK and r.reason == ""
    assert r.devices == GOOD_DEVICES
    assert r.discovery is not None and r.discovery.system.total_memory == 512 * GIB
    assert [p.name for p in r.discovery.plugins] == ["cuda"]
    assert r.notes == ("restored CUDA_VISIBLE_DEVICES",)
    assert dict(r.visible_env) == {"CUDA_VISIBLE_DEVICES": "0"}
    assert (r.version, r.ran_on, r.pid, r.hostname, r.elapsed) == ("9.9", "node-x", 4242, "gpu-07", 0.25)
    # What Ray said is kept.
    assert (dict(r.ray_resources), r.accelerator_type) == ({"GPU": 1.0}, "H100")
    assert disagreements(r) == []


def test_rays_hostname_wins_over_the_answers() -> None:
    """The hostname Ray gives wins over the one in the node's answer."""
    r = read_answer(
        attrs.evolve(BASE, hostname="from-ray"), answer(hostname="from-node", discovery=good_discovery()), 0.0
    )
    assert r.status is NodeStatus.OK and r.hostname == "from-ray"


@pytest.mark.parametrize(
    "text",
    [
        b'{"format": 1, "node_id": "node-x"}',
        None,
        {"format": 1, "node_id": "node-x"},
        42,
        ["format", 1],
    ],
)
def test_an_answer_that_is_not_text_is_unreadable(text: Any) -> None:
    """An answer that is not text (bytes, None, a dict, a number, a list) is unreadable."""
    assert_failed(read(text), "unreadable answer", str(MAX_ANSWER))


def test_an_answer_over_the_limit_is_unreadable_without_parsing() -> None:
    """An answer longer than MAX_ANSWER is unreadable, and the reason names the limit."""
    text = answer(discovery=good_discovery(), notes=["x" * MAX_ANSWER])
    assert len(text) > MAX_ANSWER
    assert_failed(read(text), "unreadable answer", "up to")


@pytest.mark.parametrize("text", ["", "{", "not json", '{"format": 1,}', "\x00", "[1, 2"])
def test_invalid_json_is_unreadable(text: str) -> None:
    """An answer that is not valid JSON is unreadable."""
    assert_failed(read(text), "unreadable answer")


@pytest.mark.parametrize(
    "text",
    [
        "[]",
        "[1]",
        "1",
        '"text"',
        "null",
        json.dumps([{"format": 1, "node_id": "node-x"}]),
        '{"node_id": "node-x"}',
        answer(format=2),
        answer(format="1"),
        answer(format=None),
    ],
)
def test_a_document_of_another_kind_or_format_is_unreadable(text: str) -> None:
    """A JSON document that is not an object of format 1 is unreadable, and the reason says format 1."""
    assert_failed(read(text), "unreadable answer", "format 1")


@pytest.mark.parametrize("ran_on", ["node-y", "", "node-x ", "NODE-X"])
def test_an_answer_from_another_node_fails_and_names_it(ran_on: str) -> None:
    """An answer made on another node (ids compared exactly) fails and names that node."""
    r = read(answer(node_id=ran_on, discovery=good_discovery()))
    assert_failed(r, repr(ran_on), "not from this node")
    assert r.ran_on == ""


def test_a_node_without_gpuscout_is_missing_with_the_import_error() -> None:
    """A node without gpuscout's cluster support is MISSING, with the import error, its Python and the fix."""
    r = read(answer(missing="ModuleNotFoundError: No module named 'gpuscout.cluster'"))
    assert r.status is NodeStatus.MISSING
    assert "install gpuscout" in r.reason
    assert "ModuleNotFoundError: No module named 'gpuscout.cluster'" in r.reason
    assert "/usr/bin/python3" in r.reason
    assert r.discovery is None and r.ran_on == "node-x" and r.pid == 4242
    assert r.hostname == "gpu-07"


def test_a_node_whose_discovery_raised_fails_with_the_error() -> None:
    """A node whose discovery raised fails with the error it sent."""
    r = read(answer(error="RuntimeError: driver on fire"))
    assert_failed(r, "discovery failed on the node", "RuntimeError: driver on fire")
    assert r.ran_on == "node-x"


def _deep(n: int) -> str:
    return "[" * n + "]" * n


@pytest.mark.parametrize(
    "discovery",
    [
        {
            "devices": [{"id": "0", "backend": "CUDA", "name": "x", "total_memory": "abc"}],
            "dropped": [],
            "system": {},
            "plugins": [],
        },
        {"devices": "not a list", "dropped": [], "system": {}, "plugins": []},
        {"devices": {"0": {}}, "dropped": [], "system": {}, "plugins": []},
        {
            "devices": [{"id": "0", "backend": "CUDA", "total_memory": -1}],
            "dropped": [],
            "system": {},
            "plugins": [],
        },
        {"devices": [], "dropped": [], "system": {"total_memory": 1.5}, "plugins": []},
        {"devices": [], "dropped": [], "system": {}, "plugins": [{"name": "x", "status": "weird"}]},
        {"devices": [], "dropped": [], "system": [], "plugins": []},
        {"devices": [[]], "dropped": [], "system": {}, "plugins": []},
        None,
        [],
        "discovery",
        7,
    ],
    ids=lambda v: f"{v!r:.40}",
)
def test_a_discovery_of_wrong_types_is_unreadable(discovery: Any) -> None:
    """A discovery whose fields have the wrong types is unreadable, never a crash."""
    assert_failed(read(answer(discovery=discovery)), "unreadable answer")


def test_no_discovery_at_all_is_unreadable() -> None:
    """An answer with neither a discovery nor an error is unreadable."""
    assert_failed(read(answer()), "unreadable answer")


@pytest.mark.parametrize("where", ["discovery", "devices", "notes", "visible_env", "node_id", "top"])
@pytest.mark.parametrize("depth", [500, 990, 10_000])
def test_deeply_nested_answers_never_raise(where: str, depth: int) -> None:
    """Deeply nested JSON anywhere in an answer never raises: the answer fails or is read as text."""
    nested = _deep(depth)
    good = json.dumps(good_discovery())
    texts = {
        "discovery": '{"format":1,"node_id":"node-x","discovery":' + nested + "}",
        "devices": '{"format":1,"node_id":"node-x","discovery":{"devices":'
        + nested
        + ',"dropped":[],"system":{},"plugins":[]}}',
        "notes": '{"format":1,"node_id":"node-x","notes":' + nested + ',"discovery":' + good + "}",
        "visible_env": '{"format":1,"node_id":"node-x","visible_env":{"A":'
        + nested
        + '},"discovery":'
        + good
        + "}",
        "node_id": '{"format":1,"node_id":' + nested + "}",
        "top": nested,
    }
    r = read(texts[where])  # an exception fails the test
    if where in ("notes", "visible_env") and r.status is NodeStatus.OK:
        return  # parsed: a nested list is text like any other, and that is all
    assert r.status is NodeStatus.FAILED and r.discovery is None
    if depth == 10_000:
        assert "unreadable answer" in r.reason


@pytest.mark.parametrize(
    "fields",
    [
        {"notes": 5},
        {"visible_env": ["CUDA_VISIBLE_DEVICES"]},
        {"visible_env": "x"},
        {"notes": 3.5},
        {"visible_env": 7},
    ],
)
def test_notes_and_env_of_wrong_types_are_unreadable(fields: dict[str, Any]) -> None:
    """Notes that are not a list, or a visible env that is not a mapping, make the answer unreadable."""
    assert_failed(read(answer(discovery=good_discovery(), **fields)), "unreadable answer")


def test_notes_sent_as_one_string_are_not_split_into_characters() -> None:
    """Notes sent as one string are refused, not split into characters."""
    r = read(answer(discovery=good_discovery(), notes="abc"))
    assert r.status is NodeStatus.FAILED and "notes: expected a list of strings" in r.reason


def test_a_pid_that_is_not_an_int_is_zero() -> None:
    """A pid that is not an int reads as 0 and leaves the answer OK."""
    for pid in ("4242", None, 1.5, [1]):
        r = read(answer(pid=pid, discovery=good_discovery()))
        assert r.status is NodeStatus.OK and r.pid == 0


HOSTILE = "evil\x1b[2J\nhost\"'$(rm -rf /)`id`\x07\u2028"


def test_hostile_text_survives_into_the_result_and_prints_escaped() -> None:
    """Hostile text from a node is kept as it is in the result and printed escaped in its heading."""
    r = read_answer(NodeResult(node_id="node-x"), answer(hostname=HOSTILE, error=f"Boom: {HOSTILE}"), 0.0)
    assert r.status is NodeStatus.FAILED
    assert r.hostname == HOSTILE
    assert HOSTILE in r.reason
    line = node_heading(r)
    assert_printable(line)
    assert "\\x1b[2J" in line and "\\n" in line and "\\x07" in line and "\\u2028" in line
    assert "$(rm -rf /)`id`" in line and "\"'" in line
    assert line.startswith("node node-x on evil\\x1b[2J\\nhost")
    assert "failed; Ray: 0 GPU" in line


def test_hostile_devices_and_disagreements_print_escaped_in_the_summary() -> None:
    """Hostile names, types and reasons print escaped in the summary and stay as they are in JSON."""
    evil = gpu(f"H100 {HOSTILE}")
    r = read_answer(
        NodeResult(node_id="node-x", ray_resources={"GPU": 2.0}, accelerator_type=f"A100{HOSTILE}"),
        answer(hostname=HOSTILE, discovery=unstructure(found([evil]))),
        0.0,
    )
    assert r.status is NodeStatus.OK and r.devices == [evil]
    nodes = (
        r,
        attrs.evolve(
            r,
            node_id="missing-node",
            status=NodeStatus.MISSING,
            discovery=None,
            reason=f"no gpuscout {HOSTILE}",
        ),
    )
    inv = Inventory(nodes=nodes, summary=summarize(nodes), elapsed=2.0)
    lines = summary_lines(inv)
    for line in [*lines, *(node_heading(n) for n in nodes)]:
        assert_printable(line)
    assert lines[0] == "Cluster: 2 nodes (1 ok, 1 missing), 1 device, 2.0 s"
    assert any(line.startswith("  1x CUDA H100 evil\\x1b[2J\\nhost") for line in lines)
    disagreement_lines = [line for line in lines if line.startswith("Ray disagrees")]
    assert len(disagreement_lines) == 2  # the count (2 vs 1) and the type
    assert all("(evil\\x1b[2J\\nhost" in line for line in disagreement_lines)
    # JSON carries the text as it is.
    doc = json.loads(json.dumps(inventory_json(inv)))
    assert doc["nodes"][0]["hostname"] == HOSTILE
    assert doc["nodes"][1]["reason"] == f"no gpuscout {HOSTILE}"


def assert_printable(line: str) -> None:
    assert "\x1b" not in line and "\n" not in line and "\r" not in line, line
    assert "\x07" not in line and "\u2028" not in line, line
    assert all(ch.isprintable() for ch in line), line


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


# -- node_env and start_environ -------------------------------------------------------------------


def test_without_the_override_nothing_changes() -> None:
    """Without Ray's override-on-zero switch, node_env leaves the environment as it is."""
    environ = {"CUDA_VISIBLE_DEVICES": "", "HIP_VISIBLE_DEVICES": "", "PATH": "/bin"}
    env, notes = node_env(environ, {"CUDA_VISIBLE_DEVICES": "0,1"})
    assert env == environ and notes == []
    env, notes = node_env({**environ, RAY_OVERRIDE_ON_ZERO: "0"}, {"CUDA_VISIBLE_DEVICES": "0"})
    assert env["CUDA_VISIBLE_DEVICES"] == "" and notes == []


def test_the_override_restores_the_nodes_own_values() -> None:
    """With the override switch, each variable Ray emptied gets the node's own value back, with a note."""
    environ = {
        RAY_OVERRIDE_ON_ZERO: "1",
        "CUDA_VISIBLE_DEVICES": "",
        "ROCR_VISIBLE_DEVICES": "",
        "HIP_VISIBLE_DEVICES": "",
        "GPU_DEVICE_ORDINAL": "3",
        "PATH": "/bin",
    }
    started = {"CUDA_VISIBLE_DEVICES": "0,1", "HIP_VISIBLE_DEVICES": "", "GPU_DEVICE_ORDINAL": "1"}
    env, notes = node_env(environ, started)
    assert env["CUDA_VISIBLE_DEVICES"] == "0,1"  # restored
    assert "ROCR_VISIBLE_DEVICES" not in env  # the node never set it
    assert env["HIP_VISIBLE_DEVICES"] == ""  # the node itself set it to ""
    assert env["GPU_DEVICE_ORDINAL"] == "3"  # not emptied by Ray: left alone
    assert env["PATH"] == "/bin" and env[RAY_OVERRIDE_ON_ZERO] == "1"
    assert len(notes) == 2
    [cuda] = [n for n in notes if "CUDA_VISIBLE_DEVICES" in n]
    [rocr] = [n for n in notes if "ROCR_VISIBLE_DEVICES" in n]
    assert "'0,1'" in cuda and RAY_OVERRIDE_ON_ZERO in cuda
    assert "unset" in rocr
    assert environ["CUDA_VISIBLE_DEVICES"] == ""  # the caller's mapping is not changed


@pytest.mark.parametrize("flag", ["1", "true", "YES", " on "])
def test_the_override_switch_reads_truthy_values(flag: str) -> None:
    """The override switch is on for any truthy value, in any case, spaces around it allowed."""
    env, notes = node_env(
        {RAY_OVERRIDE_ON_ZERO: flag, "CUDA_VISIBLE_DEVICES": ""}, {"CUDA_VISIBLE_DEVICES": "2"}
    )
    assert env["CUDA_VISIBLE_DEVICES"] == "2" and len(notes) == 1


def test_without_a_start_environment_nothing_changes() -> None:
    """Without the node's start environment, node_env changes nothing and adds no note."""
    environ = {RAY_OVERRIDE_ON_ZERO: "1", "CUDA_VISIBLE_DEVICES": ""}
    assert node_env(environ, None) == (environ, [])


def test_start_environ_reads_nul_separated_entries(tmp_path: Path) -> None:
    """start_environ reads NUL-separated entries, keeping non-UTF-8 bytes, skipping nameless ones."""
    path = tmp_path / "environ"
    path.write_bytes(
        b"PATH=/usr/bin\0OPTS=a=b=c\0EMPTY=\0NOEQUALS\0=novalue\0RAW=caf\xe9\xff\0CUDA_VISIBLE_DEVICES=0,1\0"
    )
    env = start_environ(str(path))
    assert env == {
        "PATH": "/usr/bin",
        "OPTS": "a=b=c",
        "EMPTY": "",
        "RAW": "caf\udce9\udcff",
        "CUDA_VISIBLE_DEVICES": "0,1",
    }
    assert env["RAW"].encode("utf-8", "surrogateescape") == b"caf\xe9\xff"


def test_start_environ_of_a_missing_or_unreadable_path_is_none(tmp_path: Path) -> None:
    """start_environ of a missing path or a directory is None, and of an empty file empty."""
    assert start_environ(str(tmp_path / "absent")) is None
    assert start_environ(str(tmp_path)) is None  # a directory
    (tmp_path / "empty").write_bytes(b"")
    assert start_environ(str(tmp_path / "empty")) == {}


# -- addresses ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("address", "expected", "loopback"),
    [
        ("127.0.0.1:6379", ("127.0.0.1", 6379), True),
        ("localhost:1", ("localhost", 1), True),
        ("[::1]:6379", ("::1", 6379), True),
        ("host", ("host", DEFAULT_PORT), False),
        ("10.1.2.3:65535", ("10.1.2.3", 65535), False),
        ("127.8.9.10", ("127.8.9.10", DEFAULT_PORT), True),
        ("head.example.com:6380", ("head.example.com", 6380), False),
    ],
)
def test_an_address_splits_into_host_and_port_and_loopback_is_known(
    address: str, expected: tuple[str, int], loopback: bool
) -> None:
    """An address splits into host and port (Ray's default port if none), and loopback hosts are known."""
    assert _split(address) == expected
    assert _is_loopback(expected[0]) is loopback


@pytest.mark.parametrize("address", ["auto", "ray://x:10001", "", "http://h:1"])
def test_addresses_ray_resolves_itself_are_left_to_ray(address: str) -> None:
    """An address Ray resolves itself (auto, ray://, http://, empty) is not split."""
    assert _split(address) is None


@pytest.mark.parametrize("address", ["h:0", "h:70000", "h:abc", ":5", "h:-1", "[]:5"])
def test_bad_addresses_name_themselves(address: str) -> None:
    """A bad address is a GpuscoutError that names it."""
    with pytest.raises(GpuscoutError) as caught:
        _split(address)
    assert repr(address) in str(caught.value)


@pytest.mark.parametrize("host", ["10.0.0.1", "::2", "example.com", "", "localhost.", "0.0.0.0"])
def test_other_hosts_are_not_loopback(host: str) -> None:
    """A host other than 127.x, ::1 or exactly localhost is not loopback."""
    assert not _is_loopback(host)


def test_import_ray_without_ray_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without Ray installed, import_ray raises RayMissing with the pip command that installs it."""
    # A None entry makes `import ray` raise ImportError; Ray itself is never imported here.
    monkeypatch.setitem(sys.modules, "ray", None)
    monkeypatch.delenv(RAY_LOOPBACK_ENV, raising=False)
    with pytest.raises(RayMissing) as caught:
        import_ray("127.0.0.1:6379")
    assert "pip install 'gpuscout[ray]'" in str(caught.value)
    # "ray" counts as imported already, so the loopback switch is left alone.
    assert RAY_LOOPBACK_ENV not in os.environ


def test_import_ray_checks_the_address_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """import_ray refuses a bad address before it looks for Ray."""
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(GpuscoutError) as caught:
        import_ray("h:70000")
    assert not isinstance(caught.value, RayMissing)


# -- report, in this process, over lavapipe -------------------------------------------------------


@pytest.fixture
def lavapipe_node(monkeypatch: pytest.MonkeyPatch, lavapipe_icd: str) -> None:
    """This process's environment as a node pinned to Vulkan and lavapipe alone."""
    monkeypatch.setattr(
        os,
        "environ",
        {
            "GPUSCOUT_PLUGINS": "vulkan",
            "VK_DRIVER_FILES": lavapipe_icd,
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        },
    )


def test_a_report_made_in_process_reads_back_ok(lavapipe_node: None) -> None:
    """A node's report made in this process over lavapipe reads back OK, with its device and plugins."""
    text = report({"include_software": True, "isolated": False}, "node-x")
    doc = json.loads(text)
    assert doc["format"] == cluster_node.REPORT_FORMAT == 1
    assert (doc["node_id"], doc["pid"]) == ("node-x", os.getpid())
    assert doc["visible_env"] == {}
    r = read_answer(NodeResult(node_id="node-x"), text, 0.5)
    assert r.status is NodeStatus.OK, r.reason
    assert r.ran_on == "node-x" and r.pid == os.getpid() and r.hostname == doc["hostname"]
    assert r.version == doc["version"] != ""
    [device] = r.devices
    assert device.library == "Vulkan" and device.software
    assert device.name.startswith("llvmpipe")
    # GPUSCOUT_PLUGINS=vulkan: the other built-ins are reported, as disabled.
    assert r.discovery is not None
    statuses = {p.name: p.status for p in r.discovery.plugins}
    assert statuses.pop("vulkan") is PluginStatus.OK
    assert set(statuses.values()) == {PluginStatus.DISABLED}
    assert r.problems() == []
    # Ray's view of a node without GPUs agrees: Vulkan-only devices are not Ray's GPUs.
    assert disagreements(r) == []


def test_a_report_without_software_drops_lavapipe(lavapipe_node: None) -> None:
    """A report without software devices finds nothing and lists lavapipe as dropped."""
    r = read_answer(
        NodeResult(node_id="node-x"), report({"include_software": False, "isolated": False}, "node-x"), 0.0
    )
    assert r.status is NodeStatus.OK and r.devices == [] and r.discovery is not None
    assert [d.device.name[:8] for d in r.discovery.dropped] == ["llvmpipe"]


def test_a_report_for_another_node_is_refused(lavapipe_node: None) -> None:
    """A report made for one node is refused when read as another node's answer."""
    text = report({"include_software": True, "isolated": False}, "node-x")
    r = read_answer(NodeResult(node_id="node-y"), text, 0.0)
    assert r.status is NodeStatus.FAILED and r.discovery is None
    assert "'node-x'" in r.reason


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


def test_the_address_comes_from_the_argument_then_ray_address_then_rays_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Ray address comes from the argument, then RAY_ADDRESS, then Ray's own file, else auto."""
    from gpuscout.cluster.ray import ray_address_file, resolve_address

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))
    assert ray_address_file() == str(tmp_path / "ray" / "ray_current_cluster")
    assert resolve_address(None) == "auto"  # nothing recorded: Ray looks for itself
    (tmp_path / "ray").mkdir()
    (tmp_path / "ray" / "ray_current_cluster").write_text("127.0.0.1:41000\n")
    assert resolve_address(None) == "127.0.0.1:41000"
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.1:6379")
    assert resolve_address(None) == "10.0.0.1:6379"
    assert resolve_address("head:6380") == "head:6380"


@pytest.mark.parametrize("timeout", [0, -1.0, float("nan"), float("inf"), "60", True, None])
def test_a_bad_inventory_timeout_is_refused_before_ray_is_touched(timeout: object) -> None:
    """A timeout that is not a finite number of seconds above 0 is refused before Ray is imported."""
    import sys

    from gpuscout.cluster.ray import inventory

    before = "ray" in sys.modules
    with pytest.raises(GpuscoutError, match="timeout must be a finite number of seconds > 0"):
        inventory("127.0.0.1:1", timeout)  # type: ignore[arg-type]
    assert ("ray" in sys.modules) == before


@pytest.mark.parametrize(
    ("child", "message"),
    [
        ("import sys; sys.stdout.write('[1, 2]')", "answered something unreadable: TypeError"),
        (
            'import sys; sys.stdout.write(\'{{"nodes": [{{"x": 1}}]}}\')',
            "answered something unreadable: KeyError",
        ),
        (
            "import sys; sys.stderr.write('Failed to connect to GCS\\\\n'); sys.exit(1)",
            "exited with status 1 without an answer; last stderr: Failed to connect to GCS",
        ),
        ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", "crashed: SIGKILL without an answer"),
        (
            'import sys; sys.stdout.write(\'{{"error": "cannot reach it", "kind": "error"}}\')',
            "^cannot reach it$",
        ),
    ],
)
def test_the_inventory_child_ending_badly_is_one_gpuscout_error(
    monkeypatch: pytest.MonkeyPatch, child: str, message: str
) -> None:
    """The child that holds Ray's driver is gpuscout's own, but whatever it does (answers
    garbage, is ended by Ray with status 1, is killed), the host gets one GpuscoutError. (The
    child's code is a format string: its braces are doubled.)"""
    import gpuscout.cluster.ray as ray_module

    monkeypatch.setattr(ray_module, "_BOOT", child)
    monkeypatch.setattr(ray_module, "check_reachable", lambda address, timeout: None)
    monkeypatch.setattr(ray_module, "_ray_installed", lambda: True)
    with pytest.raises(GpuscoutError, match=message):
        ray_module._gather_in_child("127.0.0.1:6379", 10.0, {})
