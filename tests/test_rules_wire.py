"""Rules of reading the JSON wire format (``gpuscout.from_json``), each stated once."""

from __future__ import annotations

import json

import pytest

from gpuscout import DeviceInfo, GpuscoutError, from_json
from gpuscout._records.results import Discovery

SYSTEM = {"total_memory": 0, "free_memory": 0, "free_swap": 0}


def document(report: dict[str, object]) -> str:
    return json.dumps({"devices": [], "dropped": [], "system": SYSTEM, "plugins": [report]})


def test_a_plugin_reports_device_count_reads_as_an_int() -> None:
    """``devices: 2`` in a plugin report of ``gpuscout list --json`` reads as the int 2."""
    found: Discovery = from_json(document({"name": "x", "status": "ok", "devices": 2}), Discovery)
    [report] = found.plugins
    assert report.devices == 2 and type(report.devices) is int


@pytest.mark.parametrize("flag", [True, False])
def test_a_json_bool_is_not_a_number(flag: bool) -> None:
    """true and false are not ints on the wire (JSON has no 1-valued true): refused with the path."""
    with pytest.raises(GpuscoutError, match=r"plugins\[0\]\.devices: expected int"):
        from_json(document({"name": "x", "status": "ok", "devices": flag}), Discovery)


def test_null_reads_as_the_fields_zero_value() -> None:
    """As Go's decoder does, a null field is the field's default: "" for text, 0, false, ()."""
    devices: list[DeviceInfo] = from_json(
        json.dumps(
            [
                {
                    "id": "0",
                    "backend": "CUDA",
                    "name": None,
                    "total_memory": None,
                    "integration": None,
                    "LibraryPath": None,
                    "ComputeMajor": None,
                    "uuid": None,
                }
            ]
        ),
        list[DeviceInfo],
    )
    assert devices == [DeviceInfo(id="0", library="CUDA")]


def test_null_in_a_plugin_report_reads_as_its_default() -> None:
    """A null note, error or device count in a report reads as "", "" and 0."""
    found: Discovery = from_json(
        document({"name": "x", "status": "ok", "note": None, "error": None, "devices": None}), Discovery
    )
    [report] = found.plugins
    assert (report.note, report.error, report.devices) == ("", "", 0)
