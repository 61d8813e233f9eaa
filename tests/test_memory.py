"""BackendMemory's summary and the message of InsufficientMemoryError."""

from __future__ import annotations

import logging

import pytest

from gpuscout._records.memory import BackendMemory, DeviceMemory, InsufficientMemoryError
from gpuscout.sizes import GIB

MEMORY = BackendMemory(
    input_weights=1 * GIB,
    cpu=DeviceMemory(name="CPU", weights=[2 * GIB, 0], cache=[GIB // 2, 0]),
    gpus=[
        DeviceMemory(
            id="GPU-a",
            library="CUDA",
            name="CUDA0",
            weights=[0, 28 * GIB],
            cache=[0, 3 * GIB // 2],
            graph=GIB // 2,
        )
    ],
)


def test_summary_lists_weights_cache_and_graph_per_device_then_total() -> None:
    """The summary lists weights, cache and graph per device, GPUs first, then the total."""
    assert MEMORY.summary() == [
        "model weights CUDA GPU-a (CUDA0) 28.0 GiB",
        "model weights CPU 3.0 GiB",
        "kv cache CUDA GPU-a (CUDA0) 1.5 GiB",
        "kv cache CPU 512.0 MiB",
        "compute graph CUDA GPU-a (CUDA0) 512.0 MiB",
        "total memory 33.5 GiB",
    ]
    assert BackendMemory().summary() == []


def test_the_insufficient_memory_message_names_what_did_not_fit_where() -> None:
    """InsufficientMemoryError names each GPU that did not fit, what it needs and has, and the CPU's share."""
    err = InsufficientMemoryError(MEMORY, free={"GPU-a": 24 * GIB})
    assert str(err) == (
        "insufficient memory: CUDA GPU-a (CUDA0) needs 30.0 GiB (weights 28.0 GiB, "
        "cache 1.5 GiB, graph 512.0 MiB), has 24.0 GiB; CPU holds 3.5 GiB "
        "(weights 3.0 GiB, cache 512.0 MiB)"
    )
    assert err.memory is MEMORY and err.go_plus_v().startswith(
        "insufficient memory - required allocations: {InputWeights:1073741824 "
    )
    assert "CUDA" not in str(InsufficientMemoryError(MEMORY, free={"GPU-a": 40 * GIB}))


def test_log_summary_logs_each_row(caplog: pytest.LogCaptureFixture) -> None:
    """Each summary row is one ``memory.summary`` event with its device, size and bytes."""
    caplog.set_level(logging.INFO, logger="gpuscout")
    MEMORY.log_summary()
    events = [r.__dict__["gpuscout"] for r in caplog.records if r.name.startswith("gpuscout")]
    assert [(e["event"], e["what"], e["device"], e["bytes"]) for e in events] == [
        ("memory.summary", "model weights", "CUDA GPU-a (CUDA0)", 28 * GIB),
        ("memory.summary", "model weights", "CPU", 3 * GIB),
        ("memory.summary", "kv cache", "CUDA GPU-a (CUDA0)", 3 * GIB // 2),
        ("memory.summary", "kv cache", "CPU", GIB // 2),
        ("memory.summary", "compute graph", "CUDA GPU-a (CUDA0)", GIB // 2),
        ("memory.summary", "total memory", "", 67 * GIB // 2),
    ]
    assert events[0]["size"] == "28.0 GiB"


def test_log_summary_is_quiet_below_the_hosts_level(caplog: pytest.LogCaptureFixture) -> None:
    """At the default warning level the info rows are not emitted."""
    caplog.set_level(logging.WARNING, logger="gpuscout")
    MEMORY.log_summary()
    assert [r for r in caplog.records if r.name.startswith("gpuscout")] == []


def test_a_device_with_exactly_the_memory_it_needs_is_not_named() -> None:
    """``describe`` names only devices that need more than they have; equal is enough."""
    need = MEMORY.gpus[0].size
    assert "GPU-a" not in MEMORY.describe(free={"GPU-a": need})
    assert "GPU-a" in MEMORY.describe(free={"GPU-a": need - 1})
