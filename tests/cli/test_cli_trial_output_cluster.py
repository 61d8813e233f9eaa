"""`gpuscout cluster` after a new user's trial (issue 22): global options after the command, the
nodes' deadline under its own name, an exit code when Ray disagrees, a progress line on a
terminal only, Ray's advice in gpuscout's words, and unknown free memory counted apart. No Ray
cluster is started: the inventory is replaced by one built here."""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Sequence
from typing import Any

import pytest

from gpuscout import DeviceInfo, Discovery, SystemInfo
from gpuscout.cli import main
from gpuscout.cli._commands.cluster import RAY_DISAGREES, _progress, summary_lines
from gpuscout.cluster._ray_driver import first_line
from gpuscout.cluster.inventory import Inventory, NodeResult, NodeStatus, summarize
from gpuscout.sizes import GIB

H100 = "NVIDIA H100 80GB HBM3"


def gpu(index: int, *, unknown: bool = False) -> DeviceInfo:
    return DeviceInfo(
        id=f"GPU-{index:04d}",
        library="CUDA",
        name=H100,
        description=H100,
        pci_id=f"0000:{index + 1:02x}:00.0",
        total_memory=80 * GIB,
        free_memory=80 * GIB if unknown else 70 * GIB,
        free_memory_unknown=unknown,
    )


def node(devices: Sequence[DeviceInfo], gpus: float) -> NodeResult:
    return NodeResult(
        node_id="node-a",
        hostname="host-a",
        address="10.0.0.1",
        status=NodeStatus.OK,
        ray_resources={"CPU": 8.0, "GPU": gpus},
        accelerator_type="H100",
        discovery=Discovery(devices=list(devices), dropped=[], system=SystemInfo(), plugins=[]),
    )


def inventory_of(*nodes: NodeResult) -> Inventory:
    return Inventory(nodes=nodes, summary=summarize(nodes), elapsed=0.5)


AGREES = inventory_of(node([gpu(0), gpu(1)], gpus=2.0))
DISAGREES = inventory_of(node([gpu(0)], gpus=2.0))


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Each inventory call's arguments; every call answers ``AGREES``."""
    seen: list[dict[str, Any]] = []

    def fake(address: str | None, timeout: float, **options: Any) -> Inventory:
        seen.append({"address": address, "timeout": timeout, **options})
        return AGREES

    monkeypatch.setattr("gpuscout.cluster.ray.inventory", fake)
    return seen


def run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def answer_with(monkeypatch: pytest.MonkeyPatch, found: Inventory) -> None:
    monkeypatch.setattr("gpuscout.cluster.ray.inventory", lambda *a, **kw: found)


def test_plugins_after_cluster_are_accepted_and_sent_to_the_nodes(calls: list[dict[str, Any]]) -> None:
    """`cluster --ray A --plugins vulkan` is no usage error: the nodes get the allow list."""
    code, _, err = run(["cluster", "--ray", "10.0.0.1:6379", "--plugins", "vulkan", "--json"])
    assert code == 0, err
    assert calls[0]["plugins"] == ["vulkan"] and calls[0]["address"] == "10.0.0.1:6379"


def test_timeout_means_the_plugins_deadline_before_or_after_cluster(calls: list[dict[str, Any]]) -> None:
    """`--timeout 7` before and after the command both give each plugin 7 s on the nodes."""
    run(["--timeout", "7", "cluster", "--json"])
    run(["cluster", "--timeout", "7", "--json"])
    assert [c["enumerate_timeout"] for c in calls] == [7.0, 7.0]


def test_node_timeout_names_the_nodes_deadline(calls: list[dict[str, Any]]) -> None:
    """`--node-timeout 20` bounds the wait for the nodes, apart from the plugins' deadline."""
    run(["cluster", "--node-timeout", "20", "--timeout", "5", "--json"])
    assert calls[0]["timeout"] == 20.0 and calls[0]["enumerate_timeout"] == 5.0


