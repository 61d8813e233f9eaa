"""ROCm's seed rules with a Scout that holds the rocm plugin alone."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from gpuscout import DeviceInfo, Scout
from gpuscout.testing import ScoutFactory


@pytest.fixture
def scout(gpuscout_scout: ScoutFactory) -> Callable[..., Scout]:
    """``scout(env=None, platform="linux")``: the rocm plugin alone."""
    return lambda env=None, platform="linux": gpuscout_scout("rocm", env=env or {}, platform=platform)


def card(id: str = "GPU-0123456789abcdef", **kw: object) -> DeviceInfo:
    return DeviceInfo(id=id, filter_id=id, library="ROCm", **kw)  # type: ignore[arg-type]


def test_rocm_passes_flash_attention_and_is_preferred(scout: Callable[..., Scout]) -> None:
    """ROCm devices pass flash attention and win twins."""
    s = scout()
    assert s.flash_attention_supported([card(compute_major=0x9, compute_minor=0x6)]) is True
    assert s.preferred(card(), DeviceInfo(library="Vulkan")) is True


def test_rocm_devices_are_validated_with_deep_init(scout: Callable[..., Scout]) -> None:
    """An unsupported target crashes rocBLAS, so ROCm devices are initialised in a child."""
    assert scout().init_env(card()) == {"GGML_CUDA_INIT": "1"}


@pytest.mark.parametrize(
    ("env", "platform", "expected"),
    [
        ({}, "linux", {"ROCR_VISIBLE_DEVICES": "GPU-a,GPU-b"}),
        (
            {"HIP_VISIBLE_DEVICES": "3,2"},
            "linux",
            {"ROCR_VISIBLE_DEVICES": "GPU-a,GPU-b", "HIP_VISIBLE_DEVICES": "0,1"},
        ),
        (
            {"ROCR_VISIBLE_DEVICES": "1", "HIP_VISIBLE_DEVICES": "0"},
            "linux",
            {"ROCR_VISIBLE_DEVICES": "GPU-a,GPU-b", "HIP_VISIBLE_DEVICES": "0,1"},
        ),
        ({}, "win32", {"HIP_VISIBLE_DEVICES": "GPU-a,GPU-b"}),
        ({"GPU_DEVICE_ORDINAL": "1"}, "win32", {"GPU_DEVICE_ORDINAL": "GPU-a,GPU-b"}),
    ],
)
def test_visible_env_always_filters_rocm(
    scout: Callable[..., Scout], env: dict[str, str], platform: str, expected: dict[str, str]
) -> None:
    """ROCR_VISIBLE_DEVICES on Linux (plus the child's ordinals where a numeric list, or an
    inherited HIP list, is set), the first numeric variable (else HIP_VISIBLE_DEVICES) elsewhere."""
    devices = [card("GPU-a"), card("GPU-b")]
    assert scout(env, platform).visible_env(devices) == expected
