"""GPUSCOUT_INVENTORY_VISIBLE_DEVICES: parsing, and the round trip through ``visible_env``."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import gpuscout_inventory
from gpuscout import DeviceInfo, Scout
from gpuscout_inventory.visibility import visible_indices

ENV = gpuscout_inventory.INVENTORY_ENV
VISIBLE = gpuscout_inventory.VISIBLE_ENV

Build = Callable[..., Scout]
Write = Callable[..., Path]

DEVICES = [
    DeviceInfo(id="0", library="Inventory"),
    DeviceInfo(id="b", filter_id="bf"),
    DeviceInfo(id="2"),
    DeviceInfo(id="uuid-3"),
]


@pytest.mark.parametrize(
    ("value", "shown", "unknown"),
    [
        (None, [0, 1, 2, 3], []),
        ("", [], []),
        (" , ", [], []),
        ("0", [0], []),
        ("3,1", [1, 3], []),
        ("b", [1], []),
        ("bf", [1], []),
        ("uuid-3, 0 ,uuid-3", [0, 3], []),
        ("002", [2], []),
        ("4,x,0,x", [0], ["4", "x"]),
        ("9" * 5000, [], ["9" * 5000]),
        ("²", [], ["²"]),
    ],
)
def test_variable_shows_ids_filter_ids_and_indices(
    value: str | None, shown: list[int], unknown: list[str]
) -> None:
    """Unset shows all, "" none; tokens are ids, filter ids or 0-based indices."""
    assert visible_indices(value, DEVICES) == (shown, unknown)


def test_names_win_over_indices() -> None:
    """A numeric id names its device even where it is also another device's index."""
    devices = [DeviceInfo(id="1"), DeviceInfo(id="0")]
    assert visible_indices("1", devices) == ([0], [])
    assert visible_indices("0", devices) == ([1], [])


def test_enumerate_honours_the_variable(inventory_file: Write, scout: Build) -> None:
    """Only the devices the variable lists are reported, keeping their file ids."""
    path = inventory_file([{"name": "a"}, {"name": "b"}, {"name": "c"}])
    found = scout({ENV: str(path), VISIBLE: "2,0"}).discover()
    assert sorted((d.id, d.name) for d in found.devices) == [("0", "a"), ("2", "c")]


def test_enumerate_notes_tokens_that_name_nothing(inventory_file: Write, scout: Build) -> None:
    """A token that names no device is ignored with a note."""
    s = scout({ENV: str(inventory_file([{"name": "a"}])), VISIBLE: "0,gone"})
    assert [d.name for d in s.discover().devices] == ["a"]
    note = next(r.note for r in s.reports if r.name == "inventory")
    assert f"{VISIBLE}: 'gone' named no device" in note


def test_empty_variable_hides_everything(inventory_file: Write, scout: Build) -> None:
    """An empty variable shows no device."""
    assert scout({ENV: str(inventory_file([{}])), VISIBLE: ""}).discover().devices == []


def _inventory() -> list[dict[str, Any]]:
    return [
        {"name": "a", "total_memory": "8GiB", "free_memory": "8GiB"},
        {"id": "b", "filter_id": "bf", "total_memory": "4GiB", "free_memory": "1GiB"},
        {"id": "7", "pci_id": "0000:03:00.0", "integrated": True},
        {"name": "d", "free_memory": "2GiB"},
    ]


def test_visible_env_round_trip_shows_exactly_each_selection(inventory_file: Write, scout: Build) -> None:
    """For every subset, a Scout given ``visible_env`` of it discovers exactly that subset."""
    base = {ENV: str(inventory_file(_inventory()))}
    devices = scout(base).discover().devices
    for size in range(1, len(devices) + 1):
        for selection in itertools.combinations(devices, size):
            env = scout(base).visible_env(list(selection))
            seen = scout({**base, **env}).discover().devices
            assert sorted(d.id for d in seen) == sorted(d.id for d in selection), env


def test_visible_env_writes_filter_id_over_id_in_selection_order(inventory_file: Write, scout: Build) -> None:
    """One entry per selected device: its filter id, else its id, joined in selection order."""
    s = scout({ENV: str(inventory_file(_inventory()))})
    by_id = {d.id: d for d in s.discover().devices}
    assert s.visible_env([by_id["7"], by_id["b"], by_id["0"]]) == {VISIBLE: "7,bf,0"}


def test_visible_env_leaves_other_libraries_alone(inventory_file: Write, scout: Build) -> None:
    """A selection without Inventory devices writes nothing."""
    s = scout({ENV: str(inventory_file([{"library": "Elsewhere"}]))})
    assert s.visible_env(s.discover().devices) == {}


def test_isolate_hides_all_when_none_is_selected(inventory_file: Write, scout: Build) -> None:
    """With no Inventory device selected, isolation sets the variable to the empty list."""
    s = scout({ENV: str(inventory_file(_inventory()))})
    other = DeviceInfo(id="0", library="Elsewhere")
    assert s.isolate_env([other], {}) == [("inventory", {VISIBLE: ""})]
    assert s.isolate_env(s.discover().devices[:1], {}) == []


def test_env_command_child_sees_exactly_the_selection(inventory_file: Write, scout: Build) -> None:
    """What ``gpuscout env inventory:0`` computes shows the child that device alone."""
    base = {ENV: str(inventory_file(_inventory()))}
    s = scout(base)
    [chosen] = s.select(["inventory:0"])
    assert chosen.id == "0"  # inventory:N is the plugin's own number: the first device of the file
    env = s.visible_env([chosen])
    assert [d.id for d in scout({**base, **env}).discover().devices] == ["0"]
