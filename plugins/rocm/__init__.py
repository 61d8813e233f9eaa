"""ROCm backend: AMD GPUs through amdsmi or Linux sysfs, ROCR/HIP visibility, gfx targets.

amdsmi is imported only inside enumerate; importing this module costs nothing. Without an AMD
driver, enumerate costs nothing either: with no KFD topology and no amdsmi installed the answer
is given here, and ``enumeration`` (with the sysfs, amdsmi and rule modules it imports) is
loaded only when there may be a GPU to find.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence

from gpuscout.plugin import (
    Context,
    DeviceInfo,
    EnvEntry,
    GgmlOrder,
    devices_of,
    for_library,
    ggml_cuda_supports_op,
    hookimpl,
    is_wsl2,
)
from gpuscout.plugins.rocm.names import HIP, INIT_ENV, LIBRARY, ROCR

GPUSCOUT_API_VERSION = 1
#: Variables that change what this plugin finds, recorded by ``gpuscout record`` when set.
GPUSCOUT_RECORDED_ENV = ("ROCR_*", "HIP_*", "HSA_*", "GPU_DEVICE_ORDINAL", "AMD_*", "ROCM_*")
#: What keeps a test's Scout from the machine's real AMD GPUs (the testing kit sets it unless a
#: test passes its own environment): ROCr reads an empty list as "no devices".
GPUSCOUT_TEST_ENV = {ROCR: ""}


#: The modules holding the seams of enumerate (``enumeration.enumerate_devices``,
#: ``smi.import_amdsmi``, ``sysfs.read_kfd_gpu_nodes``, ``hsakmt.kfd_failure``): once one is
#: imported it may have been replaced (the tests' fake machines do), and only the full path
#: answers. See ``_surely_no_gpu``.
_SEAMS = tuple(f"{__name__}.{m}" for m in ("enumeration", "smi", "sysfs", "hsakmt"))
#: Where the KFD topology lives (``sysfs.TOPOLOGY``, said again so as not to import it).
_TOPOLOGY = "/sys/class/kfd/kfd/topology/nodes"


def _surely_no_gpu(context: Context) -> str | None:
    """The first note ``enumeration.enumerate_devices`` would give (``diagnosis`` adds the rest),
    when it would find nothing: on a live Linux root with no KFD topology and no amdsmi
    installed. None when it may find something, or when only it may answer (a replay or a
    recording being made, or one of its modules already imported).

    The same outcome as ``enumeration.enumerate_devices`` (``smi.import_amdsmi``, then
    ``sysfs.read_kfd_gpu_nodes``), found with a directory check and a ``find_spec``, so that a
    driverless machine imports neither ``enumeration`` nor amdsmi: keep the two in step
    (tests/test_plugin_cost.py compares their reports).
    """
    if context.platform != "linux" or context.root not in ("", "/"):
        return None
    if any(m in sys.modules for m in _SEAMS) or "amdsmi" in sys.modules:
        return None
    if context.replaying or context.recording:
        return None
    if os.path.isdir(context.path(_TOPOLOGY)):
        return None
    import importlib.util

    try:
        if importlib.util.find_spec("amdsmi") is not None:
            return None  # installed: importing it is the full path's to try (and to explain)
    except (ImportError, ValueError):
        return None
    if context.list_dir(_TOPOLOGY) is not None:  # its notes (a passed deadline), as sysfs's
        return None
    guess = "" if is_wsl2(context) else " (amdgpu not loaded?)"  # WSL2 never loads amdgpu
    return (
        f"no AMD GPU: no KFD topology{guess} under {context.shown(_TOPOLOGY)}; "
        "amdsmi unavailable (ModuleNotFoundError: No module named 'amdsmi')"
    )


@hookimpl
def gpuscout_enumerate(context: Context) -> list[DeviceInfo]:
    """AMD GPUs: amdsmi when it works and the root is live, else the KFD topology in sysfs."""
    missing = _surely_no_gpu(context)
    if missing is not None:
        from gpuscout.plugins.rocm.diagnosis import explain_no_topology

        context.note(missing)
        explain_no_topology(context, topology=False)  # as enumeration.enumerate_devices does
        return []
    from gpuscout.plugins.rocm.enumeration import enumerate_devices

    return enumerate_devices(context)


@for_library(LIBRARY)
def gpuscout_ggml_supports_op(device: DeviceInfo, op: str, params: Mapping[str, int]) -> bool | None:
    """ggml-hip (built from ggml-cuda's code)'s supports_op for the operations asked about."""
    return ggml_cuda_supports_op(op, params)


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
def gpuscout_visible_env(selection: Sequence[DeviceInfo], context: Context) -> list[EnvEntry] | None:
    """ROCm devices are always filtered (an unsupported one can crash the runner)."""
    from gpuscout.plugins.rocm.rules import visible_entries

    return visible_entries(selection, context.env, context.platform)


@hookimpl
def gpuscout_ggml_devices(devices: Sequence[DeviceInfo], context: Context) -> GgmlOrder | None:
    """ggml's HIP backend (registered where CUDA's is, first): the ROCm devices in the given
    order, named ``ROCm<n>``, with the visibility variable ``visible_env`` writes for them."""
    from gpuscout.plugins.rocm.rules import visible_entries

    mine = devices_of(devices, LIBRARY)
    if not mine:
        return None
    selection = [d for _, d in mine]
    env: dict[str, str] = {}
    for _, name, value in visible_entries(selection, context.env, context.platform) or []:
        env[name] = f"{env[name]},{value}" if name in env else value
    return GgmlOrder(0, tuple((i, f"ROCm{n}") for n, (i, _) in enumerate(mine)), env)


@for_library(LIBRARY)
def gpuscout_refresh(devices: Sequence[DeviceInfo], context: Context) -> list[DeviceInfo] | None:
    """ROCm devices with free memory re-read (sysfs counters or amdsmi: cheap)."""
    from gpuscout.plugins.rocm.enumeration import refresh_devices

    return refresh_devices([d for _, d in devices_of(devices, LIBRARY)], context)
