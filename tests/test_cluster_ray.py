"""The Ray inventory against a real multi-node Ray cluster on this machine
(``ray.cluster_utils.Cluster``: a head and raylets, one CPU each, all bound to 127.0.0.1).

Each node runs the gpuscout installed here, so each is pinned to lavapipe (``GPUSCOUT_PLUGINS=
vulkan`` and the loader pointed at lavapipe alone) and told it has no GPU: the results are the
same on a laptop and on a GPU server. One node gets another environment (Vulkan blocked, and
Ray's override of visibility variables switched on); others are added per test: one whose plugin
hangs (to be killed or timed out mid-inventory) and one with an old gpuscout without cluster
support on its path.
"""

from __future__ import annotations

import concurrent.futures
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuscout.cluster.inventory import NodeStatus
from gpuscout.errors import GpuscoutError
from gpuscout.testing import eventually, processes_with_env, running
from tests import ports
from tests.conftest import write_site

#: Every process of the test cluster carries this variable with the module's own value.
MARK = "GPUSCOUT_TEST_RAY_MARK"
SLOW = """
    import os, time
    from gpuscout.plugin import hookimpl

    @hookimpl
    def gpuscout_enumerate(context):
        with open(context.env["SLOW_PID_FILE"], "w") as f:
            f.write(str(os.getpid()))
        time.sleep(float(context.env.get("SLOW_SECONDS", "60")))
        return []
"""
#: Ray notices a dead node after health checks fail (15 s by default); the tests kill nodes.
FAST_DEATH = {
    "health_check_period_ms": 500,
    "health_check_timeout_ms": 500,
    "health_check_failure_threshold": 2,
}
#: An older gpuscout, as a node might have: importable, but without gpuscout.cluster.
OLD_GPUSCOUT = '"""gpuscout 0.0.1, before the cluster inventory."""\n__version__ = "0.0.1"\n'


def _import_ray() -> Any:
    # Ray reads this at import: with 0, a local cluster and its driver stay on 127.0.0.1.
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    try:
        import ray
        from ray.cluster_utils import Cluster
    except ImportError:
        if os.environ.get("CI") == "true":
            pytest.fail("ray is missing, but CI installs the test extra (which includes ray)")
        pytest.skip("ray is not installed (pip install 'gpuscout[ray]')")
    return ray, Cluster


class LocalCluster:
    """A running ``ray.cluster_utils.Cluster`` with node ids by role, and node adding/removal."""

    def __init__(self, cluster: Any, base_env: dict[str, str], mark: str) -> None:
        self.cluster = cluster
        self.base_env = base_env
        self.mark = mark
        self.roles: dict[str, str] = {}

    @property
    def address(self) -> str:
        return str(self.cluster.address)

    def add(self, role: str, **env: str) -> Any:
        node = self.cluster.add_node(num_cpus=1, num_gpus=0, env_vars={**self.base_env, **env})
        self.cluster.wait_for_nodes()
        self.roles[role] = node.node_id
        return node


