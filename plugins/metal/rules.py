"""Metal's rules from the seed, as pure functions of a device: the memory Metal holds back and
the flash-attention pass."""

from __future__ import annotations

from gpuscout.plugin import DeviceInfo
from gpuscout.plugins.metal.names import LIBRARY

MIB = 1024 * 1024
#: The seed's MinimumMemory for Metal.
MINIMUM_MEMORY = 512 * MIB


def flash_attention(device: DeviceInfo) -> bool | None:
    """True for a Metal device, by library or by the name "Metal" (the seed checks both, so a
    device of another library named "Metal" passes too); None for any other device."""
    return True if device.library == LIBRARY or device.name == LIBRARY else None
