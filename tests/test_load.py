"""The load loop (LAYOUT.md step 7) against a fake runner that says what it is: it computes the
memory a layout needs (the layers where the layout puts them, a graph on each GPU it uses, as
large as the fake's rule says) and succeeds when that fits what it was told the GPUs really
have, which may be less than discovery reported."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuscout import DeviceInfo, Scout, SystemInfo
from gpuscout._records.layers import GPULayersList
from gpuscout._records.memory import BackendMemory, DeviceMemory, InsufficientMemoryError
from gpuscout.errors import GpuscoutError
from gpuscout.load import MAX_CALLS, Allocation, LoadOperation, layer_sizes
from gpuscout.sizes import GIB, MIB

RESERVE = 457 * MIB  # CUDA's minimum memory
SYSTEM = SystemInfo(total_memory=64 * GIB, free_memory=60 * GIB, free_swap=0)


def gpu(n: int, free: int) -> DeviceInfo:
    return DeviceInfo(
        id=f"GPU-{n}",
        library="CUDA",
        name=f"Card {n}",
        description=f"Card {n}",
        total_memory=free + GIB,
        free_memory=free,
        compute_major=9,
        driver_major=12,
        driver_minor=4,
    )


@attrs.define
class FakeRunner:
    """A runner that allocates nothing: ``graph(layers_on_gpu)`` is the graph a GPU holding that
    many layers needs; ``real_free`` what each GPU really has for layers and graph (its
    reported free memory minus the reserve, unless told less)."""

    devices: Sequence[DeviceInfo]
    layers: Sequence[int]
    graph: Callable[[int], int] = lambda n: 0
    real_free: dict[str, int] = attrs.field(factory=dict)
    commit_fails: bool = False
    calls: list[tuple[LoadOperation, int]] = attrs.field(factory=list)

    def __call__(self, layout: GPULayersList, operation: LoadOperation) -> Allocation:
        self.calls.append((operation, layout.sum()))
        where = {layer: g.id for g in layout for layer in g.layers}
        gpus = []
        fits = True
        for d in self.devices:
            mine = [size if where.get(i) == d.id else 0 for i, size in enumerate(self.layers)]
            held = sum(1 for i in where if where[i] == d.id)
            graph = self.graph(held) if held else 0
            gpus.append(
                DeviceMemory(
                    id=d.id,
                    library=d.library,
                    name=d.name,
                    weights=mine,
                    cache=[0] * len(self.layers),
                    graph=graph,
                )
            )
            room = self.real_free.get(d.id, d.free_memory - RESERVE)
            fits = fits and sum(mine) + graph <= room
        cpu = DeviceMemory(
            library="cpu",
            name="CPU",
            weights=[0 if i in where else s for i, s in enumerate(self.layers)],
            cache=[0] * len(self.layers),
        )
        success = fits and not (operation is LoadOperation.COMMIT and self.commit_fails)
        if operation is LoadOperation.CLOSE:
            success = True
        return Allocation(success, BackendMemory(input_weights=0, cpu=cpu, gpus=gpus))

    def estimate(self) -> BackendMemory:
        """The first estimate: every layer on the CPU, no graph known yet."""
        return BackendMemory(
            cpu=DeviceMemory(
                library="cpu", name="CPU", weights=list(self.layers), cache=[0] * len(self.layers)
            )
        )

    def operations(self) -> list[LoadOperation]:
        return [op for op, _ in self.calls]


@pytest.fixture
def scout(scout_with: Callable[..., Scout]) -> Scout:
    return scout_with([])


def test_an_estimate_that_holds_goes_fit_alloc_commit(scout: Scout) -> None:
    """An estimate the runner's report confirms loads in three calls: fit, alloc, commit."""
    devices = [gpu(0, 16 * GIB)]
    runner = FakeRunner(devices, [100 * MIB] * 10, graph=lambda n: 200 * MIB)
    done = scout.load(runner.estimate(), devices, SYSTEM, runner)
    assert done.layout.sum() == 10 and [str(d.id) for d in done.devices] == ["GPU-0"]
    # The report's graph still fits: the same layout again, so the loop converged at once.
    assert runner.operations() == [LoadOperation.FIT, LoadOperation.ALLOC, LoadOperation.COMMIT]
    assert done.calls == 3 and done.memory.gpus[0].graph == 200 * MIB


