"""Recordings: ``gpuscout record`` writes what discovery read and what drivers answered, and
``--replay`` / ``Scout(replay=)`` discover on it (docs/recordings.md)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gpuscout import DeviceInfo, GpuscoutError, Scout
from gpuscout._machine.context import Context
from gpuscout._recording.record import Recorder, TrackedEnv
from gpuscout._recording.replay import MAX_ANSWER_BYTES, load
from gpuscout.cli import main
from gpuscout.plugin import RecordingError, hookimpl
from gpuscout.testing import FIFO, ReplayFactory, Symlink, write_tree


class ReadsAndRecords:
    """A plugin that reads files through its context and records its driver's answer."""

    __name__ = "mine"

    @hookimpl
    def gpuscout_enumerate(self, context: Context) -> list[DeviceInfo]:
        if context.replaying:
            answer = context.recorded("devices")
            if answer is None:
                context.note("no answers of mydriver recorded")
                return []
        else:
            answer = [{"id": "a", "memory": 8 << 30}]
            context.record("devices", answer)
        total = context.read_u64("/sys/class/mine/card0/memory") or 0
        node = context.device_node("/dev/mine0")
        link = context.read_link("/sys/class/mine/card0/driver") or ""
        context.env.get("MINE_VISIBLE")
        return [
            DeviceInfo(
                id=a["id"],
                library="Mine",
                name=f"{node} {link.rsplit('/', 1)[-1]}",
                total_memory=total,
                free_memory=a["memory"],
            )
            for a in answer
        ]


def _tree(tmp_path: Path) -> Path:
    return write_tree(
        tmp_path / "live",
        {
            "/sys/class/mine/card0/memory": "17179869184\n",
            "/sys/class/mine/card0/unread": "not copied\n",
            "/sys/class/mine/card0/driver": Symlink("../../../bus/drivers/minedrv"),
            "/dev/mine0": "",
            "/proc/meminfo": "MemTotal: 16384 kB\nMemAvailable: 8192 kB\n",
        },
    )


def _record(
    tmp_path: Path, env: dict[str, str] | None = None, families: tuple[str, ...] = (), **options: Any
) -> tuple[Path, Any]:
    recorder = Recorder()
    scout = Scout(
        plugins=["mine"],
        extra=[ReadsAndRecords()],
        entry_points=False,
        env=env if env is not None else {"MINE_VISIBLE": "0", "API_TOKEN": "s3cret"},
        platform="linux",
        root=_tree(tmp_path),
        recorder=recorder,
    )
    found = scout.discover()
    target = tmp_path / "rec"
    assert isinstance(scout.env, TrackedEnv)  # a Scout with a recorder notes what is read
    recorder.write(str(target), platform=scout.platform, env=scout.env.recorded(families), **options)
    return target, found


def _replay(target: Path, **options: Any) -> Any:
    return Scout(
        plugins=["mine"], extra=[ReadsAndRecords()], entry_points=False, replay=target, **options
    ).discover()


def test_a_replayed_recording_finds_what_the_recording_discovery_found(tmp_path: Path) -> None:
    """Devices, system memory and notes of a replay equal those of the recorded discovery."""
    target, found = _record(tmp_path)
    again = _replay(target)
    assert again.devices == found.devices
    assert again.devices[0].total_memory == 16 << 30
    assert again.devices[0].name == "present minedrv"
    assert again.system == found.system and again.system.total_memory == 16384 * 1024


def test_a_recording_holds_only_what_discovery_read(tmp_path: Path) -> None:
    """A file next to one that was read is not copied."""
    target, _ = _record(tmp_path)
    assert (target / "root/sys/class/mine/card0/memory").read_text() == "17179869184\n"
    assert not (target / "root/sys/class/mine/card0/unread").exists()
    assert os.readlink(target / "root/sys/class/mine/card0/driver") == "../../../bus/drivers/minedrv"


