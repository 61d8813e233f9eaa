"""AMD GPUs that ROCR_VISIBLE_DEVICES, or the list HIP applies after it, hides: reported marked
``hidden_by`` with the variable that hides each, and dropped by the core with that reason.

Recorded trees: mixed_apu_dgpu (an RX 7900 XTX and a Radeon iGPU) and mi300x_cpx (one MI300X
in CPX mode: eight KFD GPU nodes, each with its own UUID).
"""

from __future__ import annotations

from collections.abc import Callable

from gpuscout import Discovery, Scout

DGPU, IGPU = "GPU-2a9e4c7b10f3d685", "GPU-0000b2c41e5a7f09"
BY_CUDA = "(HIP reads it when HIP_VISIBLE_DEVICES is empty or unset)"


def reasons(found: Discovery) -> list[tuple[str, str]]:
    return [(d.device.id, d.reason) for d in found.dropped]


def test_a_gpu_rocr_leaves_out_is_dropped_naming_rocr(
        discover: Callable[..., Discovery]) -> None:
    """ROCR_VISIBLE_DEVICES=1 keeps the iGPU; the discrete card is hidden by ROCR."""
    found = discover("mixed_apu_dgpu", {"ROCR_VISIBLE_DEVICES": "1"})
    assert ([d.id for d in found.devices], reasons(found)) == (
        [IGPU], [(DGPU, "hidden by ROCR_VISIBLE_DEVICES=1")])


def test_a_gpu_hip_leaves_out_of_rocrs_survivors_is_dropped_naming_hip(
        discover: Callable[..., Discovery]) -> None:
    """ROCR_VISIBLE_DEVICES=2,3 then HIP_VISIBLE_DEVICES=1: partition 3 alone; partition 2 is
    hidden by HIP, the six others by ROCR."""
    found = discover("mi300x_cpx", {"ROCR_VISIBLE_DEVICES": "2,3", "HIP_VISIBLE_DEVICES": "1"})
    assert ([d.id for d in found.devices], sorted({r for _, r in reasons(found)}),
            dict(reasons(found))["GPU-8d1e2c3a00003002"]) == (
        ["GPU-8d1e2c3a00004003"],
        ["hidden by HIP_VISIBLE_DEVICES=1", "hidden by ROCR_VISIBLE_DEVICES=2,3"],
        "hidden by HIP_VISIBLE_DEVICES=1")


def test_cuda_visible_devices_read_by_hip_is_named_with_why(
        discover: Callable[..., Discovery]) -> None:
    """HIP falls back to CUDA_VISIBLE_DEVICES; the reason names it and says why HIP reads it."""
    found = discover("mixed_apu_dgpu", {"CUDA_VISIBLE_DEVICES": "1"})
    assert reasons(found) == [(DGPU, f"hidden by CUDA_VISIBLE_DEVICES=1 {BY_CUDA}")]


def test_hidden_gpus_have_no_hip_position_in_their_name(
        rocm_scout: Callable[..., Scout]) -> None:
    """A hidden GPU is named "ROCm" alone: HIP numbers only what it sees (ROCm0, ...)."""
    found = rocm_scout("mixed_apu_dgpu", {"ROCR_VISIBLE_DEVICES": "1"}).enumerate()
    assert [(d.name, bool(d.hidden_by)) for _, d in found] == [("ROCm0", False), ("ROCm", True)]


def test_nothing_is_hidden_without_a_visibility_variable(
        discover: Callable[..., Discovery]) -> None:
    """No variable set: both GPUs listed, nothing dropped."""
    found = discover("mixed_apu_dgpu")
    assert (len(found.devices), found.dropped) == (2, [])
