"""The node side of the cluster inventory (``gpuscout.cluster._node``: the environment it
restores from Ray's override, and one real in-process ``report`` over lavapipe) and the driver's
edges that need no cluster: addresses, ``import_ray``, the timeout, the child ending badly.

Ray is never imported here (tests/test_cluster_ray.py starts a real cluster and must import it
first); ``import_ray`` is only driven with ``ray`` blocked in ``sys.modules``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from gpuscout._records.results import PluginStatus
from gpuscout.cluster import _node as cluster_node
from gpuscout.cluster._node import RAY_OVERRIDE_ON_ZERO, node_env, report, start_environ
from gpuscout.cluster._ray_driver import _is_loopback, _split
from gpuscout.cluster.inventory import NodeResult, NodeStatus, disagreements
from gpuscout.cluster.ray import DEFAULT_PORT, RAY_LOOPBACK_ENV, RayMissing, import_ray, read_answer
from gpuscout.errors import GpuscoutError

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


# -- the driver, without a cluster ----------------------------------------------------------------


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
