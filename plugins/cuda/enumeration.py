"""NVIDIA GPUs through NVML (module ``pynvml`` of nvidia-ml-py, imported only when enumerating).

NVML is started, read and shut down within one call; no CUDA context is ever created here.
Every NVML failure becomes zero devices (or one skipped device) and a note, never an exception.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Any

from gpuscout.plugin import Context, DeviceInfo, SystemInfo
from gpuscout.plugins.cuda import diagnosis, wsl
from gpuscout.plugins.cuda.names import LIBRARY, VISIBLE_ENV
from gpuscout.plugins.cuda.nvlink import peer_map, read_links, with_peers
from gpuscout.plugins.cuda.order import cuda_order
from gpuscout.plugins.cuda.readings import (
    DriverReading,
    GpuReading,
    MemoryReading,
    MigReading,
    PciLocation,
    pci_location,
    records,
    text,
)
from gpuscout.plugins.cuda.unified import ask_integrated, uma_system
from gpuscout.plugins.cuda.visibility import (
    GpuSlot,
    MigSlot,
    hidden_units,
    mig_uuids,
    one_process,
    visible_uuids,
)

# NVML return codes (nvml.h; stable ABI values, also ``NVMLError.value`` in pynvml).
NOT_SUPPORTED = 3
NO_PERMISSION = 4
FUNCTION_NOT_FOUND = 13
GPU_IS_LOST = 15
MIG_ENABLED = 1
#: nvmlMemory_v2 as pynvml spells it (struct version 2 | size 40).
MEMORY_V2 = 0x02000028

LINUX_LIBRARY = "libnvidia-ml.so.1"


def _error_code(exc: BaseException) -> int | None:
    value = getattr(exc, "value", None)
    return value if isinstance(value, int) else None


def _describe(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def _library_missing(platform: str) -> str | None:
    """Why NVML surely cannot work here, found without importing pynvml; None if it may."""
    if platform == "darwin":
        return "NVML does not exist on macOS (no NVIDIA driver)"
    if not platform.startswith("linux"):
        return None  # Windows: pynvml knows the DLL's two homes; let nvmlInit look.
    try:
        ctypes.CDLL(LINUX_LIBRARY)
    except OSError as exc:
        return f"NVML library {LINUX_LIBRARY} cannot be loaded (is the NVIDIA driver installed?): {exc}"
    return None


def _load_nvml(context: Context) -> Any | None:
    """The NVML bindings (the ``pynvml`` module), or None with a note when NVML is unusable.

    The one seam tests replace with a recorded stand-in.
    """
    if context.replaying:
        from gpuscout.plugins.cuda.replay import ReplayedNvml

        answers = context.recorded("nvml")
        if answers is None:
            context.note(
                context.recorded("missing")
                or "the recording holds no NVML answers (no NVIDIA driver was asked)"
            )
            return None
        return ReplayedNvml(answers)
    wsl_problem = wsl.preload(context)  # WSL2: its NVML, by full path, before pynvml asks by name
    if wsl_problem:
        context.note(wsl_problem)
    missing = _library_missing(context.platform)
    if missing is not None:
        context.record("missing", missing)
        context.note(missing)
        return None
    try:
        import pynvml  # type: ignore[import-untyped]
    except ImportError as exc:
        context.record("missing", f"NVML bindings (nvidia-ml-py) cannot be imported: {exc}")
        context.note(f"NVML bindings (nvidia-ml-py) cannot be imported: {exc}")
        return None
    if context.recording:
        from gpuscout.plugins.cuda.replay import RecordingNvml

        return RecordingNvml(pynvml, context)
    return pynvml


def _memory(nv: Any, handle: Any) -> MemoryReading | None:
    """Memory info v2, else v1; None when NVML says memory info is not supported."""
    v2 = getattr(nv, "nvmlMemory_v2", MEMORY_V2)
    try:
        info = nv.nvmlDeviceGetMemoryInfo(handle, version=v2)
        return MemoryReading(int(info.total), int(info.free), int(info.reserved))
    except nv.NVMLError as exc:
        # FunctionNotFound (driver older than v2) and any other refusal of v2 (a version
        # mismatch, NotSupported on unified parts) leave the answer to v1.
        if _error_code(exc) == GPU_IS_LOST:
            raise
    try:
        info = nv.nvmlDeviceGetMemoryInfo(handle)
    except nv.NVMLError as exc:
        if _error_code(exc) == NOT_SUPPORTED:
            return None
        raise
    return MemoryReading(int(info.total), int(info.free))


def _optional_int(call: Any, handle: Any, nv: Any) -> int | None:
    try:
        return int(call(handle))
    except (nv.NVMLError, AttributeError):
        return None


def _mig_enabled(nv: Any, handle: Any) -> bool:
    try:
        current, _pending = nv.nvmlDeviceGetMigMode(handle)
    except nv.NVMLError as exc:
        if _error_code(exc) in (NOT_SUPPORTED, FUNCTION_NOT_FOUND):
            return False
        raise
    return int(current) == MIG_ENABLED


def _mig_instances(nv: Any, handle: Any) -> tuple[MigReading, ...]:
    """The MIG instances of a GPU in MIG mode (indices with no instance are skipped)."""
    found: list[MigReading] = []
    for i in range(int(nv.nvmlDeviceGetMaxMigDeviceCount(handle))):
        try:
            mig = nv.nvmlDeviceGetMigDeviceHandleByIndex(handle, i)
        except nv.NVMLError:
            continue
        found.append(
            MigReading(
                uuid=text(nv.nvmlDeviceGetUUID(mig)),
                name=text(nv.nvmlDeviceGetName(mig)),
                memory=_memory(nv, mig),
                gpu_instance_id=_optional_int(getattr(nv, "nvmlDeviceGetGpuInstanceId", None), mig, nv),
                compute_instance_id=_optional_int(
                    getattr(nv, "nvmlDeviceGetComputeInstanceId", None), mig, nv
                ),
            )
        )
    return tuple(found)


def _pci(nv: Any, handle: Any) -> PciLocation | None:
    """The GPU's PCI location; None when NVML says it has none (NotSupported: Jetson Orin's
    integrated "Orin (nvgpu)" on JetPack 6, whose Bus-Id nvidia-smi prints as N/A,
    anduril/jetpack-nixos#371, ultralytics/ultralytics#20680)."""
    try:
        pci = nv.nvmlDeviceGetPciInfo(handle)
    except nv.NVMLError as exc:
        if _error_code(exc) == NOT_SUPPORTED:
            return None
        raise
    return pci_location(pci.domain, pci.bus, pci.device, pci.busId)