def test_a_graph_learnt_from_the_runner_shrinks_the_layout(scout: Scout) -> None:
    """The estimate knows no graph; the runner's report has one, so fewer layers fit."""
    devices = [gpu(0, RESERVE + 1000 * MIB)]
    runner = FakeRunner(devices, [100 * MIB] * 10, graph=lambda n: 250 * MIB)
    done = scout.load(runner.estimate(), devices, SYSTEM, runner)
    assert done.layout.sum() == 7  # (1000 - 250) // 100
    assert runner.calls == [
        (LoadOperation.FIT, 10),
        (LoadOperation.FIT, 7),
        (LoadOperation.ALLOC, 7),
        (LoadOperation.COMMIT, 7),
    ]
    assert layer_sizes(done.memory) == [100 * MIB] * 10


def test_free_memory_that_lied_is_found_by_backoff(scout: Scout) -> None:
    """Discovery said 2000 MiB usable, the GPU really has 1200: allocations fail until the
    backoff (10% of free memory per step) holds back enough."""
    devices = [gpu(0, RESERVE + 2000 * MIB)]
    runner = FakeRunner(devices, [100 * MIB] * 20, real_free={"GPU-0": 1200 * MIB})
    done = scout.load(runner.estimate(), devices, SYSTEM, runner)
    placed = done.layout.sum()
    assert placed * 100 * MIB <= 1200 * MIB and placed >= 9
    fits = [n for op, n in runner.calls if op is LoadOperation.FIT]
    assert fits[0] == 20 and fits == sorted(fits, reverse=True)  # never more layers again
    assert runner.operations()[-1] is LoadOperation.COMMIT


def test_a_gpu_with_no_room_at_all_still_loads_on_the_cpu(scout: Scout) -> None:
    """Backoff ends at a layout with no GPU layer, which any runner can allocate."""
    devices = [gpu(0, 8 * GIB)]
    runner = FakeRunner(devices, [100 * MIB] * 8, real_free={"GPU-0": 0})
    done = scout.load(runner.estimate(), devices, SYSTEM, runner)
    assert done.layout.sum() == 0 and done.devices == ()
    assert runner.operations()[-1] is LoadOperation.COMMIT


def test_a_runner_that_never_allocates_fails_once_the_backoff_holds_back_everything(scout: Scout) -> None:
    """A runner that never allocates fails once the backoff passes 1, closed once, nothing committed."""
    devices = [gpu(0, 8 * GIB)]
    runner = FakeRunner(devices, [100 * MIB] * 8, real_free={"GPU-0": -1})  # not even nothing
    with pytest.raises(GpuscoutError, match=r"^memory layout cannot be allocated$"):
        scout.load(runner.estimate(), devices, SYSTEM, runner)
    assert runner.operations()[-1] is LoadOperation.CLOSE
    assert runner.operations().count(LoadOperation.CLOSE) == 1
    assert LoadOperation.COMMIT not in runner.operations()


def test_a_forced_layer_count_that_cannot_be_allocated_is_an_error(scout: Scout) -> None:
    """A forced num_gpu that cannot be allocated is an error naming it, and the runner is closed."""
    devices = [gpu(0, 8 * GIB)]
    runner = FakeRunner(devices, [100 * MIB] * 8, real_free={"GPU-0": 300 * MIB})
    with pytest.raises(GpuscoutError, match="with num_gpu = 5"):
        scout.load(runner.estimate(), devices, SYSTEM, runner, num_gpu=5)
    assert runner.operations()[-1] is LoadOperation.CLOSE


def test_a_failed_commit_is_an_error_and_releases(scout: Scout) -> None:
    """A commit the runner refuses is an error, and the runner is closed after it."""
    devices = [gpu(0, 8 * GIB)]
    runner = FakeRunner(devices, [100 * MIB] * 4, commit_fails=True)
    with pytest.raises(GpuscoutError, match="failed to commit memory for model"):
        scout.load(runner.estimate(), devices, SYSTEM, runner)
    assert runner.operations()[-2:] == [LoadOperation.COMMIT, LoadOperation.CLOSE]


