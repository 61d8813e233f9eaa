"""``gpuscout record``: secret-looking names are never written, ``--anonymize`` replaces UUIDs
wherever they stand (folder names, glued to words) and the anonymized replay gives the same
memory figures, and a relative ``--root`` records its files (docs/recordings.md)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from gpuscout import Scout
from gpuscout._recording.anonymize import Anonymizer
from gpuscout._recording.record import Recorder, TrackedEnv
from gpuscout.cli import main
from gpuscout.testing import write_tree

POD = "8f2c6a1e-4b3d-4e5f-9a7b-1c2d3e4f5a6b"
CONTAINER = "3d1f" * 16
CGROUP = f"/kubepods/burstable/pod{POD}/{CONTAINER}"
GIB = 1 << 30


def _pod_tree(where: Path) -> Path:
    """A container in a Kubernetes pod: cgroup v2, an 8 GiB limit on the pod's own folder."""
    return write_tree(
        where,
        {
            "/proc/meminfo": "MemTotal: 67108864 kB\nMemFree: 50331648 kB\nMemAvailable: 60000000 kB\n",
            "/proc/self/cgroup": f"0::{CGROUP}\n",
            f"/sys/fs/cgroup{CGROUP}/memory.max": f"{8 * GIB}\n",
            f"/sys/fs/cgroup{CGROUP}/memory.current": f"{GIB}\n",
            f"/sys/fs/cgroup{CGROUP}/memory.stat": "inactive_file 0\n",
        },
    )


def _everything(rec: Path) -> str:
    """Every name and every file's text in a recording, as one string."""
    out = []
    for folder, dirs, files in os.walk(rec):
        for name in dirs + files:
            out.append(os.path.join(folder, name))
            path = Path(folder, name)
            if path.is_file() and not path.is_symlink():
                out.append(path.read_text(errors="replace"))
    return "\n".join(out)


@pytest.mark.parametrize(
    "name", ["NVIDIA_APIKEY", "CUDA_ACCESSKEY", "NVIDIA_SSHKEY", "HIP_Auth_X", "ROCM_mytoken"]
)
def test_a_secret_looking_name_is_never_recorded(name: str) -> None:
    """KEY, TOKEN, SECRET, PASSWORD, CREDENTIAL, AUTH anywhere in a name, in any case, keep the
    variable out of the recording, even in a family a plugin declares."""
    env = TrackedEnv({name: "s3cret", "CUDA_VISIBLE_DEVICES": "0"})
    assert env.recorded(["CUDA_*", "NVIDIA_*", "HIP_*", "ROCM_*"]) == {"CUDA_VISIBLE_DEVICES": "0"}


def test_a_uuid_glued_to_a_word_is_anonymized() -> None:
    """pod<uuid> and a systemd slice's pod<uuid with underscores> lose their UUID, consistently."""
    anon = Anonymizer("somehost")
    slice_name = "kubepods-burstable-pod" + POD.replace("-", "_") + ".slice"
    out = anon.text(f"pod{POD} {slice_name} {POD}")
    assert POD not in out and POD.replace("-", "_") not in out
    glued, sliced, bare = out.split(" ")
    assert glued == "pod" + bare and sliced == "kubepods-burstable-pod" + bare.replace("-", "_") + ".slice"


def _record(root: Path, out: Path, anonymize: bool) -> Scout:
    recorder = Recorder()
    scout = Scout(plugins=[], entry_points=False, env={}, platform="linux", root=root, recorder=recorder)
    scout.discover()
    recorder.write(str(out), platform="linux", env={}, anonymize=anonymize)
    return scout


def test_an_anonymized_recording_holds_no_uuid_and_replays_the_same_memory(tmp_path: Path) -> None:
    """--anonymize replaces the pod's UUID and the container's id in folder names as in
    /proc/self/cgroup, so the replay still finds the 8 GiB limit: the same memory figures."""
    root = _pod_tree(tmp_path / "live")
    live = Scout(plugins=[], entry_points=False, env={}, platform="linux", root=root).discover().system
    _record(root, tmp_path / "rec", anonymize=True)
    recorded = _everything(tmp_path / "rec")
    assert POD not in recorded and CONTAINER not in recorded
    replayed = Scout(replay=tmp_path / "rec", plugins=[], entry_points=False).discover().system
    assert live.total_memory == 8 * GIB
    assert (replayed.total_memory, replayed.free_memory) == (live.total_memory, live.free_memory)


def test_record_with_a_relative_root_copies_its_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """gpuscout --root tree record out, with tree relative to the working folder, writes the files
    discovery read, and the replay gives the tree's memory."""
    _pod_tree(tmp_path / "tree")
    monkeypatch.chdir(tmp_path)
    assert main(["--root", "tree", "--plugins", "cuda", "record", "out"]) == 0
    assert (tmp_path / "out" / "root" / "proc" / "meminfo").read_text().startswith("MemTotal")
    manifest = json.loads((tmp_path / "out" / "recording.json").read_text())
    assert manifest["format"] == 1
    assert (
        Scout(replay=tmp_path / "out", plugins=[], entry_points=False).discover().system.total_memory
        == 8 * GIB
    )


def test_record_of_a_tree_copies_nothing_from_outside_it(tmp_path: Path) -> None:
    """Recording a --root tree whose /proc/meminfo climbs out by a link chain copies no host file
    into the recording: files are read as discovery read them, inside the root."""
    (tmp_path / "secret").write_text("MemTotal: 77777 kB\n")
    root = tmp_path / "tree"
    root.mkdir()
    (root / "l0").symlink_to(".")
    top = len(tmp_path.parts) + 2
    for i in range(1, top + 1):
        (root / f"l{i}").symlink_to(f"l{i - 1}/..")
    (root / "proc").mkdir()
    (root / "proc" / "meminfo").symlink_to(f"../l{top}{tmp_path}/secret")
    assert (root / "proc" / "meminfo").read_text().startswith("MemTotal: 77777")  # the kernel's view
    _record(root, tmp_path / "rec", anonymize=False)
    assert "77777" not in _everything(tmp_path / "rec")
