"""The inventory file format: what a good file gives and where a bad one is refused."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gpuscout import DeviceInfo
from gpuscout.sizes import GIB
from gpuscout_inventory.fileformat import InventoryError, kind_of, parse_inventory


def parse_json(devices: Any) -> list[Any]:
    return parse_inventory(json.dumps({"devices": devices}), "json", "Inventory")


def test_json_device_becomes_a_record_with_every_field() -> None:
    """Every DeviceInfo field a JSON file names lands in the record."""
    [entry] = parse_json(
        [
            {
                "id": "a",
                "library": "Inventory",
                "name": "n",
                "description": "d",
                "filter_id": "f",
                "integrated": True,
                "pci_id": "0000:01:00.0",
                "total_memory": 10,
                "free_memory": 5,
                "compute_major": 9,
                "compute_minor": 0,
                "driver_major": 12,
                "driver_minor": 4,
                "nvidia_driver_major": 550,
                "gfx_target": "gfx1100",
                "library_path": ["/opt/lib"],
                "runner_env_overrides": {"A_B": "1"},
                "uuid": "GPU-1",
                "free_memory_unknown": True,
                "software": False,
            }
        ]
    )
    assert entry.device == DeviceInfo(
        id="a",
        library="Inventory",
        name="n",
        description="d",
        filter_id="f",
        integrated=True,
        pci_id="0000:01:00.0",
        total_memory=10,
        free_memory=5,
        compute_major=9,
        compute_minor=0,
        driver_major=12,
        driver_minor=4,
        nvidia_driver_major=550,
        gfx_target="gfx1100",
        library_path=("/opt/lib",),
        runner_env_overrides={"A_B": "1"},
        uuid="GPU-1",
        free_memory_unknown=True,
    )


def test_toml_and_json_files_give_the_same_records(toml_text: Callable[..., str]) -> None:
    """The same devices written as TOML and as JSON read the same."""
    devices = [
        {"name": "a", "total_memory": "2GiB", "runner_env_overrides": {"X": "1"}},
        {"id": "b", "free_memory": 7, "integrated": True},
    ]
    from_toml = parse_inventory(toml_text(devices), "toml", "Inventory")
    assert from_toml == parse_json(devices)


def test_missing_id_and_library_default_to_index_and_plugin_library() -> None:
    """A device without id gets its file index; without library, the plugin's library."""
    entries = parse_json([{"id": "x"}, {}])
    assert [(e.device.id, e.device.library) for e in entries] == [("x", "Inventory"), ("1", "Inventory")]


def test_library_in_another_case_is_written_as_the_plugins() -> None:
    """``library = "inventory"`` is the plugin's library, spelled its way."""
    [entry] = parse_json([{"library": "INVENTORY"}])
    assert entry.device.library == "Inventory"


def test_another_library_is_kept() -> None:
    """A device may pose as another library's (for a host's CUDA code path)."""
    [entry] = parse_json([{"library": "CUDA"}])
    assert entry.device.library == "CUDA"


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("24GiB", 24 * GIB),
        ("1.5 TiB", 3 << 39),
        ("512 mib", 512 << 20),
        ("100B", 100),
        ("0GiB", 0),
        ("1.0000000001KiB", 1024),
    ],
)
def test_memory_strings_with_binary_units_are_bytes(text: str, size: int) -> None:
    """Sizes with a binary unit become bytes (a fraction of a byte is dropped)."""
    [entry] = parse_json([{"total_memory": text}])
    assert entry.device.total_memory == size


def test_rule_keys_are_kept_beside_the_record() -> None:
    """``flash_attention`` and ``minimum_memory`` are rules, not record fields."""
    [entry] = parse_json([{"flash_attention": False, "minimum_memory": "2GiB"}])
    assert (entry.flash_attention, entry.minimum_memory) == (False, 2 * GIB)
    assert entry.device == DeviceInfo(id="0", library="Inventory")


def test_pci_ids_are_normalized() -> None:
    """PCI ids are lower case with a four-digit domain; an empty one means none."""
    entries = parse_json([{"pci_id": "C4:00.0"}, {"pci_id": "0001:0A:1F.7"}, {"pci_id": ""}])
    assert [e.device.pci_id for e in entries] == ["0000:c4:00.0", "0001:0a:1f.7", ""]


def test_an_empty_device_list_is_no_devices() -> None:
    """``devices = []`` is a valid, empty inventory."""
    assert parse_inventory("devices = []", "toml", "Inventory") == []


@pytest.mark.parametrize(
    ("path", "kind"),
    [
        ("/a/b.json", "json"),
        ("/a/B.TOML", "toml"),
        ("/a/b.yaml", None),
        ("/a/json", None),
    ],
)
def test_the_suffix_decides_the_format(path: str, kind: str | None) -> None:
    """.json is JSON, .toml is TOML (any case), anything else is neither."""
    assert kind_of(path) == kind


