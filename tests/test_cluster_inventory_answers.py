"""The reading of a node's answer (``gpuscout.cluster.ray.read_answer``), fed as an attacker
would: text that is not text, too long, not JSON, of another format or node, wrong types, deep
nesting; and hostile text kept as it is in the result and JSON, printed escaped by the CLI.

Ray is never imported here (tests/test_cluster_ray.py starts a real cluster and must import it
first).
"""

from __future__ import annotations

import json
from typing import Any

import attrs
import pytest

from gpuscout._records.device import SystemInfo
from gpuscout._records.encode import unstructure
from gpuscout._records.results import PluginReport
from gpuscout.cli._commands.cluster import node_heading, summary_lines
from gpuscout.cluster.inventory import (
    Inventory,
    NodeResult,
    NodeStatus,
    disagreements,
    inventory_json,
    summarize,
)
from gpuscout.cluster.ray import MAX_ANSWER, read_answer
from gpuscout.sizes import GIB
from tests.cluster_inventory_kit import H100, found, gpu

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
