"""``LIBRARY:INDEX`` is the runtime's own number (issue 34 item 1), the shortest selecting id
prefixes the terminal table shows (item 2), and the "did you mean" a selector written another
way gets from the devices there are (item 11)."""

from __future__ import annotations

from typing import Any

import pytest

from gpuscout import DeviceInfo, hookimpl
from gpuscout._discovery.budgets import Budgets, parse_entries
from gpuscout._selection.numbering import (
    did_you_mean_device,
    library_numbers,
    runtime_numbering,
    selector_names,
)
from gpuscout._selection.selectors import SelectionError, match_one, select_devices, shortest_ids
from gpuscout.sizes import GIB
from gpuscout.testing import scout_of


def card(uuid: str, pci: str, free: int = 8, **fields: Any) -> DeviceInfo:
    return DeviceInfo(
        id=uuid,
        library="CUDA",
        uuid=uuid,
        filter_id=uuid,
        pci_id=pci,
        total_memory=24 * GIB,
        free_memory=free * GIB,
        **fields,
    )


# CUDA's own order (FASTEST_FIRST): the card at bus 02 first, the one at bus 01 second.
FAST = card("GPU-1a2b3c4d-0000-4000-8000-000000000001", "0000:02:00.0", free=20)
SLOW = card("GPU-0b1c2d3e-0000-4000-8000-000000000002", "0000:01:00.0", free=22)


class Enumerating:
    """A plugin answering ``devices`` in the order given (its runtime's order)."""

    def __init__(self, *devices: DeviceInfo) -> None:
        self.devices = list(devices)

    @hookimpl
    def gpuscout_enumerate(self, context: Any) -> list[DeviceInfo]:
        return list(self.devices)


def test_the_nth_device_a_plugin_reports_is_its_library_number_n() -> None:
    """Numbers count each library's devices in the plugin's answer, case ignored."""
    vulkan = DeviceInfo(id="0", library="Vulkan", total_memory=GIB)
    numbers = runtime_numbering([("a", FAST), ("b", vulkan), ("a", SLOW.evolve(library="cuda"))])
    assert numbers == {FAST.device_id: 0, vulkan.device_id: 0, SLOW.evolve(library="cuda").device_id: 1}


def test_a_hidden_device_gets_no_number_and_takes_none_from_the_others() -> None:
    """A device hidden by a visibility variable is not enumerated by the runtime: no number."""
    hidden = FAST.evolve(hidden_by="CUDA_VISIBLE_DEVICES=1")
    assert runtime_numbering([("cuda", hidden), ("cuda", SLOW)]) == {SLOW.device_id: 0}


def test_cuda_0_is_the_first_device_cuda_enumerates_not_the_first_by_pci() -> None:
    """Through a Scout, ``cuda:0`` is the device the plugin reported first (bus 02), though
    bus 01 comes first in PCI order and ranks first."""
    scout = scout_of(("nv", Enumerating(FAST, SLOW)))
    assert scout.discover().devices[0] == SLOW
    assert scout.select(["cuda:0"]) == [FAST]
    assert scout.select(["cuda:1"]) == [SLOW]


def test_a_reserve_on_cuda_0_holds_back_the_first_device_cuda_enumerates() -> None:
    """``--reserve cuda:0=2GiB`` lands where ``env cuda:0`` does (issue 34: it hit rank 1)."""
    scout = scout_of(("nv", Enumerating(FAST, SLOW)), reserve={"cuda:0": 2 * GIB})
    budgeted = {d.id: d.usable_memory for d in scout.discover().devices}
    assert budgeted == {FAST.id: 22 * GIB, SLOW.id: None}


def test_a_budget_applied_without_a_numbering_counts_in_pci_order() -> None:
    """Devices handed to the budgets without a discovery's numbering keep the PCI order."""
    budgeted, _ = Budgets(reserve=parse_entries("cuda:0=2GiB", "--reserve")).apply([FAST, SLOW])
    assert [d.usable_memory for d in budgeted] == [None, 22 * GIB]


def test_devices_without_a_numbering_count_in_pci_order() -> None:
    """``select_devices`` without a numbering (a list built by hand) falls back to PCI order."""
    assert select_devices(Budgets(), [FAST, SLOW], ["cuda:0"]) == [SLOW]  # type: ignore[arg-type]


def test_a_numbering_missing_one_device_of_the_library_falls_back_to_pci_order() -> None:
    """A partial numbering cannot be trusted for that library: PCI order for all of it."""
    assert library_numbers([FAST, SLOW], "cuda", {FAST.device_id: 0}) == [(0, 1), (1, 0)]


