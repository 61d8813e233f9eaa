"""The child's ROCm ordinal (the seed's updateVisibleDevicesEnv with visibleDeviceCount): the
number of non-blank entries already in ROCR_VISIBLE_DEVICES when a device is appended."""

from __future__ import annotations

from gpuscout import DeviceInfo
from gpuscout._machine.context import EnvEntry
from gpuscout.plugins.rocm.rules import visible_entries

HIP_LIST = {"HIP_VISIBLE_DEVICES": "0,1"}


def test_each_rocm_device_takes_the_next_child_ordinal() -> None:
    """Two named devices are the child's GPU 0 and GPU 1 in the inherited HIP list."""
    selection = [DeviceInfo(id="GPU-a", library="ROCm"), DeviceInfo(id="GPU-b", library="ROCm")]
    assert visible_entries(selection, HIP_LIST, "linux") == [
        EnvEntry(0, "ROCR_VISIBLE_DEVICES", "GPU-a"),
        EnvEntry(0, "HIP_VISIBLE_DEVICES", "0"),
        EnvEntry(1, "ROCR_VISIBLE_DEVICES", "GPU-b"),
        EnvEntry(1, "HIP_VISIBLE_DEVICES", "1"),
    ]


def test_a_blank_entry_does_not_count_toward_the_next_ordinal() -> None:
    """visibleDeviceCount skips blank fields: after a blank token the next device is still 0."""
    selection = [DeviceInfo(id=" ", library="ROCm"), DeviceInfo(id="GPU-b", library="ROCm")]
    entries = visible_entries(selection, HIP_LIST, "linux")
    assert [e.value for e in entries if e.name == "HIP_VISIBLE_DEVICES"] == ["0", "0"]


def test_devices_of_other_libraries_take_no_rocm_ordinal() -> None:
    """A CUDA device between two ROCm ones adds nothing to the ROCm lists."""
    selection = [
        DeviceInfo(id="GPU-a", library="ROCm"),
        DeviceInfo(id="0", library="CUDA"),
        DeviceInfo(id="GPU-b", library="ROCm"),
    ]
    entries = visible_entries(selection, HIP_LIST, "linux")
    assert [(e.position, e.value) for e in entries if e.name == "HIP_VISIBLE_DEVICES"] == [(0, "0"), (2, "1")]
