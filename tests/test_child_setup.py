"""A child's set-up (``gpuscout._selection.child``): the library decides the variables added, the
environment a child starts from and its CPUs, for ``env``, ``exec`` and ``exec --fit`` alike."""

from __future__ import annotations

import gzip
import json
import os
import sys
from pathlib import Path

import pytest

from gpuscout import Scout
from gpuscout._selection.child import child_base, child_setup
from gpuscout.cli import main

MACHINES = Path(__file__).resolve().parent / "machines"
GEMMA = Path(__file__).resolve().parent / "data" / "fit" / "gemma3-270m-q4_k_m.header.gguf.gz"


def test_a_replayed_child_starts_from_this_process_environment_not_the_recording(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On a replay the recorded environment feeds discovery only: the child's base is os.environ."""
    monkeypatch.setenv("GPUSCOUT_TEST_SENTINEL", "here")
    monkeypatch.delenv("CUDA_VERSION", raising=False)
    scout = Scout(replay=MACHINES / "docker_nvidia")
    assert scout.env.get("CUDA_VERSION") == "12.4.1"  # recorded
    setup = child_setup(scout, scout.discover().devices)
    assert child_base(scout) is os.environ
    assert setup.env["GPUSCOUT_TEST_SENTINEL"] == "here" and "CUDA_VERSION" not in setup.env
    assert setup.env["CUDA_VISIBLE_DEVICES"] == setup.added["CUDA_VISIBLE_DEVICES"]


def test_a_live_child_starts_from_the_environment_the_plugins_saw() -> None:
    """Without a replay the child's base is the scout's own environment, the added variables win."""
    scout = Scout(env={"KEEP": "1", "CUDA_VISIBLE_DEVICES": "old"}, plugins=[])
    setup = child_setup(scout, [], visible={"CUDA_VISIBLE_DEVICES": "new"})
    assert setup.env == {"KEEP": "1", "CUDA_VISIBLE_DEVICES": "new"}
    assert setup.added == {"CUDA_VISIBLE_DEVICES": "new"} and setup.affinity is None and setup.cpus is None


def test_isolation_hides_the_other_vendors_around_a_given_visibility() -> None:
    """``visible`` (a fit's variables) is kept as given; ``isolate`` adds each other vendor's hide value."""
    scout = Scout(replay=MACHINES / "wsl2_rtx4090_rtx3090")
    devices = scout.discover().devices
    plain = child_setup(scout, devices[:1], visible={"CUDA_VISIBLE_DEVICES": "GPU-x"})
    isolated = child_setup(scout, devices[:1], isolate=True, visible={"CUDA_VISIBLE_DEVICES": "GPU-x"})
    assert plain.added == {"CUDA_VISIBLE_DEVICES": "GPU-x"}
    assert isolated.added["CUDA_VISIBLE_DEVICES"] == "GPU-x"
    assert isolated.added["GGML_VK_VISIBLE_DEVICES"] == "" and isolated.added["HIP_VISIBLE_DEVICES"] == "-1"


def test_cpu_affinity_is_decided_only_when_asked() -> None:
    """The affinity is the scout's decision for exactly the setup's devices."""
    scout = Scout(replay=MACHINES / "h200x8")
    devices = scout.discover().devices[:1]
    setup = child_setup(scout, devices, cpu_affinity=True)
    assert setup.affinity == scout.cpu_affinity(devices)
    assert child_setup(scout, devices).affinity is None


@pytest.fixture(scope="module")
def gemma(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("gguf")
    path = tmp_path_factory.mktemp("gemma") / "gemma.gguf"
    with gzip.open(GEMMA) as src, open(path, "wb") as dst:
        dst.write(src.read())
        dst.truncate(253113024)
    return path


def _fake_server(tmp_path: Path) -> Path:
    server = tmp_path / "fake-llama-server"
    server.write_text(
        f"#!{sys.executable}\nimport json, os, sys\n"
        "print(json.dumps({'argv': sys.argv[1:], 'env': dict(os.environ)}))\n"
    )
    server.chmod(0o755)
    return server


def test_exec_fit_on_a_replay_runs_the_command_with_this_machine_environment(
    gemma: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``exec --fit`` on a replay gives the command this process's environment plus the fit's
    variables, not the recorded one (the recording's CUDA_VERSION never reaches it)."""
    monkeypatch.setenv("GPUSCOUT_TEST_SENTINEL", "here")
    monkeypatch.delenv("CUDA_VERSION", raising=False)
    server = _fake_server(tmp_path)
    code = main(["--replay", str(MACHINES / "docker_nvidia"), "exec", "--fit", str(gemma), "--", str(server)])
    out, err = capfd.readouterr()
    assert code == 0, err
    env = json.loads(out.strip().splitlines()[-1])["env"]
    assert env["GPUSCOUT_TEST_SENTINEL"] == "here" and "CUDA_VERSION" not in env
    assert env["CUDA_VISIBLE_DEVICES"] == "GPU-6b0f3e2d-9c41-4a7e-b58d-e13a2c9f7d06"


def test_exec_fit_honours_isolate(gemma: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """``exec --fit --isolate`` hides the other vendors' devices from the command too."""
    server = _fake_server(tmp_path)
    code = main(
        [
            "--replay", str(MACHINES / "docker_nvidia"), "exec", "--fit", str(gemma), "--isolate",
            "--", str(server),
        ]
    )  # fmt: skip
    out, err = capfd.readouterr()
    assert code == 0, err
    env = json.loads(out.strip().splitlines()[-1])["env"]
    assert env["GGML_VK_VISIBLE_DEVICES"] == "" and env["ROCR_VISIBLE_DEVICES"] == ""


def test_exec_fit_honours_cpu_affinity(
    gemma: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """``exec --fit --cpu-affinity`` decides the CPUs for the devices the fit uses and says so."""
    server = _fake_server(tmp_path)
    code = main(
        [
            "--replay", str(MACHINES / "h200x8"), "exec", "--fit", str(gemma), "--device", "0",
            "--cpu-affinity", "--", str(server),
        ]
    )  # fmt: skip
    _, err = capfd.readouterr()
    assert code == 0, err
    assert "NUMA node 0, local to 0=CUDA 'NVIDIA H200'" in err


def test_exec_fit_verifies_the_devices_the_fit_uses(
    gemma: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """``exec --fit --verify`` checks in a child that it sees exactly the fit's devices first."""
    server = _fake_server(tmp_path)
    code = main(
        [
            "--replay", str(MACHINES / "wsl2_rtx4090_rtx3090"), "exec", "--fit", str(gemma), "--verify",
            "--", str(server),
        ]
    )  # fmt: skip
    out, err = capfd.readouterr()
    assert code == 0, err
    assert "verified: the child sees exactly the 2 selected" in err and '"argv"' in out