def test_a_recording_keeps_the_variables_read_and_never_a_secret(tmp_path: Path) -> None:
    """The manifest's env holds MINE_VISIBLE, which was read, and not API_TOKEN."""
    target, _ = _record(
        tmp_path,
        env={
            "MINE_VISIBLE": "0",
            "API_TOKEN": "s3cret",
            "CUDA_VISIBLE_DEVICES": "1",
            "HOME": "/root",
            "GPUSCOUT_PLUGINS": "mine",
            "CUDA_TOKEN": "x",
        },
        families=("CUDA_*",),
    )
    manifest = json.loads((target / "recording.json").read_text())
    assert manifest["env"] == {"MINE_VISIBLE": "0", "CUDA_VISIBLE_DEVICES": "1", "GPUSCOUT_PLUGINS": "mine"}
    assert manifest["format"] == 1 and manifest["platform"] == "linux"
    assert "s3cret" not in "".join(p.read_text(errors="replace") for p in target.rglob("*") if p.is_file())


def test_a_tracked_environment_notes_lookups_but_not_copies() -> None:
    """dict(env) and items() note nothing; get and in note the name."""
    env = TrackedEnv({"A": "1", "B": "2", "CUDA_X": "3"})
    dict(env)
    list(env.items())
    assert env.get("A") == "1" and "Z" not in env
    assert env.read == {"A", "Z"}
    assert env.recorded() == {"A": "1"}
    assert env.recorded(["CUDA_*", "B"]) == {"A": "1", "B": "2", "CUDA_X": "3"}


def test_the_built_in_plugins_declare_the_variables_that_change_what_they_find() -> None:
    """cuda, rocm, vulkan and metal name their families; the recorder reads them off the Scout."""
    from gpuscout._recording.record import declared_families

    scout = Scout(entry_points=False, env={})
    families = declared_families(scout.plugin_manager.get_plugins())
    assert {"CUDA_*", "NVIDIA_*", "ROCR_*", "HIP_*", "GPU_DEVICE_ORDINAL", "GGML_VK_*"} <= set(families)


def test_a_replay_uses_the_callers_environment_when_given(tmp_path: Path) -> None:
    """Scout(replay=, env=) sees the caller's env, not the recorded one."""
    target, _ = _record(tmp_path)
    assert Scout(replay=target, entry_points=False, plugins=[]).env["MINE_VISIBLE"] == "0"
    assert dict(Scout(replay=target, entry_points=False, plugins=[], env={}).env) == {}


def test_a_plugin_without_answers_in_the_recording_finds_nothing(tmp_path: Path) -> None:
    """An answers/ folder without the plugin's file replays a machine without its driver."""
    target, _ = _record(tmp_path)
    (target / "answers/mine.json").unlink()
    found = _replay(target)
    assert found.devices == []
    assert "no answers of mydriver recorded" in found.report("mine").note


def test_anonymizing_replaces_uuids_consistently(tmp_path: Path) -> None:
    """One UUID seen in two answers gets one replacement, unlike the original."""
    recorder = Recorder()
    uuid = "GPU-9d4e6b2a-5c8f-4a1d-b3e7-6f2a8c1d4e95"
    recorder.answer("cuda", "nvml", {"gpus": [{"uuid": uuid}]})
    recorder.answer("vulkan", "probe", {"devices": [{"uuid": "9d4e6b2a5c8f4a1db3e76f2a8c1d4e95"}]})
    recorder.write(str(tmp_path / "rec"), platform="linux", env={}, anonymize=True)
    cuda = json.loads((tmp_path / "rec/answers/cuda.json").read_text())["nvml"]["gpus"][0]["uuid"]
    vk = json.loads((tmp_path / "rec/answers/vulkan.json").read_text())["probe"]["devices"][0]
    assert cuda != uuid and cuda.startswith("GPU-") and len(cuda) == len(uuid)
    assert cuda[4:].replace("-", "") == vk["uuid"]


def test_an_answer_that_is_not_plain_json_is_left_out_with_a_problem(tmp_path: Path) -> None:
    """A set or NaN answer is not recorded; the manifest lists why."""
    recorder = Recorder()
    recorder.answer("mine", "bad", {1, 2})
    recorder.answer("mine", "nan", float("nan"))
    recorder.answer("mine", "good", [1])
    manifest = recorder.write(str(tmp_path / "rec"), platform="linux", env={})
    assert json.loads((tmp_path / "rec/answers/mine.json").read_text()) == {"good": [1]}
    assert len(manifest["problems"]) == 2


def test_recording_into_a_directory_that_holds_files_is_refused(tmp_path: Path) -> None:
    """Nothing is overwritten, and no half-written folder is left."""
    (tmp_path / "rec").mkdir()
    (tmp_path / "rec/keep").write_text("mine")
    with pytest.raises(GpuscoutError, match="not an empty directory"):
        Recorder().write(str(tmp_path / "rec"), platform="linux", env={})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rec"]