def read_gpu(nv: Any, index: int) -> GpuReading:
    """Everything gpuscout reports about GPU ``index``; raises NVMLError when NVML refuses."""
    handle = nv.nvmlDeviceGetHandleByIndex(index)
    pci = _pci(nv, handle)
    major, minor = nv.nvmlDeviceGetCudaComputeCapability(handle)
    mig_enabled = _mig_enabled(nv, handle)
    return GpuReading(
        index=index,
        name=text(nv.nvmlDeviceGetName(handle)),
        uuid=text(nv.nvmlDeviceGetUUID(handle)),
        pci=pci or PciLocation(),
        on_pci=pci is not None,
        # In MIG mode the parent's memory is an aggregate that needs privileges: not read.
        memory=None if mig_enabled else _memory(nv, handle),
        compute_major=int(major),
        compute_minor=int(minor),
        mig_enabled=mig_enabled,
        mig=_mig_instances(nv, handle) if mig_enabled else (),
        links=() if mig_enabled else read_links(nv, handle),
    )


def read_driver(nv: Any, context: Context) -> DriverReading:
    """The CUDA version the driver supports and the kernel driver version (0 / '' if unknown).

    The CUDA version is what the runtime gets from ``cuDriverGetVersion``: NVML's
    ``nvmlSystemGetCudaDriverVersion_v2`` asks libcuda for exactly that (it loads the library
    without ``cuInit``), so under cuda-compat it reports the compat libcuda a child would load,
    where v1 reports the kernel driver's own CUDA version. Drivers or bindings without ``_v2``
    fall back to v1.
    """
    cuda = 0
    kernel = ""
    v2 = getattr(nv, "nvmlSystemGetCudaDriverVersion_v2", None)
    try:
        try:
            if v2 is None:
                raise AttributeError("nvmlSystemGetCudaDriverVersion_v2")
            cuda = int(v2())
        except (nv.NVMLError, AttributeError) as exc:
            if _error_code(exc) not in (None, FUNCTION_NOT_FOUND, NOT_SUPPORTED):
                raise
            cuda = int(nv.nvmlSystemGetCudaDriverVersion())
    except nv.NVMLError as exc:
        context.note(f"NVML did not give the CUDA driver version: {_describe(exc)}")
    try:
        kernel = text(nv.nvmlSystemGetDriverVersion())
    except nv.NVMLError as exc:
        context.note(f"NVML did not give the NVIDIA driver version: {_describe(exc)}")
    return DriverReading(cuda_version=cuda, kernel_version=kernel)


