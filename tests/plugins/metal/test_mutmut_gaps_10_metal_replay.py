"""Rules of the Metal plugin's recording seam (gpuscout.plugins.metal.replay) found by the tenth
mutmut round's survivors (tests/MUTATION.md, "Tenth mutmut round"): ``capture`` keeps what pyobjc's
Metal answers as ``ReplayedMetal`` replays it, whatever calls the module offers.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gpuscout.plugin import RecordingError
from gpuscout.plugins.metal.replay import ReplayedMetal, capture

M2 = {
    "name": "Apple M2 Max",
    "registryID": 4294970964,
    "hasUnifiedMemory": True,
    "recommendedMaxWorkingSetSize": 22906503168,
    "currentAllocatedSize": 1048576,
}
EGPU = {
    "name": "AMD Radeon Pro W6800X",
    "registryID": 4294971012,
    "hasUnifiedMemory": False,
    "recommendedMaxWorkingSetSize": 34342961152,
    "currentAllocatedSize": 0,
}
ANSWERS = {"devices": [M2, EGPU], "default": M2["registryID"]}


def test_a_capture_of_replayed_metal_is_the_same_answers() -> None:
    """capture(ReplayedMetal(x)) == x: every device's five answers under their names, in the
    order MTLCopyAllDevices gives them, and the default device's registryID.
    Kills gpuscout.plugins.metal.replay.x_capture__mutmut_1.._17 and its like."""
    assert capture(ReplayedMetal(copy.deepcopy(ANSWERS))) == ANSWERS


class _DefaultOnly:
    """A Metal module with only MTLCreateSystemDefaultDevice (no MTLCopyAllDevices)."""

    def __init__(self, answers: dict[str, Any]) -> None:
        self._metal = ReplayedMetal(answers)

    def MTLCreateSystemDefaultDevice(self) -> Any:
        return self._metal.MTLCreateSystemDefaultDevice()


def test_without_copy_all_devices_the_default_device_is_recorded_alone() -> None:
    """Where the module cannot list every device, the default one is still recorded (as the
    list's one device and as the default)."""
    assert capture(_DefaultOnly(copy.deepcopy(ANSWERS))) == {"devices": [M2], "default": M2["registryID"]}


class _Nothing:
    """A Metal module that answers neither call."""


def test_a_module_without_either_call_records_no_device_and_no_default() -> None:
    """Neither call: no devices, default null (what ReplayedMetal reads as no Metal device)."""
    assert capture(_Nothing()) == {"devices": [], "default": None}
    assert ReplayedMetal(capture(_Nothing())).MTLCreateSystemDefaultDevice() is None


def test_a_default_device_missing_from_the_list_is_added_to_it() -> None:
    """A default device the list does not hold (listed devices and default answered apart) is
    appended, so that the replay's default is one of its devices."""

    class _Apart:
        def MTLCopyAllDevices(self) -> list[Any]:
            return ReplayedMetal({"devices": [EGPU], "default": None}).MTLCopyAllDevices()

        def MTLCreateSystemDefaultDevice(self) -> Any:
            return ReplayedMetal(
                {"devices": [M2], "default": M2["registryID"]}
            ).MTLCreateSystemDefaultDevice()

    recorded = capture(_Apart())
    assert recorded == {"devices": [EGPU, M2], "default": M2["registryID"]}
    default = ReplayedMetal(recorded).MTLCreateSystemDefaultDevice()
    assert default is not None and default.name() == "Apple M2 Max"


@pytest.mark.parametrize(
    ("answers", "message"),
    [
        ([], "answers/metal.json: metal: expected an object with a list 'devices'"),
        ({"devices": {}}, "answers/metal.json: metal: expected an object with a list 'devices'"),
        (
            {"devices": [M2], "default": True},
            "answers/metal.json: metal.default: expected a registryID or null",
        ),
        (
            {"devices": [M2], "default": "4294970964"},
            "answers/metal.json: metal.default: expected a registryID or null",
        ),
        (
            {"devices": [{**M2, "hasUnifiedMemory": 1}]},
            "answers/metal.json: metal.devices[0].hasUnifiedMemory: expected bool, got 1",
        ),
        (
            {"devices": [M2, {**EGPU, "registryID": 1 << 64}]},
            "answers/metal.json: metal.devices[1].registryID: expected int, got 18446744073709551616",
        ),
        ({"devices": ["Apple M2 Max"]}, "answers/metal.json: metal.devices[0].name: expected str, got None"),
        (
            {"devices": [{**M2, "currentAllocatedSize": True}]},
            "answers/metal.json: metal.devices[0].currentAllocatedSize: expected int, got True",
        ),
    ],
)
def test_a_recorded_metal_answer_of_the_wrong_shape_is_a_recording_error_naming_it(
    answers: Any, message: str
) -> None:
    """A recording's Metal answers of the wrong shape are refused, naming the field and what it
    held (a bool is no int, an int no bool, and a registryID is below 2**64)."""
    with pytest.raises(RecordingError) as caught:
        ReplayedMetal(answers)
    assert str(caught.value) == message
