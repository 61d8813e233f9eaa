"""The CUDA plugin's recording seam: ``capture`` keeps what NVML answers, ``ReplayedNvml``
answers it back, and a recording replays the same devices."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpuscout import Scout
from gpuscout.context import Context
from gpuscout.plugin import RecordingError
from gpuscout.plugins.cuda import nvml
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
