"""The plugin inside a Scout: discovery from a file, notes for bad input, rules, good manners."""

from __future__ import annotations

import ast
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import gpuscout_inventory
from gpuscout import DeviceInfo, Scout
from gpuscout.plugin import API_VERSION
from gpuscout.sizes import GIB
from gpuscout.testing import check_plugin

ENV = gpuscout_inventory.INVENTORY_ENV

Build = Callable[..., Scout]
Write = Callable[..., Path]


def report(scout: Scout) -> Any:
    return next(r for r in scout.reports if r.name == "inventory")


@pytest.mark.parametrize("name", ["inventory.json", "inventory.toml"])
def test_devices_of_a_file_are_discovered(
    name: str, inventory_file: Write, scout: Build, two_cards: list[dict[str, Any]]
) -> None:
    """A JSON or TOML inventory's devices are reported, discrete first."""
    s = scout({ENV: str(inventory_file(two_cards, name))})
    found = s.discover()
    assert [(d.library, d.id, d.name) for d in found.devices] == [
        ("Inventory", "0", "Big card"),
        ("Inventory", "igpu", "Small part"),
    ]
    assert found.devices[0].total_memory == 24 * GIB
    assert report(s).status == "ok" and report(s).devices == 2


def test_check_plugin_finds_no_problem(inventory_file: Write, two_cards: list[dict[str, Any]]) -> None:
    """gpuscout's kit finds the plugin well-behaved and its records wire-safe."""
    env = {ENV: str(inventory_file(two_cards))}
    assert check_plugin(gpuscout_inventory, name="inventory", env=env) == []


def test_check_plugin_finds_no_problem_without_a_file() -> None:
    """Without an inventory the plugin is still well-behaved."""
    assert check_plugin(gpuscout_inventory, name="inventory") == []


def test_unset_variable_gives_no_device_and_says_how_to_set_it(scout: Build) -> None:
    """Without GPUSCOUT_INVENTORY: no device, a note naming the variable."""
    s = scout({})
    assert s.discover().devices == []
    assert f"{ENV} is not set: set it to the absolute path of a .json or .toml" in report(s).note


@pytest.mark.parametrize("name", ["inventory.json", "inventory.toml"])
def test_bad_file_gives_no_device_and_a_note_naming_file_index_and_key(
    name: str, inventory_file: Write, scout: Build, caplog: pytest.LogCaptureFixture
) -> None:
    """One bad key drops the whole file, with a note and a warning; the plugin stays ok."""
    path = inventory_file([{"name": "fine"}, {"free_memory": -3}], name)
    s = scout({ENV: str(path)})
    with caplog.at_level(logging.WARNING, logger="gpuscout"):
        found = s.discover()
    assert found.devices == []
    r = report(s)
    assert (r.status, r.devices, r.error) == ("ok", 0, "")
    assert f"{ENV}={path}: device 1, key 'free_memory': memory must not be negative" in r.note
    assert "no device read from this file" in r.note
    assert any("inventory.file_rejected" in m and "free_memory" in m for m in caplog.messages)


def test_unparsable_file_gives_a_note(inventory_file: Write, scout: Build) -> None:
    """Text that is not TOML is a note, never an exception."""
    s = scout({ENV: str(inventory_file(name="x.toml", text="devices = [[["))})
    assert s.discover().devices == []
    assert "not valid TOML" in report(s).note


def test_missing_file_gives_a_note(tmp_path: Path, scout: Build) -> None:
    """A path to nothing is a note naming the path."""
    missing = tmp_path / "nothing.json"
    s = scout({ENV: str(missing)})
    assert s.discover().devices == []
    assert f"{ENV}={missing}: cannot read it under the root '/'" in report(s).note


def test_relative_path_is_refused_with_a_note(scout: Build) -> None:
    """A relative path is refused: files are read under the root, not the working directory."""
    s = scout({ENV: "inventory.json"})
    assert s.discover().devices == []
    assert "must be an absolute path" in report(s).note


def test_other_suffix_is_refused_with_a_note(inventory_file: Write, scout: Build) -> None:
    """A file that is neither .json nor .toml is not guessed at."""
    s = scout({ENV: str(inventory_file(name="inventory.yaml", text="devices: []"))})
    assert s.discover().devices == []
    assert "expected a file ending in .json or .toml" in report(s).note


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")
def test_fifo_is_refused_without_blocking(tmp_path: Path, scout: Build) -> None:
    """A FIFO is not read (it would block discovery until its deadline)."""
    fifo = tmp_path / "inventory.json"
    os.mkfifo(fifo)
    s = scout({ENV: str(fifo)}, enumerate_timeout=2.0)
    found = s.discover()
    assert found.devices == [] and report(s).status == "ok"
    assert "not a regular file" in report(s).note


