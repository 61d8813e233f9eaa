"""Rules of the CUDA plugin's recording seam (gpuscout.plugins.cuda.replay ``capture``) found by
the tenth mutmut round's survivors (tests/MUTATION.md, "Tenth mutmut round"): a recording keeps
NVML's answers as docs/recordings.md writes them, not only the parts the plugin reads today.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from gpuscout.plugin import RecordingError
from gpuscout.plugins.cuda.replay import ReplayedNvml, ReplayedNVMLError, capture

A = "GPU-5b2c8f41-7e0a-4c3d-9b1e-2f6a8d4c7e90"


def _link(bus: int, kind: int = 2) -> dict[str, Any]:
    return {
        "state": 1,
        "remote": {"busId": f"00000000:{bus:02X}:00.0", "domain": 0, "bus": bus, "device": 0},
        "type": kind,
    }


ANSWERS: dict[str, Any] = {
    "driver": {"kernel": "550.54.15", "cuda": 12040},
    "gpus": [
        {
            "name": "H100",
            "uuid": A,
            "pci": {"busId": "00000000:18:00.0", "domain": 0, "bus": 24, "device": 0},
            "compute": [9, 0],
            "mig_mode": [0, 0],
            "nvlink": [_link(0x2A), {"state": 0}, _link(0xC5, 1)],
        }
    ],
}


def test_a_capture_keeps_each_links_answers_as_nvml_gave_them() -> None:
    """capture() records every NVLink answer whole: the state, and for an active link its remote
    PCI info under the keys ``busId``, ``domain``, ``bus``, ``device`` (the format replays read)
    and the remote device type.
    Kills gpuscout.plugins.cuda.replay.x__remote__mutmut_50..52 and its like (the keys)."""
    recorded = capture(ReplayedNvml(copy.deepcopy(ANSWERS)))
    assert recorded["gpus"][0]["nvlink"] == ANSWERS["gpus"][0]["nvlink"]
    assert recorded["gpus"][0]["pci"] == ANSWERS["gpus"][0]["pci"]


class _OldBindings(ReplayedNvml):
    """An older pynvml: PCI bus ids come back as bytes (a NUL-padded C char array)."""

    def nvmlDeviceGetPciInfo(self, handle: Any) -> SimpleNamespace:
        pci = super().nvmlDeviceGetPciInfo(handle)
        return SimpleNamespace(**{**vars(pci), "busId": pci.busId.encode("ascii")})

    def nvmlDeviceGetNvLinkRemotePciInfo(self, handle: Any, link: int) -> SimpleNamespace:
        pci = super().nvmlDeviceGetNvLinkRemotePciInfo(handle, link)
        return SimpleNamespace(**{**vars(pci), "busId": pci.busId.encode("ascii")})


def test_bus_ids_given_as_bytes_are_recorded_as_text() -> None:
    """Bindings that answer a bus id as bytes (older pynvml) are recorded as the same text, for
    the GPU's own PCI info and a link's remote end alike.
    Kills gpuscout.plugins.cuda.replay.x__remote__mutmut_39, _45.._49 and capture's like."""
    recorded = capture(_OldBindings(copy.deepcopy(ANSWERS)))
    assert recorded["gpus"][0]["pci"]["busId"] == "00000000:18:00.0"
    assert [x.get("remote", {}).get("busId") for x in recorded["gpus"][0]["nvlink"]] == [
        "00000000:2A:00.0",
        None,
        "00000000:C5:00.0",
    ]


class _NoRemoteCall(ReplayedNvml):
    """Bindings without nvmlDeviceGetNvLinkRemotePciInfo (it is not in every pynvml)."""

    def __getattribute__(self, name: str) -> Any:
        if name == "nvmlDeviceGetNvLinkRemotePciInfo":
            raise AttributeError(name)
        return super().__getattribute__(name)


def test_a_missing_remote_pci_call_is_recorded_as_nvmls_function_not_found() -> None:
    """Where the bindings lack the remote-PCI call, each active link's remote end is recorded as
    NVML's FunctionNotFound error (what a replay then raises), the link itself kept.
    Kills gpuscout.plugins.cuda.replay.x__remote__mutmut_6, _11.._15."""
    recorded = capture(_NoRemoteCall(copy.deepcopy(ANSWERS)))
    links = recorded["gpus"][0]["nvlink"]
    assert [x["state"] for x in links] == [1, 0, 1]
    assert links[0]["remote"] == {"error": "FunctionNotFound"} == links[2]["remote"]


RECORDED = sorted((Path(__file__).parent / "recorded").glob("*.json"))


@pytest.mark.parametrize("path", RECORDED, ids=lambda p: p.stem)
def test_a_capture_of_a_replayed_capture_is_the_same_capture(path: Path) -> None:
    """capture() writes what ReplayedNvml reads back as the same answers: capturing the replay of
    a capture gives that capture again, field for field (the driver's versions, each GPU's PCI
    info, compute capability, MIG mode and instances, memory, links).
    Kills gpuscout.plugins.cuda.replay.x_capture__mutmut_8, _9, _24, _25, _81.._83 and their like
    (a field written under another name or left unconverted)."""
    first = capture(ReplayedNvml(json.loads(path.read_text())))
    assert capture(ReplayedNvml(copy.deepcopy(first))) == first


