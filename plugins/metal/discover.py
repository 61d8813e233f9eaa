"""Metal enumeration through pyobjc's ``Metal`` module (macOS only).

Off macOS nothing Apple is imported. On macOS ``Metal`` (pyobjc-framework-Metal) is imported
inside :func:`enumerate_devices`, never at import time.

Memory is llama.cpp's view: total = ``recommendedMaxWorkingSetSize``, free = total -
``currentAllocatedSize``. ``currentAllocatedSize`` counts only what *this process* allocated on
the device, so "free" does not see other processes' use of the unified memory.
"""

from __future__ import annotations

from typing import Any, Protocol

from gpuscout.plugin import Context, DeviceInfo
from gpuscout.plugins.metal.names import LIBRARY


class MetalDevice(Protocol):
    """The few MTLDevice methods used here (pyobjc exposes properties as methods)."""

    def name(self) -> str:
        """The GPU's marketing name, e.g. "Apple M2 Max"."""

    def registryID(self) -> int:
        """The IORegistry id, the same in every process."""

    def hasUnifiedMemory(self) -> bool:
        """Whether CPU and GPU share memory (Apple silicon)."""

    def recommendedMaxWorkingSetSize(self) -> int:
        """Bytes the GPU can use without hurting performance (about 2/3 to 3/4 of RAM)."""

    def currentAllocatedSize(self) -> int:
        """Bytes this process has allocated on the GPU."""


def device_info(device: MetalDevice, ordinal: int) -> DeviceInfo:
    """The record for one MTLDevice, reported as the ``ordinal``-th Metal device.

    ``id`` and ``filter_id`` are the ordinal; ``uuid`` is the registryID (stable across
    processes) in hex as ``ioreg`` prints it, e.g. ``0x100000a4c``. Integrated means unified
    memory. Compute and driver versions are not Metal concepts: compute is -1.-1 (unknown),
    driver 0.0.
    """
    total = max(0, int(device.recommendedMaxWorkingSetSize()))
    used = max(0, int(device.currentAllocatedSize()))
    name = str(device.name())
    return DeviceInfo(
        id=str(ordinal),
        library=LIBRARY,
        name=name or f"Metal{ordinal}",
        description=name,
        filter_id=str(ordinal),
        integrated=bool(device.hasUnifiedMemory()),
        total_memory=total,
        free_memory=max(0, total - used),
        compute_major=-1,
        compute_minor=-1,
        uuid=f"{int(device.registryID()):#x}",
    )


def all_devices(framework: Any) -> list[Any]:
    """``MTLCopyAllDevices()``, else the system default device, else nothing.

    MTLCreateSystemDefaultDevice can answer None in command-line processes, so it is only the
    fallback.
    """
    copy_all = getattr(framework, "MTLCopyAllDevices", None)
    devices = list(copy_all() or ()) if copy_all is not None else []
    if devices:
        return devices
    default = getattr(framework, "MTLCreateSystemDefaultDevice", None)
    device = default() if default is not None else None
    return [device] if device is not None else []


def enumerate_devices(context: Context) -> list[DeviceInfo]:
    """Every Metal device on macOS; none elsewhere, with a note, importing nothing Apple."""
    if context.platform != "darwin":
        context.note(f"Metal: only on macOS (platform {context.platform!r})")
        return []
    try:
        import Metal  # type: ignore[import-not-found, unused-ignore]
    except ImportError as exc:
        context.note(f"Metal: pyobjc-framework-Metal cannot be imported ({exc})")
        return []
    devices = all_devices(Metal)
    if not devices:
        context.note("Metal: MTLCopyAllDevices and MTLCreateSystemDefaultDevice found no device")
    return [device_info(d, i) for i, d in enumerate(devices)]
