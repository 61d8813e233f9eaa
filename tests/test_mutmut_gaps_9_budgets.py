"""Rules of budgets (gpuscout._discovery.budgets) found by the ninth mutmut round's survivors
(tests/MUTATION.md, "Ninth mutmut round"). Each test states one rule; the mutants it kills are
named in its docstring's last line.
"""

from __future__ import annotations

import pytest

from gpuscout import DeviceInfo
from gpuscout._discovery.budgets import MAX_ENTRIES, BudgetError, Budgets, Entry, budget_notes, prefer_from
from gpuscout.sizes import GIB


def _refusal(call: object) -> str:
    with pytest.raises(BudgetError) as caught:
        call()  # type: ignore[operator]
    return str(caught.value)


def test_a_prefer_item_that_is_not_a_str_is_refused_naming_its_place_and_type() -> None:
    """Each item of a prefer list must be a selector string; another type is refused, naming
    its place in the list and its type.
    Kills gpuscout._discovery.budgets.x__prefer_items__mutmut_5 (the type of None)."""
    assert (
        _refusal(lambda: prefer_from(["cuda:0", 7], "prefer"))
        == "prefer[1]: a selector must be a str, got int"
    )


def test_a_prefer_list_may_hold_max_entries_selectors_and_no_more() -> None:
    """A prefer list of exactly MAX_ENTRIES selectors is accepted ("at most"), commas inside an
    item counted; one more is refused, saying how many and the limit.
    Kills gpuscout._discovery.budgets.x__prefer_items__mutmut_10 (``>=``) and _11 (no message)."""
    full = [f"cuda:{i}" for i in range(MAX_ENTRIES - 2)] + ["rocm:0,rocm:1"]
    assert len(prefer_from(full, "prefer")) == MAX_ENTRIES
    over = [*full, "vulkan:0"]
    assert _refusal(lambda: prefer_from(over, "prefer")) == (
        f"prefer: {MAX_ENTRIES + 1} selectors, at most {MAX_ENTRIES} allowed"
    )


# Runtime numbering against PCI order: CUDA counts GPU-a as device 0, while GPU-b sits on the
# lower PCI address (what a list without numbering falls back to).
GPU_A = DeviceInfo(
    id="GPU-a", library="CUDA", total_memory=24 * GIB, free_memory=20 * GIB, pci_id="0000:02:00.0"
)
GPU_B = DeviceInfo(
    id="GPU-b", library="CUDA", total_memory=24 * GIB, free_memory=20 * GIB, pci_id="0000:01:00.0"
)
NUMBERING = {GPU_A.device_id: 0, GPU_B.device_id: 1}


def test_a_library_index_budget_names_the_runtimes_device_number() -> None:
    """``cuda:0=1GiB`` caps the device CUDA calls 0 (the discovery's numbering), not the first
    in PCI order.
    Kills gpuscout._discovery.budgets.xǁBudgetsǁapply__mutmut_8, _12 (the numbering not passed
    on) and x__match__mutmut_10, _14."""
    devices, outcome = Budgets(cap=(Entry("cuda:0", GIB, "cuda:0=1GiB"),)).apply([GPU_A, GPU_B], NUMBERING)
    assert [d.usable_memory for d in devices] == [GIB, None]
    assert set(outcome.applied) == {GPU_A.device_id}


def test_a_budget_every_device_holds_alike_is_said_once_for_all_of_them() -> None:
    """budget_notes says a budget note that three or more devices (all of them) hold alike once,
    as ``each of the N devices: ...``.
    Kills gpuscout._discovery.budgets.x_budget_notes__mutmut_6 (``every`` not given)."""
    gpus = [
        DeviceInfo(id=f"GPU-{i}", library="CUDA", total_memory=24 * GIB, free_memory=20 * GIB)
        for i in range(3)
    ]
    devices, _ = Budgets(cap=(Entry("all", GIB, "all=1GiB"),)).apply(gpus)
    assert budget_notes(devices) == [
        "each of the 3 devices: budget: cap all=1GiB: usable 1.0 GiB of 24.0 GiB"
    ]
