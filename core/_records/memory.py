"""Memory accounting records: the seed's DeviceMemory, BackendMemory and ErrNoMem."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from gpuscout._records.fields import MAX_BYTES, RecordError, is_bytes, show_value
from gpuscout._records.gofmt import go_plus_v
from gpuscout.errors import GpuscoutError
from gpuscout.sizes import human_bytes, sizes_apart


def _tuple(value: Any, name: str, ok: Any, expected: str) -> tuple[Any, ...]:
    if value is None:
        return ()
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise RecordError(
            f"{name}: expected a sequence of {expected}, got {show_value(value)}", name.rpartition(".")[2]
        )
    items = tuple(value)
    bad = next((i for i, v in enumerate(items) if not ok(v)), None)
    if bad is not None:
        raise RecordError(
            f"{name}[{bad}]: expected {expected}, got {show_value(items[bad])}", name.rpartition(".")[2]
        )
    return items


def _is_size(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= MAX_BYTES


def _weights(value: Any) -> tuple[int, ...]:
    return _tuple(value, "DeviceMemory.weights", _is_size, "an int of bytes in 0..2**64-1")


def _cache(value: Any) -> tuple[int, ...]:
    return _tuple(value, "DeviceMemory.cache", _is_size, "an int of bytes in 0..2**64-1")


def _memory_tuple(value: Any) -> tuple[DeviceMemory, ...]:
    return _tuple(value, "BackendMemory.gpus", lambda v: isinstance(v, DeviceMemory), "a DeviceMemory")


def _is_str(instance: Any, attribute: attrs.Attribute[str], value: Any) -> None:
    if not isinstance(value, str):
        raise RecordError(
            f"{type(instance).__name__}.{attribute.name}: expected str, got {show_value(value)}",
            attribute.name,
        )


def _is_device_memory(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, DeviceMemory):
        raise RecordError(
            f"{type(instance).__name__}.{attribute.name}: expected a DeviceMemory, got {show_value(value)}",
            attribute.name,
        )


@attrs.frozen
class DeviceMemory:
    """Memory one device needs: per-layer weights and cache, plus the compute graph."""

    id: str = attrs.field(default="", validator=_is_str)
    library: str = attrs.field(default="", validator=_is_str)
    name: str = attrs.field(default="", validator=_is_str)
    weights: tuple[int, ...] = attrs.field(default=(), converter=_weights)
    cache: tuple[int, ...] = attrs.field(default=(), converter=_cache)
    graph: int = attrs.field(default=0, validator=is_bytes)

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

    input_weights: int = attrs.field(default=0, validator=is_bytes)
    cpu: DeviceMemory = attrs.field(factory=DeviceMemory, validator=_is_device_memory)
    gpus: tuple[DeviceMemory, ...] = attrs.field(default=(), converter=_memory_tuple)

    @property
    def size(self) -> int:
        """Total bytes over input weights, the CPU and every GPU."""
        return self.input_weights + self.cpu.size + sum(g.size for g in self.gpus)

    def go_plus_v(self) -> str:
        """The record as Go's ``%+v`` prints the seed's struct."""
        gpus = " ".join(g.go_plus_v() for g in self.gpus)
        return f"{{InputWeights:{self.input_weights} CPU:{self.cpu.go_plus_v()} GPUs:[{gpus}]}}"

    def summary_rows(self) -> list[tuple[str, str, int]]:
        """``(what, device, bytes)`` rows as the seed's ``BackendMemory.Log`` prints them: model
        weights per GPU then the CPU (input weights included), then kv cache, then compute graph,
        each only when not zero, and a last ``("total memory", "", total)`` row when any is."""

        def name(d: DeviceMemory) -> str:
            return _device_name(d)

        rows: list[tuple[str, str, int]] = []
        rows += [("model weights", name(g), sum(g.weights)) for g in self.gpus]
        rows.append(("model weights", name(self.cpu), self.input_weights + sum(self.cpu.weights)))
        rows += [("kv cache", name(g), sum(g.cache)) for g in (*self.gpus, self.cpu)]
        rows += [("compute graph", name(g), g.graph) for g in (*self.gpus, self.cpu)]
        rows = [row for row in rows if row[2] > 0]
        total = sum(row[2] for row in rows)
        if total > 0:
            rows.append(("total memory", "", total))
        return rows

    def summary(self) -> list[str]:
        """The summary as lines, binary units: ``model weights  CUDA0  12.0 GiB`` ... ``total
        memory  13.5 GiB`` (empty when nothing is needed)."""
        return [
            " ".join(part for part in (what, device, human_bytes(size)) if part)
            for what, device, size in self.summary_rows()
        ]

    def log_summary(self, level: str = "info") -> None:
        """Log the summary through structlog: one ``memory.summary`` event per row (``what``,
        ``device``, ``size`` in binary units, ``bytes``), at ``level`` (a logger method name)."""
        from gpuscout.log import get_logger

        log = getattr(get_logger(__name__), level)
        for what, device, size in self.summary_rows():
            log("memory.summary", what=what, device=device, size=human_bytes(size), bytes=size)

    def describe(self, free: Mapping[str, int] | None = None) -> str:
        """What this allocation needs where, one clause per device: ``CUDA 0 (CUDA0) needs
        30.0 GiB (weights 28.0 GiB, cache 1.5 GiB, graph 512.0 MiB)``. With ``free`` (device id,
        or ``library id``, to bytes available), only devices that need more than that are named,
        each with what it has; the CPU clause (input weights included) always ends the text."""
        clauses = []
        for g in self.gpus:
            available = _lookup(free, g) if free is not None else None
            if free is not None and (available is None or g.size <= available):
                continue
            if available is None:
                clause = f"{_device_name(g)} needs {human_bytes(g.size)} ({_parts(g)})"
            else:  # the need and what it has written so that they read differently
                need, has = sizes_apart(g.size, available)
                clause = f"{_device_name(g)} needs {need} ({_parts(g)}), has {has}"
            clauses.append(clause)
        cpu_size = self.input_weights + self.cpu.size
        cpu = f"CPU {_device_name(self.cpu, 'CPU')} holds {human_bytes(cpu_size)}".replace("CPU CPU ", "CPU ")
        cpu_parts = _parts(self.cpu, self.input_weights)
        clauses.append(f"{cpu} ({cpu_parts})" if cpu_parts else cpu)
        return "; ".join(clauses)


def _device_name(d: DeviceMemory, default: str = "") -> str:
    label = " ".join(part for part in (d.library, d.id) if part)
    if d.name and label:
        return f"{label} ({d.name})"
    return d.name or label or default


def _lookup(free: Mapping[str, int] | None, d: DeviceMemory) -> int | None:
    if not free:
        return None
    for key in (f"{d.library} {d.id}", d.id):
        if key in free:
            return free[key]
    return None


def _parts(d: DeviceMemory, input_weights: int = 0) -> str:
    parts = []
    weights = input_weights + sum(d.weights)
    if weights:
        parts.append(f"weights {human_bytes(weights)}")
    if sum(d.cache):
        parts.append(f"cache {human_bytes(sum(d.cache))}")
    if d.graph:
        parts.append(f"graph {human_bytes(d.graph)}")
    return ", ".join(parts)


class InsufficientMemoryError(GpuscoutError):
    """A load did not fit (the seed's ErrNoMem); ``memory`` is the allocation that was attempted.

    The message says what did not fit where (``BackendMemory.describe``): with ``free`` (device
    id, or ``library id``, to bytes available) only the devices that overflow are named, else
    every GPU's need; the CPU part ends it. The seed's text, with Go's ``%+v`` of the
    allocation, is ``go_plus_v()``.
    """

    def __init__(self, memory: BackendMemory, free: Mapping[str, int] | None = None) -> None:
        if not isinstance(memory, BackendMemory):
            raise RecordError(f"InsufficientMemoryError: expected a BackendMemory, got {show_value(memory)}")
        if free is not None and not isinstance(free, Mapping):
            raise RecordError(
                f"InsufficientMemoryError: free must map device ids to bytes, got {show_value(free)}"
            )
        self.memory = memory
        self.free = dict(free) if free is not None else None
        super().__init__(f"insufficient memory: {memory.describe(self.free)}")

    def go_plus_v(self) -> str:
        """The seed's ErrNoMem message: ``insufficient memory - required allocations: {...}``."""
        return f"insufficient memory - required allocations: {self.memory.go_plus_v()}"

    @property
    def backend_memory(self) -> BackendMemory:
        """The attempted allocation (the seed embeds it; also as ``memory``)."""
        return self.memory

    def __getattr__(self, name: str) -> object:
        # Like the seed's embedded struct: err.input_weights, err.cpu, err.gpus, err.size.
        if name in ("input_weights", "cpu", "gpus", "size", "summary", "log_summary"):
            return getattr(self.memory, name)
        raise AttributeError(f"{type(self).__name__!s} has no attribute {name!r}")
