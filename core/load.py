"""The load loop (docs LAYOUT.md step 7): fit, then allocate, then commit a layout with a runner
that reports what it really needs, rebuilding the layout from each report.

The reference is Ollama's loading of a model by its own engine (``ollamaServer.Load``, before it
moved to llama-server). A runner answers each request with whether it succeeded and the
``BackendMemory`` it found it needs (weights, cache and graph per device); the next layout is
built from that report, since the graphs and the real sizes are only known once the runner has
tried. Rules, as the reference has them:

- A new layout is tried while it was not tried before (by ``GPULayersList.hash``) and places no
  more layers than the current one: more information only ever means fewer layers.
- In auto mode (``num_gpu`` -1), when the new layout would place more than one layer more than
  the current one (graphs moving on and off GPUs make layouts alternate), the counts in between
  are tried from the top down with that count forced; the first that allocates, and that a
  layout rebuilt from its report confirms, is taken (and the tried layouts are forgotten).
- Otherwise the loop has converged: a successful allocation moves on to the next operation
  (fit, then alloc). A failed one with ``num_gpu`` >= 0 is an error; in auto mode it raises the
  backoff (the share of free memory held back) by 0.1 and tries again, until it exceeds 1.
- Commit loads the weights; a failure there is an error. On any failure the runner is told to
  release what it holds (``LoadOperation.CLOSE``).

The runner is the host's: ``allocate(layout, operation) -> Allocation``. gpuscout has no runner
that allocates model memory, so the loop is tested against a fake one.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence

import attrs

from gpuscout._layout.plan import create_layout, f32, verify_layout
from gpuscout._records.device import DeviceID, DeviceInfo, SystemInfo
from gpuscout._records.layers import GPULayersList
from gpuscout._records.memory import BackendMemory
from gpuscout.errors import GpuscoutError

#: The backoff step after a failed allocation (float32, as the reference adds it).
BACKOFF_STEP = f32(0.1)
#: Runner calls after which the loop gives up: the reference always ends sooner (each layout is
#: tried once per operation and the backoff passes 1 after 11 failures); this bounds a runner
#: whose reports never settle.
MAX_CALLS = 1000


class LoadOperation(enum.IntEnum):
    """What the runner is asked to do with a layout (the reference's LoadOperation)."""

    FIT = 0  # report the memory the layout needs, allocate nothing
    ALLOC = 1  # allocate that memory, load no weights
    COMMIT = 2  # load the weights: the layout is final
    CLOSE = 3  # release everything (after a failure)


@attrs.frozen
class Allocation:
    """A runner's answer: whether the operation succeeded, and the memory it found it needs."""

    success: bool
    memory: BackendMemory


@attrs.frozen
class LoadResult:
    """A committed layout, the runner's last report, the devices used (in layout order) and how
    many runner calls it took."""

    layout: GPULayersList
    memory: BackendMemory
    devices: tuple[DeviceID, ...]
    calls: int


Allocate = Callable[[GPULayersList, LoadOperation], Allocation]


def layer_sizes(memory: BackendMemory) -> list[int]:
    """Each layer's full cost wherever it sits: weights and cache on every GPU and on the CPU."""
    sizes = [w + c for w, c in _pairs(memory.cpu.weights, memory.cpu.cache)]
    for gpu in memory.gpus:
        for i, (w, c) in enumerate(_pairs(gpu.weights, gpu.cache)):
            if i < len(sizes):
                sizes[i] += w + c
    return sizes


def _pairs(weights: Sequence[int], cache: Sequence[int]) -> list[tuple[int, int]]:
    n = max(len(weights), len(cache))
    return [(weights[i] if i < len(weights) else 0, cache[i] if i < len(cache) else 0) for i in range(n)]


def graphs(memory: BackendMemory, devices: Sequence[DeviceInfo]) -> dict[str, int]:
    """Each device's graph bytes from the report, by device id (a device not in it: 0)."""
    found = {(g.id, g.library.lower()): g.graph for g in memory.gpus}
    return {d.id: found[(d.id, d.library.lower())] for d in devices if (d.id, d.library.lower()) in found}


class _Loop:
    """One load: the state the reference keeps across its labelled loops."""

    def __init__(
        self,
        devices: Sequence[DeviceInfo],
        system: SystemInfo,
        reserve: Callable[[DeviceInfo], int],
        allocate: Allocate,
        *,
        num_gpu: int,
        require_full: bool,
        spread: bool,
        overhead: int,
        platform: str,
    ) -> None:
        self.devices, self.system, self.reserve = devices, system, reserve
        self.allocate, self.num_gpu, self.require_full = allocate, num_gpu, require_full
        self.spread, self.overhead, self.platform = spread, overhead, platform
        self.backoff = 0.0
        self.calls = 0

    def layout(self, memory: BackendMemory, num_gpu: int | None = None) -> GPULayersList:
        """createLayout: build, then verify (InsufficientMemoryError when it cannot load)."""
        count = self.num_gpu if num_gpu is None else num_gpu
        sizes, table = layer_sizes(memory), graphs(memory, self.devices)
        built = create_layout(
            sizes,
            self.devices,
            self.reserve,
            num_gpu=count,
            require_full=self.require_full,
            spread=self.spread,
            backoff=self.backoff,
            overhead=self.overhead,
            graphs=table,
        )
        verify_layout(
            built,
            sizes,
            self.devices,
            self.system,
            num_gpu=count,
            require_full=self.require_full,
            graphs=table,
            platform=self.platform,
            cpu_extra=memory.input_weights + memory.cpu.graph,
        )
        if self.platform == "darwin" and num_gpu is None:
            vram = sum(table.get(g.id, 0) for g in built) + sum(
                sizes[i] for g in built for i in g.layers if i < len(sizes)
            )
            if vram > self.system.total_memory:
                self.num_gpu = 0  # the reference turns partial offload off for later passes
        return built

    def call(self, layout: GPULayersList, operation: LoadOperation) -> Allocation:
        self.calls += 1
        if self.calls > MAX_CALLS:
            raise GpuscoutError(f"load: the runner's reports did not settle within {MAX_CALLS} calls")
        reply = self.allocate(GPULayersList(layout), operation)
        if not (isinstance(reply, Allocation) and isinstance(reply.memory, BackendMemory)):
            raise GpuscoutError(f"load: allocate must return an Allocation, got {type(reply).__name__}")
        return reply

    def run(self, memory: BackendMemory) -> LoadResult:
        layout = self.layout(memory)
        past: set[int] = set()
        operation = LoadOperation.FIT
        while operation < LoadOperation.COMMIT:
            reply = self.call(layout, operation)
            past.add(layout.hash())
            layout, advance = self.settle(layout, reply, operation, past)
            if advance:
                operation = LoadOperation(operation + 1)
        reply = self.call(layout, LoadOperation.COMMIT)
        if not reply.success:
            raise GpuscoutError("failed to commit memory for model")
        used = tuple(dict.fromkeys(g.device_id for g in layout))
        return LoadResult(layout=layout, memory=reply.memory, devices=used, calls=self.calls)

    def settle(
        self, layout: GPULayersList, reply: Allocation, operation: LoadOperation, past: set[int]
    ) -> tuple[GPULayersList, bool]:
        """After the runner's ``reply`` to ``layout``: the next layout and whether to move on
        to the next operation (False: ask again with the same operation)."""
        memory = reply.memory
        while True:
            new = self.layout(memory)
            if new.hash() not in past and new.sum() <= layout.sum():
                return new, False
            if self.num_gpu < 0 and new.sum() - layout.sum() > 1:
                # Layouts alternating by more than one layer: try each count in between, from
                # the top down; the first that allocates and that its own report confirms wins.
                for count in range(new.sum() - 1, layout.sum() - 1, -1):
                    forced = self.layout(memory, num_gpu=count)
                    reply = self.call(forced, operation)
                    if reply.success and forced.sum() <= self.layout(reply.memory).sum():
                        past.clear()  # going up again: coming back down must stay possible
                        return forced, True
            # Converged (a layout seen before, or one with more layers): keep the last one.
            if reply.success:
                return layout, True
            if self.num_gpu >= 0:
                raise GpuscoutError(f"memory layout cannot be allocated with num_gpu = {self.num_gpu}")
            if self.backoff > 1:
                raise GpuscoutError("memory layout cannot be allocated")
            self.backoff = f32(f32(self.backoff) + BACKOFF_STEP)


def load(
    memory: BackendMemory,
    devices: Sequence[DeviceInfo],
    system: SystemInfo,
    reserve: Callable[[DeviceInfo], int],
    allocate: Allocate,
    *,
    num_gpu: int = -1,
    require_full: bool = False,
    spread: bool = False,
    overhead: int = 0,
    platform: str = "linux",
) -> LoadResult:
    """The load loop (arguments already checked; see ``Scout.load``). On any failure the runner
    is asked to release what it holds (``CLOSE``), then the error is raised."""
    loop = _Loop(
        devices,
        system,
        reserve,
        allocate,
        num_gpu=num_gpu,
        require_full=require_full,
        spread=spread,
        overhead=overhead,
        platform=platform,
    )
    done = False
    try:
        result = loop.run(memory)
        done = True
        return result
    finally:
        if not done:
            try:
                allocate(GPULayersList(), LoadOperation.CLOSE)
            except Exception:  # the load already failed; its error is the one to see
                pass


__all__ = [
    "BACKOFF_STEP",
    "MAX_CALLS",
    "Allocate",
    "Allocation",
    "LoadOperation",
    "LoadResult",
    "graphs",
    "layer_sizes",
    "load",
]
