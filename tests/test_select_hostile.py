"""Selectors (gpuscout._selection.selectors) given hostile text: huge numbers, non-ASCII digits, absurd sizes,
non-str values. Every outcome is a list of the given devices or a SelectionError."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuscout import DeviceInfo
from gpuscout._selection.selectors import (
    MAX_SELECTOR,
    SelectionError,
    library_order,
    match_one,
    select_devices,
)
from gpuscout.sizes import GIB, SizeError, parse_size

DEVICES = [
    DeviceInfo(
        id="GPU-8932f937-aaaa",
        library="CUDA",
        filter_id="GPU-8932f937-aaaa",
        uuid="GPU-8932f937-aaaa",
        pci_id="0000:81:00.0",
        free_memory=40 * GIB,
    ),
    DeviceInfo(
        id="GPU-5f3c0a1b2c3d4e5f",
        library="ROCm",
        filter_id="GPU-5f3c0a1b2c3d4e5f",
        pci_id="0000:c4:00.0",
        free_memory=20 * GIB,
    ),
    DeviceInfo(id="0", library="Vulkan", filter_id="2", free_memory=8 * GIB),
    DeviceInfo(id="1", library="Vulkan", filter_id="²", free_memory=4 * GIB),
]


class Reserve:
    """A fixed 457 MiB reserve per device."""

    def minimum_memory(self, device: DeviceInfo) -> int:
        return 457 << 20


def pick(selectors: Any) -> list[DeviceInfo]:
    return select_devices(Reserve(), DEVICES, selectors)


# Pieces of the selector grammar, so generated text reaches every branch, not only "unknown".
PIECES = st.sampled_from(
    [
        "best",
        "all",
        "fits:",
        "library=",
        "cuda:",
        "rocm:",
        "vulkan:",
        "0000:",
        "c4:00.0",
        "GPU-",
        "GPU-8932",
        "1",
        "0",
        "-",
        "+",
        ".",
        ",",
        " ",
        "GiB",
        "KB",
        "e999",
        "nan",
        "inf",
        "²",
        "٣",
        "\u212a",
        "\u0131",
        "\n",
        "\0",
        "9" * 40,
        "9" * 5000,
    ]
)
HOSTILE = st.lists(PIECES | st.text(max_size=12), max_size=6).map("".join)


def outcome(selectors: Any) -> list[DeviceInfo] | None:
    """The devices picked, or None for a SelectionError; any other exception propagates."""
    try:
        return pick(selectors)
    except SelectionError:
        return None


@settings(max_examples=500)
@given(text=HOSTILE)
def test_any_text_gives_devices_or_a_selection_error(text: str) -> None:
    """One arbitrary selector picks some of the given devices or raises SelectionError."""
    chosen = outcome([text])
    assert chosen is None or all(any(d is e for e in DEVICES) for d in chosen)


@settings(max_examples=300)
@given(texts=st.lists(HOSTILE, max_size=5))
def test_any_list_of_selectors_gives_devices_in_rank_order_or_an_error(texts: list[str]) -> None:
    """A list of arbitrary selectors picks distinct given devices in their given order, or fails."""
    chosen = outcome(texts)
    if chosen is not None:
        positions = [next(i for i, e in enumerate(DEVICES) if d is e) for d in chosen]
        assert positions == sorted(set(positions))


RESERVE = 457 << 20
#: Bytes per unit, written out (binary units are powers of 1024, decimal ones of 1000).
UNIT_BYTES = {
    "KiB": 1024,
    "MiB": 1024**2,
    "GiB": 1024**3,
    "TiB": 1024**4,
    "KB": 1000,
    "MB": 1000**2,
    "GB": 1000**3,
    "TB": 1000**4,
}


def fitting(size: int) -> list[DeviceInfo]:
    """The devices ``fits:`` must pick for ``size``: free memory after the reserve holds it."""
    return [d for d in DEVICES if not d.free_memory_unknown and d.free_memory - RESERVE >= size]


@settings(max_examples=300)
@given(text=HOSTILE)
def test_any_fits_size_gives_devices_or_a_selection_error(text: str) -> None:
    """`fits:` followed by anything never raises Overflow, Value or Decimal errors; what it picks
    is exactly the devices that hold the size it read, and it fails only when none does."""
    chosen = outcome([f"fits:{text}"])
    try:  # a selector is stripped before it is read, so fits: reads the size without the end
        size = parse_size(f"fits:{text}".strip()[5:], what="fits:")
    except SizeError:
        assert chosen is None
        return
    assert chosen == (fitting(size) or None)


@settings(max_examples=300)
@given(
    whole=st.integers(0, 50_000),
    fraction=st.sampled_from(["", ".5", ".25", ".001", ".999"]),
    unit=st.sampled_from(sorted(UNIT_BYTES)),
    case=st.sampled_from([str, str.lower, str.upper]),
    pad=st.sampled_from(["", " ", "  "]),
)
def test_a_well_formed_size_reads_as_the_bytes_it_says(
    whole: int, fraction: str, unit: str, case: Any, pad: str
) -> None:
    """`<number><unit>` reads as number x unit bytes (rounded down), whatever the unit's case and
    the blanks around it, and `fits:` picks exactly the devices holding that many bytes."""
    text = f"{pad}{whole}{fraction}{pad}{case(unit)}{pad}"
    meant = (whole * 1000 + int(fraction[1:].ljust(3, "0") or 0)) * UNIT_BYTES[unit] // 1000
    assert parse_size(text, what="fits:") == meant
    assert outcome([f"fits:{text}"]) == (fitting(meant) or None)


@pytest.mark.parametrize("device", DEVICES, ids=lambda d: f"{d.library}-{d.id}")
def test_a_size_equal_to_the_free_memory_after_the_reserve_fits(device: DeviceInfo) -> None:
    """`fits:` holds when free memory minus the reserve equals the size; one KiB more does not."""
    usable_kib = (device.free_memory - RESERVE) // 1024
    assert device in pick([f"fits:{usable_kib}KiB"])
    assert device not in (outcome([f"fits:{usable_kib + 1}KiB"]) or [])


def test_a_huge_rank_is_out_of_range() -> None:
    """A 999-digit rank position is a SelectionError saying it is out of range."""
    with pytest.raises(SelectionError, match=r"is out of range \(0\.\.3\)"):
        pick(["9" * 999])


def test_a_huge_library_index_lists_the_library() -> None:
    """A 990-digit library index is a SelectionError listing the library's devices."""
    with pytest.raises(SelectionError, match="has 1 device"):
        pick(["cuda:" + "9" * 990])


