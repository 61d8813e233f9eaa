"""The one size grammar (gpuscout.sizes.parse_size): what it reads, what it refuses and how it
says so, and the sizes gpuscout writes read back as the bytes they stand for."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuscout.errors import GpuscoutError
from gpuscout.sizes import (
    GIB,
    MAX_SIZE,
    MIB,
    UNIT_BYTES,
    SizeError,
    human_bytes,
    parse_size,
    plural,
    size_text,
    sizes_apart,
    word_for,
)


def read(text: Any) -> int:
    return parse_size(text, what="test")


def reason(text: Any) -> str:
    """What parse_size says is wrong with ``text``."""
    with pytest.raises(SizeError) as caught:
        read(text)
    return caught.value.reason


@settings(max_examples=500)
@given(size=st.integers(0, MAX_SIZE))
def test_a_size_as_gpuscout_writes_it_reads_back_exactly(size: int) -> None:
    """size_text (``20GiB``, ``123B``: what budgets echo) reads back to the same bytes."""
    assert read(size_text(size)) == size


@settings(max_examples=500)
@given(size=st.integers(0, 1000 << 40))
def test_a_size_as_tables_show_it_reads_back_within_its_rounding(size: int) -> None:
    """human_bytes (``12.3 GiB``, what list and fit print) reads back to within the half tenth
    of a unit it was rounded to: what gpuscout prints, gpuscout reads."""
    shown = human_bytes(size)
    unit = UNIT_BYTES[shown.split()[1].lower()]
    assert abs(read(shown) - size) <= unit // 20 + 1


@settings(max_examples=300)
@given(
    whole=st.integers(0, 10**6),
    digits=st.text("0123456789", max_size=60),
    unit=st.sampled_from(sorted(UNIT_BYTES)),
    case=st.sampled_from([str, str.lower, str.upper, str.swapcase]),
    blanks=st.sampled_from(["", " ", "\t", "  ", "\n"]),
)
def test_a_number_and_a_unit_read_as_their_product_rounded_down(
    whole: int, digits: str, unit: str, case: Any, blanks: str
) -> None:
    """``<number><unit>``, in any case, with whitespace around and between, is the exact product
    rounded down to whole bytes, however many fraction digits it has."""
    number = f"{whole}.{digits}" if digits else str(whole)
    exact = Fraction(number) * UNIT_BYTES[unit]
    assert read(f"{blanks}{number}{blanks}{case(unit)}{blanks}") == math.floor(exact)


@settings(max_examples=500)
@given(text=st.text(max_size=40) | st.from_regex(r"-?[0-9]{1,25}(\.[0-9]{0,30})?[ \t]*[a-zA-Z]{0,4}"))
def test_any_text_is_bytes_in_range_or_a_one_line_size_error(text: str) -> None:
    """Whatever the text, parse_size gives bytes in 0..2**63-1 or a SizeError of one line."""
    try:
        size = read(text)
    except SizeError as exc:
        assert "\n" not in str(exc) and "\r" not in str(exc)
        return
    assert 0 <= size <= MAX_SIZE


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("24GiB", 24 * GIB),
        ("1KiB", 1024),
        ("3MiB", 3 * MIB),
        ("2TiB", 2 << 40),
        ("1KB", 1000),
        ("5MB", 5 * 10**6),
        ("2GB", 2 * 10**9),
        ("1TB", 10**12),
        ("1.5GiB", 3 * GIB // 2),
        ("0MiB", 0),
        ("16 gib", 16 * GIB),
        (" 1\n GiB\t", GIB),
        ("4096B", 4096),
        ("4096b", 4096),
        ("1.5B", 1),
        ("0." + "9" * 30 + "GiB", GIB - 1),
        ("1." + "9" * 500 + "KiB", 2047),
        ("0" * 500 + "1GiB", GIB),
        (f"{MAX_SIZE}B", MAX_SIZE),
    ],
)
def test_these_sizes_read_as_these_bytes(text: str, size: int) -> None:
    """Binary and decimal units, B, whitespace around and between, fractions (rounded down),
    leading zeros, and 2**63-1 bytes."""
    assert read(text) == size


def test_a_bare_number_is_refused_with_the_spellings_it_could_mean() -> None:
    """``24`` could be bytes, MiB or GiB: the error shows each spelling."""
    assert reason("24") == "'24': a size needs a unit, e.g. 24GiB or 24MiB; bytes are 24B"


def test_a_bare_fraction_is_refused_without_a_bytes_spelling() -> None:
    """``1.5`` is no whole number of bytes, so only the units are offered."""
    assert reason("1.5") == "'1.5': a size needs a unit, e.g. 1.5GiB or 1.5MiB"


@pytest.mark.parametrize("text", ["-1GiB", "-0B", " -24 MiB", "-1"])
def test_a_negative_size_is_refused_as_negative(text: str) -> None:
    """A minus sign is a negative size, whatever follows."""
    assert reason(text) == f"{text!r}: a size cannot be negative"


@pytest.mark.parametrize(
    "text", [f"{MAX_SIZE + 1}B", "8388608TiB", "9" * 30 + "TiB", "9" * 900 + "GiB", "9223372036854775.808KB"]
)
def test_a_size_over_2_63_bytes_is_refused_as_too_large(text: str) -> None:
    """2**63 bytes and beyond, in any unit, are too large (never an OverflowError)."""
    assert reason(text).endswith(": larger than the largest size, 2**63-1 bytes (8 EiB)")


@pytest.mark.parametrize(
    "text",
    [
        "nan",
        "inf",
        "NaNGiB",
        "infGiB",
        "1e9GiB",
        "1e400",
        "0x10GiB",
        "1_000GiB",
        "+1GiB",
        ".5GiB",
        "1.GiB",
        "1,5GiB",
        "GiB",
        "",
        "2 4GiB",
        "1. 5GiB",
        "24 G iB",
        "24\x00GiB",
        "24\u00a0GiB",
        "'2GiB'",
        '"2GiB"',
        "$(reboot)",
        "`reboot`GiB",
        "2GiB;reboot",
        "\uff12GiB",
        "\u0662GiB",
        "1\u212aiB",
        "1k\u0131b",
    ],
)
def test_what_is_no_number_and_unit_is_refused_naming_the_units(text: str) -> None:
    """Exponents, NaN, hex, underscores, signs, whitespace inside the number or the unit, NUL,
    non-ASCII spaces, digits and letters, quotes and shell syntax are not sizes."""
    assert reason(text) == (
        f"{text!a}: not a size; expected a number and a unit, B, KiB, MiB, GiB, TiB "
        "(powers of 1024) or KB, MB, GB, TB (powers of 1000), e.g. 24GiB"
    )


@pytest.mark.parametrize(
    ("text", "unit"), [("24 PiB", "PiB"), ("17EiB", "EiB"), ("24GiBs", "GiBs"), ("1k", "k")]
)
def test_an_unknown_unit_is_refused_by_name(text: str, unit: str) -> None:
    """A number with letters that are no unit names the letters and the units there are."""
    assert reason(text).startswith(f"{text!r}: unknown unit {unit!r}; expected B, KiB, MiB, GiB, TiB")


def test_a_look_alike_letter_is_shown_escaped() -> None:
    """A Kelvin sign is shown as ``\\u212a``, so the message does not read ``'1KiB'``."""
    assert reason("1\u212aiB").startswith("'1\\u212aiB': not a size")


def test_a_text_over_1000_characters_is_refused_cut_short() -> None:
    """An absurdly long text is refused with its start and its length, not echoed whole."""
    said = reason("1" * 1001 + "GiB")
    assert said.endswith("... (1004 characters): too long for a size (at most 1000 characters)")
    assert len(said) < 200


@pytest.mark.parametrize("value", [24, 1.5, None, b"24GiB"])
def test_a_size_that_is_no_str_is_refused_by_type(value: Any) -> None:
    """An int, float, None or bytes is no size text."""
    assert reason(value) == f"a size must be a str, got {type(value).__name__}"


def test_the_error_names_where_the_size_was_written() -> None:
    """SizeError says ``WHAT: REASON`` and is a GpuscoutError and a ValueError."""
    with pytest.raises(SizeError) as caught:
        parse_size("24", what="--cap entry 1 'all=24'")
    assert str(caught.value) == (
        "--cap entry 1 'all=24': '24': a size needs a unit, e.g. 24GiB or 24MiB; bytes are 24B"
    )
    assert isinstance(caught.value, GpuscoutError) and isinstance(caught.value, ValueError)


@pytest.mark.parametrize(
    ("count", "expected"), [(0, "0 blocks"), (1, "1 block"), (2, "2 blocks"), (-1, "-1 blocks")]
)
def test_a_count_takes_the_singular_only_for_one(count: int, expected: str) -> None:
    """plural says ``1 block`` and ``2 blocks``."""
    assert plural(count, "block") == expected


def test_an_irregular_plural_is_given() -> None:
    """word_for takes the plural when it is not the word and an s."""
    assert (word_for(1, "entry", "entries"), word_for(3, "entry", "entries")) == ("entry", "entries")


@pytest.mark.parametrize(
    ("size", "digits", "expected"),
    [(5 * GIB // 2, 2, "2.50 GiB"), (GIB + GIB // 1000, 3, "1.001 GiB"), (1023, 3, "1023 B")],
)
def test_a_size_is_written_to_the_decimals_asked(size: int, digits: int, expected: str) -> None:
    """human_bytes takes 1 to 3 decimals; under 1 KiB it is the exact count either way."""
    assert human_bytes(size, digits) == expected


@settings(max_examples=500)
@given(sizes=st.lists(st.integers(0, 1 << 50), min_size=2, max_size=4))
def test_sizes_that_differ_are_never_written_alike(sizes: list[int]) -> None:
    """sizes_apart writes two different sizes differently and two equal ones alike."""
    texts = sizes_apart(*sizes)
    pairs = list(zip(sizes, texts, strict=True))
    assert all((a == b) == (x == y) for a, x in pairs for b, y in pairs)


def test_sizes_apart_take_the_fewest_decimals_that_tell_them_apart() -> None:
    """A tenth apart: one decimal; a hundredth: two; a few bytes: the exact counts."""
    assert sizes_apart(24762777600, 24741150720) == ("23.1 GiB", "23.0 GiB")
    assert sizes_apart(GIB + 12 * MIB, GIB) == ("1.01 GiB", "1.00 GiB")
    assert sizes_apart(GIB + 10, GIB) == ("1073741834 B", "1073741824 B")