# -- hostile recordings ----------------------------------------------------------------------------


def _manifest(path: Path, **data: Any) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "recording.json").write_text(json.dumps({"format": 1, "platform": "linux", **data}))
    return path


def _manifest_text(path: Path, text: str) -> Path:
    """A recording whose manifest holds exactly ``text``."""
    path.mkdir()
    (path / "recording.json").write_text(text)
    return path


def _fifo_manifest(path: Path) -> Path:
    """A recording whose manifest is a FIFO."""
    path.mkdir()
    os.mkfifo(path / "recording.json")
    return path


HOSTILE: dict[str, tuple[Callable[[Path], object], str]] = {
    "missing manifest": (lambda p: p.mkdir(), "recording.json: missing"),
    "wrong version": (lambda p: _manifest(p, format=2), "format 2 is not one"),
    "format as text": (lambda p: _manifest(p, format="1"), "format '1' is not one"),
    "no platform": (lambda p: _manifest_text(p, '{"format": 1}'), "no 'platform' key"),
    "manifest a list": (lambda p: _manifest_text(p, "[]"), "expected a JSON object"),
    "manifest not json": (lambda p: _manifest_text(p, "{"), "not valid JSON"),
    "NaN": (lambda p: _manifest_text(p, '{"format": 1, "platform": "linux", "x": NaN}'), "not valid JSON"),
    "10^400": (
        lambda p: _manifest_text(p, '{"format": 1, "platform": "linux", "x": 1' + "0" * 400 + "}"),
        "not valid JSON",
    ),
    "env not str": (lambda p: _manifest(p, env={"A": 1}), "env['A'] must be a str"),
    "manifest a FIFO": (_fifo_manifest, "not a regular file"),
    "FIFO in the tree": (
        lambda p: write_tree(_manifest(p) / "root", {"/sys/x": FIFO}),
        "not a regular file, directory or link",
    ),
    "huge file in the tree": (
        lambda p: write_tree(_manifest(p) / "root", {"/proc/meminfo": b"0" * (2 << 20)}),
        "larger than 1048576 bytes",
    ),
    "link out of the tree": (
        lambda p: write_tree(_manifest(p) / "root", {"/sys/x": Symlink("../../../../etc/passwd")}),
        "leads outside the recording",
    ),
    "absolute link": (
        lambda p: write_tree(_manifest(p) / "root", {"/proc/meminfo": Symlink("/proc/meminfo")}),
        "leads outside the recording",
    ),
    "answer file misnamed": (
        lambda p: write_tree(_manifest(p) / "answers", {"/Cuda.json": "{}"}),
        "not <plugin>.json",
    ),
    "answer not an object": (
        lambda p: write_tree(_manifest(p) / "answers", {"/cuda.json": "[1]"}),
        "expected a JSON object",
    ),
}