@pytest.fixture(scope="module")
def local_cluster(lavapipe_icd: str) -> Iterator[LocalCluster]:
    """Three nodes: ``head`` and ``plain`` see lavapipe; ``other`` has Vulkan blocked, and
    ``CUDA_VISIBLE_DEVICES=3`` with Ray's override-on-zero switched on."""
    ray, Cluster = _import_ray()
    mark = uuid.uuid4().hex
    base = {"GPUSCOUT_PLUGINS": "vulkan", "VK_DRIVER_FILES": lavapipe_icd, MARK: mark}
    saved = {
        k: os.environ.pop(k)
        for k in (
            "VK_ICD_FILENAMES",
            "VK_ADD_DRIVER_FILES",
            "GGML_VK_VISIBLE_DEVICES",
            "RAY_ADDRESS",
            "RAY_TMPDIR",
        )
        if k in os.environ
    }
    # Ray's sessions and its address file go to a folder of the test's own, not /tmp/ray,
    # where a real cluster on this machine keeps its address (a short path: Ray's sockets
    # live there and Unix socket paths are short).
    os.environ["RAY_TMPDIR"] = ray_tmp = tempfile.mkdtemp(prefix="gsray", dir="/tmp")
    try:
        cluster = Cluster(
            initialize_head=True,
            head_node_args={"num_cpus": 1, "num_gpus": 0, "env_vars": base, "_system_config": FAST_DEATH},
        )
        local = LocalCluster(cluster, base, mark)
        local.roles["head"] = cluster.head_node.node_id
        local.add(
            "other",
            GPUSCOUT_DISABLE_PLUGINS="vulkan",
            RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO="1",
            CUDA_VISIBLE_DEVICES="3",
        )
        local.add("plain")
        yield local
    finally:
        if ray.is_initialized():
            ray.shutdown()
        if "cluster" in locals():
            cluster.shutdown()
        del os.environ["RAY_TMPDIR"]
        os.environ.update(saved)
    assert eventually(lambda: not processes_with_env(MARK, mark), within=20), (
        f"processes of the test cluster left running: {processes_with_env(MARK, mark)}"
    )
    shutil.rmtree(ray_tmp, ignore_errors=True)


def by_role(local: LocalCluster, nodes: Any) -> dict[str, Any]:
    ids = {v: k for k, v in local.roles.items()}
    return {ids.get(n.node_id, n.node_id): n for n in nodes}


def inventory(local: LocalCluster, **kwargs: Any) -> Any:
    from gpuscout.cluster.ray import inventory as run

    return run(local.address, kwargs.pop("timeout", 60.0), include_software=True, **kwargs)


def test_one_result_per_node_each_made_on_its_own_node(local_cluster: LocalCluster) -> None:
    """The inventory gives one OK result per node, each made by a task on that node, and detaches."""
    import ray

    found = inventory(local_cluster)
    assert not ray.is_initialized(), "the call attached, so it detaches"
    nodes = by_role(local_cluster, found.nodes)
    assert set(nodes) >= {"head", "other", "plain"}
    for role in ("head", "other", "plain"):
        node = nodes[role]
        assert node.status is NodeStatus.OK, node.reason
        # The task read its node id from its own runtime: it ran where it was pinned.
        assert node.ran_on == node.node_id == local_cluster.roles[role]
        assert node.address == "127.0.0.1" and node.version
    assert len({nodes[r].pid for r in ("head", "other", "plain")}) == 3
    assert found.elapsed < 30


def test_a_node_with_another_environment_answers_differently(local_cluster: LocalCluster) -> None:
    """Each node discovers in its own environment, its visibility values restored from Ray's override."""
    nodes = by_role(local_cluster, inventory(local_cluster).nodes)
    for role in ("head", "plain"):
        assert [(d.library, d.software) for d in nodes[role].devices] == [("Vulkan", True)]
        assert nodes[role].notes == ()
    other = nodes["other"]
    assert other.devices == []
    assert {r.name: str(r.status) for r in other.discovery.plugins}["vulkan"] == "disabled"
    # Ray set CUDA_VISIBLE_DEVICES="" for the zero-GPU task; discovery saw the node's own "3".
    assert other.visible_env == {"CUDA_VISIBLE_DEVICES": "3"}
    assert any("CUDA_VISIBLE_DEVICES" in n and "'3'" in n for n in other.notes)


