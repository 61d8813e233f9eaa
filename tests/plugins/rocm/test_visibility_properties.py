"""ROCR_VISIBLE_DEVICES and HIP_VISIBLE_DEVICES given arbitrary text: never an exception, only
positions within range, each at most once, numbers of any length read as strtol reads them."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gpuscout.plugins.rocm.visibility import _strtol0, hip_visible, rocr_visible, visible_order

UUIDS = ["GPU-babababababababa", "GPU-abbaabbaabbaabba", "", "GPU-abbababababaabba"]
LONG_MAX = 2**63 - 1

PIECES = st.sampled_from(
    [
        "0",
        "1",
        "2",
        "3",
        "4",
        "-1",
        "+",
        ",",
        " ",
        "\t",
        "\u00a0",
        "\0",
        "²",
        "٣",
        "\uff11",
        "0x",
        "0X3",
        "07",
        "08",
        "GPU-",
        "GPU-BABA",
        "gpu-abbab",
        "GPU-XX",
        "GPU-abba",
        "G",
        "9223372036854775807",
        "9223372036854775808",
        "9" * 5000,
        "0" * 5000,
        "0x" + "f" * 5000,
    ]
)
VALUES = st.lists(PIECES | st.text(max_size=6), max_size=8).map("".join)


def in_range_once(chosen: list[int], count: int) -> bool:
    return all(0 <= i < count for i in chosen) and len(chosen) == len(set(chosen))


@settings(max_examples=500)
@given(value=VALUES | st.none())
def test_any_rocr_value_gives_distinct_indices_in_range(value: str | None) -> None:
    """Any ROCR_VISIBLE_DEVICES text gives distinct KFD indices below the GPU count."""
    assert in_range_once(rocr_visible(value, UUIDS), len(UUIDS))


@settings(max_examples=500)
@given(value=VALUES, survivors=st.integers(0, len(UUIDS)))
def test_any_hip_value_gives_distinct_positions_in_range(value: str, survivors: int) -> None:
    """Any HIP_VISIBLE_DEVICES text gives no filter or distinct positions among the survivors."""
    kept = hip_visible(value, UUIDS[:survivors])
    assert kept is None or in_range_once(kept, survivors)


@settings(max_examples=300)
@given(rocr=VALUES | st.none(), hip=VALUES, cuda=VALUES)
def test_any_environment_gives_distinct_indices_in_range(rocr: str | None, hip: str, cuda: str) -> None:
    """Both variables together (and CUDA's as HIP's fallback) never raise or leave the range."""
    env = {"HIP_VISIBLE_DEVICES": hip, "CUDA_VISIBLE_DEVICES": cuda}
    if rocr is not None:
        env["ROCR_VISIBLE_DEVICES"] = rocr
    assert in_range_once(visible_order(env, UUIDS), len(UUIDS))


@settings(max_examples=300)
@given(token=VALUES)
def test_strtol_stays_within_long(token: str) -> None:
    """Any token reads as nothing or a value strtol can return."""
    value = _strtol0(token)
    assert value is None or -LONG_MAX - 1 <= value <= LONG_MAX


@given(digits=st.integers(20, 6000), sign=st.sampled_from(["", "+", "-"]))
def test_decimal_overflow_clamps_like_strtol(digits: int, sign: str) -> None:
    """Past 19 digits strtol clamps to LONG_MAX or LONG_MIN, at any length."""
    assert _strtol0(sign + "9" * digits) == (-LONG_MAX - 1 if sign == "-" else LONG_MAX)


@given(token=st.sampled_from(["²", "٣", "\uff11", "1²"]))
def test_non_ascii_digits_end_both_lists(token: str) -> None:
    """Unicode digits are no index for ROCr or HIP: the list ends there."""
    assert rocr_visible(f"1,{token}", UUIDS) == [1]
    assert hip_visible(f"1,{token}", UUIDS) == [1]


def test_a_5000_digit_hip_index_ends_the_list() -> None:
    """An index past int()'s digit limit is out of range, not a crash."""
    assert hip_visible("0," + "1" * 5000, UUIDS) == [0]
