"""Scout.refresh: fresh free memory from the plugins, stale (never 0) where none could say."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from structlog.testing import capture_logs

from gpuscout import DeviceInfo, Scout, from_json, hookimpl, to_json
from gpuscout._records.device import check_device
from gpuscout._records.fields import RecordError
from gpuscout.sizes import GIB
from gpuscout.testing import ScoutFactory

Refresh = Callable[[list[DeviceInfo]], Any]


class Backend:
    """A plugin of one library: reports ``devices``, refreshes them with ``refresh``. Every
    device gets a PCI domain of its own, so no two are merged as one card."""

    domains = itertools.count(1)

    def __init__(self, library: str, ids: Sequence[str], refresh: Refresh | None) -> None:
        self.library = library
        self.devices = [
            DeviceInfo(
                id=i,
                library=library,
                pci_id=f"{next(self.domains) % 0x10000:04x}:01:00.0",
                uuid=f"{library}-{i}",
                total_memory=16 * GIB,
                free_memory=10 * GIB,
            )
            for i in ids
        ]
        self.refresh = refresh

    @hookimpl
    def gpuscout_enumerate(self, context: Any) -> list[DeviceInfo]:
        return list(self.devices)

    @hookimpl
    def gpuscout_refresh(self, devices: Sequence[DeviceInfo], context: Any) -> Any:
        mine = [d for d in devices if d.library == self.library]
        if not mine or self.refresh is None:
            return None
        return self.refresh(mine)


def freed(gib: int) -> Refresh:
    """Every device now has ``gib`` GiB free."""
    return lambda mine: [d.evolve(free_memory=gib * GIB) for d in mine]


def raises(mine: list[DeviceInfo]) -> Any:
    raise RuntimeError("driver went away")


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """Set when the test ends, so a hanging plugin's abandoned thread ends too."""
    event = threading.Event()
    yield event
    event.set()


def hangs(release: threading.Event) -> Refresh:
    def run(mine: list[DeviceInfo]) -> Any:
        release.wait(30)
        return [d.evolve(free_memory=1) for d in mine]

    return run


def by_id(devices: Sequence[DeviceInfo]) -> dict[str, DeviceInfo]:
    return {f"{d.library}:{d.id}": d for d in devices}


def status(s: Scout, name: str) -> tuple[str, str]:
    report = next(r for r in s.reports if r.name == name)
    return str(report.status), report.error


def test_refreshed_devices_carry_new_free_memory_and_are_not_stale(gpuscout_scout: ScoutFactory) -> None:
    """Each device a plugin refreshes comes back with its new free memory, not stale."""
    s = gpuscout_scout(("acme", Backend("Acme", ["0", "1"], freed(3))))
    devices = s.discover().devices
    fresh = s.refresh(devices)
    assert [(d.id, d.free_memory, d.free_memory_stale) for d in fresh] == [
        ("0", 3 * GIB, False),
        ("1", 3 * GIB, False),
    ]


def test_refresh_keeps_the_order_of_the_devices_passed(gpuscout_scout: ScoutFactory) -> None:
    """The answer lists the devices in the order they were passed, whoever refreshed them."""
    s = gpuscout_scout(
        ("acme", Backend("Acme", ["0", "1"], freed(3))), ("zeta", Backend("Zeta", ["0"], None))
    )
    devices = list(reversed(s.discover().devices))
    assert [(d.library, d.id) for d in s.refresh(devices)] == [(d.library, d.id) for d in devices]


def test_a_raising_plugin_leaves_its_devices_stale_with_old_values(gpuscout_scout: ScoutFactory) -> None:
    """A plugin that raises is reported failed; its devices keep their values, marked stale."""
    s = gpuscout_scout(("acme", Backend("Acme", ["0"], freed(3))), ("boom", Backend("Boom", ["0"], raises)))
    devices = s.discover().devices
    fresh = by_id(s.refresh(devices))
    assert (fresh["Acme:0"].free_memory, fresh["Acme:0"].free_memory_stale) == (3 * GIB, False)
    assert fresh["Boom:0"] == by_id(devices)["Boom:0"].evolve(free_memory_stale=True)
    assert status(s, "boom")[0] == "failed" and "driver went away" in status(s, "boom")[1]


