"""Only GpuscoutError leaves the public API for bad input (issue 20): records, from_json,
plan, load, and the CLI options an attacker reported."""

from __future__ import annotations

import argparse
import math
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuscout import DeviceInfo, GpuscoutError, Scout, SystemInfo, from_json, to_json
from gpuscout._records.fields import RecordError
from gpuscout._records.layers import GPULayers, GPULayersList
from gpuscout._records.memory import BackendMemory, DeviceMemory
from gpuscout._records.results import Discovery, PluginReport
from gpuscout.cli import main
from gpuscout.load import Allocation, LoadOperation

HUGE = 10**400
DOCUMENT = '{"devices":[],"dropped":[],"system":{},"plugins":[{"name":"x","elapsed_ms":%s}]}'


def _scout() -> Scout:
    return Scout(plugins=[], entry_points=False)


def test_plan_refuses_none_as_a_device() -> None:
    """``plan`` with ``devices=[None]`` raises GpuscoutError naming the item."""
    with pytest.raises(GpuscoutError, match=r"devices\[0\]"):
        _scout().plan([1], [None], SystemInfo())  # type: ignore[list-item]


def test_from_json_refuses_a_device_of_huge_memory_before_plan_can_see_it() -> None:
    """A device of 10**400 bytes is a GpuscoutError naming the path, not a struct.error later."""
    text = '[{"id":"0","backend":"Vulkan","total_memory":' + str(HUGE) + "}]"
    with pytest.raises(GpuscoutError, match=r"^\[0\]\.total_memory: "):
        from_json(text, list[DeviceInfo])


def test_plan_refuses_a_layer_of_huge_size() -> None:
    """A layer size of 10**400 bytes is a GpuscoutError, not a struct.error."""
    device = DeviceInfo(id="0", library="Vulkan", total_memory=2**40, free_memory=2**40)
    with pytest.raises(GpuscoutError, match=r"layers\[0\]"):
        _scout().plan([HUGE], [device], SystemInfo())


def test_load_refuses_str_weights() -> None:
    """Weights given as str are a GpuscoutError naming the field, not a TypeError."""
    with pytest.raises(GpuscoutError, match=r"DeviceMemory\.weights\[0\]"):
        BackendMemory(cpu=DeviceMemory(weights=["1"]))


def test_load_refuses_a_memory_that_is_no_backend_memory() -> None:
    """``load`` with a str for its memory raises GpuscoutError."""

    def allocate(layout: GPULayersList, op: LoadOperation) -> Allocation:
        raise AssertionError("never called")

    with pytest.raises(GpuscoutError, match="BackendMemory"):
        _scout().load("weights", [], SystemInfo(), allocate)  # type: ignore[arg-type]


def test_device_info_refuses_a_negative_size_naming_the_field() -> None:
    """``DeviceInfo(free_memory=-1)`` raises RecordError, a GpuscoutError, naming the field."""
    with pytest.raises(RecordError, match=r"DeviceInfo\.free_memory must be >= 0"):
        DeviceInfo(free_memory=-1)


def test_device_info_refuses_memory_beyond_64_bits() -> None:
    """A memory size of 2**64 is refused; 2**64-1 is kept."""
    assert DeviceInfo(total_memory=2**64 - 1).total_memory == 2**64 - 1
    with pytest.raises(RecordError, match="total_memory"):
        DeviceInfo(total_memory=2**64)


def test_device_info_refuses_a_bool_as_memory() -> None:
    """``True`` is not a byte count."""
    with pytest.raises(RecordError, match="total_memory"):
        DeviceInfo(total_memory=True)


def test_system_info_refuses_text_naming_the_field() -> None:
    """``SystemInfo(free_swap="1")`` raises RecordError naming free_swap."""
    with pytest.raises(RecordError, match=r"SystemInfo\.free_swap"):
        SystemInfo(free_swap="1")  # type: ignore[arg-type]


def test_every_documented_construction_still_works() -> None:
    """Any str id and library, compute_major -1, a list path and any mapping are accepted."""
    d = DeviceInfo(
        id="\x00 any",
        library="weird lib",
        compute_major=-1,
        library_path=["/a", "/b"],
        runner_env_overrides={"A": "1"},
    )
    assert (d.library_path, dict(d.runner_env_overrides)) == (("/a", "/b"), {"A": "1"})


