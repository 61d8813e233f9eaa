"""Layer placement: the reference rules of docs LAYOUT.md (Ollama's createLayout, assignLayers,
findBestFit, greedyFit and verifyLayout), as pure functions over plain inputs.

Where the reference computes in float32 (the backoff share of free memory, the capacity factor
and its binary search, each GPU's space at a capacity) so does this module, through
``struct``, so that layouts match the reference's byte for byte near rounding edges.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import NamedTuple

from gpuscout._records.device import CPU_LIBRARY, DeviceInfo, SystemInfo, device_list, is_size
from gpuscout._records.layers import GPULayers, GPULayersList
from gpuscout._records.memory import BackendMemory, DeviceMemory, InsufficientMemoryError
from gpuscout.errors import GpuscoutError

_F32 = struct.Struct("f")


def f32(x: float) -> float:
    """``x`` rounded to the nearest float32, as Go's ``float32(x)`` (overflow saturates to inf)."""
    try:
        value: float = _F32.unpack(_F32.pack(x))[0]
    except OverflowError:
        return float("inf") if x > 0 else float("-inf")
    return value


#: The search stops when high - low <= 1e-6 (a float32 constant in the reference).
_EPSILON = f32(1e-6)


class Slot(NamedTuple):
    """One GPU as the planner sees it: its identity, its class and its usable free bytes."""

    id: str
    library: str
    integrated: bool
    free: int


class Counter:
    """Counts greedyFit calls (one per capacity step), for the benchmark."""

    def __init__(self) -> None:
        self.steps = 0


def usable_free(free: int, backoff: float, minimum: int, overhead: int, graph: int) -> int:
    """free - (float32(free)*backoff + minimum + overhead + graph), floored at 0."""
    reserved = int(f32(f32(free) * f32(backoff))) + minimum + overhead + graph
    return free - reserved if free > reserved else 0


def order(devices: Sequence[DeviceInfo]) -> list[DeviceInfo]:
    """Reverse(ByFreeMemory): discrete largest-free first, integrated last (stable on ties).

    By free memory as reported, not under a budget: a budget shrinks a device's room, never
    moves it in this order, or a 1-byte reserve could move layers onto the reserved device
    (docs/budgets.md, tests/test_budgets_plan.py)."""
    return sorted(devices, key=lambda d: (d.integrated, -d.free_memory))


def _groups(slots: Sequence[Slot], key: Callable[[Slot], object]) -> list[list[Slot]]:
    groups: dict[object, list[Slot]] = {}
    for slot in slots:
        groups.setdefault(key(slot), []).append(slot)
    return list(groups.values())


def greedy_fit(
    layers: Sequence[int],
    gpus: Sequence[Slot],
    capacity: float,
    requested: int,
    counter: Counter | None = None,
) -> list[list[int]]:
    """Layers per GPU of ``gpus`` (same order), filling from the last GPU and the last layer.

    Each GPU offers ``float32(free) * capacity`` bytes; a layer that does not fit moves on to
    the previous GPU, and running out of GPUs stops the walk. With ``requested`` ≥ 0 only the
    last ``requested`` layers are walked. Lists hold layer indexes in descending order.
    """
    if counter is not None:
        counter.steps += 1
    placed: list[list[int]] = [[] for _ in gpus]
    device = len(gpus) - 1
    space = int(f32(f32(gpus[device].free) * capacity))
    stop = -1 if requested < 0 else max(len(layers) - 1 - requested, -1)
    current = placed[device]
    for i in range(len(layers) - 1, stop, -1):
        size = layers[i]
        while size > space:
            device -= 1
            if device < 0:
                return placed
            current = placed[device]
            space = int(f32(f32(gpus[device].free) * capacity))
        current.append(i)
        space -= size
    return placed


def _count(placed: list[list[int]]) -> int:
    return sum(len(p) for p in placed)


def find_best_fit(
    layers: Sequence[int], gpus: Sequence[Slot], requested: int, force: bool, counter: Counter | None = None
) -> list[tuple[Slot, list[int]]]:
    """Per ByPerformance group, the smallest float32 capacity that places the most layers.

    The upper bound is 1000 (a forced count may overfill) only when ``requested`` ≥ 0 and
    ``force``. Layers one group placed are removed from the end before the next group.
    """
    result: list[tuple[Slot, list[int]]] = []
    for group in _groups(gpus, lambda s: s.integrated):
        low, high = 0.0, 1000.0 if requested >= 0 and force else 1.0
        best = greedy_fit(layers, group, high, requested, counter)
        most = _count(best)
        if most == 0:
            continue  # the search could only find other empty placements
        while f32(high - low) > _EPSILON:
            mid = f32(f32(low + high) / 2)
            if mid in (low, high):
                # Adjacent float32s 1e-6 apart or more (c >= 16, a forced num_gpu on a nearly
                # full GPU): the reference loops forever here; its best stays the answer.
                break
            attempt = greedy_fit(layers, group, mid, requested, counter)
            if _count(attempt) == most:
                high, best = mid, attempt
            else:
                low = mid
        layers = layers[: len(layers) - most]
        requested -= most
        result = [*zip(group, best, strict=True), *result]
    return result