def test_a_hanging_plugin_leaves_its_devices_stale_within_the_enumerate_timeout(
    gpuscout_scout: ScoutFactory, release: threading.Event
) -> None:
    """A refresh past enumerate_timeout is cut off: its devices are stale, the rest fresh."""
    s = gpuscout_scout(
        ("acme", Backend("Acme", ["0"], freed(3))),
        ("slow", Backend("Slow", ["0"], hangs(release))),
        enumerate_timeout=0.2,
    )
    devices = s.discover().devices
    start = time.monotonic()
    fresh = by_id(s.refresh(devices))
    assert time.monotonic() - start < 2.0
    assert fresh["Acme:0"].free_memory_stale is False
    assert (fresh["Slow:0"].free_memory, fresh["Slow:0"].free_memory_stale) == (10 * GIB, True)
    assert status(s, "slow")[0] == "timeout"


def test_a_device_left_out_of_the_answer_is_stale(gpuscout_scout: ScoutFactory) -> None:
    """A plugin that answers for some of its devices leaves the others stale."""
    s = gpuscout_scout(
        ("part", Backend("Part", ["0", "1"], lambda mine: [mine[0].evolve(free_memory=2 * GIB)]))
    )
    fresh = by_id(s.refresh(s.discover().devices))
    assert (fresh["Part:0"].free_memory, fresh["Part:0"].free_memory_stale) == (2 * GIB, False)
    assert (fresh["Part:1"].free_memory, fresh["Part:1"].free_memory_stale) == (10 * GIB, True)


def test_a_record_with_a_changed_id_does_not_refresh_the_device(gpuscout_scout: ScoutFactory) -> None:
    """A record whose id the plugin changed matches no device passed: that device is stale."""
    s = gpuscout_scout(
        (
            "shift",
            Backend(
                "Shift",
                ["0", "1"],
                lambda mine: [
                    mine[0].evolve(id="7", free_memory=1 * GIB),
                    mine[1].evolve(free_memory=2 * GIB),
                ],
            ),
        )
    )
    fresh = s.refresh(s.discover().devices)
    assert [(d.id, d.free_memory, d.free_memory_stale) for d in fresh] == [
        ("0", 10 * GIB, True),
        ("1", 2 * GIB, False),
    ]


def test_a_record_with_a_changed_pci_id_fails_the_plugin_for_that_device(
    gpuscout_scout: ScoutFactory,
) -> None:
    """A refreshed record must keep the device's PCI id: the device stays as it was, stale."""
    s = gpuscout_scout(
        (
            "moved",
            Backend(
                "Moved",
                ["0", "1"],
                lambda mine: [
                    mine[0].evolve(pci_id="0000:99:00.0", free_memory=0),
                    mine[1].evolve(free_memory=2 * GIB),
                ],
            ),
        )
    )
    devices = s.discover().devices
    fresh = s.refresh(devices)
    assert fresh[0] == devices[0].evolve(free_memory_stale=True)
    assert (fresh[1].free_memory, fresh[1].free_memory_stale) == (2 * GIB, False)
    state, error = status(s, "moved")
    assert state == "failed" and "pci_id" in error and "0000:99:00.0" in error


def test_a_record_with_a_changed_uuid_fails_the_plugin_for_that_device(gpuscout_scout: ScoutFactory) -> None:
    """A refreshed record must keep the device's UUID."""
    s = gpuscout_scout(
        ("swap", Backend("Swap", ["0"], lambda mine: [mine[0].evolve(uuid="another", free_memory=1)]))
    )
    devices = s.discover().devices
    assert s.refresh(devices) == [devices[0].evolve(free_memory_stale=True)]
    assert "uuid" in status(s, "swap")[1]


def test_pci_id_in_another_case_is_the_same_identity(gpuscout_scout: ScoutFactory) -> None:
    """Identity ignores case: a PCI id written in upper case still refreshes the device."""
    s = gpuscout_scout(
        (
            "upper",
            Backend(
                "Upper",
                ["0"],
                lambda mine: [mine[0].evolve(pci_id=mine[0].pci_id.upper(), free_memory=1 * GIB)],
            ),
        )
    )
    (fresh,) = s.refresh(s.discover().devices)
    assert (fresh.free_memory, fresh.free_memory_stale) == (1 * GIB, False)


