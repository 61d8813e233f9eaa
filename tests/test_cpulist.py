"""The kernel's CPU list form (lib/vsprintf.c bitmap_list_string): read exactly, written back
the same, any other text refused without an error."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gpuscout._records.cpulist import MAX_CPU, MAX_CPULIST, cpulist, cpulist_ranges, cpus, is_cpulist

cpu_sets = st.sets(st.integers(0, 4095), max_size=200)


@given(cpu_sets)
def test_any_cpu_set_printed_as_the_kernel_does_reads_back(numbers: set[int]) -> None:
    """cpulist() prints the kernel's form, and cpus() reads that same set back."""
    text = cpulist(numbers)
    assert is_cpulist(text) and cpus(text) == frozenset(numbers)
    assert cpulist(cpus(text) or set()) == text


@given(st.text(max_size=80))
def test_any_text_is_read_or_refused_never_an_error(text: str) -> None:
    """Whatever a file holds, the answer is ranges or None."""
    ranges = cpulist_ranges(text)
    assert ranges is None or all(0 <= low <= high < MAX_CPU for low, high in ranges)


def test_the_forms_the_kernel_prints() -> None:
    """Ranges and single CPUs, and the empty mask (just a newline)."""
    assert cpulist_ranges("0-3,8-11\n") == [(0, 3), (8, 11)]
    assert cpulist_ranges("5\n") == [(5, 5)] and cpulist_ranges("\n") == []
    assert cpulist([0, 1, 2, 3, 8, 9, 10, 11]) == "0-3,8-11" and cpulist([]) == ""


def test_a_list_longer_than_the_limit_or_a_cpu_past_it_is_refused() -> None:
    """Bounds: a text over MAX_CPULIST characters, a CPU number of MAX_CPU or more."""
    assert cpulist_ranges(",".join(["0"] * MAX_CPULIST)) is None
    assert cpulist_ranges(str(MAX_CPU)) is None and cpulist_ranges(str(MAX_CPU - 1)) == [(MAX_CPU - 1,) * 2]


def test_cpus_a_gap_apart_are_written_apart_never_as_a_range() -> None:
    """Only consecutive CPUs make a range: every other CPU (a node's CPUs on machines that
    number SMT siblings alternately) prints as ``0,2,4``, and ``0-1,3`` keeps its gap at 2."""
    assert cpulist([0, 2, 4]) == "0,2,4" and cpus("0,2,4") == frozenset({0, 2, 4})
    assert cpulist([0, 1, 3]) == "0-1,3" and cpulist([5, 6, 7, 9, 10]) == "5-7,9-10"