def test_oversized_file_is_refused(inventory_file: Write, scout: Build) -> None:
    """A file over gpuscout's read bound is refused, not parsed."""
    path = inventory_file(text='{"devices": []}' + " " * (1 << 20))
    s = scout({ENV: str(path)})
    assert s.discover().devices == []
    assert "larger than" in report(s).note


def test_path_is_read_under_the_scouts_root(tmp_path: Path, inventory_file: Write, scout: Build) -> None:
    """GPUSCOUT_INVENTORY names a file under the Scout's root (a recorded tree)."""
    inventory_file([{"name": "in the tree"}], "inventory.json")
    s = scout({ENV: "/inventory.json"}, root=tmp_path)
    assert [d.name for d in s.discover().devices] == ["in the tree"]


def test_empty_inventory_says_so(inventory_file: Write, scout: Build) -> None:
    """A file without devices is fine, and the note says it lists none."""
    s = scout({ENV: str(inventory_file([]))})
    assert s.discover().devices == []
    assert "lists no devices" in report(s).note


def test_file_rules_answer_flash_attention_and_minimum_memory(
    inventory_file: Write, scout: Build, two_cards: list[dict[str, Any]]
) -> None:
    """The file's rule keys answer; a device without them gets the core's defaults."""
    s = scout({ENV: str(inventory_file(two_cards))})
    big, small = s.discover().devices
    assert s.flash_attention_supported([big]) is True
    assert s.flash_attention_supported([small]) is False
    assert s.minimum_memory(big) == 1 * GIB
    assert s.minimum_memory(small) == 457 << 20


def test_rules_ignore_other_libraries(inventory_file: Write, scout: Build) -> None:
    """A device of another library gets no answer from this plugin, even with a rule key."""
    s = scout({ENV: str(inventory_file([{"library": "Elsewhere", "minimum_memory": 1}]))})
    [device] = s.discover().devices
    assert s.minimum_memory(device) == 457 << 20
    assert s.minimum_memory(DeviceInfo(id="9", library="Inventory")) == 457 << 20


def test_refresh_reads_free_memory_again(inventory_file: Write, scout: Build) -> None:
    """Editing the file and refreshing updates free memory (simulated memory pressure)."""
    path = inventory_file([{"total_memory": "8GiB", "free_memory": "8GiB"}])
    s = scout({ENV: str(path)})
    [device] = s.discover().devices
    inventory_file([{"total_memory": "8GiB", "free_memory": "2GiB", "minimum_memory": 5}])
    [fresh] = s.refresh([device])
    assert fresh.free_memory == 2 * GIB
    assert fresh.evolve(free_memory=device.free_memory) == device


def test_plugin_declares_the_api_version_it_was_written_for() -> None:
    """GPUSCOUT_API_VERSION is this gpuscout's API (1)."""
    assert gpuscout_inventory.GPUSCOUT_API_VERSION == API_VERSION == 1


def test_plugin_imports_only_gpuscout_plugin_surface_and_stdlib() -> None:
    """Each module imports gpuscout, gpuscout.plugin, itself or the standard library only."""
    package = Path(gpuscout_inventory.__file__).parent
    allowed = {"gpuscout", "gpuscout.plugin"}
    for source in sorted(package.glob("*.py")):
        for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            for name in names:
                top = name.partition(".")[0]
                ok = (
                    name in allowed
                    or top == "gpuscout_inventory"
                    or name == "__future__"
                    or (top != "gpuscout" and top in sys.stdlib_module_names)
                )
                assert ok, f"{source.name} imports {name}"


def test_plugin_never_reads_os_environ(
    inventory_file: Write, scout: Build, monkeypatch: pytest.MonkeyPatch, two_cards: list[dict[str, Any]]
) -> None:
    """The process environment is ignored: only the Scout's env counts."""
    monkeypatch.setenv(ENV, str(inventory_file(two_cards)))
    monkeypatch.setenv(gpuscout_inventory.VISIBLE_ENV, "")
    assert scout({}).discover().devices == []