def test_an_invalid_record_fails_the_plugin_and_leaves_its_devices_stale(
    gpuscout_scout: ScoutFactory,
) -> None:
    """A record that fails the border checks fails its plugin: none of its answer is used."""
    s = gpuscout_scout(
        (
            "bad",
            Backend("Bad", ["0", "1"], lambda mine: [mine[0].evolve(free_memory=1), mine[1].evolve(name=5)]),
        )
    )
    fresh = s.refresh(s.discover().devices)
    assert [(d.free_memory, d.free_memory_stale) for d in fresh] == [(10 * GIB, True)] * 2
    assert status(s, "bad")[0] == "failed" and "DeviceInfo.name" in status(s, "bad")[1]


def test_a_device_no_plugin_answers_for_is_stale(gpuscout_scout: ScoutFactory) -> None:
    """A device of a library whose plugin has no refresh keeps its value, marked stale."""
    s = gpuscout_scout(("quiet", Backend("Quiet", ["0"], None)))
    (device,) = s.discover().devices
    assert s.refresh([device]) == [device.evolve(free_memory_stale=True)]


def test_no_failure_turns_into_zero_free(gpuscout_scout: ScoutFactory, release: threading.Event) -> None:
    """Whatever way every plugin fails, every device keeps its non-zero free memory."""
    s = gpuscout_scout(
        ("boom", Backend("Boom", ["0"], raises)),
        ("slow", Backend("Slow", ["0"], hangs(release))),
        ("part", Backend("Part", ["0"], lambda mine: [])),
        (
            "moved",
            Backend(
                "Moved", ["0"], lambda mine: [d.evolve(pci_id="0000:99:00.0", free_memory=0) for d in mine]
            ),
        ),
        ("wrong", Backend("Wrong", ["0"], lambda mine: "not a list")),
        enumerate_timeout=0.2,
    )
    fresh = s.refresh(s.discover().devices)
    assert len(fresh) == 5
    assert all(d.free_memory == 10 * GIB and d.free_memory_stale for d in fresh)


def test_a_stale_device_refreshed_later_is_fresh_again(gpuscout_scout: ScoutFactory) -> None:
    """A stale device passed to a refresh that works comes back not stale."""
    s = gpuscout_scout(("acme", Backend("Acme", ["0"], freed(4))))
    (device,) = s.discover().devices
    (fresh,) = s.refresh([device.evolve(free_memory_stale=True)])
    assert (fresh.free_memory, fresh.free_memory_stale) == (4 * GIB, False)


def test_refresh_logs_which_devices_are_stale(gpuscout_scout: ScoutFactory) -> None:
    """One refresh.done event names the stale devices."""
    s = gpuscout_scout(("acme", Backend("Acme", ["0"], freed(3))), ("quiet", Backend("Quiet", ["0"], None)))
    devices = s.discover().devices
    with capture_logs() as logs:
        s.refresh(devices)
    (done,) = [e for e in logs if e["event"] == "refresh.done"]
    assert (done["devices"], done["stale"]) == (2, ["Quiet:0"])


def test_free_memory_stale_round_trips_the_wire() -> None:
    """A stale device is written with "free_memory_stale": true and read back equal."""
    device = DeviceInfo(id="0", library="Acme", free_memory=GIB, free_memory_stale=True)
    text = to_json(device)
    assert '"free_memory_stale":true' in text
    assert from_json(text, DeviceInfo) == device


def test_free_memory_stale_is_absent_from_the_wire_when_false() -> None:
    """A fresh device's JSON has no free_memory_stale key, and reads back as not stale."""
    device = DeviceInfo(id="0", library="Acme", free_memory=GIB)
    text = to_json(device)
    assert "free_memory_stale" not in text
    assert from_json(text, DeviceInfo).free_memory_stale is False


def test_free_memory_stale_must_be_a_bool() -> None:
    """The border check refuses a free_memory_stale that is not a bool, naming the field."""
    with pytest.raises(RecordError, match=r"\.free_memory_stale: expected bool"):
        check_device(DeviceInfo(id="0", free_memory_stale=1))  # type: ignore[arg-type]
