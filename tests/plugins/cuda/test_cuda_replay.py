"""The CUDA plugin's recording seam: ``capture`` keeps what NVML answers, ``ReplayedNvml``
answers it back, and a recording replays the same devices."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpuscout import Scout
from gpuscout._machine.context import Context
from gpuscout.plugin import RecordingError
from gpuscout.plugins.cuda import enumeration as nvml
from gpuscout.plugins.cuda.replay import ReplayedNvml, capture

RECORDED = Path(__file__).parent / "recorded"
NAMES = sorted(p.stem for p in RECORDED.glob("*.json"))


def _readings(answers: Any) -> Any:
    nv = ReplayedNvml(answers)
    ctx = Context(env={}, platform="linux")
    return nvml.read_driver(nv, ctx), nvml.read_gpus(nv, ctx), ctx.notes


@pytest.mark.parametrize("name", NAMES)
def test_a_capture_of_recorded_nvml_replays_the_same_readings(name: str) -> None:
    """capture(ReplayedNvml(x)) answers every call the plugin makes as x does."""
    answers = json.loads((RECORDED / f"{name}.json").read_text())
    assert _readings(capture(ReplayedNvml(answers))) == _readings(answers)


def _recording(tmp_path: Path, name: str, env: dict[str, str]) -> Path:
    answers = json.loads((RECORDED / f"{name}.json").read_text())
    (tmp_path / "answers").mkdir(parents=True)
    (tmp_path / "answers/cuda.json").write_text(json.dumps({"nvml": answers}))
    (tmp_path / "recording.json").write_text(json.dumps({"format": 1, "platform": "linux", "env": env}))
    return tmp_path


def test_a_recorded_h100_pair_replays_as_two_cuda_devices(tmp_path: Path) -> None:
    """Scout(replay=) on a recording holding two H100s' NVML answers lists both, by UUID."""
    scout = Scout(
        plugins=["cuda"],
        entry_points=False,
        replay=_recording(tmp_path, "h100_sxm_x2", {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}),
    )
    devices = scout.discover().devices
    assert [d.library for d in devices] == ["CUDA", "CUDA"]
    assert all(d.filter_id.startswith("GPU-") for d in devices)


def test_a_replayed_nvml_init_failure_is_the_plugins_note(tmp_path: Path) -> None:
    """{"init": {"error": "Unknown", "message": "Unknown Error"}} reads as NVML failing to start."""
    (tmp_path / "answers").mkdir()
    (tmp_path / "answers/cuda.json").write_text(
        json.dumps({"nvml": {"init": {"error": "Unknown", "message": "Unknown Error"}, "gpus": []}})
    )
    (tmp_path / "recording.json").write_text('{"format": 1, "platform": "linux"}')
    found = Scout(plugins=["cuda"], entry_points=False, replay=tmp_path).discover()
    assert found.devices == []
    assert "NVML could not start (NVIDIA driver): Unknown Error" in found.plugins[0].note


def test_an_unknown_nvml_error_name_is_a_recording_error() -> None:
    """An error name pynvml does not have is refused, naming where it is."""
    with pytest.raises(RecordingError, match=r"nvml.init: unknown NVML error 'Oops'"):
        ReplayedNvml({"init": {"error": "Oops"}}).nvmlInit()


def test_two_recorded_gpus_with_one_uuid_are_a_recording_error(tmp_path: Path) -> None:
    """A copied GPU entry (one UUID twice) is refused, naming both places: never a card hidden from itself."""
    target = _recording(tmp_path, "h100_sxm_x2", {})
    path = target / "answers/cuda.json"
    answers = json.loads(path.read_text())
    gpus = answers["nvml"]["gpus"]
    gpus[1]["uuid"] = gpus[0]["uuid"]
    path.write_text(json.dumps(answers))
    with pytest.raises(RecordingError, match=r"nvml\.gpus\[1\]\.uuid: .* is also \.gpus\[0\]\.uuid"):
        Scout(plugins=["cuda"], entry_points=False, replay=target).discover()


def test_a_mig_instance_with_its_parents_uuid_is_a_recording_error() -> None:
    """MIG instances and GPUs share one UUID space: a MIG- entry repeating a GPU's UUID is refused."""
    gpu = {
        "name": "A100",
        "uuid": "GPU-1",
        "pci": {},
        "compute": [8, 0],
        "mig": [{"index": 0, "uuid": "GPU-1"}],
    }
    with pytest.raises(
        RecordingError, match=r"nvml\.gpus\[0\]\.mig\[0\]\.uuid: 'GPU-1' is also \.gpus\[0\]\.uuid"
    ):
        ReplayedNvml({"gpus": [gpu]})
