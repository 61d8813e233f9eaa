"""Rules of the Vulkan plugin's replay check (gpuscout.plugins.vulkan.replay) found by the tenth
mutmut round's survivors (tests/MUTATION.md, "Tenth mutmut round"): every field of a recorded
probe has the type and range the loader gives, or the recording is refused naming the field.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from gpuscout.plugin import RecordingError
from gpuscout.plugins.vulkan.replay import replayed

MACHINE = Path(__file__).parents[2] / "machines" / "intel_arc_a770_igpu"
PROBE = json.loads((MACHINE / "answers/vulkan.json").read_text())["probe"]


class _Recorded:
    """A context whose recording holds ``answer`` as the Vulkan probe's."""

    def __init__(self, answer: Any) -> None:
        self._answer = answer

    def recorded(self, key: str) -> Any:
        return self._answer if key == "probe" else None


def _device(**changes: Any) -> dict[str, Any]:
    answer: dict[str, Any] = copy.deepcopy(PROBE)
    answer["devices"][0].update(changes)
    return answer


def _refused(answer: Any) -> str:
    with pytest.raises(RecordingError) as caught:
        replayed(_Recorded(answer))  # type: ignore[arg-type]
    text = str(caught.value)
    assert text.startswith("answers/vulkan.json: probe: not what the Vulkan probe answers (ValueError: ")
    return text.split("(ValueError: ", 1)[1][:-1]


def test_a_list_field_holds_at_most_4096_entries() -> None:
    """A recorded list (extensions, heaps, PCI address) holds at most 4096 entries: 4096 replay,
    4097 are refused naming the field.
    Kills gpuscout.plugins.vulkan.replay.x__is__mutmut_14.._17."""
    ok = replayed(_Recorded(_device(extensions=["VK_KHR_x"] * 4096)))  # type: ignore[arg-type]
    assert len(ok.devices[0].extensions) == 4096
    assert _refused(_device(extensions=["VK_KHR_x"] * 4097)).startswith(
        "devices[0].extensions must be list[str]"
    )
    assert _refused(_device(extensions="VK_KHR_x")).startswith("devices[0].extensions must be list[str]")


@pytest.mark.parametrize("value", [(1 << 64) - 1, 0])
def test_an_int_field_runs_from_0_to_2_to_the_64_exclusive(value: int) -> None:
    """An unsigned 64-bit field (a driver version, a heap size) replays from 0 to 2**64 - 1."""
    assert replayed(_Recorded(_device(driver_version=value))).devices[0].driver_version == value  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [1 << 64, 2 << 64, -1, True, 1.0, "1"])
def test_an_int_field_out_of_range_or_of_another_type_is_refused(value: Any) -> None:
    """2**64 and past, a negative number, a bool, a float or a string are no loader answer.
    Kills gpuscout.plugins.vulkan.replay.x__is__mutmut_29, _30, _34, _36, _37."""
    assert (
        _refused(_device(driver_version=value)) == f"devices[0].driver_version must be int, got {value!r:.40}"
    )


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        ([], "expected an object with a list 'devices'"),
        ({"devices": {}}, "expected an object with a list 'devices'"),
        ({**PROBE, "error": 5}, "error must be str"),
        ({**PROBE, "instance_version": -1}, "instance_version must be int"),
        ({**PROBE, "library": ["libvulkan.so.1"]}, "library must be str"),
        ({**PROBE, "devices": ["gpu"]}, "devices[0] must be an object"),
        (_device(colour="blue"), "devices[0].colour: not a field of a Vulkan device"),
    ],
)
def test_a_probe_of_the_wrong_shape_is_refused_naming_what(answer: Any, message: str) -> None:
    """The probe is an object with a list of devices; its error, instance version and library
    have the loader's types; each device is an object of the loader's fields only.
    Kills gpuscout.plugins.vulkan.replay.x__check_answer__mutmut_1, _4.._8, _11, _12, _15, _16,
    _20, _26, _31, _35, _41."""
    assert _refused(answer) == message


def test_a_probe_without_error_version_or_library_replays() -> None:
    """Those three are optional: a probe with none of them replays its devices."""
    answer = {"devices": copy.deepcopy(PROBE["devices"])}
    assert len(replayed(_Recorded(answer)).devices) == len(PROBE["devices"])  # type: ignore[arg-type]


def test_a_device_recorded_without_a_uuid_replays_without_one() -> None:
    """A device whose recording has no uuid (a driver without VkPhysicalDeviceIDProperties)
    replays with none, as an empty one does.
    Kills gpuscout.plugins.vulkan.replay.x__check_answer__mutmut_54, _56, _59."""
    answer = copy.deepcopy(PROBE)
    del answer["devices"][0]["uuid"]
    assert replayed(_Recorded(answer)).devices[0].uuid == ""  # type: ignore[arg-type]


def test_a_recording_without_the_probes_answer_replays_as_a_loader_that_said_so() -> None:
    """No ``probe`` in answers/vulkan.json: the replay is a loader answer with no device and an
    error saying the recording holds none (what the plugin's note then says).
    Kills gpuscout.plugins.vulkan.replay.x_replayed__mutmut_6.._9."""
    result = replayed(_Recorded(None))  # type: ignore[arg-type]
    assert result.devices == [] and result.error == "the recording holds no answer of the Vulkan loader"
