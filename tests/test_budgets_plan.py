"""Budgets against the planner's properties (docs/budgets.md): a cap or reserve never raises what
is placed on its device nor lowers another device's room, over random machines and models."""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from gpuscout import DeviceInfo, GPULayersList, Scout, SystemInfo
from gpuscout._discovery.budgets import Budgets
from gpuscout._layout import plan as planner
from gpuscout._records.results import Entry
from gpuscout.sizes import GIB, MIB

MINIMUM = 457 * MIB
ROOMY = SystemInfo(total_memory=1 << 50, free_memory=1 << 50)


def reserve(_: DeviceInfo) -> int:
    return MINIMUM


def held(layout: GPULayersList, layers: list[int], device: DeviceInfo) -> int:
    """Bytes of ``layers`` that ``layout`` places on ``device``."""
    return sum(
        layers[i] for g in layout for i in g.layers if (g.id, g.library) == (device.id, device.library)
    )


# Cards of 1-64 GiB with 0-100 % free, some integrated, on their own PCI buses.
def cards_of(specs: list[tuple[int, int, bool]]) -> list[DeviceInfo]:
    """Cards of (total GiB, percent free, integrated), each on its own PCI bus."""
    return [
        DeviceInfo(
            id=f"GPU-{i}",
            library="CUDA",
            integrated=integrated,
            pci_id=f"0000:{i + 1:02x}:00.0",
            total_memory=total * GIB,
            free_memory=total * GIB * percent // 100,
        )
        for i, (total, percent, integrated) in enumerate(specs)
    ]


CARDS = st.lists(
    st.tuples(st.integers(1, 64), st.integers(0, 100), st.booleans()), min_size=1, max_size=6
).map(cards_of)
LAYERS = st.lists(st.integers(1, 20_000), min_size=1, max_size=40).map(lambda m: [n * MIB for n in m])


@settings(max_examples=300)
@given(devices=CARDS, layers=LAYERS, data=st.data(), spread=st.booleans())
def test_a_budget_never_raises_what_is_placed_on_its_device(
    devices: list[DeviceInfo], layers: list[int], data: st.DataObject, spread: bool
) -> None:
    """A cap or a reserve on one device places at most what it held without the budget there,
    and at most its usable free memory less its minimum reserve."""
    target = data.draw(st.integers(0, len(devices) - 1))
    kind = data.draw(st.sampled_from(["cap", "reserve"]))
    size = data.draw(st.integers(0, 80 * GIB))
    entries = (Entry(f"cuda:{target}", size, "entry"),)
    budgets = Budgets(cap=entries) if kind == "cap" else Budgets(reserve=entries)
    budgeted, _ = budgets.apply(devices)
    before = planner.create_layout(layers, devices, reserve, spread=spread)
    after = planner.create_layout(layers, budgeted, reserve, spread=spread)
    on_target = held(after, layers, devices[target])
    assert on_target <= held(before, layers, devices[target])
    assert on_target <= max(0, budgeted[target].usable_free - MINIMUM)


@settings(max_examples=300)
@given(devices=CARDS, data=st.data())
def test_a_budget_never_lowers_another_devices_room(devices: list[DeviceInfo], data: st.DataObject) -> None:
    """Caps and reserves on some devices leave every other device's record, and the room the
    planner gives it, as they were."""
    chosen = data.draw(st.sets(st.integers(0, len(devices) - 1), min_size=1))
    sizes = st.integers(0, 80 * GIB)
    budgets = Budgets(
        cap=tuple(Entry(f"cuda:{i}", data.draw(sizes), "cap") for i in sorted(chosen)),
        reserve=tuple(Entry(f"cuda:{i}", data.draw(sizes), "reserve") for i in sorted(chosen)),
    )
    budgeted, _ = budgets.apply(devices)
    for i, (old, new) in enumerate(zip(devices, budgeted, strict=True)):
        if i in chosen:
            assert new.usable_free <= old.usable_free
        else:
            assert new == old
            room = planner.usable_free(new.usable_free, 0.0, MINIMUM, 0, 0)
            assert room == planner.usable_free(old.free_memory, 0.0, MINIMUM, 0, 0)


