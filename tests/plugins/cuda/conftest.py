"""A recorded NVML stand-in for the CUDA plugin's tests, and fixtures that install it.

``FakeNvmlRecorded`` answers pynvml's calls (same names, same error convention) from a JSON
recording under ``recorded/``; it replaces the plugin's one seam, ``nvml._load_nvml``.
"""

from __future__ import annotations

import json
import pathlib
from collections.abc import Callable, Mapping
from types import SimpleNamespace
from typing import Any

import pytest

from gpuscout import Scout
from gpuscout.plugins.cuda import nvml, order
from gpuscout.testing import ScoutFactory

RECORDED = pathlib.Path(__file__).parent / "recorded"

#: NVML return codes by the name pynvml gives their error classes.
ERROR_CODES = {
    "Uninitialized": 1, "NotSupported": 3, "NoPermission": 4, "NotFound": 6,
    "DriverNotLoaded": 9, "LibraryNotFound": 12, "FunctionNotFound": 13, "GpuIsLost": 15,
}


class FakeNVMLError(Exception):
    """pynvml's NVMLError convention: ``.value`` holds the NVML return code."""

    def __init__(self, name: str) -> None:
        super().__init__(f"fake NVML error {name}")
        self.value = ERROR_CODES[name]


def _answer(value: Any) -> Any:
    if isinstance(value, str) and value in ERROR_CODES:
        raise FakeNVMLError(value)
    if isinstance(value, Mapping) and "error" in value:
        raise FakeNVMLError(value["error"])
    return value


class FakeNvmlRecorded:
    """Replays one recorded machine through pynvml's function names. Not a driver."""

    NVMLError = FakeNVMLError
    nvmlMemory_v2 = 0x02000028

    def __init__(self, recording: dict[str, Any]) -> None:
        self.recording = recording
        self.gpus: list[dict[str, Any]] = recording["gpus"]
        self.open_sessions = 0
        self.inits = 0

    # -- library ------------------------------------------------------------------------------
    def nvmlInit(self) -> None:
        _answer(self.recording.get("init", None))
        self.open_sessions += 1
        self.inits += 1

    def nvmlShutdown(self) -> None:
        self.open_sessions -= 1

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        return int(_answer(self.recording["driver"]["cuda"]))

    def nvmlSystemGetCudaDriverVersion_v2(self) -> int:
        driver = self.recording["driver"]
        return int(_answer(driver.get("cuda_v2", driver["cuda"])))

    def nvmlSystemGetDriverVersion(self) -> str:
        return str(_answer(self.recording["driver"]["kernel"]))

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    # -- handles: ("gpu", i) or ("mig", i, j) -------------------------------------------------
    def _node(self, handle: tuple[Any, ...]) -> dict[str, Any]:
        gpu = self.gpus[handle[1]]
        if handle[0] == "gpu":
            return gpu
        return next(m for m in gpu["mig"] if m["index"] == handle[2])

    def nvmlDeviceGetHandleByIndex(self, index: int) -> tuple[Any, ...]:
        _answer(self.gpus[index].get("handle", None))
        return ("gpu", index)

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> tuple[Any, ...]:
        for i, gpu in enumerate(self.gpus):
            if gpu["uuid"] == uuid:
                return ("gpu", i)
            for m in gpu.get("mig", ()):
                if m["uuid"] == uuid:
                    return ("mig", i, m["index"])
        raise FakeNVMLError("NotFound")

    def nvmlDeviceGetName(self, handle: tuple[Any, ...]) -> str:
        return str(self._node(handle)["name"])

    def nvmlDeviceGetUUID(self, handle: tuple[Any, ...]) -> str:
        return str(self._node(handle)["uuid"])

    def nvmlDeviceGetPciInfo(self, handle: tuple[Any, ...]) -> SimpleNamespace:
        return SimpleNamespace(**self._node(handle)["pci"])

    def nvmlDeviceGetMemoryInfo(self, handle: tuple[Any, ...], version: int | None = None) -> Any:
        key = "memory_v2" if version else "memory_v1"
        return SimpleNamespace(**_answer(self._node(handle)[key]))

    def nvmlDeviceGetCudaComputeCapability(self, handle: tuple[Any, ...]) -> tuple[int, int]:
        major, minor = self._node(handle)["compute"]
        return major, minor

    def nvmlDeviceGetMigMode(self, handle: tuple[Any, ...]) -> list[int]:
        return list(_answer(self._node(handle).get("mig_mode", "NotSupported")))

    def nvmlDeviceGetMaxMigDeviceCount(self, handle: tuple[Any, ...]) -> int:
        return int(self._node(handle).get("max_mig", 0))

    def nvmlDeviceGetMigDeviceHandleByIndex(
        self, handle: tuple[Any, ...], index: int
    ) -> tuple[Any, ...]:
        if not any(m["index"] == index for m in self._node(handle).get("mig", ())):
            raise FakeNVMLError("NotFound")
        return ("mig", handle[1], index)

    def nvmlDeviceGetGpuInstanceId(self, handle: tuple[Any, ...]) -> int:
        return int(self._node(handle)["gpu_instance_id"])

    def nvmlDeviceGetComputeInstanceId(self, handle: tuple[Any, ...]) -> int:
        return int(self._node(handle)["compute_instance_id"])


def load_recording(name: str) -> dict[str, Any]:
    """The recording ``recorded/<name>.json`` as a fresh dict (tests may alter their copy)."""
    data: dict[str, Any] = json.loads((RECORDED / f"{name}.json").read_text())
    return data


@pytest.fixture
def recording() -> Callable[[str], dict[str, Any]]:
    """Loads a recording by name."""
    return load_recording


@pytest.fixture
def fake_nvml(monkeypatch: pytest.MonkeyPatch) -> Callable[[str | dict[str, Any]], FakeNvmlRecorded]:
    """Installs a FakeNvmlRecorded for a recording (name or dict) as the plugin's NVML."""

    def install(source: str | dict[str, Any]) -> FakeNvmlRecorded:
        fake = FakeNvmlRecorded(load_recording(source) if isinstance(source, str) else source)
        monkeypatch.setattr(nvml, "_load_nvml", lambda context: fake)
        return fake

    return install


@pytest.fixture
def recorded_probe(monkeypatch: pytest.MonkeyPatch) -> Callable[[int, str], list[float]]:
    """Replaces the CUDA order probe child with a recorded (exit status, output)."""

    def install(status: int, output: str) -> list[float]:
        timeouts: list[float] = []

        def run(context: Any, timeout: float) -> tuple[int, str]:
            timeouts.append(timeout)
            return status, output

        monkeypatch.setattr(order, "run_probe", run)
        return timeouts

    return install


@pytest.fixture
def no_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fails the test if the CUDA order probe child would be started."""

    def run(context: Any, timeout: float) -> tuple[int, str]:
        raise AssertionError("the CUDA order probe must not run here")

    monkeypatch.setattr(order, "run_probe", run)


@pytest.fixture
def cuda_scout(gpuscout_scout: ScoutFactory) -> Callable[..., Scout]:
    """A Scout holding only the cuda plugin, on Linux, with the given env and root."""

    def make(env: Mapping[str, str] | None = None, root: str = "/", **kwargs: Any) -> Scout:
        return gpuscout_scout("cuda", env=dict(env or {}), root=root, **kwargs)

    return make
