"""CUDA backend: NVIDIA GPUs through NVML, CUDA_VISIBLE_DEVICES, the flash-attention gate.

NVML (nvidia-ml-py) is imported only inside enumerate; importing this module costs nothing.
Without a driver, enumerate costs nothing either: the library check runs here, and
``enumeration`` (with the reading, order and visibility modules it imports) is loaded only once
NVML may work.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence

from gpuscout.plugin import (
    Context,
    DeviceInfo,
    EnvEntry,
    GgmlOrder,
    SelectionRefused,
    devices_of,
    for_library,
    ggml_cuda_supports_op,
    hookimpl,
)
from gpuscout.plugins.cuda.names import INIT_ENV, LIBRARY, ORDER_ENV, VISIBLE_ENV

GPUSCOUT_API_VERSION = 1
#: Variables that change what this plugin finds, recorded by ``gpuscout record`` when set.
GPUSCOUT_RECORDED_ENV = ("CUDA_*", "NVIDIA_*", "__NV_*")
#: What keeps a test's Scout from the machine's real NVIDIA GPUs (the testing kit sets it unless
#: a test passes its own environment): no device visible, and the bus order, so that no driver
#: probe child is started to learn CUDA's order.
GPUSCOUT_TEST_ENV = {VISIBLE_ENV: "", ORDER_ENV: "PCI_BUS_ID"}


#: The module that holds the NVML seam (``_load_nvml``); see ``_surely_no_driver``.
_NVML_MODULE = f"{__name__}.enumeration"
#: The library ``enumeration`` loads on Linux (``enumeration.LINUX_LIBRARY``, said again so as
#: not to import it).
_LINUX_LIBRARY = "libnvidia-ml.so.1"


def _surely_no_driver(context: Context) -> str | None:
    """The first note ``enumeration.enumerate_devices`` would give (``diagnosis`` adds the
    rest), when it would find nothing before importing pynvml (no NVML library); None when it
    may find something, or when only it may answer: a replay or a recording being made, or
    ``enumeration`` already imported (its seam may be replaced, as the tests' fake machines do).

    The same check as ``enumeration._library_missing``, run here so that a driverless machine
    never imports ``enumeration``: keep the two in step (tests/test_plugin_cost.py compares
    their reports).
    """
    if _NVML_MODULE in sys.modules:
        return None
    if context.replaying or context.recording:
        return None
    if context.platform == "darwin":
        return "NVML does not exist on macOS (no NVIDIA driver)"
    if not context.platform.startswith("linux"):
        return None  # Windows: pynvml knows the DLL's two homes; enumeration lets nvmlInit look.
    # What ctypes.CDLL(name) calls on Linux (mode RTLD_LOCAL; dlopen adds RTLD_NOW), the same
    # OSError included, without importing ctypes itself (3 ms, most of it not this call's).
    import _ctypes

    dlopen = getattr(_ctypes, "dlopen", None)  # none in a Windows process told "linux"
    if dlopen is None:
        return None
    try:
        dlopen(_LINUX_LIBRARY, _ctypes.RTLD_LOCAL)
    except OSError as exc:
        if _wsl2_library(context):
            return None  # WSL2 keeps its NVML in /usr/lib/wsl/lib: enumeration loads it by path
        return f"NVML library {_LINUX_LIBRARY} cannot be loaded (is the NVIDIA driver installed?): {exc}"
    return None


def _wsl2_library(context: Context) -> bool:
    """Whether this is WSL2 with the Windows driver's NVML where WSL mounts it
    (``wsl.WSL_LIBRARY``); a file check, so nothing more is imported when it is not."""
    import os

    from gpuscout.plugin import is_wsl2

    return is_wsl2(context) and os.path.isfile("/usr/lib/wsl/lib/libnvidia-ml.so.1")


@hookimpl
def gpuscout_enumerate(context: Context) -> list[DeviceInfo]:
    """NVIDIA GPUs (and MIG instances) through NVML; none, with a note, without a driver."""
    missing = _surely_no_driver(context)
    if missing is not None:
        from gpuscout.plugins.cuda.diagnosis import explain_missing_library

        context.note(missing)
        explain_missing_library(context)  # as enumeration.enumerate_devices does after this note
        return []
    from gpuscout.plugins.cuda.enumeration import enumerate_devices

    return enumerate_devices(context)


@for_library(LIBRARY)
def gpuscout_ggml_supports_op(device: DeviceInfo, op: str, params: Mapping[str, int]) -> bool | None:
    """ggml-cuda's supports_op for the operations asked about."""
    return ggml_cuda_supports_op(op, params)


@for_library(LIBRARY)
def gpuscout_flash_attention(device: DeviceInfo) -> bool | None:
    """Compute capability 7.0 or newer except 7.2, and a driver of major 7 or newer."""
    from gpuscout.plugins.cuda.rules import flash_attention_supported

    return flash_attention_supported(device)


@hookimpl
def gpuscout_isolate_env(
    selection: Sequence[DeviceInfo], env: Mapping[str, str], context: Context
) -> dict[str, str] | None:
    """Hide every CUDA device when none is selected ("" means none to CUDA). When selected
    devices are named by integer index, pin CUDA_DEVICE_ORDER=PCI_BUS_ID: indices follow CUDA's
    order, which is only the bus order (what nvidia-smi shows) with that setting."""
    mine = [d for _, d in devices_of(selection, LIBRARY)]
    if not mine:
        return {VISIBLE_ENV: ""}
    if VISIBLE_ENV in env and any((d.filter_id or d.id).strip().isdigit() for d in mine):
        return {ORDER_ENV: "PCI_BUS_ID"}
    return None


@for_library(LIBRARY)
def gpuscout_preferred_library(device: DeviceInfo, other: DeviceInfo) -> bool | None:
    """CUDA wins over any other library for the same card (the seed ignores ``other``)."""
    return True


@for_library(LIBRARY)
def gpuscout_validate_init(device: DeviceInfo, context: Context) -> Mapping[str, str] | None:
    """CUDA devices are initialised in a child first: the library may not support their CC."""
    return dict(INIT_ENV)


def _is_mig(device: DeviceInfo) -> bool:
    return (device.uuid or device.filter_id or device.id).startswith("MIG-")


@hookimpl
def gpuscout_visible_env(selection: Sequence[DeviceInfo], context: Context) -> list[EnvEntry] | None:
    """CUDA_VISIBLE_DEVICES, only when the selection is one device or all CUDA (the seed's rule:
    filtering otherwise confuses ROCm, which reads the same variable on mixed boxes).

    A CUDA process enumerates one MIG instance and nothing beside it (NVIDIA MIG user guide,
    "Device Enumeration", CUDA 11 and 12; see ``visibility.py``), so several CUDA devices of which
    one is a MIG instance cannot be shown to one child: such a selection is refused
    (``SelectionRefused``, which ``gpuscout env``/``exec`` print as one line, exit 2), rather than
    one variable naming several MIG instances, of which CUDA would silently use the first.
    """
    mine = devices_of(selection, LIBRARY)
    if len(mine) > 1 and any(_is_mig(d) for _, d in mine):
        names = " ".join(f"--device {d.filter_id or d.id}" for _, d in mine)
        raise SelectionRefused(
            f"a CUDA process sees one MIG instance and no other device beside it, so "
            f"{len(mine)} CUDA devices including a MIG instance cannot share one child; start "
            f"one child per device (gpuscout exec {names.split(' --device ')[0]} -- ..., and so "
            f"on for each)"
        )
    must_filter = len(selection) == 1 or all(d.library == LIBRARY for d in selection)
    if not must_filter:
        return None
    return [EnvEntry(i, VISIBLE_ENV, d.filter_id or d.id) for i, d in mine]


@hookimpl
def gpuscout_ggml_devices(devices: Sequence[DeviceInfo], context: Context) -> GgmlOrder | None:
    """ggml-cuda's devices: the CUDA devices in the given order, named ``CUDA<n>``, with
    CUDA_VISIBLE_DEVICES listing their UUIDs in that order (the runtime enumerates the listed
    devices in the listed order, whatever CUDA_DEVICE_ORDER says). First in ggml's registry."""
    mine = devices_of(devices, LIBRARY)
    if not mine:
        return None
    value = ",".join(d.filter_id or d.id for _, d in mine)
    return GgmlOrder(0, tuple((i, f"CUDA{n}") for n, (i, _) in enumerate(mine)), {VISIBLE_ENV: value})


@for_library(LIBRARY)
def gpuscout_refresh(devices: Sequence[DeviceInfo], context: Context) -> list[DeviceInfo] | None:
    """CUDA devices with free memory read again from NVML (system memory for unified parts)."""
    from gpuscout.plugins.cuda.enumeration import refresh_devices

    return refresh_devices(devices, context)
