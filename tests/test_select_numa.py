"""``numa=N``: the devices attached to one NUMA node, for selection, budgets and exec."""

from __future__ import annotations

import pytest

from gpuscout import DeviceInfo
from gpuscout._discovery.budgets import BudgetError, Budgets, parse_entries
from gpuscout._selection.selectors import GRAMMAR, NoMatchError, SelectionError, select_devices
from gpuscout.sizes import GIB


class NoReserve:
    def minimum_memory(self, device: DeviceInfo) -> int:
        return 0


def card(n: int, node: int) -> DeviceInfo:
    return DeviceInfo(
        id=f"GPU-{n}",
        library="CUDA",
        pci_id=f"0000:{n + 1:02x}:00.0",
        total_memory=80 * GIB,
        free_memory=80 * GIB,
        numa_node=node,
    )


# Ranked as discovery would hand them over: nodes interleaved, one card's node unknown.
RANKED = [card(0, 1), card(1, 0), card(2, 1), card(3, -1), card(4, 0)]


def ids(selectors: list[str], devices: list[DeviceInfo] = RANKED) -> list[str]:
    return [d.id for d in select_devices(NoReserve(), devices, selectors)]


def test_numa_n_picks_the_devices_on_that_node_in_rank_order() -> None:
    """numa=1 is every device whose numa_node is 1, ranked as before; numa=0 the others."""
    assert ids(["numa=1"]) == ["GPU-0", "GPU-2"]
    assert ids(["NUMA=0"]) == ["GPU-1", "GPU-4"]


def test_a_device_whose_node_is_unknown_is_on_no_node() -> None:
    """-1 (unknown) is not a node a selector can name; the card stays reachable by id."""
    with pytest.raises(SelectionError, match="numa= needs a node number"):
        ids(["numa=-1"])
    assert "GPU-3" not in ids(["numa=0", "numa=1"])


def test_numa_unions_with_other_selectors() -> None:
    """numa=0 with a library index is their union, in rank order, each device once."""
    assert ids(["cuda:0", "numa=0"]) == ["GPU-0", "GPU-1", "GPU-4"]


@pytest.mark.parametrize("text", ["numa=", "numa=x", "numa=1.5", "numa=$(reboot)", "numa=\uff11"])
def test_a_node_that_is_no_number_is_malformed(text: str) -> None:
    """numa= takes ASCII digits only; anything else is a SelectionError, not 'no match'."""
    with pytest.raises(SelectionError, match="numa= needs a node number") as caught:
        ids([text])
    assert not isinstance(caught.value, NoMatchError)


def test_a_node_without_devices_names_the_nodes_there_are() -> None:
    """No device on node 7: NoMatchError lists the nodes the devices are on."""
    with pytest.raises(NoMatchError, match=r"no device on NUMA node 7; devices are on nodes 0, 1"):
        ids(["numa=7"])


def test_devices_on_one_node_are_said_to_be_on_that_node() -> None:
    """Every device on node 0: the error says "node 0", not "nodes 0"."""
    with pytest.raises(NoMatchError, match=r"no device on NUMA node 7; devices are on node 0$"):
        ids(["numa=7"], [card(0, 0), card(1, 0)])


def test_without_known_nodes_the_error_says_so() -> None:
    """On a machine whose kernel gives no node, the error points at the topology docs."""
    with pytest.raises(NoMatchError, match=r"no device's NUMA node is known \(docs/topology.md\)"):
        ids(["numa=0"], [card(0, -1)])


def test_a_huge_node_number_matches_nothing_quietly() -> None:
    """A node number of 900 digits is out of range, not a crash."""
    with pytest.raises(NoMatchError, match="no device on NUMA node"):
        ids(["numa=" + "9" * 900])


def test_the_grammar_names_numa() -> None:
    """The grammar the errors print lists numa=N."""
    assert "numa=N" in GRAMMAR


def test_a_budget_can_cap_one_node() -> None:
    """cap numa=1=20GiB caps the node-1 cards only; the others keep their whole memory."""
    budgeted, _ = Budgets(cap=parse_entries("numa=1=20GiB", "--cap")).apply(RANKED)
    assert [d.usable_free for d in budgeted] == [20 * GIB, 80 * GIB, 20 * GIB, 80 * GIB, 80 * GIB]


def test_a_misspelled_numa_budget_gets_a_did_you_mean() -> None:
    """nmua=1 is answered with numa=1."""
    with pytest.raises(BudgetError, match="did you mean 'numa=1'"):
        parse_entries("nmua=1=1GiB", "--reserve")


def test_a_node_number_past_any_node_is_echoed_as_written() -> None:
    """numa=99999999999999999999 matches nothing, and the error names that node, not the
    stand-in the parser caps huge numbers to."""
    with pytest.raises(NoMatchError) as caught:
        ids(["numa=0099999999999999999999"])
    assert "no device on NUMA node 99999999999999999999; devices are on nodes 0, 1" in str(caught.value)
    assert "1000000000000000000" not in str(caught.value)
