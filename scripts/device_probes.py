"""Raw NVML and CUDA driver answers through ctypes, printed as one JSON object (no gpuscout).

Run only as a child of ``scripts/device_check.py``, so that the checking process never loads a
driver library or holds a CUDA context::

    python3 scripts/device_probes.py nvml            # NVML: every GPU, as the recorded cards hold it
    python3 scripts/device_probes.py cuda [--context]

Read-only: no call here changes the machine (no MIG mode, no reset, no persistence mode, no
clocks). ``cuda --context`` retains each device's primary context for ``cuMemGetInfo_v2`` and
releases it again; that holds some device memory for a moment.

Failures are data: an NVML call that fails is written ``{"error": "<Name>", "code": N}`` with
pynvml's error class names, a CUDA call ``{"error": "CUDA_ERROR_...", "code": N}``; a library that
cannot be loaded is ``"load_error"``. The exit status is 0 whenever JSON was printed.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
from collections.abc import Callable
from functools import partial
from typing import Any

NVML_LIBRARY = "libnvidia-ml.so.1"
CUDA_LIBRARY = "libcuda.so.1"

#: nvml.h return codes by pynvml's NVMLError_<Name> class names.
NVML_ERRORS = {
    1: "Uninitialized",
    2: "InvalidArgument",
    3: "NotSupported",
    4: "NoPermission",
    5: "AlreadyInitialized",
    6: "NotFound",
    7: "InsufficientSize",
    8: "InsufficientPower",
    9: "DriverNotLoaded",
    10: "Timeout",
    11: "IrqIssue",
    12: "LibraryNotFound",
    13: "FunctionNotFound",
    14: "CorruptedInforom",
    15: "GpuIsLost",
    16: "ResetRequired",
    17: "OperatingSystem",
    18: "LibRmVersionMismatch",
    19: "InUse",
    20: "Memory",
    21: "NoData",
    22: "VgpuEccNotSupported",
    23: "InsufficientResources",
    24: "FreqNotSupported",
    25: "ArgumentVersionMismatch",
    26: "Deprecated",
    27: "NotReady",
    28: "GpuNotFound",
    29: "InvalidState",
    999: "Unknown",
}
FUNCTION_NOT_FOUND = 13
CUDA_ERROR_NO_DEVICE = 100
#: cuDeviceGetAttribute numbers (cuda.h CUdevice_attribute).
ATTRIBUTES = {
    "pci_bus": 33,
    "pci_device": 34,
    "pci_domain": 50,
    "integrated": 18,
    "compute_major": 75,
    "compute_minor": 76,
}


class Failed(Exception):
    """One library call returned an error; ``answer`` is its JSON form."""

    def __init__(self, answer: dict[str, Any]) -> None:
        super().__init__(answer["error"])
        self.answer = answer


class NvmlPciInfo(ctypes.Structure):
    """nvmlPciInfo_t as nvmlDeviceGetPciInfo_v3 fills it."""

    _fields_ = [
        ("busIdLegacy", ctypes.c_char * 16),
        ("domain", ctypes.c_uint),
        ("bus", ctypes.c_uint),
        ("device", ctypes.c_uint),
        ("pciDeviceId", ctypes.c_uint),
        ("pciSubSystemId", ctypes.c_uint),
        ("busId", ctypes.c_char * 32),
    ]


class NvmlMemory(ctypes.Structure):
    """nvmlMemory_t (v1)."""

    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


class NvmlMemoryV2(ctypes.Structure):
    """nvmlMemory_v2_t; ``version`` must be sizeof | 2 << 24 (0x02000028)."""

    _fields_ = [
        ("version", ctypes.c_uint),
        ("total", ctypes.c_ulonglong),
        ("reserved", ctypes.c_ulonglong),
        ("free", ctypes.c_ulonglong),
        ("used", ctypes.c_ulonglong),
    ]


MEMORY_V2_VERSION = ctypes.sizeof(NvmlMemoryV2) | (2 << 24)


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


def _answer(call: Callable[[], Any]) -> Any:
    try:
        return call()
    except Failed as exc:
        return exc.answer


class Nvml:
    """The NVML calls the recorded cards need, each raising Failed on a non-zero return."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        self.lib = lib

    def call(self, name: str, *args: Any) -> None:
        function = getattr(self.lib, name, None)
        if function is None:
            raise Failed(
                {"error": NVML_ERRORS[FUNCTION_NOT_FOUND], "code": FUNCTION_NOT_FOUND, "missing": name}
            )
        rc = int(function(*args))
        if rc:
            raise Failed({"error": NVML_ERRORS.get(rc, f"Code{rc}"), "code": rc})

    def string(self, name: str, *args: Any, size: int = 96) -> str:
        buffer = ctypes.create_string_buffer(size)
        self.call(name, *args, buffer, ctypes.c_uint(size))
        return _text(buffer.value)

    def uint(self, name: str, *args: Any) -> int:
        value = ctypes.c_uint()
        self.call(name, *args, ctypes.byref(value))
        return value.value

    def memory_v1(self, handle: ctypes.c_void_p) -> dict[str, int]:
        info = NvmlMemory()
        self.call("nvmlDeviceGetMemoryInfo", handle, ctypes.byref(info))
        return {"total": info.total, "free": info.free, "used": info.used}

    def memory_v2(self, handle: ctypes.c_void_p) -> dict[str, int]:
        info = NvmlMemoryV2(version=MEMORY_V2_VERSION)
        self.call("nvmlDeviceGetMemoryInfo_v2", handle, ctypes.byref(info))
        return {"total": info.total, "reserved": info.reserved, "free": info.free, "used": info.used}

    def pci(self, handle: ctypes.c_void_p) -> dict[str, Any]:
        info = NvmlPciInfo()
        self.call("nvmlDeviceGetPciInfo_v3", handle, ctypes.byref(info))
        return {
            "busId": _text(info.busId),
            "domain": info.domain,
            "bus": info.bus,
            "device": info.device,
            "busIdLegacy": _text(info.busIdLegacy),
            "pciDeviceId": info.pciDeviceId,
        }

    def pair(self, name: str, handle: ctypes.c_void_p, kind: Any = ctypes.c_uint) -> list[int]:
        first, second = kind(), kind()
        self.call(name, handle, ctypes.byref(first), ctypes.byref(second))
        return [int(first.value), int(second.value)]

    def handle(self, name: str, *args: Any) -> ctypes.c_void_p:
        found = ctypes.c_void_p()
        self.call(name, *args, ctypes.byref(found))
        return found