def test_a_gpu_whose_handle_nvml_refuses_is_recorded_as_that_error_and_the_next_still_read() -> None:
    """nvmlDeviceGetHandleByIndex failing for one index is recorded as that GPU's ``handle``
    error, and the GPUs after it are captured as usual.
    Kills gpuscout.plugins.cuda.replay.x_capture__mutmut_50.._53."""
    answers = copy.deepcopy(ANSWERS)
    refused = {"error": "NoPermission", "message": "Insufficient Permissions"}
    answers["gpus"].insert(0, {"handle": refused})
    recorded = capture(ReplayedNvml(answers))
    assert recorded["gpus"][0] == {"handle": refused}
    assert recorded["gpus"][1]["uuid"] == A and len(recorded["gpus"]) == 2


class _NoCount(ReplayedNvml):
    """Bindings whose device count call fails (the driver answered it with an error)."""

    def nvmlDeviceGetCount(self) -> int:
        raise ReplayedNVMLError(9)


def test_a_failed_device_count_records_no_gpu() -> None:
    """When NVML cannot count its devices, capture() records none (it never asks for index 0).
    Kills gpuscout.plugins.cuda.replay.x_capture__mutmut_41 (``count or 1``)."""
    assert capture(_NoCount(copy.deepcopy(ANSWERS)))["gpus"] == []


class _Context:
    """The recording context a plugin writes its answers to (``Context.record``)."""

    def __init__(self) -> None:
        self.recorded: dict[str, Any] = {}

    def record(self, key: str, value: Any) -> None:
        self.recorded[key] = value


def test_a_recording_nvml_records_what_nvml_answers_at_init_and_passes_calls_through() -> None:
    """``gpuscout record`` wraps the live bindings: at nvmlInit it records the capture of every
    answer under ``nvml``; every other name is the bindings' own.
    Kills gpuscout.plugins.cuda.replay.xǁRecordingNvmlǁ__init__, __getattr__ and nvmlInit's
    mutants that lose the key or the capture."""
    from gpuscout.plugins.cuda.replay import RecordingNvml

    live = ReplayedNvml(copy.deepcopy(ANSWERS))
    context = _Context()
    wrapped = RecordingNvml(live, context)
    wrapped.nvmlInit()
    assert context.recorded == {"nvml": capture(ReplayedNvml(copy.deepcopy(ANSWERS)))}
    assert wrapped.nvmlDeviceGetCount() == 1 and wrapped.NVMLError is ReplayedNVMLError


def test_an_nvml_that_fails_to_start_is_recorded_as_that_failure_and_still_raises() -> None:
    """nvmlInit failing (no driver) records ``{"init": error, "gpus": []}`` with NVML's error
    name and message, then raises as the live call did, so the plugin says what it says live.
    Kills gpuscout.plugins.cuda.replay.x_init_failure's and RecordingNvml.nvmlInit's mutants."""
    from gpuscout.plugins.cuda.replay import RecordingNvml

    live = ReplayedNvml({"init": {"error": "DriverNotLoaded", "message": "Driver Not Loaded"}, "gpus": []})
    context = _Context()
    with pytest.raises(ReplayedNVMLError) as caught:
        RecordingNvml(live, context).nvmlInit()
    assert caught.value.value == 9
    assert context.recorded == {
        "nvml": {"init": {"error": "DriverNotLoaded", "message": "Driver Not Loaded"}, "gpus": []}
    }


def _nvml_error(call: Any, *args: Any) -> int:
    with pytest.raises(ReplayedNVMLError) as caught:
        call(*args)
    return int(caught.value.value)


def _recording_error(call: Any, *args: Any) -> str:
    with pytest.raises(RecordingError) as caught:
        call(*args)
    return str(caught.value)


def test_driver_versions_a_recording_lacks_are_nvmls_not_supported() -> None:
    """A recording without the driver's versions answers those calls as NVML's NOT_SUPPORTED
    (3); a recorded ``cuda`` stands in for a missing ``cuda_v2`` (older drivers have no _v2);
    a driver that is not an object is a recording error naming ``.driver``.
    Kills gpuscout.plugins.cuda.replay.xǁReplayedNvmlǁ_driver__mutmut_3.._26."""
    bare = ReplayedNvml({"gpus": []})
    assert _nvml_error(bare.nvmlSystemGetCudaDriverVersion) == 3
    assert _nvml_error(bare.nvmlSystemGetCudaDriverVersion_v2) == 3
    assert _nvml_error(bare.nvmlSystemGetDriverVersion) == 3
    old = ReplayedNvml({"driver": {"kernel": "470.256.02", "cuda": 11040}, "gpus": []})
    assert old.nvmlSystemGetCudaDriverVersion_v2() == 11040
    both = ReplayedNvml({"driver": {"kernel": "x", "cuda": 11040, "cuda_v2": 11080}, "gpus": []})
    assert both.nvmlSystemGetCudaDriverVersion_v2() == 11080
    assert _recording_error(ReplayedNvml({"driver": [], "gpus": []}).nvmlSystemGetCudaDriverVersion) == (
        "answers/cuda.json: nvml.driver: expected an object, got []"
    )