def test_a_number_no_listed_device_has_selects_nothing_and_lists_the_numbers() -> None:
    """``vulkan:0`` where the runtime's device 0 was dropped (a CUDA card's twin) matches
    nothing, and the message lists the numbers there are."""
    soft = DeviceInfo(id="2", library="Vulkan", software=True, total_memory=GIB)
    from gpuscout._selection.selectors import NoMatchError

    with pytest.raises(NoMatchError, match=r"vulkan:2 -> 0=Vulkan"):
        match_one("vulkan:0", [soft], Budgets(), {soft.device_id: 2})  # type: ignore[arg-type]
    assert match_one("vulkan:2", [soft], Budgets(), {soft.device_id: 2}) == [0]  # type: ignore[arg-type]


def test_each_device_answers_to_its_library_and_number() -> None:
    """``selector_names`` writes ``cuda:N`` in the devices' order; a library name that no
    selector can spell answers to the device id."""
    odd = DeviceInfo(id="x-1", library="Level Zero", total_memory=GIB)
    numbering = {FAST.device_id: 0, SLOW.device_id: 1, odd.device_id: 0}
    assert selector_names([SLOW, FAST, odd], numbering) == ["cuda:1", "cuda:0", "x-1"]


def test_the_shortest_id_keeps_four_characters_after_the_word_prefix() -> None:
    """``GPU-1a2b`` and ``GPU-0b1c``: four hex digits after ``GPU-``, enough when unique."""
    assert shortest_ids([FAST, SLOW]) == ["GPU-1a2b", "GPU-0b1c"]


def test_the_shortest_id_grows_until_it_selects_one_device() -> None:
    """Two UUIDs sharing 9 characters after ``GPU-`` get prefixes that tell them apart, and
    each prefix selects its own device."""
    a = card("GPU-aaaabbbb-c1aa-4000-8000-000000000001", "0000:01:00.0")
    b = card("GPU-aaaabbbb-c2aa-4000-8000-000000000002", "0000:02:00.0")
    short = shortest_ids([a, b])
    assert short == ["GPU-aaaabbbb-c1", "GPU-aaaabbbb-c2"]
    assert [match_one(s, [a, b], Budgets()) for s in short] == [[0], [1]]  # type: ignore[arg-type]


def test_a_prefix_that_reads_as_a_rank_is_never_shown() -> None:
    """An id of digits and dashes (``12345678-...``) is not cut to ``1234``, which selects
    rank 1234; it grows until the identity selector takes it."""
    d = DeviceInfo(id="12345678-aaaa-bbbb", library="Acme", total_memory=GIB)
    [short] = shortest_ids([d])
    assert not short.isdigit() and match_one(short, [d], Budgets()) == [0]  # type: ignore[arg-type]


def test_a_short_id_is_shown_whole() -> None:
    """Ids of up to 12 characters are never cut (``0``, ``GPU-4b2e6c1a``)."""
    d = DeviceInfo(id="GPU-4b2e6c1a", library="ROCm", total_memory=GIB)
    assert shortest_ids([d, DeviceInfo(id="0", library="Vulkan")]) == ["GPU-4b2e6c1a", "0"]


@pytest.mark.parametrize(
    ("written", "meant"),
    [
        ("cuda1", "cuda:1"),
        ("CUDA0", "cuda:0"),
        ("cuda-1", "cuda:1"),
        ("cdua:1", "cuda:1"),
        ("cuda", "library=cuda"),
    ],
)
def test_a_device_written_another_way_gets_its_selector(written: str, meant: str) -> None:
    """``cuda1``, llama.cpp's ``CUDA0``, ``cdua:1``, a bare library: did you mean the selector."""
    numbering = {FAST.device_id: 0, SLOW.device_id: 1}
    assert did_you_mean_device(written, [FAST, SLOW], numbering) == f"; did you mean {meant!r}?"


def test_no_suggestion_names_a_device_that_is_not_there() -> None:
    """``cuda7`` on a two-device machine, or an unrelated word, suggests nothing."""
    for written in ("cuda7", "nope", "rocm0"):
        assert did_you_mean_device(written, [FAST, SLOW]) == ""


def test_the_selector_error_for_cuda1_says_did_you_mean_cuda_1() -> None:
    """``env cuda1`` on a two-CUDA machine: the refusal names ``cuda:1``."""
    with pytest.raises(SelectionError, match=r"did you mean 'cuda:1'\?"):
        match_one("cuda1", [SLOW, FAST], Budgets(), {FAST.device_id: 0, SLOW.device_id: 1})  # type: ignore[arg-type]