def _nvml_node(nv: Nvml, handle: ctypes.c_void_p) -> dict[str, Any]:
    return {
        "name": _answer(lambda: nv.string("nvmlDeviceGetName", handle)),
        "uuid": _answer(lambda: nv.string("nvmlDeviceGetUUID", handle)),
        "memory_v2": _answer(lambda: nv.memory_v2(handle)),
        "memory_v1": _answer(lambda: nv.memory_v1(handle)),
    }


def _nvml_mig(nv: Nvml, handle: ctypes.c_void_p) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for index in range(nv.uint("nvmlDeviceGetMaxMigDeviceCount", handle)):
        try:
            mig = nv.handle("nvmlDeviceGetMigDeviceHandleByIndex", handle, ctypes.c_uint(index))
        except Failed:
            continue
        node = {"index": index, **_nvml_node(nv, mig)}
        node["gpu_instance_id"] = _answer(partial(nv.uint, "nvmlDeviceGetGpuInstanceId", mig))
        node["compute_instance_id"] = _answer(partial(nv.uint, "nvmlDeviceGetComputeInstanceId", mig))
        found.append(node)
    return found


def nvml_gpu(nv: Nvml, index: int) -> dict[str, Any]:
    """Everything the recorded-card format holds for GPU ``index`` (plus persistence mode)."""
    try:
        handle = nv.handle("nvmlDeviceGetHandleByIndex_v2", ctypes.c_uint(index))
    except Failed as exc:
        return {"index": index, "handle": exc.answer}
    gpu: dict[str, Any] = {"index": index, **_nvml_node(nv, handle)}
    gpu["pci"] = _answer(lambda: nv.pci(handle))
    gpu["compute"] = _answer(lambda: nv.pair("nvmlDeviceGetCudaComputeCapability", handle, ctypes.c_int))
    gpu["mig_mode"] = _answer(lambda: nv.pair("nvmlDeviceGetMigMode", handle))
    gpu["persistence_mode"] = _answer(lambda: nv.uint("nvmlDeviceGetPersistenceMode", handle))
    if isinstance(gpu["mig_mode"], list) and gpu["mig_mode"][0] == 1:
        gpu["max_mig"] = _answer(lambda: nv.uint("nvmlDeviceGetMaxMigDeviceCount", handle))
        gpu["mig"] = _answer(lambda: _nvml_mig(nv, handle))
    return gpu


