"""Rules no test stated (issue 35), part two: the runner's idle clock, and fixed examples for two
rules that only a property test found, and only sometimes (the first place of a device named
twice by ``prefer``; partitions of one card in the merge's groups)."""

from __future__ import annotations

import http.client
import threading

from gpuscout import DeviceInfo
from gpuscout._discovery.budgets import Budgets
from gpuscout._discovery.merge import merge
from gpuscout._discovery.ranking import rank
from gpuscout.runner import serve
from gpuscout.sizes import GIB

# -- the runner: the idle timeout counts time without a connection -----------------------------

IDLE = 0.3


def test_the_runner_never_leaves_for_idleness_while_a_request_is_being_answered() -> None:
    """idle_exit counts seconds without a connection: a discovery that takes many times as long
    keeps the runner serving until it answers, and the host gets its reply; once the connection
    is closed the clock runs and the runner stops by itself."""
    port: list[int] = []
    announced = threading.Event()
    alive_after_wait: list[bool] = []

    def announce(n: int) -> None:
        port.append(n)
        announced.set()

    runners: list[threading.Thread] = []
    runner = threading.Thread(
        target=serve,
        args=(lambda: slow_discovery(runners[0], alive_after_wait), 0, IDLE),
        kwargs={"announce": announce},
        daemon=True,
    )
    runners.append(runner)
    runner.start()
    assert announced.wait(30)
    conn = http.client.HTTPConnection("127.0.0.1", port[0], timeout=60)
    try:
        conn.request("GET", "/info")
        reply = conn.getresponse()
        body = reply.read()
    finally:
        conn.close()
    assert alive_after_wait == [True]
    assert reply.status == 200 and b'"id":"GPU-1"' in body.replace(b" ", b"")
    runner.join(60)
    assert not runner.is_alive()


def slow_discovery(runner: threading.Thread, alive: list[bool]) -> list[DeviceInfo]:
    """A discovery that outlasts the idle timeout ten times, noting whether the runner is still
    serving at its end (``join`` returns early only if the runner has stopped)."""
    runner.join(10 * IDLE)
    alive.append(runner.is_alive())
    return [DeviceInfo(id="GPU-1", library="CUDA", total_memory=GIB)]


# -- prefer: a device named twice keeps its first position ---------------------------------------


def _card(n: int, free_gib: int) -> DeviceInfo:
    return DeviceInfo(
        id=f"GPU-{n}",
        library="CUDA",
        pci_id=f"0000:0{n + 1}:00.0",
        total_memory=80 * GIB,
        free_memory=free_gib * GIB,
    )


def test_a_device_that_prefer_names_twice_ranks_at_its_first_position() -> None:
    """prefer cuda:2,cuda:0,cuda:2: cuda:2 is placed by its first selector (position 0), not its
    last (2), so the order is cuda:2, cuda:0, then cuda:1 though it has the most free memory."""
    devices = [_card(0, 10), _card(1, 70), _card(2, 20)]
    kept, outcome = Budgets(prefer=("cuda:2", "cuda:0", "cuda:2")).apply(devices)
    assert dict(outcome.preference) == {devices[2].device_id: 0, devices[0].device_id: 1}
    assert [d.id for d in rank(kept, outcome.preference)] == ["GPU-2", "GPU-0", "GPU-1"]


def test_a_device_matched_by_a_later_broader_selector_keeps_its_earlier_place() -> None:
    """prefer cuda:1,all: cuda:1 first (position 0), every other device at position 1 in the
    usual order, most free memory first."""
    devices = [_card(0, 10), _card(1, 5), _card(2, 20)]
    kept, outcome = Budgets(prefer=("cuda:1", "all")).apply(devices)
    assert [d.id for d in rank(kept, outcome.preference)] == ["GPU-1", "GPU-2", "GPU-0"]


# -- merge: partitions of one card on one PCI address stay separate devices ---------------------