def test_summary_counts_models_and_memory_across_nodes(local_cluster: LocalCluster) -> None:
    """The summary counts models and memory across all nodes, and Ray agrees with it."""
    found = inventory(local_cluster)
    s = found.summary
    lavapipe = [m for m in s.models if m.library == "Vulkan"]
    ok = sum(1 for n in found.nodes if n.status is NodeStatus.OK and n.devices)
    assert [(m.count, m.nodes) for m in lavapipe] == [(ok, ok)]
    assert s.devices == ok and s.nodes == len(found.nodes)
    assert s.nodes_by_status["ok"] == sum(1 for n in found.nodes if n.status is NodeStatus.OK)
    vulkan = {m.library: m for m in s.memory}["Vulkan"]
    assert vulkan.devices == ok and vulkan.total_memory == sum(
        d.total_memory for n in found.nodes for d in n.devices
    )
    # Ray counts no GPU on any node (num_gpus=0) and gpuscout finds none it would count.
    assert s.disagreements == ()


def _gpuscout(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    return subprocess.run(
        [str(Path(sys.executable).parent / "gpuscout"), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env or clean,
    )


def test_cluster_json_on_the_command_line(local_cluster: LocalCluster) -> None:
    """As a user runs it: a fresh process, no Ray variable in its environment (gpuscout keeps
    Ray on loopback for a 127.0.0.1 address by itself)."""
    out = _gpuscout("cluster", "--ray", local_cluster.address, "--json", "--include-software")
    assert out.returncode == 0, out.stderr
    document = json.loads(out.stdout)
    assert set(document) == {"nodes", "summary"}
    nodes = {n["node_id"]: n for n in document["nodes"]}
    for role in ("head", "other", "plain"):
        node = nodes[local_cluster.roles[role]]
        assert node["status"] == "ok" and node["ran_on"] == node["node_id"]
        assert set(node) >= {"hostname", "address", "ray", "devices", "dropped", "system", "problems"}
        assert node["ray"]["resources"]["CPU"] == 1.0
    assert [d["backend"] for d in nodes[local_cluster.roles["plain"]]["devices"]] == ["Vulkan"]
    assert nodes[local_cluster.roles["other"]]["devices"] == []
    assert document["summary"]["nodes"] == len(document["nodes"])
    assert document["summary"]["disagreements"] == []


def test_without_an_address_the_cluster_started_here_is_found(
    local_cluster: LocalCluster, tmp_path: Path
) -> None:
    """No --ray and no RAY_ADDRESS: Ray's address file names the cluster on this machine
    (read by gpuscout, so that its loopback address is kept)."""
    (tmp_path / "ray").mkdir()
    (tmp_path / "ray" / "ray_current_cluster").write_text(local_cluster.address)
    clean = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    out = _gpuscout("cluster", "--json", env={**clean, "RAY_TMPDIR": str(tmp_path)})
    assert out.returncode == 0, out.stderr
    ids = {n["node_id"] for n in json.loads(out.stdout)["nodes"] if n["status"] == "ok"}
    assert ids >= {local_cluster.roles[r] for r in ("head", "other", "plain")}


def test_the_cluster_table_shows_each_node_and_the_summary(local_cluster: LocalCluster) -> None:
    """The cluster command prints a heading per node, Ray's override notes and the summary."""
    out = _gpuscout("cluster", "--ray", local_cluster.address, "--include-software")
    assert out.returncode == 0, out.stderr
    for role in ("head", "other", "plain"):
        assert f"node {local_cluster.roles[role][:12]} on " in out.stdout
    assert "note: Ray set CUDA_VISIBLE_DEVICES=''" in out.stdout
    summary = out.stdout[out.stdout.index("\nCluster: ") :]
    assert "x Vulkan llvmpipe" in summary and "Vulkan: " in summary


@pytest.fixture
def slow_node(local_cluster: LocalCluster, tmp_path: Path) -> Iterator[tuple[Any, Path]]:
    """A fourth node whose discovery hangs in a plugin (which writes its pid first)."""
    site = write_site(tmp_path / "site", "gpuscout-slow", "1.0", {"slow_probe": SLOW}, {"slow": "slow_probe"})
    pid_file = tmp_path / "slow.pid"
    node = local_cluster.add(
        "slow", PYTHONPATH=str(site), GPUSCOUT_PLUGINS="vulkan,slow", SLOW_PID_FILE=str(pid_file)
    )
    yield node, pid_file
    if node in local_cluster.cluster.worker_nodes:
        local_cluster.cluster.remove_node(node, allow_graceful=False)
    local_cluster.roles.pop("slow", None)


def _slow_pid(pid_file: Path) -> int:
    assert eventually(lambda: pid_file.is_file() and pid_file.read_text().strip() != "", within=30), (
        "the slow plugin never started"
    )
    return int(pid_file.read_text())


def test_a_node_killed_mid_inventory_is_reported_dead(
    local_cluster: LocalCluster, slow_node: tuple[Any, Path]
) -> None:
    """A node killed mid-inventory is DEAD, the others OK, and its hanging discovery ends with it."""
    node, pid_file = slow_node
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        running_inventory = pool.submit(inventory, local_cluster, enumerate_timeout=120)
        pid = _slow_pid(pid_file)
        local_cluster.cluster.remove_node(node, allow_graceful=False)
        found = running_inventory.result(timeout=90)
    nodes = by_role(local_cluster, found.nodes)
    assert nodes["slow"].status is NodeStatus.DEAD, nodes["slow"].reason
    assert "died" in nodes["slow"].reason
    assert all(nodes[r].status is NodeStatus.OK for r in ("head", "other", "plain"))
    assert eventually(lambda: not running(pid), within=15), "the hanging discovery outlived its node"
    # Asked again, Ray lists the node as dead: reported without running anything there.
    again = by_role(local_cluster, inventory(local_cluster).nodes)
    assert again["slow"].status is NodeStatus.DEAD and again["slow"].reason
    assert again["plain"].status is NodeStatus.OK


def test_a_node_that_does_not_answer_in_time_is_cancelled(
    local_cluster: LocalCluster, slow_node: tuple[Any, Path]
) -> None:
    """A node still discovering at the deadline is TIMEOUT, the others OK, and its task is killed."""
    start = time.monotonic()
    found = inventory(local_cluster, timeout=8.0, enumerate_timeout=120)
    took = time.monotonic() - start
    nodes = by_role(local_cluster, found.nodes)
    assert nodes["slow"].status is NodeStatus.TIMEOUT
    assert "within 8 s" in nodes["slow"].reason
    assert all(nodes[r].status is NodeStatus.OK for r in ("head", "other", "plain"))
    assert took < 8.0 + 12.0
    # Nothing of the call is left running: the cancelled task's discovery is gone.
    pid = _slow_pid(slow_node[1])
    assert eventually(lambda: not running(pid), within=15), "the cancelled discovery still runs"


def test_a_node_without_cluster_support_is_reported_missing(
    local_cluster: LocalCluster, tmp_path: Path
) -> None:
    """A node whose gpuscout lacks cluster support is MISSING, with the import error."""
    old = tmp_path / "old" / "gpuscout"
    old.mkdir(parents=True)
    (old / "__init__.py").write_text(OLD_GPUSCOUT)
    node = local_cluster.add("old", PYTHONPATH=str(old.parent))
    try:
        nodes = by_role(local_cluster, inventory(local_cluster).nodes)
    finally:
        local_cluster.cluster.remove_node(node, allow_graceful=False)
        local_cluster.roles.pop("old")
    assert nodes["old"].status is NodeStatus.MISSING
    assert "No module named 'gpuscout.cluster'" in nodes["old"].reason
    assert nodes["old"].ran_on == nodes["old"].node_id
    assert nodes["plain"].status is NodeStatus.OK


def test_an_unreachable_cluster_is_one_line_and_exit_2() -> None:
    """A Ray address where nothing listens is one error line and exit 2, well before the timeout."""
    start = time.monotonic()
    # A free port no other worker's bind(0) can be handed meanwhile (tests/ports.py).
    out = _gpuscout("cluster", "--ray", f"127.0.0.1:{ports.allocator()()}", timeout=60)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.count("\n") == 1
    assert out.stderr.startswith("gpuscout: error: cannot reach the Ray cluster at 127.0.0.1:")
    assert time.monotonic() - start < 30


def test_without_ray_installed_one_line_says_how_to_install_it() -> None:
    """A Python where ``import ray`` fails, as it does without the extra."""
    code = (
        "import sys; sys.modules['ray'] = None\n"
        "from gpuscout.cli import main\n"
        "sys.exit(main(['cluster', '--ray', '127.0.0.1:6379', '--json']))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert (out.returncode, out.stdout) == (2, "")
    assert out.stderr == ("gpuscout: error: the cluster inventory needs Ray: pip install 'gpuscout[ray]'\n")


def test_a_process_already_attached_stays_attached(local_cluster: LocalCluster) -> None:
    """A process already attached to Ray stays attached after an inventory of its cluster."""
    import ray

    ray.init(address=local_cluster.address, log_to_driver=False, logging_level=logging.WARNING)
    try:
        from gpuscout.cluster.ray import inventory as run

        found = run(None, 60.0, include_software=True)
        assert ray.is_initialized()
        assert {n.node_id for n in found.nodes} >= set(local_cluster.roles.values())
    finally:
        ray.shutdown()


HEAD_ONLY = """
import os, sys, time
from ray.cluster_utils import Cluster
c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "num_gpus": 0})
print(c.address, flush=True)
time.sleep(300)
"""


def test_a_cluster_whose_head_dies_mid_inventory_does_not_take_the_host_down(
    lavapipe_icd: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ray ends a driver whose cluster head stays unreachable (exit status 1, after
    gcs_rpc_server_reconnect_timeout_s): the inventory's driver is a child of its own, so the
    host gets one GpuscoutError and lives on, and nothing of the dead cluster runs on."""
    _import_ray()
    site = write_site(tmp_path / "site", "gpuscout-slow", "1.0", {"slow_probe": SLOW}, {"slow": "slow_probe"})
    pid_file = tmp_path / "slow.pid"
    mark = uuid.uuid4().hex
    env = {
        **os.environ,
        "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
        MARK: mark,
        "PYTHONPATH": str(site),
        "GPUSCOUT_PLUGINS": "vulkan,slow",
        "VK_DRIVER_FILES": lavapipe_icd,
        "SLOW_PID_FILE": str(pid_file),
        "RAY_TMPDIR": tempfile.mkdtemp(prefix="gsray", dir="/tmp"),
    }
    env.pop("RAY_ADDRESS", None)
    head = subprocess.Popen(
        [sys.executable, "-c", HEAD_ONLY], env=env, stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        assert head.stdout is not None
        address = head.stdout.readline().strip()
        monkeypatch.setenv("RAY_gcs_rpc_server_reconnect_timeout_s", "3")
        from gpuscout.cluster.ray import inventory as run

        start = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            running_inventory = pool.submit(run, address, 60.0, enumerate_timeout=120)
            pid = _slow_pid(pid_file)
            os.killpg(head.pid, 9)  # the head node: GCS, raylet, workers
            try:
                found = running_inventory.result(timeout=90)
            except GpuscoutError as exc:
                # What Ray does to the driver: it ends it ("exited with status 1 ... Failed to
                # connect to GCS"), or its calls fail first ("stopped answering").
                assert "Ray" in str(exc)
            else:
                assert all(n.status is not NodeStatus.OK for n in found.nodes)
        assert time.monotonic() - start < 60
        assert eventually(lambda: not running(pid), within=15), "the slow discovery outlived it"
    finally:
        os.killpg(head.pid, 9) if head.poll() is None else None
        head.wait(10)
        assert head.stdout is not None
        head.stdout.close()
    assert eventually(lambda: not processes_with_env(MARK, mark), within=20), (
        f"processes of the dead cluster left running: {processes_with_env(MARK, mark)}"
    )
    shutil.rmtree(env["RAY_TMPDIR"], ignore_errors=True)
