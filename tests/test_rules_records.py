"""Rules of records at the border and of a plugin's notes, each stated once."""

from __future__ import annotations

import pytest

from gpuscout import DeviceInfo
from gpuscout._machine.context import MAX_NOTES, Context
from gpuscout._records.device import check_device, is_size
from gpuscout._records.fields import RecordError


def test_the_border_accepts_a_number_of_2_to_the_63_minus_1() -> None:
    """Number fields travel as Go's int64: 2**63-1 is the largest one, and it passes."""
    assert check_device(DeviceInfo(driver_major=2**63 - 1)).driver_major == 2**63 - 1
    assert check_device(DeviceInfo(driver_major=-(2**63))).driver_major == -(2**63)


def test_the_border_refuses_a_number_of_2_to_the_63() -> None:
    """2**63 does not fit an int64: the record is refused, naming the field."""
    with pytest.raises(RecordError, match=r"\.driver_major: expected an int in .*2\*\*63-1"):
        check_device(DeviceInfo(driver_major=2**63))


def test_a_byte_count_is_below_2_to_the_63() -> None:
    """Sizes are 0..2**63-1: 2**63 is not one."""
    assert is_size(2**63 - 1) and is_size(0)
    assert not is_size(2**63) and not is_size(-1)


def notes_after(count: int) -> list[str]:
    ctx = Context(env={}, platform="linux")
    for i in range(count):
        ctx.note(f"n{i}")
    return ctx.notes


def test_notes_below_the_cap_are_all_kept() -> None:
    """Up to MAX_NOTES - 1 notes are kept as written, with no marker."""
    assert notes_after(MAX_NOTES - 1) == [f"n{i}" for i in range(MAX_NOTES - 1)]


def test_notes_past_the_cap_end_in_one_marker_and_total_max_notes() -> None:
    """Past the cap, MAX_NOTES notes are kept, the last one saying that more were dropped."""
    kept = notes_after(MAX_NOTES + 10)
    assert len(kept) == MAX_NOTES
    assert kept[:-1] == [f"n{i}" for i in range(MAX_NOTES - 1)]
    assert kept[-1] == "(more notes dropped)"