PCI = "0000:2a:00.0"
MIG_A = DeviceInfo(id="MIG-a", library="CUDA", pci_id=PCI, total_memory=20 * GIB)
MIG_B = DeviceInfo(id="MIG-b", library="CUDA", pci_id=PCI, total_memory=10 * GIB)
VK = DeviceInfo(id="0", library="Vulkan", pci_id=PCI, total_memory=40 * GIB)


def _cuda_first(a: DeviceInfo, b: DeviceInfo) -> bool:
    return a.library == "CUDA"


def test_two_partitions_of_one_card_from_one_plugin_stay_two_devices() -> None:
    """Two MIG instances that share their card's PCI address are two devices, in either order,
    with a PCI address in upper case on one of them too."""
    assert merge([("cuda", MIG_A), ("cuda", MIG_B)], None, _cuda_first) == ([MIG_A, MIG_B], [])
    assert merge([("cuda", MIG_B), ("cuda", MIG_A)], None, _cuda_first) == ([MIG_B, MIG_A], [])
    upper = MIG_B.evolve(pci_id=PCI.upper())
    assert merge([("cuda", MIG_A), ("cuda", upper)], None, _cuda_first) == ([MIG_A, upper], [])


def test_partitions_stay_two_when_the_cards_other_view_came_first_and_was_replaced() -> None:
    """The card's Vulkan view first, then both partitions: the first partition replaces the view
    (CUDA is preferred), the second is still a device of its own, not that survivor's duplicate."""
    kept, dropped = merge([("vulkan", VK), ("cuda", MIG_A), ("cuda", MIG_B)], None, _cuda_first)
    assert kept == [MIG_A, MIG_B]
    assert [(d.device.id, d.reason, d.duplicate_of) for d in dropped] == [("0", "duplicate", MIG_A.device_id)]


def test_partitions_stay_two_around_the_cards_other_view() -> None:
    """A partition, the card's Vulkan view, the other partition: the view is the first
    partition's duplicate and the second partition is kept."""
    kept, dropped = merge([("cuda", MIG_A), ("vulkan", VK), ("cuda", MIG_B)], None, _cuda_first)
    assert kept == [MIG_A, MIG_B]
    assert [d.device.id for d in dropped] == ["0"]


def test_the_same_partition_reported_twice_by_one_plugin_is_one_device() -> None:
    """The other side of the group rule: one id on one PCI address from one plugin twice is one
    device (SAME_BACKEND), the second listing dropped as its duplicate."""
    kept, dropped = merge([("cuda", MIG_A), ("cuda", MIG_B), ("cuda", MIG_A)], None, _cuda_first)
    assert kept == [MIG_A, MIG_B]
    assert [(d.device.id, d.duplicate_of) for d in dropped] == [("MIG-a", MIG_A.device_id)]


def _variant(partition: str, variant: str) -> DeviceInfo:
    return MIG_A.evolve(id=partition, library_path=(f"/usr/lib/ollama/{variant}",))


def test_partitions_of_two_library_variants_stay_two_devices_of_the_newer_variant() -> None:
    """The cuda_v12 and cuda_v13 plugins each report two partitions of one card: each partition
    of the newer variant meets the first survivor of the other plugin's group on that PCI
    address (never one of its own plugin's partitions) and replaces it, so the card stays two
    devices, both cuda_v13's, as the seed's fold has it."""
    found = [
        ("cuda", _variant("MIG-a", "cuda_v12")),
        ("cuda", _variant("MIG-b", "cuda_v12")),
        ("cuda13", _variant("MIG-a", "cuda_v13")),
        ("cuda13", _variant("MIG-c", "cuda_v13")),
    ]
    kept, dropped = merge(found, None, _cuda_first)
    assert kept == [found[2][1], found[3][1]]
    assert [(d.device, d.duplicate_of) for d in dropped] == [
        (found[0][1], found[2][1].device_id),
        (found[1][1], found[3][1].device_id),
    ]