def nvml_dump() -> dict[str, Any]:
    """NVML's view of the machine: driver versions, device count and every GPU."""
    dump: dict[str, Any] = {"library": NVML_LIBRARY}
    try:
        nv = Nvml(ctypes.CDLL(NVML_LIBRARY))
    except OSError as exc:
        dump["load_error"] = str(exc)
        return dump
    try:
        nv.call("nvmlInit_v2")
    except Failed as exc:
        dump["init"] = exc.answer
        return dump
    try:
        dump["nvml_version"] = _answer(lambda: nv.string("nvmlSystemGetNVMLVersion", size=80))
        dump["driver"] = {
            "kernel": _answer(lambda: nv.string("nvmlSystemGetDriverVersion", size=80)),
            "cuda": _answer(lambda: nv.uint("nvmlSystemGetCudaDriverVersion")),
            "cuda_v2": _answer(lambda: nv.uint("nvmlSystemGetCudaDriverVersion_v2")),
        }
        count = _answer(lambda: nv.uint("nvmlDeviceGetCount_v2"))
        dump["count"] = count
        dump["gpus"] = [nvml_gpu(nv, i) for i in range(count)] if isinstance(count, int) else []
    finally:
        dump["shutdown"] = _answer(lambda: nv.call("nvmlShutdown"))
    return dump


class Cuda:
    """The CUDA driver API calls the check needs, each raising Failed on a non-zero CUresult."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        self.lib = lib

    def error(self, rc: int) -> dict[str, Any]:
        name = ctypes.c_char_p()
        getter = getattr(self.lib, "cuGetErrorName", None)
        if getter is None or getter(rc, ctypes.byref(name)) != 0 or name.value is None:
            return {"error": f"CUresult {rc}", "code": rc}
        return {"error": _text(name.value), "code": rc}

    def call(self, name: str, *args: Any) -> None:
        function = getattr(self.lib, name, None)
        if function is None:
            raise Failed({"error": "missing symbol", "missing": name})
        rc = int(function(*args))
        if rc:
            raise Failed(self.error(rc))

    def integer(self, name: str, *args: Any) -> int:
        value = ctypes.c_int()
        self.call(name, ctypes.byref(value), *args)
        return value.value

    def uuid(self, device: ctypes.c_int) -> dict[str, Any]:
        raw = (ctypes.c_ubyte * 16)()
        for name in ("cuDeviceGetUuid_v2", "cuDeviceGetUuid"):
            if getattr(self.lib, name, None) is not None:
                self.call(name, ctypes.byref(raw), device)
                return {"uuid": format_uuid(bytes(raw)), "uuid_call": name}
        raise Failed({"error": "missing symbol", "missing": "cuDeviceGetUuid"})

    def memory(self, device: ctypes.c_int) -> dict[str, Any]:
        """cuMemGetInfo_v2 in the device's primary context (retained, then released)."""
        context = ctypes.c_void_p()
        self.call("cuDevicePrimaryCtxRetain", ctypes.byref(context), device)
        try:
            self.call("cuCtxSetCurrent", context)
            free, total = ctypes.c_size_t(), ctypes.c_size_t()
            self.call("cuMemGetInfo_v2", ctypes.byref(free), ctypes.byref(total))
            return {"free": free.value, "total": total.value}
        finally:
            self.call("cuCtxSetCurrent", ctypes.c_void_p())
            release = (
                "cuDevicePrimaryCtxRelease_v2"
                if getattr(self.lib, "cuDevicePrimaryCtxRelease_v2", None) is not None
                else "cuDevicePrimaryCtxRelease"
            )
            self.call(release, device)


