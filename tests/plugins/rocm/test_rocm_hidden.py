"""AMD GPUs that ROCR_VISIBLE_DEVICES, or the list HIP applies after it, hides: reported marked
``hidden_by`` with the variable that hides each, and dropped by the core with that reason.

Recorded trees: mixed_apu_dgpu (an RX 7900 XTX and a Radeon iGPU) and mi300x_cpx (one MI300X
in CPX mode: eight KFD GPU nodes, each with its own UUID).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from gpuscout import Discovery, Scout
from gpuscout.plugins.rocm.visibility import hidden_by

DGPU, IGPU = "GPU-2a9e4c7b10f3d685", "GPU-0000b2c41e5a7f09"
UUIDS = [DGPU, IGPU]
BY_CUDA = "(HIP reads it when HIP_VISIBLE_DEVICES is empty or unset)"


def reasons(found: Discovery) -> list[tuple[str, str]]:
    return [(d.device.id, d.reason) for d in found.dropped]


def test_a_gpu_rocr_leaves_out_is_dropped_naming_rocr(discover: Callable[..., Discovery]) -> None:
    """ROCR_VISIBLE_DEVICES=1 keeps the iGPU; the discrete card is hidden by ROCR."""
    found = discover("mixed_apu_dgpu", {"ROCR_VISIBLE_DEVICES": "1"})
    assert ([d.id for d in found.devices], reasons(found)) == (
        [IGPU],
        [(DGPU, "hidden by ROCR_VISIBLE_DEVICES=1")],
    )


def test_a_gpu_hip_leaves_out_of_rocrs_survivors_is_dropped_naming_hip(
    discover: Callable[..., Discovery],
) -> None:
    """ROCR_VISIBLE_DEVICES=2,3 then HIP_VISIBLE_DEVICES=1: partition 3 alone; partition 2 is
    hidden by HIP, the six others by ROCR."""
    found = discover("mi300x_cpx", {"ROCR_VISIBLE_DEVICES": "2,3", "HIP_VISIBLE_DEVICES": "1"})
    assert (
        [d.id for d in found.devices],
        sorted({r for _, r in reasons(found)}),
        dict(reasons(found))["GPU-8d1e2c3a00003002"],
    ) == (
        ["GPU-8d1e2c3a00004003"],
        ["hidden by HIP_VISIBLE_DEVICES=1", "hidden by ROCR_VISIBLE_DEVICES=2,3"],
        "hidden by HIP_VISIBLE_DEVICES=1",
    )


def test_cuda_visible_devices_read_by_hip_is_named_with_why(discover: Callable[..., Discovery]) -> None:
    """HIP falls back to CUDA_VISIBLE_DEVICES; the reason names it and says why HIP reads it."""
    found = discover("mixed_apu_dgpu", {"CUDA_VISIBLE_DEVICES": "1"})
    assert reasons(found) == [(DGPU, f"hidden by CUDA_VISIBLE_DEVICES=1 {BY_CUDA}")]


def test_hidden_gpus_have_no_hip_position_in_their_name(rocm_scout: Callable[..., Scout]) -> None:
    """A hidden GPU is named "ROCm" alone: HIP numbers only what it sees (ROCm0, ...)."""
    found = rocm_scout("mixed_apu_dgpu", {"ROCR_VISIBLE_DEVICES": "1"}).enumerate()
    assert [(d.name, bool(d.hidden_by)) for _, d in found] == [("ROCm0", False), ("ROCm", True)]


def test_nothing_is_hidden_without_a_visibility_variable(discover: Callable[..., Discovery]) -> None:
    """No variable set: both GPUs listed, nothing dropped."""
    found = discover("mixed_apu_dgpu")
    assert (len(found.devices), found.dropped) == (2, [])


# -- NoDevFiles and empty values (Slurm writes NoDevFiles for a job without GPUs) ---------------


@pytest.mark.parametrize(
    ("env", "why"),
    [
        ({"ROCR_VISIBLE_DEVICES": "NoDevFiles"}, "ROCR_VISIBLE_DEVICES=NoDevFiles"),
        ({"ROCR_VISIBLE_DEVICES": ""}, "ROCR_VISIBLE_DEVICES=''"),
        ({"HIP_VISIBLE_DEVICES": "NoDevFiles"}, "HIP_VISIBLE_DEVICES=NoDevFiles"),
        ({"CUDA_VISIBLE_DEVICES": "NoDevFiles"}, f"CUDA_VISIBLE_DEVICES=NoDevFiles {BY_CUDA}"),
    ],
)
def test_no_dev_files_or_an_empty_rocr_list_hides_every_gpu(env: dict[str, str], why: str) -> None:
    """ROCr ends its list at the invalid token NoDevFiles (and shows nothing when set but
    empty); HIP ends its list at it too, whether read from HIP_VISIBLE_DEVICES or CUDA's."""
    assert hidden_by(env, UUIDS) == {0: why, 1: why}


def test_an_empty_hip_list_hides_nothing() -> None:
    """HIP_VISIBLE_DEVICES set but empty (CUDA's unset) filters nothing, unlike ROCr and CUDA."""
    assert hidden_by({"HIP_VISIBLE_DEVICES": ""}, UUIDS) == {}


def test_gpu_device_ordinal_hides_nothing() -> None:
    """GPU_DEVICE_ORDINAL is OpenCL's in ROCclr: HIP programs still see every GPU."""
    assert hidden_by({"GPU_DEVICE_ORDINAL": "NoDevFiles"}, UUIDS) == {}


def test_no_dev_files_leaves_no_device_in_a_discovery(discover: Callable[..., Discovery]) -> None:
    """On the recorded box ROCR_VISIBLE_DEVICES=NoDevFiles lists nothing and drops both GPUs."""
    found = discover("mixed_apu_dgpu", {"ROCR_VISIBLE_DEVICES": "NoDevFiles"})
    assert (found.devices, [r for _, r in reasons(found)]) == (
        [],
        ["hidden by ROCR_VISIBLE_DEVICES=NoDevFiles"] * 2,
    )
