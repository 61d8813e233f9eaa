"""GPULayers and GPULayersList: printing, ordering, sums and a stable hash."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuscout import BackendMemory, DeviceMemory, GPULayers, GPULayersList, InsufficientMemoryError


@pytest.mark.parametrize(
    ("layers", "text"),
    [
        ([], ""),
        ([0], "ID:GPU-a Layers:1(0..0)"),
        ([2, 0, 1], "ID:GPU-a Layers:3(0..2)"),
        ([5, 1, 3], "ID:GPU-a Layers:3[1 3 5]"),
        ([10, 11, 13], "ID:GPU-a Layers:3[10 11 13]"),
    ],
)
def test_gpu_layers_print_like_go(layers: list[int], text: str) -> None:
    """str(GPULayers) matches the seed's String(): ranges when contiguous, else the list."""
    assert str(GPULayers("GPU-a", "CUDA", layers)) == text


def test_printing_does_not_reorder_the_layers() -> None:
    """Unlike Go, printing sorts a copy."""
    g = GPULayers("0", "CUDA", [3, 1])
    str(g)
    assert g.layers == [3, 1]


@pytest.mark.parametrize(
    ("entries", "text"),
    [
        ([], "[]"),
        ([GPULayers(), GPULayers()], "[ ]"),
        (
            [GPULayers("0", "CUDA", [0, 1]), GPULayers("1", "CUDA", [2])],
            "3[ID:0 Layers:2(0..1) ID:1 Layers:1(2..2)]",
        ),
        ([GPULayers("0", "CUDA", [4, 2]), GPULayers("1", "ROCm", [])], "2[ID:0 Layers:2[2 4] ]"),
    ],
)
def test_gpu_layers_list_prints_like_go(entries: list[GPULayers], text: str) -> None:
    """str(GPULayersList) prefixes the sum when positive, empty entries included."""
    assert str(GPULayersList(entries)) == text


def test_first_layer_is_the_smallest_or_maxint() -> None:
    """first_layer is the minimum, or Go's MaxInt when empty."""
    assert GPULayers(layers=[7, 3, 9]).first_layer == 3
    assert GPULayers().first_layer == 2**63 - 1


def test_list_sorts_by_first_layer() -> None:
    """sort() orders entries by their first layer, empty ones last."""
    items = GPULayersList([GPULayers("a", layers=[5]), GPULayers("b"), GPULayers("c", layers=[1, 9])])
    items.sort()
    assert [g.id for g in items] == ["c", "a", "b"]
    assert [g.id for g in sorted(items)] == ["c", "a", "b"]


def test_sum_counts_every_layer() -> None:
    """sum() is the number of layers over all GPUs."""
    assert GPULayersList([GPULayers(layers=[1, 2]), GPULayers(layers=[3])]).sum() == 3


def test_hash_ignores_empty_entries_and_depends_on_placement() -> None:
    """Empty entries do not change the hash; moving a layer does."""
    a = GPULayersList([GPULayers("0", "CUDA", [0, 1])])
    b = GPULayersList([GPULayers("0", "CUDA", [0, 1]), GPULayers("1", "CUDA")])
    c = GPULayersList([GPULayers("0", "CUDA", [0]), GPULayers("1", "CUDA", [1])])
    assert a.hash() == b.hash() != c.hash()


def test_hash_is_stable_across_processes() -> None:
    """The same assignment hashes the same in a fresh interpreter (hash seed randomised)."""
    code = (
        "from gpuscout import GPULayers, GPULayersList;"
        "l = GPULayersList([GPULayers('GPU-1', 'CUDA', [0, 1, 2])]);print(l.hash(), hash(l))"
    )
    runs = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            env={"PYTHONHASHSEED": seed},
            timeout=60,
        ).stdout
        for seed in ("1", "2")
    }
    assert len(runs) == 1 and runs.pop().split()[0] == str(
        GPULayersList([GPULayers("GPU-1", "CUDA", [0, 1, 2])]).hash()
    )


@given(st.lists(st.integers(min_value=0, max_value=500), min_size=1, max_size=30, unique=True))
def test_contiguous_runs_always_print_as_ranges(layers: list[int]) -> None:
    """Any set of layers prints as a range exactly when it is contiguous."""
    text = str(GPULayers("x", "CUDA", layers))
    contiguous = max(layers) - min(layers) + 1 == len(layers)
    assert text.endswith(f"({min(layers)}..{max(layers)})") == contiguous


def test_memory_sizes_add_up() -> None:
    """DeviceMemory.size and BackendMemory.size sum weights, caches and graphs."""
    cpu = DeviceMemory(id="cpu", name="CPU", weights=[1, 2], cache=[3], graph=4)
    gpu = DeviceMemory(id="0", library="CUDA", name="CUDA0", weights=[10], graph=20)
    assert cpu.size == 10 and gpu.size == 30
    assert BackendMemory(input_weights=5, cpu=cpu, gpus=[gpu]).size == 45


def test_insufficient_memory_error_prints_like_errnomem() -> None:
    """The message is the seed's, with Go's %+v of the allocation."""
    memory = BackendMemory(
        input_weights=1,
        cpu=DeviceMemory(name="CPU", weights=[2]),
        gpus=[DeviceMemory(id="0", library="CUDA", name="CUDA0", graph=3)],
    )
    err = InsufficientMemoryError(memory)
    assert err.memory is memory and err.backend_memory is memory
    assert (err.input_weights, err.gpus, err.size) == (1, memory.gpus, 6)
    assert str(err).startswith("insufficient memory: CUDA 0 (CUDA0) needs 3 B")
    assert err.go_plus_v() == (
        "insufficient memory - required allocations: {InputWeights:1 CPU:{DeviceID:{ID: Library:} "
        "Name:CPU Weights:[2] Cache:[] Graph:0} GPUs:[{DeviceID:{ID:0 Library:CUDA} Name:CUDA0 "
        "Weights:[] Cache:[] Graph:3}]}"
    )