def format_uuid(raw: bytes) -> str:
    """16 UUID bytes as nvidia-smi prints them: ``GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx``."""
    h = raw.hex()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def cuda_device(cu: Cuda, ordinal: int, context: bool) -> dict[str, Any]:
    """One CUDA ordinal: UUID, PCI attributes, integrated flag, total (and free) memory."""
    try:
        device = ctypes.c_int(cu.integer("cuDeviceGet", ctypes.c_int(ordinal)))
    except Failed as exc:
        return {"ordinal": ordinal, "device": exc.answer}
    found: dict[str, Any] = {"ordinal": ordinal}
    try:
        found.update(cu.uuid(device))
    except Failed as exc:
        found["uuid"] = exc.answer

    def name() -> str:
        buffer = ctypes.create_string_buffer(256)
        cu.call("cuDeviceGetName", buffer, ctypes.c_int(256), device)
        return _text(buffer.value)

    def bus_id() -> str:
        buffer = ctypes.create_string_buffer(64)
        cu.call("cuDeviceGetPCIBusId", buffer, ctypes.c_int(64), device)
        return _text(buffer.value)

    def total() -> int:
        value = ctypes.c_size_t()
        cu.call("cuDeviceTotalMem_v2", ctypes.byref(value), device)
        return value.value

    found["name"] = _answer(name)
    found["pci_bus_id"] = _answer(bus_id)
    for key, number in ATTRIBUTES.items():
        found[key] = _answer(partial(cu.integer, "cuDeviceGetAttribute", number, device))
    found["total_mem"] = _answer(total)
    if context:
        found["mem_info"] = _answer(lambda: cu.memory(device))
    return found


def cuda_dump(context: bool) -> dict[str, Any]:
    """What the CUDA driver API shows this process under its CUDA_VISIBLE_DEVICES."""
    dump: dict[str, Any] = {
        "library": CUDA_LIBRARY,
        "env": {k: os.environ.get(k) for k in ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")},
    }
    try:
        cu = Cuda(ctypes.CDLL(CUDA_LIBRARY))
    except OSError as exc:
        dump["load_error"] = str(exc)
        return dump
    dump["driver_version"] = _answer(lambda: cu.integer("cuDriverGetVersion"))
    try:
        cu.call("cuInit", ctypes.c_uint(0))
    except Failed as exc:
        dump["init"] = exc.answer
        # CUDA_ERROR_NO_DEVICE is how "nothing visible" looks: zero devices, not a failure.
        dump["count"] = 0 if exc.answer.get("code") == CUDA_ERROR_NO_DEVICE else exc.answer
        dump["devices"] = []
        return dump
    count = _answer(lambda: cu.integer("cuDeviceGetCount"))
    dump["count"] = count
    dump["devices"] = [cuda_device(cu, i, context) for i in range(count)] if isinstance(count, int) else []
    return dump


def main(argv: list[str]) -> int:
    """``nvml`` or ``cuda [--context]``; prints the dump as JSON on stdout."""
    if not argv or argv[0] not in ("nvml", "cuda"):
        sys.stderr.write("usage: device_probes.py nvml | cuda [--context]\n")
        return 64
    dump = nvml_dump() if argv[0] == "nvml" else cuda_dump(context="--context" in argv)
    sys.stdout.write(json.dumps(dump) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
