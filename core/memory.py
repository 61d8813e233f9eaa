"""Memory accounting records: the seed's DeviceMemory, BackendMemory and ErrNoMem."""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from gpuscout.errors import GpuscoutError
from gpuscout.gofmt import go_plus_v


def _int_tuple(value: Iterable[int] | None) -> tuple[int, ...]:
    return tuple(value) if value else ()


def _memory_tuple(value: Iterable[DeviceMemory] | None) -> tuple[DeviceMemory, ...]:
    return tuple(value) if value else ()


@attrs.frozen
class DeviceMemory:
    """Memory one device needs: per-layer weights and cache, plus the compute graph."""

    id: str = ""
    library: str = ""
    name: str = ""
    weights: tuple[int, ...] = attrs.field(default=(), converter=_int_tuple)
    cache: tuple[int, ...] = attrs.field(default=(), converter=_int_tuple)
    graph: int = 0

    @property
    def size(self) -> int:
        """Total bytes: every weight, every cache entry and the graph."""
        return sum(self.weights) + sum(self.cache) + self.graph

    def go_plus_v(self) -> str:
        """The record as Go's ``%+v`` prints the seed's struct."""
        return (
            f"{{DeviceID:{{ID:{self.id} Library:{self.library}}} Name:{self.name} "
            f"Weights:{go_plus_v(self.weights)} Cache:{go_plus_v(self.cache)} Graph:{self.graph}}}"
        )


@attrs.frozen
class BackendMemory:
    """Memory a model load needs: input weights (always on the CPU), the CPU part and each GPU's."""

    input_weights: int = 0
    cpu: DeviceMemory = attrs.field(factory=DeviceMemory)
    gpus: tuple[DeviceMemory, ...] = attrs.field(default=(), converter=_memory_tuple)

    @property
    def size(self) -> int:
        """Total bytes over input weights, the CPU and every GPU."""
        return self.input_weights + self.cpu.size + sum(g.size for g in self.gpus)

    def go_plus_v(self) -> str:
        """The record as Go's ``%+v`` prints the seed's struct."""
        gpus = " ".join(g.go_plus_v() for g in self.gpus)
        return f"{{InputWeights:{self.input_weights} CPU:{self.cpu.go_plus_v()} GPUs:[{gpus}]}}"


class InsufficientMemoryError(GpuscoutError):
    """A load did not fit (the seed's ErrNoMem); ``memory`` is the allocation that was attempted."""

    def __init__(self, memory: BackendMemory) -> None:
        self.memory = memory
        super().__init__(f"insufficient memory - required allocations: {memory.go_plus_v()}")

    @property
    def backend_memory(self) -> BackendMemory:
        """The attempted allocation (the seed embeds it; also as ``memory``)."""
        return self.memory

    def __getattr__(self, name: str) -> object:
        # Like the seed's embedded struct: err.input_weights, err.cpu, err.gpus, err.size.
        if name in ("input_weights", "cpu", "gpus", "size"):
            return getattr(self.memory, name)
        raise AttributeError(f"{type(self).__name__!s} has no attribute {name!r}")