def read_gpus(nv: Any, context: Context) -> list[GpuReading]:
    """Every GPU NVML lets this process open; the others are skipped with a note."""
    gpus: list[GpuReading] = []
    for index in range(int(nv.nvmlDeviceGetCount())):
        try:
            gpus.append(read_gpu(nv, index))
        except nv.NVMLError as exc:
            context.note(f"NVML GPU {index} skipped: {_describe(exc)}")
    return gpus


def _slot(gpu: GpuReading) -> GpuSlot:
    return GpuSlot(
        uuid=gpu.uuid,
        mig_enabled=gpu.mig_enabled,
        mig=tuple(MigSlot(m.uuid, m.gpu_instance_id, m.compute_instance_id) for m in gpu.mig),
    )


def _needs_system(gpus: Sequence[GpuReading]) -> bool:
    return any((g.memory is None and not g.mig_enabled) or g.integrated is True for g in gpus)


def build_devices(
    gpus: Sequence[GpuReading],
    driver: DriverReading,
    context: Context,
    system: SystemInfo | None = None,
) -> list[DeviceInfo]:
    """The records CUDA would expose under the context's visibility variables, in CUDA order.

    CUDA_VISIBLE_DEVICES set: what one CUDA process started with it sees (``one_process``: at
    most one MIG instance). Unset: every device, each MIG instance included, so that a host can
    give each instance to a child of its own; a note says what one process would see. The
    devices the variable hides follow, in CUDA order, marked ``hidden_by``
    (``CUDA_VISIBLE_DEVICES=0``): the core drops them and their twins in other libraries.
    """
    gpus, probe = ask_integrated(gpus, context)
    ordered = cuda_order(gpus, context, probe)  # one probe child answers both questions
    slots = [_slot(g) for g in ordered]
    value = context.env.get(VISIBLE_ENV)
    named = visible_uuids(value, slots)
    visible = named if value is None else one_process(named, slots)
    if system is None and _needs_system(gpus):
        system = uma_system(context)
    by_uuid: dict[str, DeviceInfo] = {}
    for gpu in ordered:
        by_uuid.update(records(gpu, driver, system))
    devices = [by_uuid[uuid] for uuid in visible]
    hiding = hidden_units(value, list(by_uuid), named, visible)
    for gpu in gpus:
        if gpu.mig_enabled and not gpu.mig:
            context.note(f"NVML GPU {gpu.index} is in MIG mode with no MIG instances")
    hidden = len(by_uuid) - len(named)
    if hidden:
        context.note(f"{hidden} NVIDIA {'device' if hidden == 1 else 'devices'} hidden by {VISIBLE_ENV}")
    migs = [u for u in named if u in mig_uuids(slots)]
    if value is not None and len(visible) < len(named):
        context.note(
            f"{len(named) - len(visible)} NVIDIA {'device' if len(named) - len(visible) == 1 else 'devices'} "
            f"named by {VISIBLE_ENV} left"
            f" out: CUDA enumerates one MIG instance per process, here {visible[0]}"
        )
    elif value is None and migs and len(named) > 1:
        context.note(
            f"a CUDA process started without {VISIBLE_ENV} sees only {migs[0]} (CUDA"
            " enumerates one MIG instance per process); every device is listed so that"
            f" each can be given to a child of its own by {VISIBLE_ENV}=<its UUID>"
        )
    if any(d.integrated and d.free_memory_unknown for d in devices):
        context.note("unified-memory GPU: NVML has no memory figures and system memory is unknown")
    if any(not d.integrated and d.free_memory_unknown for d in devices):
        context.note("NVML has no memory figures for a discrete NVIDIA device: memory unknown")
    found = devices + [by_uuid[uuid].evolve(hidden_by=why) for uuid, why in hiding.items()]
    return with_peers(found, peer_map([(g.uuid, g.pci.pci_id, g.links) for g in gpus if not g.mig_enabled]))


