"""Rules of the merge's duplicate keys (``gpuscout._discovery.merge.merge``), each stated once."""

from __future__ import annotations

from collections.abc import Sequence

from gpuscout import DeviceInfo
from gpuscout._discovery.merge import merge


def always(pairs: Sequence[tuple[DeviceInfo, DeviceInfo]]) -> list[bool]:
    return [True] * len(pairs)


def cuda_first(a: DeviceInfo, b: DeviceInfo) -> bool:
    return a.library == "CUDA"


CUDA = DeviceInfo(id="0", library="CUDA", description="Acme")
VULKAN = DeviceInfo(id="1", library="Vulkan", description="Acme")


def test_a_survivor_without_keys_still_meets_a_new_device_that_has_keys() -> None:
    """A device whose plugin gave no duplicate key is asked about every later device."""
    kept, dropped = merge([("cuda", CUDA), ("vulkan", VULKAN)], always, cuda_first, lambda ds: [None, "k"])
    assert kept == [CUDA] and [d.device for d in dropped] == [VULKAN]


def test_a_new_device_without_keys_meets_a_survivor_that_has_keys() -> None:
    """A later device whose plugin gave no key is asked about every survivor."""
    kept, dropped = merge([("cuda", CUDA), ("vulkan", VULKAN)], always, cuda_first, lambda ds: ["k", None])
    assert kept == [CUDA] and [d.device for d in dropped] == [VULKAN]


def test_devices_with_disjoint_keys_are_not_asked_about() -> None:
    """Keys that do not intersect mean the heuristic is never consulted for that pair."""
    kept, dropped = merge([("cuda", CUDA), ("vulkan", VULKAN)], always, cuda_first, lambda ds: ["a", "b"])
    assert kept == [CUDA, VULKAN] and dropped == []
