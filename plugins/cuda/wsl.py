"""NVIDIA GPUs under WSL2: where NVML lives there, and what a WSL2 machine lacks by design.

In WSL2 the Windows driver projects the GPU into the Linux VM through dxgkrnl (the device node
``/dev/dxg``), and mounts its user-mode libraries, ``libnvidia-ml.so.1`` and ``libcuda.so.1``
among them, under ``/usr/lib/wsl/lib`` (NVIDIA, "CUDA on WSL User Guide": no Linux display
driver is installed inside WSL). The VM has no ``/dev/nvidia*`` node, no NVIDIA PCI function
under ``/sys/bus/pci`` and no ``nvidia`` kernel module, so the diagnostics that look for those
would only mislead; NVML still reports each GPU's PCI address.
"""

from __future__ import annotations

from typing import Any

from gpuscout.plugin import DXG_NODE, Context, DeviceInfo, is_wsl2

#: Where WSL2 mounts the Windows driver's NVML.
WSL_LIBRARY = "/usr/lib/wsl/lib/libnvidia-ml.so.1"
#: Said on each device found under WSL2 (appended to its notes).
DEVICE_NOTE = (
    "WSL2: reached through /dev/dxg (the Windows driver's GPU paravirtualization); "
    "no PCI sysfs or /dev/nvidia* node exists in the VM"
)
#: The loaded library, kept so that it stays loaded for pynvml's CDLL by soname.
_loaded: list[Any] = []


def wsl2(context: Context) -> bool:
    """Whether ``context``'s machine is WSL2 (``/proc/version`` under its root)."""
    return context.platform.startswith("linux") and is_wsl2(context)


def preload(context: Context) -> str:
    """Load WSL's NVML by its full path when this is a live WSL2 machine, so that pynvml's
    ``CDLL("libnvidia-ml.so.1")`` finds it by soname even when ``/usr/lib/wsl/lib`` is not on
    the loader's path (a container, a distribution without WSL's ld.so.conf entry).

    '' when loaded (or not WSL2, or not live); else why it could not be loaded.
    """
    if context.replaying or context.root not in ("", "/") or not wsl2(context):
        return ""
    if _loaded:
        return ""
    import ctypes

    try:
        _loaded.append(ctypes.CDLL(WSL_LIBRARY))
    except OSError as exc:
        return f"WSL2: {WSL_LIBRARY} cannot be loaded: {exc}"
    return ""


def mark(context: Context, devices: list[DeviceInfo]) -> list[DeviceInfo]:
    """``devices`` with the WSL2 sentence appended to each one's notes, and the plugin's note
    saying where NVML came from; ``devices`` unchanged off WSL2."""
    if not devices or not wsl2(context):
        return devices
    context.note(
        f"WSL2: NVIDIA GPUs through the Windows driver's NVML ({WSL_LIBRARY}) and {DXG_NODE}; "
        "no PCI sysfs, /dev/nvidia* or nvidia module is expected in WSL's VM"
    )
    return [d.evolve(notes=(*d.notes, DEVICE_NOTE)) for d in devices]


def explain_missing(context: Context) -> bool:
    """On WSL2, the note saying why NVML is missing or found nothing (instead of the bare-metal
    diagnostics of device nodes, PCI functions and the kernel module, none of which WSL2 has);
    True when it was said, False off WSL2."""
    if not wsl2(context):
        return False
    dxg = context.device_node(DXG_NODE)
    if dxg == "missing":
        context.note(
            f"WSL2: {DXG_NODE} is missing, so no Windows GPU is projected into this VM (a WSL1 "
            "distribution, a Windows driver without WSL support, or a container started without "
            f"--device {DXG_NODE}?)"
        )
    elif dxg == "denied":
        context.note(f"WSL2: {DXG_NODE} is present but this process may not open it")
    else:
        context.note(
            f"WSL2: {DXG_NODE} is present; an NVIDIA GPU's NVML comes with the NVIDIA Windows "
            "driver, in /usr/lib/wsl/lib (install or update that driver on Windows; no Linux "
            "NVIDIA driver belongs inside WSL)"
        )
    return True
