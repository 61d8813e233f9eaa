"""Vulkan's device type decides whether a device's memory is the host's (shared_memory)."""

from __future__ import annotations

import pytest

from gpuscout.plugins.vulkan.devices import to_device_info
from gpuscout.plugins.vulkan.loader import RawDevice
from gpuscout.sizes import GIB


def _raw(device_type: int) -> RawDevice:
    return RawDevice(
        index=0,
        name="AMD Radeon 8060S Graphics (RADV GFX1151)",
        device_type=device_type,
        vendor_id=0x1002,
        device_id=0x1586,
        api_version=(1 << 22) | (4 << 12),
        driver_version=0,
        heaps=[[96 * GIB, 1], [48 * GIB, 0]],
    )


def test_an_integrated_gpu_is_shared_and_says_so() -> None:
    """VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU (1) sets shared_memory and a note naming GTT."""
    d = to_device_info(_raw(1), 0, "linux")
    assert (d.integrated, d.shared_memory) == (True, True)
    assert any("GTT" in n for n in d.notes)


@pytest.mark.parametrize("device_type", [0, 2, 3, 4])
def test_other_device_types_are_not_shared(device_type: int) -> None:
    """OTHER, DISCRETE_GPU, VIRTUAL_GPU and CPU devices are not shared and carry no such note."""
    d = to_device_info(_raw(device_type), 0, "linux")
    assert (d.shared_memory, d.notes) == (False, ())