@pytest.mark.parametrize("case", list(HOSTILE), ids=list(HOSTILE))
def test_a_hostile_recording_is_refused_with_one_line(
    tmp_path: Path, case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Scout(replay=) raises RecordingError naming the file; the CLI exits 2 with one line."""
    make, message = HOSTILE[case]
    make(tmp_path / "rec")
    with pytest.raises(RecordingError, match=message.replace("(", r"\(").replace("[", r"\[")):
        Scout(replay=tmp_path / "rec", entry_points=False)
    assert main(["--replay", str(tmp_path / "rec"), "list", "--json"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("gpuscout: error: ") and str(tmp_path) in err[0]


def test_a_2_gib_answer_is_refused_without_reading_it(tmp_path: Path) -> None:
    """An answer file over the limit (sparse, 2 GiB) is one RecordingError."""
    _manifest(tmp_path / "rec")
    (tmp_path / "rec/answers").mkdir()
    with open(tmp_path / "rec/answers/cuda.json", "wb") as f:
        f.truncate(2 << 30)
    with pytest.raises(RecordingError, match=f"larger than {MAX_ANSWER_BYTES} bytes"):
        load(tmp_path / "rec")


def test_replay_and_root_together_are_refused(tmp_path: Path) -> None:
    """A recording brings its own root."""
    with pytest.raises(GpuscoutError, match="exclude each other"):
        Scout(replay=_manifest(tmp_path / "rec"), root=str(tmp_path), entry_points=False)


def test_a_malformed_nvml_answer_is_named(tmp_path: Path, gpuscout_replay: ReplayFactory) -> None:
    """answers/cuda.json with a GPU whose name is a number fails discovery naming the path."""
    write_tree(
        _manifest(tmp_path / "rec") / "answers",
        {
            "/cuda.json": json.dumps(
                {
                    "nvml": {
                        "driver": {"kernel": "550.54.15", "cuda": 12040},
                        "gpus": [
                            {
                                "name": 5,
                                "uuid": "GPU-1",
                                "pci": {"busId": "", "domain": 0, "bus": 1, "device": 0},
                                "compute": [9, 0],
                            }
                        ],
                    }
                }
            )
        },
    )
    with pytest.raises(RecordingError, match=r"answers/cuda.json: nvml.gpus\[0\].name"):
        gpuscout_replay(tmp_path / "rec", "cuda", include_builtins=False).discover()


def test_the_replay_fixture_discovers_on_a_recording(tmp_path: Path, gpuscout_replay: ReplayFactory) -> None:
    """gpuscout_replay builds a Scout on the recording with an object plugin of the test."""
    target, found = _record(tmp_path)
    scout = gpuscout_replay(target, ("mine", ReadsAndRecords()), include_builtins=False)
    assert scout.discover().devices == found.devices


def test_record_and_replay_through_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """gpuscout record writes a recording that --replay lists as the live discovery listed."""
    root = _tree(tmp_path)
    assert (
        main(
            [
                "record",
                str(tmp_path / "rec"),
                "--root",
                str(root),
                "--plugins",
                "cuda,rocm",
                "--machine",
                "a test box",
            ]
        )
        == 0
    )
    assert "recorded 0 devices, " in capsys.readouterr().err
    manifest = json.loads((tmp_path / "rec/recording.json").read_text())
    assert manifest["machine"] == "a test box"
    assert main(["--replay", str(tmp_path / "rec"), "list", "--json", "--plugins", "cuda,rocm"]) == 0
    replayed = json.loads(capsys.readouterr().out)
    assert replayed["system"] == {"total_memory": 16384 * 1024, "free_memory": 8192 * 1024, "free_swap": 0}


def test_scout_takes_replay_and_defaults_enumerate_to_15_seconds() -> None:
    """The contract's names: Scout(..., enumerate_timeout=15.0, hook_timeout=1.0, replay=None)."""
    import inspect

    params = inspect.signature(Scout).parameters
    assert params["enumerate_timeout"].default == 15.0
    assert params["hook_timeout"].default == 1.0
    assert params["replay"].default is None
    names = list(params)
    assert names.index("replay") == names.index("hook_timeout") + 1


MACHINES = Path(__file__).parent / "machines"
SELECTING = sorted(
    p.parent.name for p in MACHINES.glob("*/expected.json") if json.loads(p.read_text()).get("env_best")
)


@pytest.mark.parametrize("machine", SELECTING)
def test_a_child_of_a_replay_sees_exactly_what_env_best_chose(
    machine: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """env best --verify on a recorded machine: the child, given the recording's environment
    and the selection (--replay-env process), discovers exactly the chosen device."""
    assert main(["--replay", str(MACHINES / machine), "env", "best", "--verify"]) == 0
    assert "the child sees exactly the 1 selected device: " in capsys.readouterr().err


def _listing(*argv: str) -> dict[str, Any]:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "gpuscout", *argv, "list", "--json", "--include-software"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    listing: dict[str, Any] = json.loads(done.stdout)
    for report in listing["plugins"]:
        report.pop("elapsed_ms")
    listing["system"].pop("free_memory", None)  # it moves between two runs
    for device in listing["devices"]:
        if device.get("integration") or device.get("software"):
            device.pop("free_memory", None)  # system memory, which moves too
    return listing


@pytest.mark.real_machine
def test_a_recording_of_this_machine_replays_as_this_machine_lists(tmp_path: Path) -> None:
    """gpuscout record here, then --replay: the same list --json as this machine gives."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "gpuscout", "record", str(tmp_path / "here")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert _listing("--replay", str(tmp_path / "here")) == _listing()