def test_from_json_refuses_nan_elapsed_naming_the_path() -> None:
    """``elapsed_ms: NaN`` in a list --json document is a GpuscoutError with its path."""
    for token in ("NaN", "Infinity", "-Infinity", "1e999"):
        with pytest.raises(GpuscoutError, match=r"^plugins\[0\]\.elapsed_ms: "):
            from_json(DOCUMENT % token, Discovery)


def test_from_json_refuses_an_int_beyond_64_bits_naming_the_path() -> None:
    """An integer of 10**400 in any number field is refused with its JSON path."""
    with pytest.raises(GpuscoutError, match=r"^\[0\]\.ComputeMajor: .*64 bits"):
        from_json('[{"ComputeMajor":' + str(HUGE) + "}]", list[DeviceInfo])


def test_to_json_never_writes_nan() -> None:
    """A NaN elapsed time is a GpuscoutError, not the non-JSON token NaN."""
    report = PluginReport(name="x", elapsed=math.nan)
    found = Discovery(devices=[], dropped=[], system=SystemInfo(), plugins=[report])
    with pytest.raises(GpuscoutError, match="JSON"):
        to_json(found)


def test_print_json_never_writes_nan() -> None:
    """The CLI's JSON printer refuses NaN with a GpuscoutError."""
    from gpuscout.cli._common import print_json

    with pytest.raises(GpuscoutError, match="JSON"):
        print_json({"elapsed_ms": math.inf})


def test_nfd_expiry_of_5000_digits_is_a_one_line_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    """``nfd --expiry`` with 5000 digits exits 2 with one line, before any discovery."""

    def factory(_: argparse.Namespace) -> Scout:
        raise AssertionError("no discovery for a bad option")

    code = main(["nfd", "--dry-run", "--expiry", "1" * 5000 + "s"], scout_factory=factory)
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "--expiry" in err


@pytest.mark.parametrize("host", ["a" * 64, "a..b"])
def test_cluster_ray_address_with_a_bad_host_label_is_a_one_line_usage_error(
    host: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A host label over 63 characters, or an empty one, exits 2 with one line."""
    code = main(["cluster", "--ray", f"{host}:6379"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Ray address" in err


def _values() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.sampled_from([-1, 2**63, 2**64 - 1, 2**64, -(2**63) - 1, HUGE]),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=5),
        st.lists(st.one_of(st.integers(), st.text(max_size=3), st.none()), max_size=3),
        st.dictionaries(st.text(max_size=3), st.one_of(st.text(max_size=3), st.integers()), max_size=2),
        st.builds(DeviceMemory),
        st.builds(GPULayers),
    )


RECORDS = [DeviceInfo, SystemInfo, DeviceMemory, BackendMemory, GPULayers]


@pytest.mark.parametrize("cls", RECORDS, ids=lambda c: c.__name__)
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_any_value_in_any_field_gives_a_record_or_one_gpuscout_error(cls: type, data: st.DataObject) -> None:
    """Any field given any value builds the record or raises GpuscoutError, nothing else."""
    field = data.draw(st.sampled_from([f.name for f in attrs.fields(cls)]))
    value = data.draw(_values())
    try:
        cls(**{field: value})
    except GpuscoutError:
        pass


@settings(max_examples=100, deadline=None)
@given(items=st.lists(_values(), max_size=3))
def test_any_items_give_a_layers_list_or_one_gpuscout_error(items: list[Any]) -> None:
    """GPULayersList of any items is a list of GPULayers or a GpuscoutError."""
    try:
        assert all(isinstance(g, GPULayers) for g in GPULayersList(items))
    except GpuscoutError:
        pass


def test_hash_of_a_layer_changed_in_place_beyond_64_bits_is_a_gpuscout_error() -> None:
    """A layer appended after construction that 64 bits cannot hold fails hash() with RecordError."""
    g = GPULayers(id="0", layers=[1])
    g.layers.append(HUGE)
    with pytest.raises(RecordError, match=r"layers\[1\]"):
        GPULayersList([g]).hash()