def enumerate_devices(context: Context) -> list[DeviceInfo]:
    """NVIDIA GPUs (MIG instances for GPUs in MIG mode) that CUDA would show this environment."""
    nv = _load_nvml(context)
    if nv is None:
        diagnosis.explain_missing_library(context)
        return []
    try:
        nv.nvmlInit()
    except nv.NVMLError as exc:
        context.note(f"NVML could not start (NVIDIA driver): {_describe(exc)}")
        diagnosis.explain_init_failure(context, _error_code(exc))
        return []
    try:
        driver = read_driver(nv, context)
        gpus = read_gpus(nv, context)
    except nv.NVMLError as exc:
        context.note(f"NVML failed while enumerating GPUs: {_describe(exc)}")
        diagnosis.explain_no_gpu(context)
        return []
    finally:
        try:
            nv.nvmlShutdown()
        except nv.NVMLError:
            pass
    if not gpus:
        diagnosis.explain_no_gpu(context)
    return wsl.mark(context, build_devices(gpus, driver, context))


def refresh_devices(devices: Sequence[DeviceInfo], context: Context) -> list[DeviceInfo] | None:
    """``devices`` of this library with free memory read again from NVML (None if NVML fails).

    A device NVML cannot read now (gone, lost, memory info refused), one without a UUID to find
    it by, and a unified-memory device while system memory is unknown are left out, so the
    core keeps their previous value (stale) instead of a 0 that only means "no reading".
    """
    mine = [d for d in devices if d.library == LIBRARY and d.uuid]
    if not mine:
        return None
    nv = _load_nvml(context)
    if nv is None:
        return None
    try:
        nv.nvmlInit()
    except nv.NVMLError:
        return None
    system: SystemInfo | None = None
    updated: list[DeviceInfo] = []
    try:
        for device in mine:
            if device.integrated:
                system = system or uma_system(context)
                # Zeros from system memory mean "unreadable", not "full".
                if system.total_memory and device.total_memory:
                    updated.append(
                        device.evolve(
                            free_memory=min(system.free_memory, device.total_memory),
                            free_memory_unknown=False,
                        )
                    )
                continue
            try:
                memory = _memory(nv, nv.nvmlDeviceGetHandleByUUID(device.uuid))
            except nv.NVMLError:
                continue
            if memory is not None:
                updated.append(
                    device.evolve(
                        free_memory=min(memory.free, device.total_memory), free_memory_unknown=False
                    )
                )
    finally:
        try:
            nv.nvmlShutdown()
        except nv.NVMLError:
            pass
    return updated
