"""CUDA's rules from the seed, as pure functions over DeviceInfo."""

from __future__ import annotations

from gpuscout.plugin import DeviceInfo, get_logger

_log = get_logger(__name__)


def flash_attention_supported(device: DeviceInfo) -> bool:
    """The seed's cudaFlashAttentionSupported for a CUDA device.

    Compute capability below 7, or exactly 7.2 (Jetson Xavier), fails. An unknown driver version
    (0) passes with a warning, else the driver major must be 7 or more.
    """
    if device.compute_major < 7 or (device.compute_major == 7 and device.compute_minor == 2):
        return False
    if device.driver_major == 0:
        _log.warning(
            "rules.cuda_driver_unknown",
            device=device.description,
            compute=device.compute,
            detail="CUDA driver version unavailable; allowing flash attention by compute capability",
        )
        return True
    return device.driver_major >= 7
