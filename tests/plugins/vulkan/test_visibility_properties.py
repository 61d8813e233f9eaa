"""GGML_VK_VISIBLE_DEVICES given arbitrary text: never an exception, indices within size_t,
reported indices within the device count, numbers of any length read as an istream reads them."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gpuscout.plugins.vulkan.visibility import parse_indices, select_indices

SIZE_T = 2**64

PIECES = st.sampled_from(
    [
        "0",
        "1",
        "2",
        "3",
        "-1",
        "-0",
        "+",
        "-",
        ",",
        " ",
        "\t",
        "\n",
        "\u00a0",
        "\0",
        "²",
        "٣",
        "\uff11",
        "x",
        "18446744073709551615",
        "18446744073709551616",
        "9" * 5000,
        "0" * 5000,
    ]
)
VALUES = st.lists(PIECES | st.text(max_size=6), max_size=8).map("".join)


@settings(max_examples=500)
@given(value=VALUES)
def test_any_value_reads_as_size_t_indices(value: str) -> None:
    """parse_indices never raises and every index fits size_t."""
    assert all(0 <= i < SIZE_T for i in parse_indices(value))


@settings(max_examples=500)
@given(value=VALUES | st.none(), count=st.integers(0, 4))
def test_any_value_selects_distinct_devices_in_range(value: str | None, count: int) -> None:
    """select_indices gives distinct indices below the device count, and a note is one line."""
    indices, note = select_indices(value, count)
    assert all(0 <= i < count for i in indices) and len(indices) == len(set(indices))
    assert "\n" not in note


@given(digits=st.integers(21, 6000), sign=st.sampled_from(["", "+", "-"]))
def test_numbers_past_size_t_stop_the_reading(digits: int, sign: str) -> None:
    """A number too large for size_t ends the list at any length, signed or not."""
    assert parse_indices("1 " + sign + "9" * digits + " 2") == [1]


@given(zeros=st.integers(0, 5000))
def test_leading_zeros_do_not_change_an_index(zeros: int) -> None:
    """Any number of leading zeros leaves the index as it is."""
    assert parse_indices("0" * zeros + "2") == [2]


@given(entry=st.sampled_from(["²", "٣", "\uff11", "\u00a01"]))
def test_non_ascii_digits_and_blanks_stop_the_reading(entry: str) -> None:
    """The classic locale reads only ASCII digits after ASCII blanks."""
    assert parse_indices(f"0,{entry},1") == [0]
