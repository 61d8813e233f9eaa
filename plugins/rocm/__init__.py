"""ROCm backend: AMD GPUs through amdsmi or Linux sysfs, ROCR/HIP visibility, gfx targets.

amdsmi is imported only inside enumerate; importing this module costs nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gpuscout.plugin import Context, DeviceInfo, EnvEntry, devices_of, for_library, hookimpl
from gpuscout.plugins.rocm.names import HIP, INIT_ENV, LIBRARY, ROCR

GPUSCOUT_API_VERSION = 1
#: What keeps a test's Scout from the machine's real AMD GPUs (the testing kit sets it unless a
#: test passes its own environment): ROCr reads an empty list as "no devices".
GPUSCOUT_TEST_ENV = {ROCR: ""}


@hookimpl
def gpuscout_enumerate(context: Context) -> list[DeviceInfo]:
    """AMD GPUs: amdsmi when it works and the root is live, else the KFD topology in sysfs."""
    from gpuscout.plugins.rocm.discover import enumerate_devices

    return enumerate_devices(context)


@for_library(LIBRARY)
def gpuscout_flash_attention(device: DeviceInfo) -> bool | None:
    """ROCm devices pass (the seed)."""
    return True


#: ROCr reads set-but-empty as "no devices". HIP does not: an empty HIP_VISIBLE_DEVICES (with
#: CUDA_VISIBLE_DEVICES also empty) filters nothing, so "-1", an invalid entry that ends HIP's
#: list before any device, hides them there (and on Windows, where there is no ROCr).
HIDE_ALL = {ROCR: "", HIP: "-1"}


@hookimpl
def gpuscout_isolate_env(
    selection: Sequence[DeviceInfo], env: Mapping[str, str], context: Context
) -> dict[str, str] | None:
    """Hide every AMD device when no ROCm device is selected."""
    return None if devices_of(selection, LIBRARY) else dict(HIDE_ALL)


@for_library(LIBRARY)
def gpuscout_preferred_library(device: DeviceInfo, other: DeviceInfo) -> bool | None:
    """ROCm wins over any other library for the same card (the seed ignores ``other``)."""
    return True


@for_library(LIBRARY)
def gpuscout_validate_init(device: DeviceInfo, context: Context) -> Mapping[str, str] | None:
    """ROCm devices are initialised in a child first: rocBLAS crashes on unsupported targets."""
    return dict(INIT_ENV)


@hookimpl
def gpuscout_visible_env(
    selection: Sequence[DeviceInfo], context: Context
) -> list[EnvEntry] | None:
    """ROCm devices are always filtered (an unsupported one can crash the runner)."""
    from gpuscout.plugins.rocm.rules import visible_entries

    return visible_entries(selection, context.env, context.platform)


@for_library(LIBRARY)
def gpuscout_refresh(
    devices: Sequence[DeviceInfo], context: Context
) -> list[DeviceInfo] | None:
    """ROCm devices with free memory re-read (sysfs counters or amdsmi: cheap)."""
    from gpuscout.plugins.rocm.discover import refresh_devices

    return refresh_devices([d for _, d in devices_of(devices, LIBRARY)], context)
