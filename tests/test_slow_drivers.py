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
from gpuscout._host.isolation import START_ALLOWANCE
from gpuscout.sizes import GIB
from gpuscout.testing import ScoutFactory, eventually

CARD = DeviceInfo(
    id="0", library="Slow", uuid="Slow-0", pci_id="0000:0a:00.0", total_memory=16 * GIB, free_memory=10 * GIB
)
#: The deadline these tests give a plugin, and what a discovery may take beyond it.
LIMIT = 0.3
MARGIN = 0.5


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """Set when the test ends, so a stuck plugin's abandoned thread ends too."""
    event = threading.Event()
    yield event
    event.set()


def report(s: Scout, name: str) -> Any:
    return next(r for r in s.reports if r.name == name)


def slow_of(found: Any) -> Any:
    """The report of the plugin named "slow" in a Discovery."""
    return found.report("slow")


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


class Driver:
    """A plugin whose first enumerate (and first refresh, and minimum_memory) waits for
    ``gate``, the later ones answer at once; it counts its calls, those finished, and the most
    calls inside it at one time."""

    def __init__(self, gate: threading.Event) -> None:
        self.gate = gate
        self.calls: list[str] = []
        self.finished: list[str] = []
        self.inside = self.most_inside = 0
        self.lock = threading.Lock()

    def _enter(self, hook: str) -> bool:
        with self.lock:
            self.calls.append(hook)
            self.inside += 1
            self.most_inside = max(self.most_inside, self.inside)
            return self.calls.count(hook) == 1

    def _leave(self, hook: str) -> None:
        with self.lock:
            self.inside -= 1
            self.finished.append(hook)

    @hookimpl
    def gpuscout_enumerate(self, context: Any) -> list[DeviceInfo]:
        first = self._enter("enumerate")
        try:
            if first:
                self.gate.wait(30)
                return [CARD.evolve(id="late")]
            return [CARD]
        finally:
            self._leave("enumerate")

    @hookimpl
    def gpuscout_refresh(self, devices: Sequence[DeviceInfo], context: Any) -> Any:
        first = self._enter("refresh")
        try:
            if first:
                self.gate.wait(30)
            return [d.evolve(free_memory=3 * GIB) for d in devices if d.library == "Slow"]
        finally:
            self._leave("refresh")

    @hookimpl
    def gpuscout_minimum_memory(self, device: DeviceInfo) -> int | None:
        first = self._enter("minimum_memory")
        try:
            if first:
                self.gate.wait(30)
            return 1 << 20 if device.library == "Slow" else None
        finally:
            self._leave("minimum_memory")


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
    gpuscout_scout: ScoutFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """discover(validate=True) gives its children the enumerate deadline plus their start."""
    seen: list[float] = []

    def validate(checks: Any, timeout: float = 30.0, **options: Any) -> Any:
        seen.append(timeout)
        return [device for device, _ in checks], []

    monkeypatch.setattr(gpuscout.runner, "validate_devices", validate)
    s = gpuscout_scout(("slow", NeedsInit()), enumerate_timeout=7.0)
    assert [d.id for d in s.discover(validate=True).devices] == ["0"]
    assert seen == [7.0 + START_ALLOWANCE]


def test_a_plugin_that_overran_and_then_answers_is_ok_with_a_note(gpuscout_scout: ScoutFactory) -> None:
    """A plugin whose overrun call answers during the next discovery is ok there, with a note."""
    gate = threading.Event()
    driver = Driver(gate)
    s = gpuscout_scout(("slow", driver), enumerate_timeout=LIMIT)
    first = s.discover()
    assert first.devices == [] and str(slow_of(first).status) == "timeout"
    threading.Timer(LIMIT / 3, gate.set).start()
    second = s.discover()
    slow = slow_of(second)
    assert [d.id for d in second.devices] == ["late"] and str(slow.status) == "ok"
    assert "overran its enumerate deadline in an earlier discovery (0.3 s); asked again" in slow.note
    assert "this answer is from that earlier call" in slow.note
    assert driver.calls == ["enumerate"] and driver.most_inside == 1
    third = s.discover()
    assert [d.id for d in third.devices] == ["0"] and slow_of(third).note == ""


def test_a_plugin_stuck_for_good_costs_one_deadline_per_discovery_on_one_call(
    gpuscout_scout: ScoutFactory, release: threading.Event
) -> None:
    """A plugin that never returns is timeout every time; no second call is ever started."""
    driver = Driver(release)
    s = gpuscout_scout(("slow", driver), ("fast", SlowRefresh(0.0)), enumerate_timeout=LIMIT)
    s.discover()
    start = time.monotonic()
    second = s.discover()
    took = time.monotonic() - start
    slow = slow_of(second)
    assert took < LIMIT + MARGIN, f"the second discovery took {took:.2f} s"
    assert str(slow.status) == "timeout" and "still running" in slow.error
    assert "overran its enumerate deadline in an earlier discovery" in slow.note
    assert driver.calls == ["enumerate"] and driver.finished == []
    assert [d.id for d in second.devices] == ["0"]


def test_a_late_answer_that_came_between_discoveries_is_not_used(gpuscout_scout: ScoutFactory) -> None:
    """A call that finished late, between two discoveries, is dropped: the next one calls anew."""
    gate = threading.Event()
    driver = Driver(gate)
    s = gpuscout_scout(("slow", driver), enumerate_timeout=LIMIT)
    assert s.discover().devices == []
    gate.set()
    assert eventually(lambda: driver.finished == ["enumerate"])
    second = s.discover()
    assert [d.id for d in second.devices] == ["0"] and str(slow_of(second).status) == "ok"
    assert "overran its enumerate deadline in an earlier discovery" in slow_of(second).note
    assert driver.calls == ["enumerate", "enumerate"] and driver.most_inside == 1


def test_a_stuck_rule_hook_holds_back_the_next_enumerate_not_a_second_call(
    gpuscout_scout: ScoutFactory,
) -> None:
    """While a rule hook call is stuck, the next discovery waits for it before enumerating."""
    gate = threading.Event()
    driver = Driver(gate)
    driver.calls.append("enumerate")  # its enumerates answer at once
    s = gpuscout_scout(("slow", driver), hook_timeout=0.1, enumerate_timeout=LIMIT)
    (card,) = s.discover().devices
    assert s.minimum_memory(card) == 457 << 20  # timed out: the core default
    held = s.discover()
    assert held.devices == [] and "gpuscout_minimum_memory call from before" in slow_of(held).error
    gate.set()
    assert eventually(lambda: "minimum_memory" in driver.finished)
    assert [d.id for d in s.discover().devices] == ["0"]
    assert s.minimum_memory(card) == 1 << 20
    assert driver.most_inside == 1


def test_a_refresh_that_overran_is_asked_again_by_the_next_refresh(gpuscout_scout: ScoutFactory) -> None:
    """A refresh past its deadline leaves the device stale; the next refresh is answered."""
    gate = threading.Event()
    driver = Driver(gate)
    driver.calls.append("enumerate")
    s = gpuscout_scout(("slow", driver), enumerate_timeout=LIMIT)
    devices = s.discover().devices
    assert s.refresh(devices)[0].free_memory_stale is True
    gate.set()
    assert eventually(lambda: "refresh" in driver.finished)
    (fresh,) = s.refresh(devices)
    assert (fresh.free_memory, fresh.free_memory_stale) == (3 * GIB, False)
    assert driver.most_inside == 1