def test_a_long_plugin_deadline_stretches_the_default_nodes_deadline(calls: list[dict[str, Any]]) -> None:
    """`--timeout 120` (the old spelling of a long wait) gives the nodes 150 s by default."""
    run(["cluster", "--timeout", "120", "--json"])
    assert calls[0]["timeout"] == 150.0


def test_the_default_nodes_deadline_is_60_seconds(calls: list[dict[str, Any]]) -> None:
    """No option: 60 s for the nodes, 15 s per plugin."""
    run(["cluster", "--json"])
    assert calls[0]["timeout"] == 60.0 and calls[0]["enumerate_timeout"] == 15.0


def test_root_is_refused_for_cluster(calls: list[dict[str, Any]], tmp_path: Any) -> None:
    """`--root` describes this machine: exit 2 with one line, no inventory."""
    code, _, err = run(["cluster", "--root", str(tmp_path)])
    assert code == 2 and err.count("\n") == 1 and "--root" in err and calls == []


def test_ray_disagreeing_exits_4(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ray counts 2 GPUs where gpuscout finds 1: the report is printed and the exit is 4."""
    answer_with(monkeypatch, DISAGREES)
    code, out, _ = run(["cluster", "--json"])
    assert code == RAY_DISAGREES == 4
    assert json.loads(out)["summary"]["disagreements"][0]["kind"] == "gpu_count"


def test_exit_zero_keeps_a_disagreement_at_0(monkeypatch: pytest.MonkeyPatch) -> None:
    """`--exit-zero`: the same report, exit 0."""
    answer_with(monkeypatch, DISAGREES)
    code, out, _ = run(["cluster", "--exit-zero"])
    assert code == 0 and "Ray disagrees on node" in out


def test_an_agreeing_cluster_exits_0(calls: list[dict[str, Any]]) -> None:
    """No disagreement: exit 0."""
    assert run(["cluster", "--json"])[0] == 0


def test_no_progress_line_when_stderr_is_a_pipe(calls: list[dict[str, Any]]) -> None:
    """Through a pipe stderr gets nothing from a successful inventory."""
    _, _, err = run(["cluster", "--json"])
    assert err == ""


def test_a_progress_line_on_a_terminal_is_drawn_and_erased() -> None:
    """On a terminal the line names the address and the deadline, then is cleared."""

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = Tty()
    with _progress(stream, "10.0.0.1:6379", 60.0):
        pass
    text = stream.getvalue()
    assert "waiting for the nodes of 10.0.0.1:6379" in text and "at most 60 s" in text
    assert text.endswith("\r\x1b[K")


def test_rays_address_advice_names_the_ray_option() -> None:
    """Ray's "setting `--address` flag" becomes gpuscout's `--ray ADDRESS`."""
    exc = ConnectionError(
        "Could not find any running Ray instance. Please specify the one to "
        "connect to by setting `--address` flag or `RAY_ADDRESS` environment "
        "variable."
    )
    line = first_line(exc)
    assert "--address" not in line and "--ray ADDRESS" in line and "RAY_ADDRESS" in line


def test_unknown_free_memory_is_not_counted_as_free_in_the_summary() -> None:
    """One known and one unknown device: the text and the JSON count them apart."""
    found = inventory_of(node([gpu(0), gpu(1, unknown=True)], gpus=2.0))
    [memory] = [line for line in summary_lines(found) if line.startswith("  CUDA:")]
    assert memory == (
        "  CUDA: 70.0 GiB free of 80.0 GiB (1 more device, 80.0 GiB, free unknown) on 2 devices"
    )
    [entry] = found.summary.memory
    assert (entry.free_memory, entry.free_unknown_devices) == (70 * GIB, 1)


def test_the_cluster_help_names_the_new_options(capsys: pytest.CaptureFixture[str]) -> None:
    """`cluster --help` lists --node-timeout, --exit-zero and the scout options."""
    with pytest.raises(SystemExit):
        main(["cluster", "--help"])
    out = capsys.readouterr().out
    for option in ("--node-timeout", "--exit-zero", "--plugins", "--timeout"):
        assert option in out
