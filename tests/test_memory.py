"""BackendMemory's summary and the message of InsufficientMemoryError."""

from __future__ import annotations

from gpuscout.memory import BackendMemory, DeviceMemory, InsufficientMemoryError

GiB = 1 << 30

MEMORY = BackendMemory(
    input_weights=1 * GiB,
    cpu=DeviceMemory(name="CPU", weights=[2 * GiB, 0], cache=[GiB // 2, 0]),
    gpus=[DeviceMemory(id="GPU-a", library="CUDA", name="CUDA0", weights=[0, 28 * GiB],
                       cache=[0, 3 * GiB // 2], graph=GiB // 2)])


def test_summary_lists_weights_cache_and_graph_per_device_then_total() -> None:
    assert MEMORY.summary() == [
        "model weights CUDA GPU-a (CUDA0) 28.0 GiB",
        "model weights CPU 3.0 GiB",
        "kv cache CUDA GPU-a (CUDA0) 1.5 GiB",
        "kv cache CPU 512.0 MiB",
        "compute graph CUDA GPU-a (CUDA0) 512.0 MiB",
        "total memory 33.5 GiB",
    ]
    assert BackendMemory().summary() == []


def test_message_names_what_did_not_fit_where() -> None:
    err = InsufficientMemoryError(MEMORY, free={"GPU-a": 24 * GiB})
    assert str(err) == ("insufficient memory: CUDA GPU-a (CUDA0) needs 30.0 GiB (weights 28.0 GiB, "
                        "cache 1.5 GiB, graph 512.0 MiB), has 24.0 GiB; CPU holds 3.5 GiB "
                        "(weights 3.0 GiB, cache 512.0 MiB)")
    assert err.memory is MEMORY and err.go_plus_v().startswith(
        "insufficient memory - required allocations: {InputWeights:1073741824 ")
    assert "CUDA" not in str(InsufficientMemoryError(MEMORY, free={"GPU-a": 40 * GiB}))


def test_log_summary_logs_each_row(capsys) -> None:  # type: ignore[no-untyped-def]
    MEMORY.log_summary()  # quiet by default; must not raise