def assign_layers(
    layers: Sequence[int],
    gpus: Sequence[Slot],
    require_full: bool,
    requested: int,
    last_used: int,
    spread: bool,
    counter: Counter | None = None,
) -> list[tuple[Slot, list[int]]]:
    """Pack the most layers onto the fewest GPUs; a second try leaves the output layer out."""
    if requested >= 0 or spread:
        gpus = [s._replace(integrated=False) for s in gpus]
    placement: list[tuple[Slot, list[int]]] = []
    for _ in range(2):
        requested = min(len(layers), requested)
        if spread:
            placement = find_best_fit(layers, gpus, requested, not require_full, counter)
        else:
            for k in range(last_used, len(gpus)):
                force = k == len(gpus) - 1 and not require_full
                placement = find_best_fit(layers, gpus[: k + 1], requested, force, counter)
                total = sum(len(p) for _, p in placement)
                if total in (len(layers), requested):
                    break
        if sum(len(p) for _, p in placement) == len(layers):
            return placement
        layers = layers[:-1]
    return placement


def create_layout(
    layers: Sequence[int],
    devices: Sequence[DeviceInfo],
    reserve: Callable[[DeviceInfo], int],
    *,
    num_gpu: int = -1,
    require_full: bool = False,
    spread: bool = False,
    backoff: float = 0.0,
    overhead: int = 0,
    graphs: Mapping[str, int] | None = None,
    counter: Counter | None = None,
) -> GPULayersList:
    """The layout of LAYOUT.md steps 1-5: one library's GPUs, ordered by first layer.

    ``reserve`` gives each device's MinimumMemory; ``graphs`` each device id's graph bytes.
    Entries without layers are left out.
    """
    graphs = graphs or {}
    best: list[tuple[Slot, list[int]]] = []
    libraries: dict[str, list[DeviceInfo]] = {}
    for d in order(devices):
        libraries.setdefault(d.library, []).append(d)
    for group in libraries.values():
        slots = [
            Slot(
                d.id,
                d.library,
                d.integrated,
                # A budget's cap and reserve come off free memory first (docs/budgets.md).
                usable_free(d.usable_free, backoff, reserve(d), overhead, graphs.get(d.id, 0)),
            )
            for d in group
        ]
        last_used = max((i for i, d in enumerate(group) if graphs.get(d.id, 0) != 0), default=0)
        placement = assign_layers(layers, slots, require_full, num_gpu, last_used, spread, counter)
        if sum(len(p) for _, p in placement) > sum(len(p) for _, p in best):
            best = placement
    layout = GPULayersList(GPULayers(s.id, s.library, sorted(p)) for s, p in best if p)
    layout.sort()
    return layout


def verify_layout(
    layout: GPULayersList,
    layers: Sequence[int],
    devices: Sequence[DeviceInfo],
    system: SystemInfo,
    *,
    num_gpu: int,
    require_full: bool,
    graphs: Mapping[str, int] | None,
    platform: str,
    cpu_extra: int = 0,
) -> None:
    """LAYOUT.md step 6: raise InsufficientMemoryError when the layout cannot be loaded.

    With ``require_full``: GPUs exist, not every layer is placed and the count asked for (if
    any) is not reached; or the CPU's share exceeds free RAM. Off darwin, whatever
    ``require_full`` says: the CPU's share exceeds free RAM plus free swap. The CPU's share is
    the layers left on it plus ``cpu_extra`` (a runner's input weights and CPU graph), plus
    what sits on ``shared_memory`` devices, whose free bytes are the system's: those are
    counted once, against ``shared_pool`` (docs/shared-memory.md).
    """
    on_gpu = {layer for g in layout for layer in g.layers}
    cpu = cpu_extra + sum(size for i, size in enumerate(layers) if i not in on_gpu)
    placed = layout.sum()
    short = bool(devices) and placed < len(layers) and (num_gpu < 0 or placed < num_gpu)
    # The CPU's share and what sits on shared-memory devices draw from one pool: counted once.
    host = cpu + on_shared_devices(layout, layers, devices, graphs)
    free = shared_pool(devices, system)
    if (require_full and (short or host > free)) or (platform != "darwin" and host > free + system.free_swap):
        raise InsufficientMemoryError(attempt(layout, layers, devices, graphs))


def shared_pool(devices: Sequence[DeviceInfo], system: SystemInfo) -> int:
    """The bytes the CPU and the ``shared_memory`` devices draw from together: the system's free
    memory, plus whatever a shared device reports free beyond it (a carve-out in its figure is
    not the system's; counted at least as that excess). Without shared devices: system free."""
    free = system.free_memory
    return free + sum(max(0, d.free_memory - free) for d in devices if d.shared_memory)


