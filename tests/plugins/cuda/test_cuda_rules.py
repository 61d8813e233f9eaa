"""CUDA's seed rules with a Scout that holds the cuda plugin alone."""

from __future__ import annotations

import pytest

from gpuscout import DeviceInfo, Scout
from gpuscout.testing import ScoutFactory


@pytest.fixture
def scout(gpuscout_scout: ScoutFactory) -> Scout:
    """The cuda plugin alone, with an empty environment."""
    return gpuscout_scout("cuda", env={})


def card(id: str = "GPU-a", **kw: object) -> DeviceInfo:
    return DeviceInfo(id=id, filter_id=id, library="CUDA", **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("major", "minor", "driver", "ok"),
    [
        (5, 0, 12, False),
        (5, 2, 12, False),
        (6, 1, 12, False),
        (6, 2, 12, False),
        (7, 0, 12, True),
        (7, 2, 12, False),
        (7, 5, 12, True),
        (8, 9, 6, False),
        (8, 9, 7, True),
        (9, 0, 0, True),
        (12, 1, 13, True),
        (-1, -1, 12, False),
    ],
)
def test_flash_attention_gate(scout: Scout, major: int, minor: int, driver: int, ok: bool) -> None:
    """CC >= 7 but not 7.2, driver major >= 7 or unknown (0)."""
    device = card(compute_major=major, compute_minor=minor, driver_major=driver)
    assert scout.flash_attention_supported([device]) is ok


def test_other_libraries_are_not_judged_by_cuda(scout: Scout) -> None:
    """Alone, the cuda plugin lets a Vulkan device fall to the core default (fail)."""
    assert scout.flash_attention_supported([DeviceInfo(library="Vulkan")]) is False


def test_cuda_is_preferred_and_validated_with_deep_init(scout: Scout) -> None:
    """CUDA wins twins and is initialised in a child with GGML_CUDA_INIT=1."""
    assert scout.preferred(card(), DeviceInfo(library="Vulkan")) is True
    assert scout.preferred(DeviceInfo(library="Vulkan"), card()) is False
    assert scout.init_env(card()) == {"GGML_CUDA_INIT": "1"}
    assert scout.needs_init_validation(DeviceInfo(library="Vulkan")) is False


def test_visible_env_filters_one_or_all_cuda_devices(scout: Scout) -> None:
    """CUDA_VISIBLE_DEVICES for one device or an all-CUDA selection, never for a mixed one."""
    assert scout.visible_env([card("GPU-b")]) == {"CUDA_VISIBLE_DEVICES": "GPU-b"}
    assert scout.visible_env([card("GPU-b"), card("GPU-a")]) == {"CUDA_VISIBLE_DEVICES": "GPU-b,GPU-a"}
    assert scout.visible_env([card("GPU-b"), DeviceInfo(id="0", library="Vulkan")]) == {}


def test_the_reserve_is_the_core_default(scout: Scout) -> None:
    """CUDA does not answer the reserve: 457 MiB."""
    assert scout.minimum_memory(card()) == 457 * 1024**2
