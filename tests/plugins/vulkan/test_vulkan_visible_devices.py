"""GGML_VK_VISIBLE_DEVICES read as llama.cpp's Vulkan backend reads it."""

from __future__ import annotations

import pytest

from gpuscout.plugins.vulkan.visibility import parse_indices, select_indices

HUGE = 2**64


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("0", [0]),
        ("1,0", [1, 0]),
        ("0 1", [0, 1]),
        (" 2 , 0 ", [2, 0]),
        ("0,,1", [0, 1]),
        ("0,x,1", [0]),
        ("1a", [1]),
        ("", []),
        ("x", []),
        ("+1", [1]),
        ("-1", [HUGE - 1]),
        (str(HUGE), []),
    ],
)
def test_indices_are_read_like_an_istream_of_size_t(value: str, expected: list[int]) -> None:
    """Commas are spaces, reading stops at the first non-number, -1 wraps around."""
    assert parse_indices(value) == expected


def test_unset_shows_every_device() -> None:
    """Without the variable every raw device is reported, in order."""
    assert select_indices(None, 3) == ([0, 1, 2], "")


def test_set_but_empty_shows_none() -> None:
    """An empty value hides every Vulkan device."""
    indices, note = select_indices("", 3)
    assert indices == [] and "set but empty" in note


def test_listed_indices_keep_their_order() -> None:
    """The given order is the reported order."""
    assert select_indices("2,0", 3) == ([2, 0], "")


@pytest.mark.parametrize("value", ["3", "-1", "0,3"])
def test_an_index_past_the_count_hides_every_device(value: str) -> None:
    """llama.cpp registers no Vulkan backend when any index is out of range."""
    indices, note = select_indices(value, 3)
    assert indices == [] and "no Vulkan device at all" in note


def test_minus_one_is_named_as_written() -> None:
    """The note shows -1, not the wrapped size_t value."""
    assert "names device -1," in select_indices("-1", 3)[1]


def test_a_repeated_index_is_reported_once_with_a_note() -> None:
    """The same device listed twice is one device."""
    indices, note = select_indices("1,1", 2)
    assert indices == [1] and "repeats" in note