def on_shared_devices(
    layout: GPULayersList,
    layers: Sequence[int],
    devices: Sequence[DeviceInfo],
    graphs: Mapping[str, int] | None,
) -> int:
    """Bytes ``layout`` puts on ``shared_memory`` devices: their layers and their graphs."""
    shared = {(d.id, d.library) for d in devices if d.shared_memory}
    if not shared:
        return 0
    graphs = graphs or {}
    total = 0
    for g in layout:
        if (g.id, g.library) in shared:
            total += sum(layers[i] for i in g.layers if 0 <= i < len(layers))
            total += graphs.get(g.id, 0) if g.layers else 0
    return total


def attempt(
    layout: GPULayersList,
    layers: Sequence[int],
    devices: Sequence[DeviceInfo],
    graphs: Mapping[str, int] | None,
) -> BackendMemory:
    """The allocation a layout asks for: layer bytes where each layer sits, graphs per GPU."""
    graphs = graphs or {}
    where = {(g.id, g.library): set(g.layers) for g in layout}
    on_gpu = set().union(*where.values())
    gpus = []
    for d in devices:
        mine = where.get((d.id, d.library), set())
        gpus.append(
            DeviceMemory(
                id=d.id,
                library=d.library,
                name=d.name,
                weights=[size if i in mine else 0 for i, size in enumerate(layers)],
                graph=graphs.get(d.id, 0),
            )
        )
    cpu = DeviceMemory(
        library=CPU_LIBRARY, name="CPU", weights=[0 if i in on_gpu else size for i, size in enumerate(layers)]
    )
    return BackendMemory(input_weights=0, cpu=cpu, gpus=gpus)


def checked_arguments(
    layers: object,
    devices: object,
    system: object,
    num_gpu: object,
    require_full: object,
    spread: object,
    backoff: object,
    overhead: object,
    graphs: object,
) -> tuple[list[int], list[DeviceInfo], dict[str, int]]:
    """``Scout.plan``'s arguments checked: the layers, the devices and the graphs as plain
    values; GpuscoutError saying what was expected and what was found otherwise."""
    if isinstance(layers, (str, bytes, Mapping)) or not isinstance(layers, Iterable):
        raise GpuscoutError(f"plan: layers must be a list of byte sizes, got {type(layers).__name__}")
    sizes = list(layers)
    bad = next((i for i, size in enumerate(sizes) if not is_size(size)), None)
    if bad is not None:
        raise GpuscoutError(
            f"plan: layers[{bad}] must be a non-negative int of bytes, got {sizes[bad]!r:.60}"
        )
    gpus = device_list(devices, "plan: devices")
    if not isinstance(system, SystemInfo):
        raise GpuscoutError(f"plan: system must be a SystemInfo, got {type(system).__name__}")
    if type(num_gpu) is not int or num_gpu < -1:
        raise GpuscoutError(f"plan: num_gpu must be an int >= -1 (-1: auto), got {num_gpu!r:.60}")
    for name, flag in (("require_full", require_full), ("spread", spread)):
        if not isinstance(flag, bool):
            raise GpuscoutError(f"plan: {name} must be a bool, got {flag!r:.60}")
    if isinstance(backoff, bool) or not isinstance(backoff, (int, float)) or not 0 <= backoff <= 1:
        raise GpuscoutError(f"plan: backoff must be a number in [0, 1], got {backoff!r:.60}")
    if not is_size(overhead):
        raise GpuscoutError(f"plan: overhead must be a non-negative int of bytes, got {overhead!r:.60}")
    if graphs is None:
        return sizes, gpus, {}
    if not isinstance(graphs, Mapping):
        raise GpuscoutError(f"plan: graphs must map device ids to bytes, got {type(graphs).__name__}")
    table = dict(graphs)
    odd = next(((k, v) for k, v in table.items() if not isinstance(k, str) or not is_size(v)), None)
    if odd is not None:
        raise GpuscoutError(
            f"plan: graphs must map str device ids to non-negative int bytes; "
            f"{odd[0]!r:.60} maps to {odd[1]!r:.60}"
        )
    return sizes, gpus, table


def plan(
    layers: Sequence[int],
    devices: Sequence[DeviceInfo],
    system: SystemInfo,
    reserve: Callable[[DeviceInfo], int],
    *,
    num_gpu: int = -1,
    require_full: bool = False,
    spread: bool = False,
    backoff: float = 0.0,
    overhead: int = 0,
    graphs: Mapping[str, int] | None = None,
    platform: str = "linux",
    counter: Counter | None = None,
) -> GPULayersList:
    """create_layout then verify_layout (arguments already checked; see ``Scout.plan``)."""
    layout = create_layout(
        layers,
        devices,
        reserve,
        num_gpu=num_gpu,
        require_full=require_full,
        spread=spread,
        backoff=backoff,
        overhead=overhead,
        graphs=graphs,
        counter=counter,
    )
    verify_layout(
        layout,
        layers,
        devices,
        system,
        num_gpu=num_gpu,
        require_full=require_full,
        graphs=graphs,
        platform=platform,
    )
    return layout


__all__ = [
    "Counter",
    "Slot",
    "assign_layers",
    "attempt",
    "checked_arguments",
    "create_layout",
    "f32",
    "find_best_fit",
    "greedy_fit",
    "on_shared_devices",
    "order",
    "plan",
    "shared_pool",
    "usable_free",
    "verify_layout",
]
