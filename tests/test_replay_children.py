"""A recording's environment feeds its discovery only: nothing gpuscout starts on a replay (the
``--verify`` child, ``exec``'s command, the import probe) runs with it (docs/recordings.md)."""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
from pathlib import Path

import pytest

from gpuscout.cli import main

MACHINES = Path(__file__).parent / "machines"


def _hostile_copy(tmp_path: Path, machine: str = "docker_nvidia") -> tuple[Path, Path]:
    """A copy of zoo machine ``machine`` whose recorded environment names a PYTHONPATH, a PATH and
    an LD_PRELOAD inside its own root/, each of which would leave a marker file if it ran."""
    rec = tmp_path / "rec"
    shutil.copytree(MACHINES / machine, rec)
    marker = tmp_path / "ran"
    evil = rec / "root" / "evil"
    evil.mkdir()
    (evil / "sitecustomize.py").write_text(f"open({str(marker)!r}, 'a').write('sitecustomize\\n')\n")
    for name in ("python3", "true", "env"):
        program = evil / name
        program.write_text(f"#!/bin/sh\necho {name} >> {marker}\n")
        program.chmod(program.stat().st_mode | stat.S_IXUSR)
    manifest = json.loads((rec / "recording.json").read_text())
    manifest["env"].update(
        {"PYTHONPATH": str(evil), "PATH": str(evil), "LD_PRELOAD": str(evil / "missing.so")}
    )
    (rec / "recording.json").write_text(json.dumps(manifest))
    return rec, marker


def test_verify_child_of_a_replay_runs_without_the_recordings_pythonpath(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """env --verify on a replay starts its child with this process's environment: a
    sitecustomize.py the recording's PYTHONPATH names never runs, and the child still verifies."""
    rec, marker = _hostile_copy(tmp_path)
    assert main(["--replay", str(rec), "env", "best", "--verify"]) == 0
    assert "the child sees exactly the 1 selected device: " in capsys.readouterr().err
    assert not marker.exists(), marker.read_text()


def test_exec_on_a_replay_finds_its_command_on_this_machines_path(tmp_path: Path) -> None:
    """exec on a replay resolves the command on this process's PATH, not the recording's: the
    recording's own "true" never runs."""
    rec, marker = _hostile_copy(tmp_path)
    assert main(["--replay", str(rec), "exec", "--device", "best", "--", "true"]) == 0
    assert not marker.exists(), marker.read_text()


def test_exec_on_a_replay_gives_the_child_this_environment_plus_the_selection(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """exec's child on a replay has this process's PATH and PYTHONPATH, not the recording's,
    and the visibility variable gpuscout computed for the selection."""
    rec, _ = _hostile_copy(tmp_path)
    code = main(
        [
            "--replay",
            str(rec),
            "exec",
            "--device",
            "best",
            "--",
            sys.executable,
            "-c",
            "import json, os; print(json.dumps(dict(os.environ)))",
        ]
    )
    assert code == 0
    seen = json.loads(capfd.readouterr().out.strip().splitlines()[-1])
    assert seen.get("PATH") == os.environ.get("PATH")
    assert seen.get("PYTHONPATH") == os.environ.get("PYTHONPATH")
    assert "LD_PRELOAD" not in seen or seen["LD_PRELOAD"] == os.environ.get("LD_PRELOAD")
    assert seen["CUDA_VISIBLE_DEVICES"].startswith("GPU-")


def test_verify_child_of_a_replay_discovers_with_the_recorded_environment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The --verify child of a replay still discovers with the recording's environment plus the
    selection: a recorded CUDA_VISIBLE_DEVICES that hides every GPU leaves nothing to select."""
    rec, _ = _hostile_copy(tmp_path)
    manifest = json.loads((rec / "recording.json").read_text())
    manifest["env"]["CUDA_VISIBLE_DEVICES"] = "-1"
    (rec / "recording.json").write_text(json.dumps(manifest))
    assert main(["--replay", str(rec), "env", "--verify", "--format", "json"]) == 1


def test_scout_argv_of_a_replay_sets_the_selection_for_the_child() -> None:
    """The child command of a replay repeats the recording and sets the selection's variables
    in the environment its discovery sees (--replay-set), not in its process environment."""
    from gpuscout.cli import build_parser
    from gpuscout.cli._common import scout_argv

    parser, _ = build_parser("env")
    args = parser.parse_args(["env", "--replay", str(MACHINES / "docker_nvidia")])
    argv = scout_argv(args, {"CUDA_VISIBLE_DEVICES": "GPU-1"})
    assert argv == ["--replay", str(MACHINES / "docker_nvidia"), "--replay-set", "CUDA_VISIBLE_DEVICES=GPU-1"]


def test_import_probe_of_a_replay_runs_with_this_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Scout(replay=..., isolate_imports=True) starts its import probe with this process's
    environment, never the recording's."""
    from gpuscout import Scout
    from gpuscout._host.isolation import probe

    rec, _ = _hostile_copy(tmp_path)
    seen: list[dict[str, str]] = []
    real = probe.probe_imports

    def spy(names: list[str], env: dict[str, str], timeout: float) -> dict[str, tuple[str, str]]:
        seen.append(dict(env))
        return real(names, env, timeout)

    monkeypatch.setattr(probe, "probe_imports", spy)
    fake_plugin = tmp_path / "site" / "fake_probe_plugin.py"
    fake_plugin.parent.mkdir()
    fake_plugin.write_text("")
    monkeypatch.syspath_prepend(str(fake_plugin.parent))
    from gpuscout._host import loading as plugin_loading

    monkeypatch.setattr(
        plugin_loading,
        "entry_point_candidates",
        lambda host: [("fakeprobe", lambda: __import__("fake_probe_plugin"), "1", "fake-dist")],
    )
    Scout(replay=rec, isolate_imports=True)
    assert seen, "the probe was not asked"
    assert all(env.get("PYTHONPATH") != str(rec / "root" / "evil") for env in seen)
    assert all(env.get("PATH") == os.environ.get("PATH") for env in seen)