@settings(max_examples=300)
@given(devices=CARDS, layers=LAYERS, data=st.data(), spread=st.booleans())
def test_a_reserve_never_lowers_what_the_other_devices_hold_together(
    devices: list[DeviceInfo], layers: list[int], data: st.DataObject, spread: bool
) -> None:
    """While the GPUs hold as many layers as before, a reserve on one device leaves the others
    holding at least what they held together: what it gives up moves to them, not away."""
    target = data.draw(st.integers(0, len(devices) - 1))
    entry = Entry(f"cuda:{target}", data.draw(st.integers(0, 80 * GIB)), "entry")
    budgeted, _ = Budgets(reserve=(entry,)).apply(devices)
    before = planner.create_layout(layers, devices, reserve, spread=spread)
    after = planner.create_layout(layers, budgeted, reserve, spread=spread)
    if after.sum() != before.sum():
        return  # layers left the GPUs (the output layer dropped): see the test below
    others = [d for i, d in enumerate(devices) if i != target]
    assert sum(held(after, layers, d) for d in others) >= sum(held(before, layers, d) for d in others)


def test_a_reserve_does_not_reorder_the_planner() -> None:
    """Two equal cards, spread: a 1-byte reserve on the first does not move the layer onto it
    (the planner orders by free memory as reported; only each card's room shrinks)."""
    cards = [
        DeviceInfo(
            id=f"GPU-{i}", library="CUDA", pci_id=f"0000:0{i + 1}:00.0", total_memory=GIB, free_memory=GIB
        )
        for i in range(2)
    ]
    budgeted, _ = Budgets(reserve=(Entry("cuda:0", 1, "cuda:0=1B"),)).apply(cards)
    before = planner.create_layout([MIB], cards, reserve, spread=True)
    after = planner.create_layout([MIB], budgeted, reserve, spread=True)
    assert [g.id for g in after] == [g.id for g in before] == ["GPU-1"]


def test_a_reserve_that_pushes_the_output_layer_off_can_empty_another_device() -> None:
    """The reference planner's second try leaves the output layer out (LAYOUT.md): when a
    reserve on the big card pushes its block off, the small card loses the output layer too.
    The one place where a reserve lowers another device's share of layers."""
    big = DeviceInfo(
        id="GPU-0",
        library="CUDA",
        pci_id="0000:01:00.0",
        total_memory=36 * GIB,
        free_memory=36 * GIB * 43 // 100,
    )
    small = DeviceInfo(
        id="GPU-1",
        library="CUDA",
        pci_id="0000:02:00.0",
        total_memory=2 * GIB,
        free_memory=2 * GIB * 26 // 100,
    )
    layers = [15_320 * MIB, 75 * MIB]
    budgeted, _ = Budgets(reserve=(Entry("cuda:0", 75 * MIB, "cuda:0=75MiB"),)).apply([big, small])
    assert held(planner.create_layout(layers, [big, small], reserve), layers, small) == 75 * MIB
    assert planner.create_layout(layers, budgeted, reserve) == GPULayersList([])


def test_scout_plan_keeps_a_capped_device_within_its_cap(scout_with: Callable[..., Scout]) -> None:
    """Scout.plan on discovered devices under cap all=2GiB places at most 2 GiB less the
    minimum reserve on each 80 GiB card, so a 10 x 1 GiB model spreads over the cards."""
    cards = [
        DeviceInfo(
            id=f"GPU-{i}",
            library="CUDA",
            pci_id=f"0000:0{i + 1}:00.0",
            total_memory=80 * GIB,
            free_memory=80 * GIB,
        )
        for i in range(8)
    ]
    scout = scout_with(cards, env={}, cap={"all": 2 * GIB})
    found = scout.discover()
    layers = [GIB // 2] * 10
    result = scout.plan(layers, found.devices, ROOMY)
    assert result.sum() == 10
    for device in found.devices:
        assert held(result, layers, device) <= 2 * GIB - MINIMUM


def test_the_capacity_search_may_move_a_layer_between_two_other_devices() -> None:
    """A reserve on the last card in the planner's order changes the capacity the reference's
    search settles on, and layer 0 moves from the fourth card to the fifth: the others hold as
    much together, not each as much (the limit docs/budgets.md states)."""
    specs = [(1, 0, False), (1, 0, False), (1, 0, False), (1, 46, False), (22, 77, True), (19, 89, True)]
    cards = cards_of(specs)
    layers = [MIB, MIB, 1419 * MIB, 1418 * MIB]
    budgeted, _ = Budgets(reserve=(Entry("cuda:5", 5_026_980, "cuda:5=5026980B"),)).apply(cards)
    before = planner.create_layout(layers, cards, reserve, spread=True)
    after = planner.create_layout(layers, budgeted, reserve, spread=True)
    assert [(g.id, g.layers) for g in before] == [("GPU-3", [0]), ("GPU-4", [1, 2]), ("GPU-5", [3])]
    assert [(g.id, g.layers) for g in after] == [("GPU-4", [0, 1, 2]), ("GPU-5", [3])]
