"""The layer planner (``Scout.plan``, ``gpuscout._layout.plan``): LAYOUT.md's examples, one test per
rule, argument checks, and properties over random machines."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuscout import DeviceInfo, GPULayers, GpuscoutError, InsufficientMemoryError, Scout, SystemInfo
from gpuscout._layout import plan as planner
from gpuscout.sizes import GIB, MIB

RESERVE = 457 * MIB
ROOMY = SystemInfo(total_memory=64 * GIB, free_memory=64 * GIB, free_swap=0)


def gpu(id: str, usable_mib: float, library: str = "CUDA", integrated: bool = False) -> DeviceInfo:
    """A device with ``usable_mib`` MiB left once the 457 MiB reserve is held back."""
    return DeviceInfo(
        id=id,
        library=library,
        integrated=integrated,
        free_memory=RESERVE + int(usable_mib * MIB),
        total_memory=8 * GIB,
    )


def mib(*sizes: int) -> list[int]:
    return [s * MIB for s in sizes]


def layout(result: Sequence[GPULayers]) -> list[tuple[str, list[int]]]:
    return [(g.id, g.layers) for g in result]


@pytest.fixture
def scout(scout_with: Callable[..., Scout]) -> Scout:
    return scout_with()


# -- LAYOUT.md's examples ---------------------------------------------------------------------


def test_three_small_layers_fit_one_gpu(scout: Scout) -> None:
    """3x50 MiB on 256 MiB places every layer."""
    assert layout(scout.plan(mib(50, 50, 50), [gpu("gpu0", 256)], ROOMY)) == [("gpu0", [0, 1, 2])]


def test_output_layer_is_dropped_when_not_everything_fits(scout: Scout) -> None:
    """4x100 MiB on 256 MiB drops the output layer, then places layers 1 and 2."""
    result = scout.plan(mib(100, 100, 100, 100), [gpu("gpu0", 256)], ROOMY)
    assert layout(result) == [("gpu0", [1, 2])]


def test_num_gpu_one_places_the_layer_before_the_output(scout: Scout) -> None:
    """3x50 MiB on 256 MiB with num_gpu=1 places layer 1."""
    result = scout.plan(mib(50, 50, 50), [gpu("gpu0", 256)], ROOMY, num_gpu=1)
    assert layout(result) == [("gpu0", [1])]


def test_early_layers_go_to_the_larger_gpu(scout: Scout) -> None:
    """GPUs of 128 and 256 MiB with [256, 50, 50]: gpu1 takes layer 0, gpu0 layers 1-2."""
    result = scout.plan(mib(256, 50, 50), [gpu("gpu0", 128), gpu("gpu1", 256)], ROOMY)
    assert layout(result) == [("gpu1", [0]), ("gpu0", [1, 2])]


def test_integrated_gpu_takes_what_the_discrete_one_cannot(scout: Scout) -> None:
    """dGPU 128 + iGPU 256 with 3x50: the iGPU takes layer 0, the dGPU layers 1-2."""
    devices = [gpu("dgpu", 128), gpu("igpu", 256, integrated=True)]
    assert layout(scout.plan(mib(50, 50, 50), devices, ROOMY)) == [("igpu", [0]), ("dgpu", [1, 2])]


def test_library_that_places_more_layers_wins(scout: Scout) -> None:
    """Two libraries: only the group that fits more layers is used (ROCm: [0, 1])."""
    devices = [gpu("gpu0", 128, "CUDA"), gpu("gpu1", 256, "ROCm")]
    result = scout.plan(mib(128, 128, 50), devices, ROOMY)
    assert [(g.id, g.library, g.layers) for g in result] == [("gpu1", "ROCm", [0, 1])]


# -- one rule each ----------------------------------------------------------------------------


def test_library_tie_keeps_the_earlier_group(scout: Scout) -> None:
    """Libraries placing as many layers: the one sorted first (more free memory) is kept."""
    devices = [gpu("a", 300, "ROCm"), gpu("b", 400, "CUDA")]
    assert [g.library for g in scout.plan(mib(50, 50), devices, ROOMY)] == ["CUDA"]


def test_fewest_gpus_are_used_without_spread(scout: Scout) -> None:
    """Layers that fit the largest GPU stay on it alone."""
    devices = [gpu("gpu0", 256), gpu("gpu1", 512)]
    assert layout(scout.plan(mib(50, 50, 50), devices, ROOMY)) == [("gpu1", [0, 1, 2])]


def test_spread_uses_every_gpu(scout: Scout) -> None:
    """With spread the smallest capacity evens the layers over both GPUs."""
    devices = [gpu("gpu0", 256), gpu("gpu1", 256)]
    result = scout.plan(mib(50, 50, 50), devices, ROOMY, spread=True)
    assert layout(result) == [("gpu0", [0]), ("gpu1", [1, 2])]


def test_num_gpu_overfills_the_last_gpu_tried(scout: Scout) -> None:
    """num_gpu=3 forces 150 MiB of layers onto 100 usable MiB when not require_full."""
    result = scout.plan(mib(50, 50, 50), [gpu("gpu0", 100)], ROOMY, num_gpu=3)
    assert layout(result) == [("gpu0", [0, 1, 2])]


def test_num_gpu_is_not_forced_under_require_full(scout: Scout) -> None:
    """Under require_full a count that does not fit raises instead of overfilling."""
    with pytest.raises(InsufficientMemoryError):
        scout.plan(mib(50, 50, 50), [gpu("gpu0", 100)], ROOMY, num_gpu=3, require_full=True)


def test_num_gpu_zero_places_nothing(scout: Scout) -> None:
    """num_gpu=0 keeps every layer on the CPU."""
    assert scout.plan(mib(50, 50, 50), [gpu("gpu0", 256)], ROOMY, num_gpu=0) == []


def test_num_gpu_treats_integrated_gpus_as_discrete(scout: Scout) -> None:
    """With num_gpu set, an iGPU is searched together with the dGPU (one group)."""
    devices = [gpu("dgpu", 512), gpu("igpu", 512, integrated=True)]
    result = scout.plan(mib(50, 50, 50, 50), devices, ROOMY, num_gpu=4, spread=False)
    assert result.sum() == 4 and {g.id for g in result} <= {"dgpu", "igpu"}


def test_backoff_takes_a_share_of_free_memory(scout: Scout) -> None:
    """backoff 0.1 holds back a tenth of free memory: nine 100 MiB layers no longer fit."""
    devices = [gpu("gpu0", 1000)]
    layers = mib(*[100] * 9)
    assert scout.plan(layers, devices, ROOMY).sum() == 9
    assert layout(scout.plan(layers, devices, ROOMY, backoff=0.1)) == [("gpu0", list(range(8)))]


def test_usable_free_rounds_the_backoff_share_in_float32() -> None:
    """The backoff share is float32(free) * float32(backoff), truncated."""
    free = 2**33 + 12345
    share = int(planner.f32(planner.f32(free) * planner.f32(0.3)))
    assert share != int(free * 0.3)
    assert planner.usable_free(free, 0.3, 7, 11, 13) == free - share - 31


def test_overhead_is_held_back_on_every_gpu(scout: Scout) -> None:
    """110 MiB of overhead leaves 146 MiB: the output layer is dropped."""
    result = scout.plan(mib(50, 50, 50), [gpu("gpu0", 256)], ROOMY, overhead=110 * MIB)
    assert layout(result) == [("gpu0", [0, 1])]


def test_graph_is_held_back_on_its_gpu(scout: Scout) -> None:
    """A 110 MiB graph on gpu0 leaves it 146 MiB: the output layer is dropped."""
    result = scout.plan(mib(50, 50, 50), [gpu("gpu0", 256)], ROOMY, graphs={"gpu0": 110 * MIB})
    assert layout(result) == [("gpu0", [0, 1])]


def test_gpu_with_a_graph_stays_in_use(scout: Scout) -> None:
    """A graph on the second GPU (lastUsedGPU) makes the planner use both GPUs."""
    devices = [gpu("gpu0", 512), gpu("gpu1", 256)]
    assert layout(scout.plan(mib(50, 50, 50), devices, ROOMY)) == [("gpu0", [0, 1, 2])]
    result = scout.plan(mib(50, 50, 50), devices, ROOMY, graphs={"gpu1": 1})
    assert layout(result) == [("gpu0", [0, 1]), ("gpu1", [2])]


def test_no_graphs_and_empty_graphs_are_the_same(scout: Scout) -> None:
    """graphs=None and graphs={} plan alike, and a zero graph counts as absent."""
    devices = [gpu("gpu0", 512), gpu("gpu1", 256)]
    plans = [scout.plan(mib(50, 50, 50), devices, ROOMY, graphs=g) for g in (None, {}, {"gpu1": 0})]
    assert plans[0] == plans[1] == plans[2]


def test_metal_reserves_512_mib(scout: Scout) -> None:
    """A Metal device holds back 512 MiB, so 250 MiB of layers no longer fit 256 + 457 MiB."""
    layers = mib(50, 50, 50, 50, 50)
    assert scout.plan(layers, [gpu("gpu0", 256)], ROOMY).sum() == 5
    metal = scout.plan(layers, [gpu("0", 256, library="Metal")], ROOMY)
    assert layout(metal) == [("0", [0, 1, 2, 3])]


def test_require_full_raises_when_layers_stay_on_the_cpu(scout: Scout) -> None:
    """require_full: 4x100 MiB on 256 MiB raises, carrying where each layer would have sat."""
    with pytest.raises(InsufficientMemoryError) as caught:
        scout.plan(mib(100, 100, 100, 100), [gpu("gpu0", 256)], ROOMY, require_full=True, graphs={"gpu0": 5})
    memory = caught.value.memory
    assert memory.input_weights == 0
    assert memory.cpu.weights == (100 * MIB, 0, 0, 100 * MIB)
    assert [(g.id, g.weights, g.graph) for g in memory.gpus] == [("gpu0", (0, 100 * MIB, 100 * MIB, 0), 5)]


def test_require_full_accepts_a_reached_num_gpu(scout: Scout) -> None:
    """require_full with num_gpu=2: two placed layers are enough."""
    result = scout.plan(mib(100, 100, 100, 100), [gpu("gpu0", 256)], ROOMY, num_gpu=2, require_full=True)
    assert layout(result) == [("gpu0", [1, 2])]


def test_require_full_raises_when_the_cpu_share_exceeds_free_ram(scout: Scout) -> None:
    """require_full: 200 MiB left on the CPU with 100 MiB free RAM raises, swap or not."""
    system = SystemInfo(total_memory=GIB, free_memory=100 * MIB, free_swap=GIB)
    args: dict[str, Any] = {"num_gpu": 2}
    layers = mib(100, 100, 100, 100)
    assert scout.plan(layers, [gpu("gpu0", 256)], system, **args).sum() == 2
    with pytest.raises(InsufficientMemoryError):
        scout.plan(layers, [gpu("gpu0", 256)], system, require_full=True, **args)


def test_cpu_share_beyond_ram_and_swap_raises_off_darwin(scout: Scout) -> None:
    """Off darwin, 200 MiB on the CPU with 100 MiB free and 50 MiB swap raises."""
    system = SystemInfo(total_memory=GIB, free_memory=100 * MIB, free_swap=50 * MIB)
    with pytest.raises(InsufficientMemoryError):
        scout.plan(mib(100, 100, 100, 100), [gpu("gpu0", 256)], system)


def test_darwin_skips_the_swap_check(scout_with: Callable[..., Scout]) -> None:
    """On darwin the same plan returns its layout."""
    system = SystemInfo(total_memory=GIB, free_memory=100 * MIB, free_swap=50 * MIB)
    darwin = scout_with(platform="darwin")
    result = darwin.plan(mib(100, 100, 100, 100), [gpu("gpu0", 256)], system)
    assert layout(result) == [("gpu0", [1, 2])]


def test_no_gpus_plans_an_empty_layout(scout: Scout) -> None:
    """Without devices nothing is placed and nothing raises when RAM suffices."""
    assert scout.plan(mib(50, 50), [], ROOMY, require_full=True) == []


def test_layout_is_ordered_by_first_layer_and_prints_as_the_seed(scout: Scout) -> None:
    """The result is a GPULayersList in first-layer order."""
    result = scout.plan(mib(256, 50, 50), [gpu("gpu0", 128), gpu("gpu1", 256)], ROOMY)
    assert str(result) == "3[ID:gpu1 Layers:1(0..0) ID:gpu0 Layers:2(1..2)]"


@pytest.mark.parametrize(
    "kwargs",
    [
        {"layers": "abc"},
        {"layers": [1, -1]},
        {"layers": [1.5]},
        {"layers": [True]},
        {"devices": [object()]},
        {"devices": "gpu"},
        {"system": {}},
        {"num_gpu": -2},
        {"num_gpu": 1.0},
        {"num_gpu": True},
        {"require_full": 1},
        {"spread": "yes"},
        {"backoff": -0.1},
        {"backoff": 1.5},
        {"backoff": float("nan")},
        {"backoff": True},
        {"overhead": -1},
        {"overhead": 1.0},
        {"graphs": [("gpu0", 1)]},
        {"graphs": {0: 1}},
        {"graphs": {"gpu0": -1}},
        {"graphs": {"gpu0": "1"}},
    ],
)
def test_bad_arguments_raise_gpuscout_error(scout: Scout, kwargs: dict[str, Any]) -> None:
    """Each bad argument raises GpuscoutError."""
    args: dict[str, Any] = {"layers": [MIB], "devices": [gpu("gpu0", 256)], "system": ROOMY, **kwargs}
    with pytest.raises(GpuscoutError):
        scout.plan(args.pop("layers"), args.pop("devices"), args.pop("system"), **args)


# -- properties -------------------------------------------------------------------------------

UNIT = 1000  # small sizes so that layers and free memory interact


@st.composite
def machines(draw: st.DrawFn) -> tuple[list[int], list[DeviceInfo], dict[str, Any]]:
    layers = draw(st.lists(st.integers(0, 5 * UNIT), max_size=12))
    count = draw(st.integers(0, 5))
    devices = [
        DeviceInfo(
            id=f"g{i}",
            library=draw(st.sampled_from(["A", "B"])),
            integrated=draw(st.booleans()),
            free_memory=draw(st.integers(0, 20 * UNIT)),
        )
        for i in range(count)
    ]
    options = {
        "num_gpu": draw(st.integers(-1, 13)),
        "require_full": draw(st.booleans()),
        "spread": draw(st.booleans()),
        "backoff": draw(st.sampled_from([0.0, 0.1, 0.5])),
        "overhead": draw(st.integers(0, UNIT)),
        "graphs": draw(st.dictionaries(st.sampled_from([f"g{i}" for i in range(5)]), st.integers(0, UNIT))),
    }
    return layers, devices, options


def _reserve(device: DeviceInfo) -> int:
    return 100


def _create(layers: list[int], devices: list[DeviceInfo], options: dict[str, Any]) -> Any:
    return planner.create_layout(layers, devices, _reserve, **options)


@settings(max_examples=400, deadline=None)
@given(machines())
def test_no_gpu_gets_more_than_its_usable_memory(machine: Any) -> None:
    """Placed bytes stay within float32(usable), except a forced num_gpu without require_full."""
    layers, devices, options = machine
    overfill = options["num_gpu"] >= 0 and not options["require_full"]
    by_id = {d.id: d for d in devices}
    for g in _create(layers, devices, options):
        d = by_id[g.id]
        usable = planner.usable_free(
            d.free_memory, options["backoff"], 100, options["overhead"], options["graphs"].get(d.id, 0)
        )
        if not overfill:
            assert sum(layers[i] for i in g.layers) <= int(planner.f32(usable))


@settings(max_examples=400, deadline=None)
@given(machines())
def test_each_gpu_holds_contiguous_layers_of_one_library(machine: Any) -> None:
    """Every GPU's layers are a run of consecutive indexes, all GPUs of one library, no layer twice."""
    layers, devices, options = machine
    result = _create(layers, devices, options)
    assert len({g.library for g in result}) <= 1
    placed = [i for g in result for i in g.layers]
    assert len(placed) == len(set(placed))
    assert all(0 <= i < len(layers) for i in placed)
    for g in result:
        assert g.layers == list(range(g.layers[0], g.layers[0] + len(g.layers)))
    assert [g.first_layer for g in result] == sorted(g.first_layer for g in result)


