"""``max_allocation``: the largest single buffer or tensor a device's runtime can allocate (0 =
unknown), checked at the border like the memory sizes and on the wire only when known."""

from __future__ import annotations

import json

import pytest

from gpuscout import DeviceInfo, GpuscoutError, from_json, to_json
from gpuscout._records.device import check_device
from gpuscout._records.fields import RecordError
from gpuscout.sizes import MIB
from gpuscout.testing import CliRunner, ScoutFactory, injected

KNOWN = DeviceInfo(id="0", library="Vulkan", total_memory=2048 * MIB, max_allocation=128 * MIB)
UNKNOWN = DeviceInfo(id="GPU-1", library="CUDA", total_memory=2048 * MIB)


def test_max_allocation_defaults_to_zero_for_unknown() -> None:
    """A record that does not say has max_allocation 0."""
    assert DeviceInfo().max_allocation == 0


def test_a_negative_max_allocation_is_rejected_with_the_field_name() -> None:
    """The constructor refuses a negative size, as it does for total_memory."""
    with pytest.raises(ValueError, match=r"DeviceInfo\.max_allocation must be >= 0, got -1"):
        DeviceInfo(max_allocation=-1)


def test_the_border_check_keeps_a_known_max_allocation() -> None:
    """check_device passes a plain int through unchanged."""
    assert check_device(KNOWN, "[0]").max_allocation == 128 * MIB


@pytest.mark.parametrize(("value", "shown"), [(1.5, "1.5"), (True, "True"), ("128", "'128'")])
def test_the_border_check_refuses_a_max_allocation_that_is_no_int(value: object, shown: str) -> None:
    """A float, a bool or a str fails the record, naming the field and the value."""
    device = DeviceInfo(id="0", library="L")
    object.__setattr__(device, "max_allocation", value)
    with pytest.raises(RecordError) as err:
        check_device(device, "[0]")
    assert str(err.value) == f"[0].max_allocation: expected int, got {shown}"


def test_the_border_check_refuses_a_max_allocation_past_64_bits() -> None:
    """A size of 2**63 or more is not a Go int64 and fails the record."""
    device = DeviceInfo(id="0", library="L", max_allocation=2**63)
    with pytest.raises(RecordError, match=r"^\[0\]\.max_allocation: expected an int in 0\.\."):
        check_device(device, "[0]")


def test_a_plugin_with_a_bad_max_allocation_fails_naming_the_field(gpuscout_scout: ScoutFactory) -> None:
    """Discovery reports the plugin failed with the field's path and drops its answer."""
    device = DeviceInfo(id="0", library="Acme")
    object.__setattr__(device, "max_allocation", -5)
    scout = gpuscout_scout(injected([device], name="acme"))
    found = scout.discover()
    report = found.report("acme")
    assert found.devices == [] and str(report.status) == "failed"
    assert "max_allocation" in report.error


def test_max_allocation_is_on_the_wire_only_when_known() -> None:
    """A known size is written under "max_allocation"; 0 leaves the key out."""
    assert json.loads(to_json(KNOWN))["max_allocation"] == 128 * MIB
    assert "max_allocation" not in json.loads(to_json(UNKNOWN))


def test_max_allocation_round_trips_the_wire() -> None:
    """Records with and without a known size read back equal, alone and in a list."""
    assert from_json(to_json(KNOWN), DeviceInfo) == KNOWN
    assert from_json(to_json([KNOWN, UNKNOWN]), list[DeviceInfo]) == [KNOWN, UNKNOWN]


def test_a_missing_or_null_max_allocation_reads_as_unknown() -> None:
    """An Ollama runner's reply has no such key; null reads as 0 as Go's decoder does."""
    assert from_json('{"id":"0"}', DeviceInfo).max_allocation == 0
    assert from_json('{"id":"0","max_allocation":null}', DeviceInfo).max_allocation == 0


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[{"max_allocation":"128"}]', "[0].max_allocation: expected int, got '128'"),
        ('[{"max_allocation":1.5}]', "[0].max_allocation: expected int, got 1.5"),
        ('[{"max_allocation":-1}]', "max_allocation must be >= 0"),
    ],
)
def test_a_bad_max_allocation_on_the_wire_names_the_path(text: str, message: str) -> None:
    """from_json refuses a non-int or negative size with a GpuscoutError naming the key."""
    with pytest.raises(GpuscoutError) as err:
        from_json(text, list[DeviceInfo])
    assert message in str(err.value)


def test_list_json_shows_max_allocation_when_known(
    gpuscout_cli: CliRunner, gpuscout_scout: ScoutFactory
) -> None:
    """`gpuscout list --json` writes the key for a device that knows it, not for one that does not."""
    scout = gpuscout_scout(injected([KNOWN, UNKNOWN]))
    run = gpuscout_cli(["list", "--json"], scout=scout)
    assert run.code == 0, run.err
    devices = {d["id"]: d for d in run.json()["devices"]}
    assert devices["0"]["max_allocation"] == 128 * MIB
    assert "max_allocation" not in devices["GPU-1"]