def test_alternating_layouts_try_the_count_in_between(scout: Scout) -> None:
    """The reference's own case: 41 layers need a larger graph than 39 do, so the layouts
    alternate between 41 and 39; the loop tries 40, which allocates, and keeps it."""
    devices = [gpu(0, RESERVE + 4100 * MIB)]
    runner = FakeRunner(devices, [100 * MIB] * 41, graph=lambda n: 200 * MIB if n >= 41 else 0)
    done = scout.load(runner.estimate(), devices, SYSTEM, runner)
    assert done.layout.sum() == 40
    assert runner.calls == [
        (LoadOperation.FIT, 41),
        (LoadOperation.FIT, 39),
        (LoadOperation.FIT, 40),
        (LoadOperation.ALLOC, 40),
        (LoadOperation.COMMIT, 40),
    ]


def test_a_layout_that_cannot_load_raises_insufficient_memory_and_releases(scout: Scout) -> None:
    """With require_full, a model that cannot load whole raises InsufficientMemoryError after a close."""
    devices = [gpu(0, RESERVE + 300 * MIB)]
    runner = FakeRunner(devices, [100 * MIB] * 8)
    with pytest.raises(InsufficientMemoryError):
        scout.load(runner.estimate(), devices, SYSTEM, runner, require_full=True)
    assert runner.operations() == [LoadOperation.CLOSE]


def test_the_cpu_share_counts_input_weights_and_the_cpu_graph(scout: Scout) -> None:
    """verifyLayout: what stays on the CPU is the unplaced layers plus the input weights and
    the CPU graph the runner reported."""
    devices = [gpu(0, RESERVE + 200 * MIB)]
    runner = FakeRunner(devices, [100 * MIB] * 4)
    estimate = attrs.evolve(
        runner.estimate(), input_weights=30 * GIB, cpu=attrs.evolve(runner.estimate().cpu, graph=30 * GIB)
    )
    with pytest.raises(InsufficientMemoryError):
        scout.load(estimate, devices, SystemInfo(total_memory=64 * GIB, free_memory=60 * GIB), runner)


@pytest.mark.parametrize(("reply", "what"), [(None, "NoneType"), ((True, None), "tuple"), ("ok", "str")])
def test_a_runner_answering_something_else_is_refused(scout: Scout, reply: object, what: str) -> None:
    """A runner answering anything but an Allocation is refused, naming what it got, after a close."""
    devices = [gpu(0, 8 * GIB)]
    seen: list[LoadOperation] = []

    def allocate(layout: GPULayersList, operation: LoadOperation) -> object:
        seen.append(operation)
        return reply

    with pytest.raises(GpuscoutError, match=f"allocate must return an Allocation, got {what}"):
        scout.load(FakeRunner(devices, [MIB]).estimate(), devices, SYSTEM, allocate)  # type: ignore[arg-type]
    assert seen == [LoadOperation.FIT, LoadOperation.CLOSE]


