"""A recorded Vulkan answer is checked before discovery: a deviceUUID is 32 hex digits or
empty (docs/recordings.md, ``vulkan.json``), as the loader writes it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from gpuscout import Scout
from gpuscout.plugin import RecordingError

MACHINE = Path(__file__).parents[2] / "machines" / "intel_arc_a770_igpu"


def _with_uuid(tmp_path: Path, uuid: str) -> Path:
    target = tmp_path / "rec"
    shutil.copytree(MACHINE, target, symlinks=True)
    path = target / "answers/vulkan.json"
    answers = json.loads(path.read_text())
    answers["probe"]["devices"][0]["uuid"] = uuid
    path.write_text(json.dumps(answers))
    return target


@pytest.mark.parametrize(
    "uuid",
    [
        "8680a056080000000300000000000000f",  # 33 digits: one too many
        "8680a05608000000030000000000000",  # 31 digits
        "GPU-8680a056-0800-0000-0300-000000000000",  # NVML's spelling, not deviceUUID's
        "8680a056-0800-0000-0300-000000000000",  # dashes: how gpuscout prints it, not records it
        "zz80a056080000000300000000000000",  # not hex
        "$(reboot)",
    ],
    ids=["33-digits", "31-digits", "nvml-form", "dashed", "not-hex", "shell"],
)
def test_a_recorded_vulkan_uuid_that_is_not_32_hex_digits_is_refused(tmp_path: Path, uuid: str) -> None:
    """A malformed deviceUUID raises RecordingError naming file and field, never a silent 'no UUID'."""
    target = _with_uuid(tmp_path, uuid)
    with pytest.raises(
        RecordingError, match=r"answers/vulkan\.json: .*devices\[0\]\.uuid must be 32 hex digits"
    ):
        Scout(plugins=["vulkan"], entry_points=False, replay=target).discover()


@pytest.mark.parametrize("uuid", ["", "8680A056080000000300000000000000"], ids=["empty", "upper-case"])
def test_an_empty_or_upper_case_vulkan_uuid_replays(tmp_path: Path, uuid: str) -> None:
    """No UUID (a driver without VkPhysicalDeviceIDProperties) and upper-case hex both replay."""
    target = _with_uuid(tmp_path, uuid)
    found = Scout(plugins=["vulkan"], entry_points=False, replay=target).discover()
    assert found.devices[0].uuid == (uuid and "8680a056-0800-0000-0300-000000000000")


def _with_heaps(tmp_path: Path, heaps: object) -> Path:
    target = tmp_path / "rec"
    shutil.copytree(MACHINE, target, symlinks=True)
    path = target / "answers/vulkan.json"
    answers = json.loads(path.read_text())
    if heaps is None:
        del answers["probe"]["devices"][0]["heaps"]
    else:
        answers["probe"]["devices"][0]["heaps"] = heaps
    path.write_text(json.dumps(answers))
    return target


@pytest.mark.parametrize(
    ("heaps", "says"),
    [
        (None, "a Vulkan device has at least one memory heap"),
        ([], "a Vulkan device has at least one memory heap"),
        ([[8 << 30]], r"each heap is \[size, flags\]"),
        ([[8 << 30, 1, 0]], r"each heap is \[size, flags\]"),
    ],
    ids=["missing", "empty", "no-flags", "three-numbers"],
)
def test_a_recorded_vulkan_device_without_a_proper_heap_is_refused(
    tmp_path: Path, heaps: object, says: str
) -> None:
    """A device with no memory heap, or a heap that is not [size, flags], is a RecordingError."""
    target = _with_heaps(tmp_path, heaps)
    with pytest.raises(RecordingError, match=rf"answers/vulkan\.json: .*devices\[0\]\.heaps: {says}"):
        Scout(plugins=["vulkan"], entry_points=False, replay=target).discover()
