"""Rules of layer placement and the load loop (docs LAYOUT.md), each stated once."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from gpuscout import DeviceInfo, Scout
from gpuscout._discovery.ranking import library_paths
from gpuscout._layout.plan import Slot, assign_layers
from gpuscout.errors import GpuscoutError
from gpuscout.load import LoadOperation
from gpuscout.sizes import MIB
from tests.test_load import RESERVE, SYSTEM, FakeRunner, gpu


@pytest.fixture
def scout(scout_with: Callable[..., Scout]) -> Scout:
    return scout_with([])


def test_library_paths_start_with_the_base_paths() -> None:
    """The seed's LibraryPaths begins with the runtime's own directory, then the devices' paths."""
    d = DeviceInfo(id="0", library="CUDA", library_path=("/lib/cuda_v12", "/lib/base"))
    assert library_paths([d], base=("/lib/base",)) == ["/lib/base", "/lib/cuda_v12"]


def test_an_explicit_layer_count_overfills_only_the_last_gpu_tried() -> None:
    """With a requested count, earlier GPUs get what fits; only the last one tried may overfill."""
    gpus = [Slot("a", "CUDA", False, 20), Slot("b", "CUDA", False, 20)]
    placement = assign_layers([10] * 4, gpus, require_full=False, requested=4, last_used=0, spread=False)
    assert [(slot.id, layers) for slot, layers in placement] == [("a", [1, 0]), ("b", [3, 2])]


def test_a_report_that_moves_layers_to_another_gpu_is_tried_before_backing_off(scout: Scout) -> None:
    """A new layout with as many layers as the last, placed elsewhere, is asked about again."""
    devices = [gpu(0, RESERVE + 1000 * MIB), gpu(1, RESERVE + 1000 * MIB)]
    runner = FakeRunner(devices, [100 * MIB] * 10, graph=lambda n: 50 * MIB)
    done = scout.load(runner.estimate(), devices, SYSTEM, runner)
    assert done.layout.sum() == 10 and len(done.devices) == 2
    assert runner.operations()[-2:] == [LoadOperation.ALLOC, LoadOperation.COMMIT]


def test_zero_forced_layers_that_cannot_be_allocated_fail_at_once(scout: Scout) -> None:
    """num_gpu = 0 is a forced count like any other: no backoff, the error names it."""
    devices = [gpu(0, 8 * 1024 * MIB)]
    runner = FakeRunner(devices, [100 * MIB] * 8, real_free={"GPU-0": -1})
    with pytest.raises(GpuscoutError, match="with num_gpu = 0"):
        scout.load(runner.estimate(), devices, SYSTEM, runner, num_gpu=0)
    assert runner.operations() == [LoadOperation.FIT, LoadOperation.CLOSE]
