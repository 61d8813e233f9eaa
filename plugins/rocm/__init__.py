"""ROCm backend: AMD GPUs through amdsmi or Linux sysfs, ROCR/HIP visibility, gfx targets.

amdsmi is imported only inside enumerate; importing this module costs nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gpuscout import hookimpl
from gpuscout.context import Context, EnvEntry
from gpuscout.records import DeviceInfo

LIBRARY = "ROCm"
INIT_ENV = {"GGML_CUDA_INIT": "1"}


@hookimpl
def gpuscout_enumerate(context: Context) -> list[DeviceInfo]:
    """AMD GPUs: amdsmi when it works and the root is live, else the KFD topology in sysfs."""
    from gpuscout.plugins.rocm.discover import enumerate_devices

    return enumerate_devices(context)


@hookimpl
def gpuscout_flash_attention(device: DeviceInfo) -> bool | None:
    """ROCm devices pass (the seed)."""
    return True if device.library == LIBRARY else None


#: ROCr reads set-but-empty as "no devices". HIP does not: an empty HIP_VISIBLE_DEVICES (with
#: CUDA_VISIBLE_DEVICES also empty) filters nothing, so "-1", an invalid entry that ends HIP's
#: list before any device, hides them there (and on Windows, where there is no ROCr).
HIDE_ALL = {"ROCR_VISIBLE_DEVICES": "", "HIP_VISIBLE_DEVICES": "-1"}


@hookimpl
def gpuscout_isolate_env(
    selection: Sequence[DeviceInfo], env: Mapping[str, str], context: Context
) -> dict[str, str] | None:
    """Hide every AMD device when no ROCm device is selected."""
    return None if any(d.library == LIBRARY for d in selection) else dict(HIDE_ALL)


@hookimpl
def gpuscout_preferred_library(device: DeviceInfo, other: DeviceInfo) -> bool | None:
    """ROCm wins over any other library for the same card (the seed ignores ``other``)."""
    return True if device.library == LIBRARY else None


@hookimpl
def gpuscout_validate_init(device: DeviceInfo, context: Context) -> Mapping[str, str] | None:
    """ROCm devices are initialised in a child first: rocBLAS crashes on unsupported targets."""
    return dict(INIT_ENV) if device.library == LIBRARY else None


@hookimpl
def gpuscout_visible_env(
    selection: Sequence[DeviceInfo], context: Context
) -> list[EnvEntry] | None:
    """ROCm devices are always filtered (an unsupported one can crash the runner)."""
    from gpuscout.plugins.rocm.rules import visible_entries

    return visible_entries(selection, context.env, context.platform)


@hookimpl
def gpuscout_refresh(
    devices: Sequence[DeviceInfo], context: Context
) -> list[DeviceInfo] | None:
    """ROCm devices with free memory re-read (sysfs counters or amdsmi: cheap)."""
    from gpuscout.plugins.rocm.discover import refresh_devices

    mine = [d for d in devices if d.library == LIBRARY]
    return refresh_devices(mine, context) if mine else None
