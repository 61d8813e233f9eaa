"""A recorded NVML stand-in for the CUDA plugin's tests, and fixtures that install it.

``FakeNvmlRecorded`` answers pynvml's calls (same names, same error convention) from a JSON
recording under ``recorded/`` (the plugin's ``ReplayedNvml``, which replays recordings, with
session counts); it replaces the plugin's one seam, ``enumeration._load_nvml``.
"""

from __future__ import annotations

import json
import pathlib
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from gpuscout import Scout
from gpuscout.plugins.cuda import enumeration as nvml
from gpuscout.plugins.cuda import order
from gpuscout.plugins.cuda.replay import ReplayedNvml
from gpuscout.testing import ScoutFactory

RECORDED = pathlib.Path(__file__).parent / "recorded"


class FakeNvmlRecorded(ReplayedNvml):
    """Replays one recorded machine through pynvml's function names (the plugin's own
    ``ReplayedNvml``), counting NVML sessions so tests can check each one is closed. Not a
    driver."""

    def __init__(self, recording: dict[str, Any]) -> None:
        super().__init__(recording)
        self.open_sessions = 0
        self.inits = 0

    def nvmlInit(self) -> None:
        super().nvmlInit()
        self.open_sessions += 1
        self.inits += 1

    def nvmlShutdown(self) -> None:
        self.open_sessions -= 1


#: What the fixtures below return, for the annotations of the tests that take them.
Recording = Callable[[str], dict[str, Any]]
FakeNvml = Callable[[str | dict[str, Any]], FakeNvmlRecorded]
RecordedProbe = Callable[[int, str], list[float]]
CudaScout = Callable[..., Scout]


def load_recording(name: str) -> dict[str, Any]:
    """The recording ``recorded/<name>.json`` as a fresh dict (tests may alter their copy)."""
    data: dict[str, Any] = json.loads((RECORDED / f"{name}.json").read_text())
    return data


@pytest.fixture
def recording() -> Recording:
    """Loads a recording by name."""
    return load_recording


@pytest.fixture
def fake_nvml(monkeypatch: pytest.MonkeyPatch) -> FakeNvml:
    """Installs a FakeNvmlRecorded for a recording (name or dict) as the plugin's NVML."""

    def install(source: str | dict[str, Any]) -> FakeNvmlRecorded:
        fake = FakeNvmlRecorded(load_recording(source) if isinstance(source, str) else source)
        monkeypatch.setattr(nvml, "_load_nvml", lambda context: fake)
        return fake

    return install


@pytest.fixture
def recorded_probe(monkeypatch: pytest.MonkeyPatch) -> RecordedProbe:
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
def cuda_scout(gpuscout_scout: ScoutFactory) -> CudaScout:
    """A Scout holding only the cuda plugin, on Linux, with the given env and root."""

    def make(env: Mapping[str, str] | None = None, root: str = "/", **kwargs: Any) -> Scout:
        return gpuscout_scout("cuda", env=dict(env or {}), root=root, **kwargs)

    return make
