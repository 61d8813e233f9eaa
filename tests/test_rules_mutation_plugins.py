"""Vendor and node-label rules that the mutation run (scripts/mutate.py) found no test stating."""

from __future__ import annotations

from gpuscout import DeviceInfo
from gpuscout.cluster.nfd import device_labels
from gpuscout.plugins.rocm.rules import numeric_device_list, visible_entries
from gpuscout.plugins.rocm.visibility import NO_UUID, hip_visible, rocr_visible
from gpuscout.plugins.vulkan.rules import normalize_description, similar_description
from gpuscout.sizes import GIB

UUIDS = [f"GPU-{n:016x}" for n in range(1, 12)]


def cuda(n: int, **kw: object) -> DeviceInfo:
    fields: dict[str, object] = {
        "id": f"GPU-{n}",
        "library": "CUDA",
        "name": "NVIDIA A100",
        "description": "NVIDIA A100",
        "total_memory": 40 * GIB,
        "free_memory": 39 * GIB,
        "compute_major": 8,
        "driver_major": 12,
    }
    return DeviceInfo(**{**fields, **kw})  # type: ignore[arg-type]


def labels(*devices: DeviceInfo) -> dict[str, str]:
    return device_labels(devices, lambda d: True)


def test_compute_labels_order_versions_as_numbers() -> None:
    """cuda.compute.min/max compare major then minor as numbers: 9.0 is below 12.0."""
    out = labels(cuda(0, compute_major=9, compute_minor=0), cuda(1, compute_major=12, compute_minor=0))
    assert (out["cuda.compute.min"], out["cuda.compute.max"]) == ("9.0", "12.0")


def test_the_nvidia_driver_label_is_the_oldest_driver() -> None:
    """A pod needing driver N is safe on the node only if every card has at least N: the minimum."""
    out = labels(cuda(0, nvidia_driver_major=550), cuda(1, nvidia_driver_major=535))
    assert out["cuda.nvidia-driver"] == "535"


def test_the_smallest_memory_label_is_total_memory_not_free() -> None:
    """memory.smallest-mib says what the cards hold, not what happens to be free now."""
    out = labels(cuda(0, total_memory=40 * GIB, free_memory=1 * GIB))
    assert out["memory.smallest-mib"] == out["cuda.memory.smallest-mib"] == str(40 * 1024)


def test_cards_of_one_model_with_different_memory_are_not_homogeneous() -> None:
    """An A100 40 GB beside an A100 80 GB makes a mixed node."""
    assert labels(cuda(0), cuda(1))["homogeneous"] == "true"
    assert labels(cuda(0), cuda(1, total_memory=80 * GIB))["homogeneous"] == "false"


def test_a_rocr_uuid_prefix_needs_five_characters() -> None:
    """ROCr matches a UUID token of 5 to 20 characters: ``GPU-`` alone ends the list."""
    assert rocr_visible("GPU-0", UUIDS[:1]) == [0]
    assert rocr_visible("GPU-", UUIDS[:1]) == []


def test_rocr_reads_a_leading_zero_as_octal() -> None:
    """strtol with base 0: ``010`` is GPU 8, ``0x0a`` GPU 10."""
    assert rocr_visible("010,0x0a", UUIDS) == [8, 10]


def test_hip_matches_gpu_xx_to_a_gpu_without_a_uuid() -> None:
    """HIP asks ROCr for each agent's UUID, which is GPU-XX for a GPU that has none."""
    assert hip_visible(NO_UUID, [UUIDS[0], ""]) == [1]


def test_hip_refuses_an_index_with_a_leading_zero() -> None:
    """HIP reads indices written plainly: ``01`` is invalid and ends the list."""
    assert hip_visible("0,01", UUIDS[:10]) == [0]


def test_minus_one_is_no_numeric_device_list() -> None:
    """The seed's numeric list holds non-negative integers only: ``-1`` (hide all) is not one."""
    assert numeric_device_list("0,1") and not numeric_device_list("-1")


def test_a_blank_token_takes_no_ordinal_in_the_child() -> None:
    """The child's ordinal counts the non-blank tokens already written: after a blank one the
    next device is still ordinal 0."""
    blank = DeviceInfo(id="0", library="ROCm", filter_id=" ")
    second = DeviceInfo(id="1", library="ROCm", filter_id="1")
    entries = visible_entries([blank, second], {"HIP_VISIBLE_DEVICES": "0,1"}, "linux")
    assert [(e.name, e.value) for e in entries if e.position == 1] == [
        ("ROCR_VISIBLE_DEVICES", "1"),
        ("HIP_VISIBLE_DEVICES", "0"),
    ]


def test_an_unmatched_closing_parenthesis_does_not_hide_what_follows() -> None:
    """The seed's normalizeDeviceDescription drops a stray ``)``; a later ``(...)`` is still
    removed."""
    assert normalize_description("RTX) 4090 (rev a1)") == "rtx 4090"


def test_descriptions_that_normalize_to_nothing_are_not_similar() -> None:
    """Two descriptions that are only parentheses say nothing alike about the cards."""
    assert not similar_description("(x)", "(y)")
