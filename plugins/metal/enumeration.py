"""Metal enumeration through pyobjc's ``Metal`` module (macOS only).

Off macOS nothing Apple is imported. On macOS ``Metal`` (pyobjc-framework-Metal) is imported
inside :func:`enumerate_devices`, never at import time.

Memory is llama.cpp's view: total = ``recommendedMaxWorkingSetSize``, free = total -
``currentAllocatedSize``. ``currentAllocatedSize`` counts only what *this process* allocated on
the device, so "free" does not see other processes' use of the unified memory.
"""

from __future__ import annotations

from typing import Any, Protocol

from gpuscout.plugin import Context, DeviceInfo, sizes_apart, sysctl_int
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
    memory, which is also shared with the system (``shared_memory``). Compute and driver
    versions are not Metal concepts: compute is -1.-1 (unknown), driver 0.0.
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
        # Unified memory is the system's RAM: what the GPU has free, the CPU has too.
        shared_memory=bool(device.hasUnifiedMemory()),
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


def default_first(framework: Any) -> tuple[list[Any], bool]:
    """(devices, default_known): every device with the system default one first.

    ggml-metal opens ``MTLCreateSystemDefaultDevice()`` and nothing else (ggml-org/ggml
    ``src/ggml-metal/ggml-metal-device.m``, ``ggml_metal_device_init``, commit d99724f2 line
    720), so that is the device a child runs on. It is found among ``MTLCopyAllDevices()`` by
    registryID (the same in every process). ``default_known`` is False when the default device
    is None in this process or is not among the others: then the order is MTLCopyAllDevices'.
    """
    devices = all_devices(framework)
    create = getattr(framework, "MTLCreateSystemDefaultDevice", None)
    default = create() if create is not None else None
    if default is None:
        return devices, False
    wanted = int(default.registryID())
    at = next((i for i, d in enumerate(devices) if int(d.registryID()) == wanted), None)
    if at is None:
        return devices, False
    return [devices[at], *devices[:at], *devices[at + 1 :]], True


def _framework(context: Context) -> Any | None:
    """pyobjc's ``Metal`` (while recording, its answers are kept), or the recorded answers
    while replaying; None with a note when there is none."""
    if context.replaying:
        from gpuscout.plugins.metal.replay import ReplayedMetal

        answers = context.recorded("metal")
        if answers is None:
            context.note(context.recorded("missing") or "Metal: the recording holds no answers")
            return None
        return ReplayedMetal(answers)
    try:
        import Metal  # type: ignore[import-not-found, unused-ignore]
    except ImportError as exc:
        context.record("missing", f"Metal: pyobjc-framework-Metal cannot be imported ({exc})")
        context.note(f"Metal: pyobjc-framework-Metal cannot be imported ({exc})")
        return None
    if context.recording:
        from gpuscout.plugins.metal.replay import capture

        context.record("metal", capture(Metal))
    return Metal


def enumerate_devices(context: Context) -> list[DeviceInfo]:
    """Every Metal device on macOS, the system default one (ggml-metal's) first as id 0; none
    elsewhere, with a note, importing nothing Apple. With several devices a note says which
    one a child uses and names the others."""
    if context.platform != "darwin":
        context.note(f"Metal: only on macOS (platform {context.platform!r})")
        return []
    framework = _framework(context)
    if framework is None:
        return []
    devices, default_known = default_first(framework)
    if not devices:
        context.note("Metal: MTLCopyAllDevices and MTLCreateSystemDefaultDevice found no device")
    records = [device_info(d, i) for i, d in enumerate(devices)]
    note = working_set_note(
        records[0].total_memory if records else 0,
        sysctl_int(context, "iogpu.wired_limit_mb"),
        sysctl_int(context, "hw.memsize"),
    )
    if note and records and records[0].integrated:
        records[0] = records[0].evolve(notes=(*records[0].notes, note))
    if len(records) > 1:
        context.note(_others_note(records, default_known))
        if default_known:  # ggml-metal opens the default device alone: the others rank after it
            records[1:] = [d.evolve(unused_reason=_NOT_DEFAULT) for d in records[1:]]
    return records


_NOT_DEFAULT = (
    "ggml-metal opens only the system default device (MTLCreateSystemDefaultDevice) "
    "and no variable selects another"
)


def _others_note(records: list[DeviceInfo], default_known: bool) -> str:
    if not default_known:
        return (
            "Metal: the system default device (MTLCreateSystemDefaultDevice) is unknown in "
            "this process, so which of these ggml-metal would use cannot be said"
        )
    others = ", ".join(f"id {d.id} {d.name!r}" for d in records[1:])
    return (
        f"Metal: ggml-metal runs on the system default device, id 0 {records[0].name!r}; "
        f"{others} not used by a child (ggml-metal opens only the default device and no "
        "variable selects another)"
    )


MIB = 1 << 20


def working_set_note(working_set: int, wired_limit_mb: int | None, memsize: int | None) -> str:
    """What the default device's ``recommendedMaxWorkingSetSize`` follows, in one sentence;
    '' when the wired limit is unknown (not recorded, not macOS).

    The working set follows the sysctl ``iogpu.wired_limit_mb`` when it is raised (an M5 Max
    128 GB: 112.00 GiB with ``iogpu.wired_limit_mb=114688``, antirez/ds4#893); at its default,
    0, macOS gives a share of RAM: 2/3 on a 16 GB M1 (10922.67 MiB) and a 32 GB M2 Max
    (21845.34 MiB), 3/4 on 64 GB (49152.00 MiB), in llama.cpp's Metal logs, and 107.52 GiB
    of 128 GiB on the M5 Max above. The setting lasts until a reboot.
    """
    if wired_limit_mb is None:
        return ""
    # One formatter for the three figures, so that two that differ never read alike.
    shown, ram_size, limit = sizes_apart(working_set, memsize or 0, wired_limit_mb * MIB)
    ram = f" of {ram_size} RAM" if memsize else ""
    if wired_limit_mb == 0:
        return (
            f"Metal: working set {shown} is macOS's default share{ram} (iogpu.wired_limit_mb=0: "
            "about 2/3 of RAM on 16-32 GB Macs, 3/4 and more on larger ones); "
            "`sudo sysctl iogpu.wired_limit_mb=<MiB>` raises it until a reboot"
        )
    default = (
        "macOS's default, 0, gives about 2/3 of RAM on 16-32 GB Macs and 3/4 and more on larger "
        f"ones{f'; RAM {ram_size}' if memsize else ''}"
    )
    if working_set == wired_limit_mb * MIB:
        return f"Metal: working set {shown} follows iogpu.wired_limit_mb={wired_limit_mb} (raised; {default})"
    return (
        f"Metal: working set {shown} although iogpu.wired_limit_mb={wired_limit_mb} "
        f"({limit}) is set: Metal did not take that limit ({default})"
    )