# (devices, device index, key, words the message holds)
BAD_DEVICES: list[tuple[Any, int, str | None, str]] = [
    ([{"name": "a"}, {"totl_memory": 1}], 1, "totl_memory", "did you mean 'total_memory'"),
    ([{"name": 5}], 0, "name", "expected a string, got 5"),
    ([{"integrated": "yes"}], 0, "integrated", "expected true or false"),
    ([{"total_memory": 1.5}], 0, "total_memory", "expected a size in bytes"),
    ([{"total_memory": "lots"}], 0, "total_memory", "expected a size such as '24GiB'"),
    ([{"total_memory": "24GB"}], 0, "total_memory", "decimal unit, use GiB"),
    ([{"total_memory": 1 << 63}], 0, "total_memory", "more than 2**63-1"),
    ([{"free_memory": -1}], 0, "free_memory", "must not be negative"),
    ([{"free_memory": "-1GiB"}], 0, "free_memory", "must not be negative"),
    ([{"minimum_memory": -5}], 0, "minimum_memory", "must not be negative"),
    ([{"flash_attention": 1}], 0, "flash_attention", "expected true or false"),
    ([{"compute_major": 2.0}], 0, "compute_major", "expected a whole number"),
    ([{"compute_major": -(1 << 64)}], 0, "compute_major", "64-bit range"),
    ([{"id": "x"}, {"id": "x"}], 1, "id", "'x' already names device 0"),
    ([{"id": "1"}, {}], 1, "id", "'1' already names device 0"),
    ([{"id": "a"}, {"id": "b", "filter_id": "a"}], 1, "filter_id", "already names device 0"),
    ([{"id": "a,b"}], 0, "id", "without commas"),
    ([{"id": ""}], 0, "id", "non-empty"),
    ([{"filter_id": " 3"}], 0, "filter_id", "surrounding spaces"),
    ([{"library": " "}], 0, "library", "library name"),
    ([{"pci_id": "c4:00"}], 0, "pci_id", "expected a PCI id"),
    ([{"library_path": "/opt"}], 0, "library_path", "expected a list of strings"),
    ([{"library_path": ["/a", 3]}], 0, "library_path[1]", "expected a string"),
    ([{"runner_env_overrides": {"A=B": "1"}}], 0, "runner_env_overrides", "variable name"),
    ([{"runner_env_overrides": {"A": 1}}], 0, "runner_env_overrides.A", "expected a string"),
    ([{}, 7], 1, None, "expected a table of DeviceInfo fields, got a number"),
    ([{"name": None}], 0, "name", "got null"),
    ([{"flash_attention": None}], 0, "flash_attention", "got null"),
]


@pytest.mark.parametrize(
    ("devices", "index", "key", "words"), BAD_DEVICES, ids=[f"{b[2]}-{b[3][:20]}" for b in BAD_DEVICES]
)
def test_a_bad_device_is_refused_naming_its_index_and_key(
    devices: Any, index: int, key: str | None, words: str
) -> None:
    """Unknown keys, wrong types, negative memory and duplicate ids name device and key."""
    with pytest.raises(InventoryError) as caught:
        parse_json(devices)
    assert (caught.value.index, caught.value.key) == (index, key)
    assert words in str(caught.value)
    assert str(caught.value).startswith(f"device {index}")


# (text, kind, words the message holds)
BAD_FILES = [
    ("{", "json", "not valid JSON"),
    ("devices = [", "toml", "not valid TOML"),
    ("[1, 2]", "json", "expected a top-level object"),
    ("{}", "json", "no 'devices' list"),
    ('{"devices": {}}', "json", "must be a list of tables"),
    ("devices = []\nversion = 2", "toml", "unknown top-level key 'version'"),
    ('{"devices": [{"id": "a", "id": "b"}]}', "json", "key 'id' appears twice"),
    ('{"devices": [{"total_memory": NaN}]}', "json", "NaN is not a JSON number"),
    ("[" * 100_000, "json", "not valid JSON"),
    ('{"devices": [{"total_memory": ' + "9" * 5000 + "}]}", "json", "not valid JSON"),
]


@pytest.mark.parametrize(("text", "kind", "words"), BAD_FILES, ids=[b[2][:24] for b in BAD_FILES])
def test_a_bad_file_is_refused_as_a_whole(text: str, kind: str, words: str) -> None:
    """Text that is no inventory is refused without a device index."""
    with pytest.raises(InventoryError) as caught:
        parse_inventory(text, kind, "Inventory")
    assert caught.value.index is None
    assert words in str(caught.value)


def test_the_readme_example_is_a_valid_inventory() -> None:
    """The TOML example in README.md reads as two devices with their rules."""
    readme = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")
    example = readme.split("```toml\n", 1)[1].split("```", 1)[0]
    big, igpu = parse_inventory(example, "toml", "Inventory")
    assert (big.device.id, big.device.total_memory, big.flash_attention, big.minimum_memory) == (
        "big",
        24 * GIB,
        True,
        GIB,
    )
    assert (igpu.device.filter_id, igpu.device.pci_id) == ("ig0", "0000:c4:00.0")