def test_what_the_runner_raises_passes_through_after_release(scout: Scout) -> None:
    """An exception the runner raises passes through unchanged, after the runner is closed."""
    devices = [gpu(0, 8 * GIB)]
    seen: list[LoadOperation] = []

    def allocate(layout: GPULayersList, operation: LoadOperation) -> Allocation:
        seen.append(operation)
        if operation is LoadOperation.ALLOC:
            raise ConnectionError("runner gone")
        return FakeRunner(devices, [MIB] * 2)(layout, operation)

    with pytest.raises(ConnectionError, match="runner gone"):
        scout.load(FakeRunner(devices, [MIB] * 2).estimate(), devices, SYSTEM, allocate)
    assert seen[-1] is LoadOperation.CLOSE


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"memory": "x"}, "memory must be a BackendMemory"),
        ({"allocate": 3}, "allocate must be callable"),
        ({"num_gpu": -2}, "num_gpu must be an int >= -1"),
        ({"system": None}, "system must be a SystemInfo"),
    ],
)
def test_bad_arguments_are_refused(scout: Scout, kwargs: dict[str, object], message: str) -> None:
    """An argument of the wrong type or range is refused with a GpuscoutError naming it."""
    devices = [gpu(0, 8 * GIB)]
    runner = FakeRunner(devices, [MIB])
    args: dict[str, object] = {
        "memory": runner.estimate(),
        "devices": devices,
        "system": SYSTEM,
        "allocate": runner,
        **kwargs,
    }
    num_gpu = args.pop("num_gpu", -1)
    with pytest.raises(GpuscoutError, match=message):
        scout.load(**args, num_gpu=num_gpu)  # type: ignore[arg-type]


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    graphs=st.lists(st.integers(0, 3000), min_size=1, max_size=30),
    real=st.integers(0, 3000),
    n_layers=st.integers(1, 30),
    gpus=st.integers(1, 3),
    num_gpu=st.integers(-1, 5),
)
def test_any_runner_ends_with_a_result_or_an_error_and_releases_on_error(
    scout: Scout, graphs: list[int], real: int, n_layers: int, gpus: int, num_gpu: int
) -> None:
    """Whatever the runner's graphs do from call to call: the loop ends within MAX_CALLS, a
    result is a committed layout that the runner accepted, and an error releases once."""
    devices = [gpu(i, RESERVE + 2000 * MIB) for i in range(gpus)]
    turn = iter(range(10**6))
    runner = FakeRunner(
        devices,
        [100 * MIB] * n_layers,
        graph=lambda n: graphs[next(turn) % len(graphs)] * MIB,
        real_free={d.id: real * MIB for d in devices},
    )
    try:
        done = scout.load(runner.estimate(), devices, SYSTEM, runner, num_gpu=num_gpu)
    except (GpuscoutError, InsufficientMemoryError):
        assert runner.operations()[-1] is LoadOperation.CLOSE
        assert runner.operations().count(LoadOperation.CLOSE) == 1
    else:
        assert runner.operations()[-1] is LoadOperation.COMMIT
        assert LoadOperation.CLOSE not in runner.operations()
        assert done.calls == len(runner.calls) <= MAX_CALLS


def test_a_count_in_between_is_kept_only_when_its_own_report_confirms_it(scout: Scout) -> None:
    """Layouts alternate between 41 and 39 layers; 40 allocates, but the graph its report shows
    leaves room for 39 only, so 40 is not confirmed and 39, which its report confirms, is kept
    (the reference rebuilds a layout from each count's report before taking it)."""
    devices = [gpu(0, RESERVE + 4100 * MIB)]
    graphs = {41: 200 * MIB, 40: 150 * MIB}
    runner = FakeRunner(
        devices, [100 * MIB] * 41, graph=lambda n: graphs.get(n, 0), real_free={"GPU-0": 8 * GIB}
    )
    done = scout.load(runner.estimate(), devices, SYSTEM, runner)
    assert done.layout.sum() == 39
    assert runner.calls[:5] == [
        (LoadOperation.FIT, 41),
        (LoadOperation.FIT, 39),
        (LoadOperation.FIT, 40),
        (LoadOperation.FIT, 39),
        (LoadOperation.ALLOC, 39),
    ]


def test_on_darwin_a_gpu_share_above_system_memory_turns_offload_off_for_later_passes() -> None:
    """LAYOUT.md step 6, darwin: a layout whose GPU share (layers and graphs) is more than the
    system's total memory is returned, but later passes place nothing on the GPU (num_gpu 0);
    off darwin the same load keeps every layer on the GPU."""
    from gpuscout.load import load

    devices = [gpu(0, 16 * GIB)]
    small = SystemInfo(total_memory=4 * GIB, free_memory=3 * GIB, free_swap=0)
    placed = {}
    for platform in ("darwin", "linux"):
        runner = FakeRunner(devices, [GIB] * 10)
        done = load(runner.estimate(), devices, small, lambda d: RESERVE, runner, platform=platform)
        placed[platform] = (runner.calls[0], done.layout.sum())
    assert placed == {"darwin": ((LoadOperation.FIT, 10), 0), "linux": ((LoadOperation.FIT, 10), 10)}
