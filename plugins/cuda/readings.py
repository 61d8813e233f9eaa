"""Plain NVML readings and the DeviceInfo records built from them (pure functions, no NVML).

``enumeration.py`` asks the library and fills these records; everything that decides what a field of
the report says lives here, so tests can feed values recorded on real cards.
"""

from __future__ import annotations

import re
from typing import Any

import attrs

from gpuscout.plugin import DeviceInfo, SystemInfo
from gpuscout.plugins.cuda.names import LIBRARY


@attrs.frozen(order=True)
class PciLocation:
    """Where a GPU sits on the PCI bus, as integers (NVML prints them in several spellings)."""

    domain: int = 0
    bus: int = 0
    device: int = 0
    function: int = 0

    @property
    def pci_id(self) -> str:
        """The contract's spelling: lower case, at least four domain digits (``0000:01:00.0``)."""
        return f"{self.domain:04x}:{self.bus:02x}:{self.device:02x}.{self.function:x}"


@attrs.frozen
class MemoryReading:
    """Device memory in bytes (NVML memory info v2, or v1 where ``reserved`` is None)."""

    total: int
    free: int
    reserved: int | None = None

    @property
    def cuda_total(self) -> int:
        """The total as the CUDA runtime sizes the device (``cuDeviceTotalMem``,
        ``cudaMemGetInfo``): NVML's total less what the driver and firmware reserve (memory
        info v2; ggml and ollama#18201: about 0.6 GiB less on 80-141 GB cards). v1 has no
        ``reserved``, so its total stands."""
        return max(0, self.total - (self.reserved or 0))


@attrs.frozen
class MigReading:
    """One MIG instance of a GPU in MIG mode: its own UUID, name and memory."""

    uuid: str
    name: str
    #: None when NVML says memory info is not supported on the instance.
    memory: MemoryReading | None
    gpu_instance_id: int | None = None
    compute_instance_id: int | None = None


@attrs.frozen
class GpuReading:
    """What NVML says about one physical GPU."""

    index: int
    name: str
    uuid: str
    pci: PciLocation
    #: None when NVML says memory info is not supported (unified memory: GB10, Jetson Thor).
    memory: MemoryReading | None
    compute_major: int = -1
    compute_minor: int = -1
    mig_enabled: bool = False
    mig: tuple[MigReading, ...] = ()
    #: The CUDA driver's CU_DEVICE_ATTRIBUTE_INTEGRATED (NVML has no such attribute); None
    #: when the driver was not asked or did not answer.
    integrated: bool | None = None
    #: False when NVML has no PCI figures for the GPU (Jetson's "Orin (nvgpu)" sits on the
    #: SoC, not on PCI: nvidia-smi prints its Bus-Id as N/A); ``pci`` is then all zeros and
    #: the record has no ``pci_id``.
    on_pci: bool = True
    #: The GPU's active NVLinks (``nvlink.read_links``); none without NVLink or in MIG mode.
    links: tuple[Any, ...] = ()


@attrs.frozen
class DriverReading:
    """Driver-wide values: the CUDA version int (12040) and the kernel driver string."""

    cuda_version: int = 0
    kernel_version: str = ""


def text(value: str | bytes) -> str:
    """NVML strings: ``str`` in current bindings, ``bytes`` in very old ones."""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


_FUNCTION = re.compile(r"\.([0-9a-fA-F]+)\s*$")


def pci_location(domain: int, bus: int, device: int, bus_id: str | bytes = "") -> PciLocation:
    """A PciLocation from NVML's integer fields; the function number comes from ``busId``.

    NVML's struct has no integer for the function, only the text ``00000000:01:00.0``.
    """
    match = _FUNCTION.search(text(bus_id))
    function = int(match.group(1), 16) if match else 0
    return PciLocation(int(domain), int(bus), int(device), function)


def cuda_version(value: int) -> tuple[int, int]:
    """NVML's CUDA driver version int as (major, minor): 12040 -> (12, 4); 0 -> (0, 0)."""
    if value <= 0:
        return 0, 0
    return value // 1000, (value % 1000) // 10


def kernel_driver_major(version: str) -> int:
    """The branch of a kernel driver version string: ``580.126.09`` -> 580; 0 when unreadable."""
    match = re.match(r"\s*(\d+)", version)
    return int(match.group(1)) if match else 0