def test_forced_count_far_beyond_free_memory_terminates(scout: Scout) -> None:
    """num_gpu=1 with a 100 MiB layer on 1 usable MiB: the search stops (the reference's loop
    would not: adjacent float32s near c=100 are more than 1e-6 apart) and the layer is placed."""
    result = scout.plan(mib(10, 100, 10), [gpu("gpu0", 1)], ROOMY, num_gpu=1)
    assert layout(result) == [("gpu0", [1])]


@settings(max_examples=600, deadline=None)
@given(machines(), st.integers(0, 4), st.integers(1, 20 * UNIT))
def test_more_free_memory_never_places_fewer_layers(machine: Any, which: int, extra: int) -> None:
    """Without graphs, giving one GPU more free memory never lowers the placed layer count."""
    layers, devices, options = machine
    options = {**options, "graphs": {}}  # with graphs it can: see the next test
    if not devices:
        return
    which %= len(devices)
    richer = list(devices)
    richer[which] = DeviceInfo(
        id=devices[which].id,
        library=devices[which].library,
        integrated=devices[which].integrated,
        free_memory=devices[which].free_memory + extra,
    )
    assert _create(layers, richer, options).sum() >= _create(layers, devices, options).sum()


def test_more_free_memory_can_place_fewer_layers_when_a_graph_is_held_back() -> None:
    """The reference sorts by raw free memory but fills by usable memory: 38 more bytes on g1
    (whose graph holds 8 back) put it ahead of g2, the fill order changes and a layer is lost."""
    layers = [20, 100, 50, 30, 60]

    def machine(g1_free: int) -> list[DeviceInfo]:
        return [
            DeviceInfo(id="g0", library="A", free_memory=101),
            DeviceInfo(id="g1", library="A", free_memory=g1_free),
            DeviceInfo(id="g2", library="A", free_memory=123),
        ]

    def placed(g1_free: int) -> int:
        return planner.create_layout(
            layers, machine(g1_free), lambda d: 0, spread=True, graphs={"g1": 8}
        ).sum()

    assert (placed(86), placed(86 + 38)) == (5, 4)
