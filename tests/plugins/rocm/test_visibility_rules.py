"""ROCR_VISIBLE_DEVICES and HIP_VISIBLE_DEVICES as the runtimes apply them, as tables."""

from __future__ import annotations

import pytest

from gpuscout.plugins.rocm.visibility import hip_visible, rocr_visible, visible_order

# ROCr's own examples (amd_filter_device.h): four GPUs with these UUIDs.
ROCR_DOC_UUIDS = [
    "GPU-babababababababa",
    "GPU-abbaabbaabbaabba",
    "GPU-babaabbaabbababa",
    "GPU-abbababababaabba",
]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param("", [], id="A1-empty-shows-none"),
        pytest.param("-1", [], id="A2-minus-one-shows-none"),
        pytest.param("GPU-XX", [], id="A3-GPU-XX-shows-none"),
        pytest.param("3,GPU-BABABABABABABABA,4", [3, 0], id="B-out-of-range-ends-list"),
        # The header says Gpu-1 and Gpu-2, but its second token is Gpu-1's own UUID and the same
        # header (and the parser) make a repeat terminating: only Gpu-1 surfaces.
        pytest.param("1,GPU-ABBAABBAABBAABBA,GPU-XX", [1], id="C-repeat-by-uuid-ends-list"),
        pytest.param("3,GPU-BABAABBA,GPU-XX", [3, 2], id="D-prefix-selects"),
    ],
)
def test_rocr_documented_examples(value: str, expected: list[int]) -> None:
    """ROCr's documented ROCR_VISIBLE_DEVICES examples give its documented devices."""
    assert rocr_visible(value, ROCR_DOC_UUIDS) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param(None, [0, 1, 2, 3], id="unset-shows-all"),
        pytest.param("2,0", [2, 0], id="indices-reorder"),
        pytest.param(" 1 , 3 ", [1, 3], id="blanks-trimmed"),
        pytest.param("0,2,-1,1", [0, 2], id="negative-ends-list"),
        pytest.param("0,x,1", [0], id="garbage-ends-list"),
        pytest.param("0,,1", [0], id="empty-token-ends-list"),
        pytest.param("1,", [1], id="trailing-comma-ignored"),
        pytest.param("0x3,01", [3, 1], id="strtol-hex-and-octal"),
        pytest.param("08", [], id="bad-octal-ends-list"),
        pytest.param("gpu-abbab", [3], id="uuid-case-insensitive"),
        pytest.param("GPU-", [], id="uuid-prefix-too-short"),
        pytest.param("GPU-BABA", [], id="ambiguous-prefix-ends-list"),
        pytest.param("GPU-babababababababa0", [], id="uuid-too-long"),
        pytest.param("0,1,2,3,0", [0, 1, 2, 3], id="tokens-beyond-gpu-count-unread"),
    ],
)
def test_rocr_visible_devices_table(value: str | None, expected: list[int]) -> None:
    """ROCR_VISIBLE_DEVICES follows ROCr's parser case by case."""
    assert rocr_visible(value, ROCR_DOC_UUIDS) == expected


def test_rocr_uuid_never_matches_a_gpu_without_one() -> None:
    """A GPU whose unique_id is 0 is selectable only by index."""
    assert rocr_visible("GPU-XX,0", ["", "GPU-0000000000000001"]) == []


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param("", None, id="empty-no-filter"),
        pytest.param("1,0", [1, 0], id="indices-reorder"),
        pytest.param("0,0,2", [0, 2], id="duplicates-skipped"),
        pytest.param("0,4,1", [0], id="out-of-range-ends-list"),
        pytest.param("0,-1,1", [0], id="negative-ends-list"),
        pytest.param("01", [], id="leading-zero-invalid"),
        pytest.param(" 1", [], id="blank-invalid"),
        pytest.param("GPU-abbaabba", [1], id="uuid-prefix"),
        pytest.param("GPU-ABBAABBA", [], id="uuid-case-sensitive"),
        pytest.param("2,GPU-nope", [2], id="unmatched-uuid-ends-list"),
    ],
)
def test_hip_visible_devices_table(value: str, expected: list[int] | None) -> None:
    """HIP_VISIBLE_DEVICES follows ROCclr's parser case by case."""
    assert hip_visible(value, ROCR_DOC_UUIDS) == expected


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        pytest.param({}, [0, 1, 2, 3], id="nothing-set"),
        pytest.param(
            {"ROCR_VISIBLE_DEVICES": "1,2,3", "HIP_VISIBLE_DEVICES": "0"},
            [1],
            id="hip-indexes-rocr-survivors",
        ),
        pytest.param(
            {"ROCR_VISIBLE_DEVICES": "3,1", "HIP_VISIBLE_DEVICES": "1,0"}, [1, 3], id="hip-reorders-survivors"
        ),
        pytest.param(
            {"ROCR_VISIBLE_DEVICES": "1", "HIP_VISIBLE_DEVICES": "1"}, [], id="hip-index-past-survivors-hides"
        ),
        pytest.param(
            {"HIP_VISIBLE_DEVICES": "", "CUDA_VISIBLE_DEVICES": "2"}, [2], id="empty-hip-falls-back-to-cuda"
        ),
        pytest.param({"HIP_VISIBLE_DEVICES": "3", "CUDA_VISIBLE_DEVICES": "2"}, [3], id="hip-wins-over-cuda"),
        pytest.param(
            {"HIP_VISIBLE_DEVICES": "", "CUDA_VISIBLE_DEVICES": ""}, [0, 1, 2, 3], id="both-empty-no-filter"
        ),
        pytest.param({"GPU_DEVICE_ORDINAL": "1"}, [0, 1, 2, 3], id="opencl-ordinal-ignored"),
        pytest.param({"ROCR_VISIBLE_DEVICES": "", "HIP_VISIBLE_DEVICES": "0"}, [], id="rocr-empty-hides-all"),
    ],
)
def test_rocr_then_hip_composition(env: dict[str, str], expected: list[int]) -> None:
    """ROCr filters first, then HIP indexes what ROCr left."""
    assert visible_order(env, ROCR_DOC_UUIDS) == expected
