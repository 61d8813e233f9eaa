"""Vulkan's seed rules with a Scout that holds the vulkan plugin alone."""

from __future__ import annotations

import pytest

from gpuscout import DeviceComparison, DeviceInfo, Scout
from gpuscout.plugins.vulkan.rules import normalize_description, similar_memory
from gpuscout.sizes import GIB, MIB
from gpuscout.testing import ScoutFactory


@pytest.fixture
def scout(gpuscout_scout: ScoutFactory) -> Scout:
    """The vulkan plugin alone; the default environment keeps the real loader away."""
    return gpuscout_scout("vulkan")


@pytest.mark.parametrize(
    ("text", "normalized"),
    [
        ("NVIDIA GeForce RTX 4090", "nvidia geforce rtx 4090"),
        ("  AMD Radeon(TM) Graphics ", "amd radeon graphics"),
        ("AMD Radeon RX 7900 XTX (RADV NAVI31)", "amd radeon rx 7900 xtx"),
        ("Intel(R) Arc(tm) A770 Graphics (DG2)", "intel arc a770 graphics"),
        ("a)b", "ab"),
        ("((nested) still inside) out", "out"),
        ("Foo--Bar_baz", "foo bar baz"),
        ("(all in parentheses)", ""),
    ],
)
def test_descriptions_normalize_like_the_seed(text: str, normalized: str) -> None:
    """Lower case, parenthesised parts dropped, other characters collapsed to one space."""
    assert normalize_description(text) == normalized


@pytest.mark.parametrize(
    ("a", "b", "similar"),
    [
        (24 * GIB, 24 * GIB, True),
        (80 * GIB, 76 * GIB, True),
        (80 * GIB, 75 * GIB, False),
        (4 * GIB, 4 * GIB + 512 * MIB, True),
        (4 * GIB, 4 * GIB + 513 * MIB, False),
        (0, 0, False),
        (GIB, 0, False),
    ],
)
def test_memory_is_similar_within_5_percent_or_512_mib(a: int, b: int, similar: bool) -> None:
    """The tolerance is 5 % of the larger size, never less than 512 MiB; zero never matches."""
    assert similar_memory(a, b) is similar


def test_the_vulkan_twin_of_a_cuda_card_is_a_duplicate(scout: Scout) -> None:
    """Alone, the vulkan plugin recognises its view of a CUDA card by description and memory."""
    cuda = DeviceInfo(
        id="GPU-a", library="CUDA", description="NVIDIA GeForce RTX 4090", total_memory=24 * GIB
    )
    vk = DeviceInfo(
        id="0", library="Vulkan", description="NVIDIA GeForce RTX 4090", total_memory=24 * GIB - 300 * MIB
    )
    assert scout.compare(vk, cuda) is DeviceComparison.DUPLICATE


def test_vulkan_passes_flash_attention_but_is_not_preferred(scout: Scout) -> None:
    """Vulkan devices pass flash attention; Vulkan never wins a twin; no init validation."""
    vk = DeviceInfo(id="0", library="Vulkan")
    assert scout.flash_attention_supported([vk]) is True
    assert scout.preferred(vk, DeviceInfo(library="CUDA")) is False
    assert scout.needs_init_validation(vk) is False


def test_visible_env_filters_only_a_single_vulkan_device(scout: Scout) -> None:
    """GGML_VK_VISIBLE_DEVICES carries the raw index of a lone Vulkan selection only."""
    one = DeviceInfo(id="0", filter_id="2", library="Vulkan")
    two = DeviceInfo(id="1", filter_id="3", library="Vulkan")
    assert scout.visible_env([one]) == {"GGML_VK_VISIBLE_DEVICES": "2"}
    assert scout.visible_env([one, two]) == {}