def test_a_link_without_its_remote_answers_is_not_supported_and_a_malformed_one_is_named() -> None:
    """An active link recorded without ``remote`` or ``type`` answers those calls as
    NOT_SUPPORTED; a remote without ``busId`` has an empty one; a remote that is not an
    object, a non-integer domain or type is a recording error naming the link's field.
    Kills gpuscout.plugins.cuda.replay.xǁReplayedNvmlǁnvmlDeviceGetNvLinkRemotePciInfo__mutmut_8..52
    and nvmlDeviceGetNvLinkRemoteDeviceType__mutmut_7..20."""
    bare = {"state": 1}
    no_bus = {"state": 1, "remote": {"domain": 0, "bus": 42, "device": 0}, "type": 2}
    not_obj = {"state": 1, "remote": [42], "type": 2}
    bad_domain = {"state": 1, "remote": {"domain": "0", "bus": 42, "device": 0}, "type": "GPU"}
    nv = ReplayedNvml({"gpus": [{"name": "x", "uuid": A, "nvlink": [bare, no_bus, not_obj, bad_domain]}]})
    h = nv.nvmlDeviceGetHandleByIndex(0)
    assert _nvml_error(nv.nvmlDeviceGetNvLinkRemotePciInfo, h, 0) == 3
    assert _nvml_error(nv.nvmlDeviceGetNvLinkRemoteDeviceType, h, 0) == 3
    assert nv.nvmlDeviceGetNvLinkRemotePciInfo(h, 1).busId == ""
    assert _recording_error(nv.nvmlDeviceGetNvLinkRemotePciInfo, h, 2) == (
        "answers/cuda.json: nvml.gpus[0].nvlink[2].remote: expected an object, got [42]"
    )
    assert _recording_error(nv.nvmlDeviceGetNvLinkRemotePciInfo, h, 3) == (
        "answers/cuda.json: nvml.gpus[0].nvlink[3].remote.domain: expected a whole number, got '0'"
    )
    assert _recording_error(nv.nvmlDeviceGetNvLinkRemoteDeviceType, h, 3) == (
        "answers/cuda.json: nvml.gpus[0].nvlink[3].type: expected a whole number, got 'GPU'"
    )


class _OddBindings(ReplayedNvml):
    """Bindings that answer the driver version as bytes (older pynvml), fail the device name
    with an NVMLError that carries no code, and the compute capability with an unknown code."""

    def nvmlSystemGetDriverVersion(self) -> Any:
        return super().nvmlSystemGetDriverVersion().encode("utf-8")

    def nvmlDeviceGetName(self, handle: Any) -> str:
        error = ReplayedNVMLError(0, "the binding broke")
        error.value = None  # type: ignore[assignment]
        raise error

    def nvmlDeviceGetCudaComputeCapability(self, handle: Any) -> Any:
        raise ReplayedNVMLError(1234, "a code this NVML table lacks")


def test_odd_answers_are_recorded_as_text_or_as_the_error_they_were() -> None:
    """A bytes answer is recorded as its text; an NVMLError without a code is recorded as
    ``Unknown`` with its message; an NVML code the table lacks is recorded as the number.
    Kills gpuscout.plugins.cuda.replay.x__value__mutmut_8.._16 and x__error__mutmut_6.._20."""
    recorded = capture(_OddBindings(copy.deepcopy(ANSWERS)))
    assert recorded["driver"]["kernel"] == "550.54.15"
    gpu = recorded["gpus"][0]
    assert gpu["name"] == {"error": "Unknown", "message": "the binding broke"}
    assert gpu["compute"] == {"error": 1234, "message": "a code this NVML table lacks"}


def test_memory_a_recording_lacks_is_not_supported_and_a_missing_figure_is_zero() -> None:
    """A GPU recorded without ``memory_v2`` answers the v2 call as NOT_SUPPORTED; a recorded
    memory object without ``used`` (or another figure) answers it as 0.
    Kills gpuscout.plugins.cuda.replay.xǁReplayedNvmlǁnvmlDeviceGetMemoryInfo__mutmut_14, _15,
    _32, _39, _40."""
    gpu = {"name": "x", "uuid": A, "memory_v1": {"total": 8, "free": 6}}
    nv = ReplayedNvml({"gpus": [gpu]})
    h = nv.nvmlDeviceGetHandleByIndex(0)
    assert _nvml_error(nv.nvmlDeviceGetMemoryInfo, h, 2) == 3
    memory = nv.nvmlDeviceGetMemoryInfo(h)
    assert (memory.total, memory.free, memory.used, memory.reserved) == (8, 6, 0, 0)
