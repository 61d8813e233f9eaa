"""NFD labels count the devices whose memory is the system's, node-wide and per library."""

from __future__ import annotations

from gpuscout import DeviceInfo
from gpuscout.cluster.nfd import device_labels
from gpuscout.sizes import GIB


def test_shared_memory_devices_are_counted_apart_from_integrated_ones() -> None:
    """A unified GB10 is shared; a carve-out APU is integrated only; a discrete card neither."""
    devices = [
        DeviceInfo(id="G", library="CUDA", integrated=True, shared_memory=True, total_memory=119 * GIB),
        DeviceInfo(id="0", library="ROCm", integrated=True, total_memory=96 * GIB),
        DeviceInfo(id="1", library="ROCm", total_memory=24 * GIB),
    ]
    labels = device_labels(devices, lambda d: True, ["cuda", "rocm"])
    assert (labels["shared-memory.count"], labels["integrated.count"]) == ("1", "2")
    assert (labels["cuda.shared-memory.count"], labels["rocm.shared-memory.count"]) == ("1", "0")


def test_a_library_named_shared_memory_keeps_its_own_key() -> None:
    """A library named like the node-wide word gets a hashed slug: shared-memory.count keeps its meaning."""
    devices = [DeviceInfo(id="0", library="Shared-Memory", total_memory=GIB)]
    labels = device_labels(devices, lambda d: True)
    assert labels["shared-memory.count"] == "0"
    assert any(k.startswith("shared-memory-") and k.endswith(".count") for k in labels)