def _memory_fields(
    memory: MemoryReading | None, system: SystemInfo | None, integrated: bool | None
) -> tuple[int, int, bool, bool]:
    """(total, free, integrated, free unknown) for a memory reading.

    Every integrated NVIDIA part (GB10, Jetson) has unified memory: the record says so with
    ``shared_memory`` (``_record``), so that the planner counts its free bytes and the
    system's once.

    Totals are the CUDA runtime's (``MemoryReading.cuda_total``). An integrated device (the
    driver says so, or, when it was not asked, NVML has no memory figures for it: GB10, Jetson
    Thor) shares system memory: its free memory is ``system.free_memory``, which the caller
    fills by ggml's rule (``unified.uma_system``); its total is NVML's when NVML has one, else the
    system's. A device the driver calls discrete without NVML figures has unknown memory.
    """
    if integrated is None:
        integrated = memory is None
    if not integrated:
        if memory is None:
            return 0, 0, False, True
        total = memory.cuda_total
        return total, min(memory.free, total), False, False
    have_system = system is not None and system.total_memory > 0
    if memory is not None:
        total = memory.cuda_total
        free = system.free_memory if system is not None and have_system else memory.free
        return total, min(free, total), True, False
    if system is None or not have_system:
        return 0, 0, True, True
    return system.total_memory, min(system.free_memory, system.total_memory), True, False


def _record(
    uuid: str,
    name: str,
    memory: MemoryReading | None,
    gpu: GpuReading,
    driver: DriverReading,
    system: SystemInfo | None,
) -> DeviceInfo:
    # A MIG instance is a slice of a discrete GPU: never integrated.
    integrated_flag = False if gpu.mig_enabled else gpu.integrated
    total, free, integrated, unknown = _memory_fields(memory, system, integrated_flag)
    cuda_major, cuda_minor = cuda_version(driver.cuda_version)
    notes = (unified_note(memory, unknown),) if integrated else ()
    return DeviceInfo(
        id=uuid,
        library=LIBRARY,
        name=name,
        description=name,
        filter_id=uuid,
        uuid=uuid,
        integrated=integrated,
        shared_memory=integrated,
        pci_id=gpu.pci.pci_id if gpu.on_pci else "",
        total_memory=total,
        free_memory=free,
        free_memory_unknown=unknown,
        compute_major=gpu.compute_major,
        compute_minor=gpu.compute_minor,
        driver_major=cuda_major,
        driver_minor=cuda_minor,
        nvidia_driver_major=kernel_driver_major(driver.kernel_version),
        notes=notes,
    )


def unified_note(memory: MemoryReading | None, unknown: bool) -> str:
    """The note of an integrated (unified-memory) NVIDIA device: whose bytes its figures are."""
    if unknown:
        return (
            "unified memory shared with the system; NVML has no memory figures and system memory is unknown"
        )
    if memory is None:
        return (
            "unified memory shared with the system: NVML reports memory Not Supported, so "
            "total and free are the system's (MemTotal, MemAvailable)"
        )
    return (
        "unified memory shared with the system: free memory is the system's (MemAvailable), as ggml reads it"
    )


def gpu_record(gpu: GpuReading, driver: DriverReading, system: SystemInfo | None) -> DeviceInfo:
    """The DeviceInfo for a whole GPU (not in MIG mode)."""
    return _record(gpu.uuid, gpu.name, gpu.memory, gpu, driver, system)


def mig_record(
    gpu: GpuReading, mig: MigReading, driver: DriverReading, system: SystemInfo | None
) -> DeviceInfo:
    """The DeviceInfo for one MIG instance of ``gpu``: its own UUID, name and memory, the
    parent's compute capability and PCI id.

    ``pci_id`` is the parent's: the instances sit at its address, and the core keeps records of
    one PCI id from one plugin apart when their ids differ (partitions), while a Vulkan view of
    the same card is still recognised as its twin.
    """
    return _record(mig.uuid, mig.name, mig.memory, gpu, driver, system)


def records(gpu: GpuReading, driver: DriverReading, system: SystemInfo | None) -> dict[str, DeviceInfo]:
    """Every record ``gpu`` yields, keyed by UUID: its MIG instances in MIG mode, else itself."""
    if gpu.mig_enabled:
        return {m.uuid: mig_record(gpu, m, driver, system) for m in gpu.mig}
    return {gpu.uuid: gpu_record(gpu, driver, system)}
