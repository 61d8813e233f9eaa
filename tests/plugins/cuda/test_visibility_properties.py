"""CUDA_VISIBLE_DEVICES given arbitrary text: never an exception, only UUIDs of the given GPUs,
each at most once, and indices read as strtoul reads them whatever their length."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gpuscout.plugins.cuda.visibility import GpuSlot, MigSlot, parse_index, visible_uuids

G0 = "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6"
G1 = "GPU-8932aa01-5b3c-4e2d-8f1a-9c7b6d5e4f30"
G3 = "GPU-9d4e6b2a-5c8f-4a1d-b3e7-6f2a8c1d4e95"
M0 = "MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f"
M1 = "MIG-2a7b9e4d-8c13-5f6e-a0d2-7e4b1c9f3a58"
GPUS = [GpuSlot(G0), GpuSlot(G1), GpuSlot(G3, mig_enabled=True, mig=(MigSlot(M0, 1, 0), MigSlot(M1, 5, 0)))]
UNITS = {G0, G1, M0, M1}
ULONG_MAX = 2**64 - 1

# Pieces that reach every branch: indices, signs, blanks, UUID and MIG prefixes, legacy MIG
# names, numbers past 64 bits and past int()'s 4300 digits, and digits that are not ASCII.
PIECES = st.sampled_from(
    [
        "0",
        "1",
        "2",
        "3",
        "-",
        "+",
        ",",
        " ",
        "\t",
        "\n",
        "\u00a0",
        "\0",
        "²",
        "٣",
        "\uff11",
        "-0",
        "GPU-",
        "GPU-8932",
        "GPU-8932f",
        "MIG-",
        "MIG-c6",
        "MIG-GPU-9d4e/1/0",
        "MIG-GPU-9d4e/5/0",
        "/",
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
def test_any_value_selects_given_units_at_most_once(value: str) -> None:
    """Any text gives distinct UUIDs of the given GPUs and MIG instances, never an exception."""
    chosen = visible_uuids(value, GPUS)
    assert set(chosen) <= UNITS and len(chosen) == len(set(chosen))


@settings(max_examples=300)
@given(entry=VALUES)
def test_any_entry_reads_as_no_index_or_an_unsigned_long(entry: str) -> None:
    """parse_index never raises and stays within unsigned long."""
    number = parse_index(entry)
    assert number is None or 0 <= number <= ULONG_MAX


@given(digits=st.integers(21, 6000), sign=st.sampled_from(["", "+", "-"]))
def test_numbers_past_unsigned_long_read_as_ulong_max(digits: int, sign: str) -> None:
    """strtoul answers ULONG_MAX on overflow, with or without a sign, at any length."""
    assert parse_index(sign + "9" * digits) == ULONG_MAX


@given(number=st.integers(0, ULONG_MAX), zeros=st.integers(0, 5000))
def test_leading_zeros_do_not_change_an_index(number: int, zeros: int) -> None:
    """Any number of leading zeros leaves the index as it is."""
    assert parse_index("0" * zeros + str(number)) == number


@given(entry=st.sampled_from(["²", "٣", "\uff11", "\u00a01", "\u20031"]))
def test_non_ascii_digits_and_blanks_are_not_an_index(entry: str) -> None:
    """strtoul in the C locale reads only ASCII digits after ASCII blanks."""
    assert parse_index(entry) is None
