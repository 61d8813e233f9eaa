"""CUDA's view of a GPU in MIG mode: its MIG instances are the devices, never the GPU itself."""

from __future__ import annotations

from gpuscout.plugins.cuda.visibility import GpuSlot, MigSlot, visible_uuids

MIG_A = "MIG-11111111-2222-3333-4444-555555555555"


def test_a_gpu_in_mig_mode_without_instances_makes_no_cuda_device() -> None:
    """MIG mode on, no instance created: CUDA enumerates nothing for that GPU."""
    gpus = [GpuSlot("GPU-a", mig_enabled=True), GpuSlot("GPU-b")]
    assert visible_uuids(None, gpus) == ["GPU-b"]
    assert visible_uuids("0,1", gpus) == ["GPU-b"]


def test_a_gpu_in_mig_mode_is_its_instances() -> None:
    """MIG mode on: the GPU's instances stand where the GPU would (index and UUID alike)."""
    gpus = [GpuSlot("GPU-a", mig_enabled=True, mig=(MigSlot(MIG_A, 1, 0),)), GpuSlot("GPU-b")]
    assert visible_uuids(None, gpus) == [MIG_A, "GPU-b"]
    assert visible_uuids("GPU-a", gpus) == [MIG_A]


def test_instances_listed_for_a_gpu_out_of_mig_mode_are_not_devices() -> None:
    """Out of MIG mode the GPU is the device, whatever instances are left on record."""
    gpus = [GpuSlot("GPU-a", mig_enabled=False, mig=(MigSlot(MIG_A, 1, 0),))]
    assert visible_uuids(None, gpus) == ["GPU-a"]