def test_a_5000_digit_rank_is_refused_as_too_long() -> None:
    """Past int()'s 4300-digit limit the length cap answers first, with SelectionError."""
    with pytest.raises(SelectionError, match="too long"):
        pick(["9" * 5000])


def test_leading_zeros_do_not_change_a_rank() -> None:
    """`0001` is rank 1."""
    assert pick(["0" * 500 + "1"]) == [DEVICES[1]]


@pytest.mark.parametrize(
    "selector", ["²", "cuda:²", "٣", "vulkan:٣", "fits:²GiB", "fits:1\u212aiB", "fits:1k\u0131b"]
)
def test_non_ascii_digits_and_letters_are_not_numbers_or_units(selector: str) -> None:
    """Unicode digits and look-alike letters make an unknown selector, not a crash."""
    with pytest.raises(SelectionError):
        pick([selector])


def test_a_selector_longer_than_the_limit_is_refused_truncated() -> None:
    """An absurdly long selector is refused with its start, its length and the limit."""
    with pytest.raises(SelectionError, match=r"\(1001 characters\) is too long") as info:
        pick(["x" * (MAX_SELECTOR + 1)])
    assert len(str(info.value)) < 200


@pytest.mark.parametrize(
    "selectors", [None, 5, 2**70, b"best", bytearray(b"all"), [None], [5], [b"best"], ["best", 1.5], object()]
)
def test_non_str_selectors_are_a_selection_error(selectors: Any) -> None:
    """Anything but str or an iterable of str is refused with SelectionError."""
    with pytest.raises(SelectionError, match="must be a str"):
        pick(selectors)


@pytest.mark.parametrize("selector", [None, 5, b"best"])
def test_match_one_refuses_a_non_str_selector(selector: Any) -> None:
    """match_one, public on its own, refuses non-str input the same way."""
    with pytest.raises(SelectionError, match="must be a str"):
        match_one(selector, DEVICES, Reserve())


def test_library_order_copes_with_unicode_and_huge_digit_filter_ids() -> None:
    """Filter ids like `²` or 5,000 digits sort without int(): digits by value, others first."""
    devices = [
        DeviceInfo(id=str(i), library="Vulkan", filter_id=f)
        for i, f in enumerate(["9" * 5000, "10", "²", "9", "010"])
    ]
    assert library_order(devices, "vulkan") == [2, 3, 4, 1, 0]
