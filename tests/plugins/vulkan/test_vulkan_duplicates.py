"""A Vulkan device that is a CUDA/ROCm card seen twice: PCI id, then UUID, then the seed's guess."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from gpuscout import DeviceComparison, DeviceInfo, Scout
from gpuscout.plugins.vulkan.rules import same_uuid, uuid_hex
from gpuscout.sizes import GIB

UUID = "5f6c2a1e-8b3d-4c9a-a1b2-0123456789ab"
OTHER_UUID = "00000000-1111-2222-3333-444444444444"


def cuda(**kw: object) -> DeviceInfo:
    base: dict[str, object] = dict(
        id=f"GPU-{UUID}",
        library="CUDA",
        uuid=f"GPU-{UUID}",
        description="NVIDIA H200",
        total_memory=141 * GIB,
    )
    return DeviceInfo(**{**base, **kw})  # type: ignore[arg-type]


def vulkan(**kw: object) -> DeviceInfo:
    base: dict[str, object] = dict(
        id="0", library="Vulkan", filter_id="0", uuid=UUID, description="NVIDIA H200", total_memory=141 * GIB
    )
    return DeviceInfo(**{**base, **kw})  # type: ignore[arg-type]


@pytest.fixture
def scout(scout_with: Callable[..., Scout]) -> Scout:
    return scout_with()


def test_nvml_and_vulkan_spellings_of_one_uuid_agree() -> None:
    """GPU-<uuid> and the bare dashed uuid normalise to the same 32 hex digits."""
    assert uuid_hex(f"GPU-{UUID.upper()}") == uuid_hex(UUID) == UUID.replace("-", "")


def test_a_mig_uuid_is_not_a_whole_gpu() -> None:
    """MIG-... names a slice and never matches a Vulkan device."""
    assert uuid_hex("MIG-" + UUID) == ""


def test_same_uuid_makes_a_duplicate_whatever_the_description(scout: Scout) -> None:
    """Matching UUIDs decide even when the names and memory differ."""
    a = vulkan(description="NVIDIA Graphics Device", total_memory=GIB)
    assert scout.compare(cuda(), a) is DeviceComparison.DUPLICATE


def test_different_uuids_fall_back_to_the_seed_heuristic(scout: Scout) -> None:
    """Other UUIDs, same description and memory: the seed's guess still says duplicate."""
    assert scout.compare(cuda(), vulkan(uuid=OTHER_UUID)) is DeviceComparison.DUPLICATE


def test_different_uuids_and_descriptions_are_unique(scout: Scout) -> None:
    """Neither the UUID nor the heuristic matches: two cards."""
    other = vulkan(uuid=OTHER_UUID, description="AMD Radeon PRO W7900")
    assert scout.compare(cuda(), other) is DeviceComparison.UNIQUE


def test_different_pci_ids_win_over_a_matching_uuid(scout: Scout) -> None:
    """When both carry a PCI id the core's PCI compare decides first."""
    a, b = cuda(pci_id="0000:01:00.0"), vulkan(pci_id="0000:02:00.0")
    assert scout.compare(a, b) is DeviceComparison.UNIQUE


def test_uuid_match_needs_a_vulkan_and_a_twin_library() -> None:
    """Two Vulkan devices, or Vulkan and Metal, are not matched by UUID."""
    assert not same_uuid(vulkan(), vulkan(id="1"))
    assert not same_uuid(vulkan(), cuda(library="Metal"))


def test_empty_uuids_never_match() -> None:
    """Devices without a UUID are left to the heuristic."""
    assert not same_uuid(vulkan(uuid=""), cuda(uuid=""))


def test_discovery_drops_the_vulkan_twin_of_a_cuda_card(scout_with: Callable[..., Scout]) -> None:
    """The CUDA record survives, the Vulkan one is dropped as its duplicate."""
    found = scout_with([vulkan(description="NVIDIA Graphics Device"), cuda()]).discover()
    assert [d.library for d in found.devices] == ["CUDA"]
    assert [(x.device.library, x.reason, x.duplicate_of) for x in found.dropped] == [
        ("Vulkan", "duplicate", cuda().device_id)
    ]
