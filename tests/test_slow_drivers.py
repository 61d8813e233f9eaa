"""Slow drivers: a driver that takes seconds (an NVML init without persistence mode, a Strix Halo
discovery) gets the enumerate deadline wherever it is called, and a plugin that overran once is
asked again by the next discovery, never with two calls into it at once."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pytest

import gpuscout.runner
from gpuscout import DeviceInfo, Scout, hookimpl
from gpuscout.isolation import START_ALLOWANCE
from gpuscout.testing import ScoutFactory

GIB = 1 << 30
CARD = DeviceInfo(id="0", library="Slow", uuid="Slow-0", pci_id="0000:0a:00.0",
                  total_memory=16 * GIB, free_memory=10 * GIB)


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """Set when the test ends, so a stuck plugin's abandoned thread ends too."""
    event = threading.Event()
    yield event
    event.set()


def report(s: Scout, name: str) -> Any:
    return next(r for r in s.reports if r.name == name)


class SlowRefresh:
    """Reports CARD; its refresh takes ``seconds`` and then says 3 GiB are free."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    @hookimpl
    def gpuscout_enumerate(self, context: Any) -> list[DeviceInfo]:
        return [CARD]

    @hookimpl
    def gpuscout_refresh(self, devices: Sequence[DeviceInfo], context: Any) -> Any:
        time.sleep(self.seconds)
        return [d.evolve(free_memory=3 * GIB) for d in devices if d.library == "Slow"]


class NeedsInit:
    """Reports CARD and asks for it to be initialised in a child."""

    @hookimpl
    def gpuscout_enumerate(self, context: Any) -> list[DeviceInfo]:
        return [CARD]

    @hookimpl
    def gpuscout_validate_init(self, device: DeviceInfo) -> Mapping[str, str] | None:
        return {"SLOW_INIT": "1"} if device.library == "Slow" else None


def test_the_default_enumerate_deadline_is_15_s() -> None:
    """A Scout built without a deadline gives each plugin 15 s, as the command line does."""
    assert Scout(entry_points=False, plugins=[]).enumerate_timeout == 15.0


def test_a_refresh_slower_than_hook_timeout_still_answers(gpuscout_scout: ScoutFactory) -> None:
    """A refresh gets the enumerate deadline, not the rule hooks' one."""
    s = gpuscout_scout(("slow", SlowRefresh(0.4)), hook_timeout=0.1, enumerate_timeout=2.0)
    (fresh,) = s.refresh(s.discover().devices)
    assert (fresh.free_memory, fresh.free_memory_stale) == (3 * GIB, False)
    assert str(report(s, "slow").status) == "ok"


def test_init_validation_runs_under_the_enumerate_deadline(
        gpuscout_scout: ScoutFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """discover(validate=True) gives its children the enumerate deadline plus their start."""
    seen: list[float] = []

    def validate(checks: Any, timeout: float = 30.0, **options: Any) -> Any:
        seen.append(timeout)
        return [device for device, _ in checks], []

    monkeypatch.setattr(gpuscout.runner, "validate_devices", validate)
    s = gpuscout_scout(("slow", NeedsInit()), enumerate_timeout=7.0)
    assert [d.id for d in s.discover(validate=True).devices] == ["0"]
    assert seen == [7.0 + START_ALLOWANCE]
