"""NVML's answers in a recording: captured from the live NVML, and replayed in its place.

The answers are one JSON object (the recording's ``answers/cuda.json`` key ``nvml``; the
format of ``tests/plugins/cuda/recorded/`` and docs/recordings.md)::

    {"init": {"error": "DriverNotLoaded", "message": "Driver Not Loaded"},   # only if it failed
     "driver": {"kernel": "550.54.15", "cuda": 12040, "cuda_v2": 12040},
     "gpus": [{"name": ..., "uuid": ..., "pci": {"busId", "domain", "bus", "device"},
               "memory_v2": {"total", "free", "reserved", "used"}, "memory_v1": {...},
               "compute": [9, 0], "mig_mode": [0, 0], "max_mig": 7, "mig": [...]}]}

Any answer may be ``{"error": NAME or code, "message": text}``: the call raised NVMLError
with that code. ``ReplayedNvml`` answers pynvml's calls from it (the plugin's one NVML seam
takes it in pynvml's place); ``capture`` makes it from the live bindings.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import SimpleNamespace
from typing import Any

from gpuscout.plugin import RecordingError

#: NVML return codes by the names pynvml gives their error classes (nvml.h values).
ERROR_CODES = {
    "Uninitialized": 1,
    "InvalidArgument": 2,
    "NotSupported": 3,
    "NoPermission": 4,
    "AlreadyInitialized": 5,
    "NotFound": 6,
    "InsufficientSize": 7,
    "InsufficientPower": 8,
    "DriverNotLoaded": 9,
    "Timeout": 10,
    "IrqIssue": 11,
    "LibraryNotFound": 12,
    "FunctionNotFound": 13,
    "CorruptedInforom": 14,
    "GpuIsLost": 15,
    "ResetRequired": 16,
    "OperatingSystem": 17,
    "LibRmVersionMismatch": 18,
    "InUse": 19,
    "Memory": 20,
    "NoData": 21,
    "Unknown": 999,
}
_NAMES = {code: name for name, code in ERROR_CODES.items()}
_WHERE = "answers/cuda.json: nvml"


class ReplayedNVMLError(Exception):
    """pynvml's NVMLError convention: ``.value`` holds the NVML return code."""

    def __init__(self, code: int, message: str = "") -> None:
        super().__init__(message or f"NVML error {_NAMES.get(code, code)} (replayed)")
        self.value = code


def _code(error: Any, where: str) -> int:
    if isinstance(error, bool):
        raise RecordingError(f"{_WHERE}{where}: error must be an NVML error name or code")
    if isinstance(error, int):
        return error
    if isinstance(error, str) and error in ERROR_CODES:
        return ERROR_CODES[error]
    raise RecordingError(
        f"{_WHERE}{where}: unknown NVML error {error!r:.40} (one of {', '.join(ERROR_CODES)}, or a code)"
    )


def _answer(value: Any, where: str) -> Any:
    if isinstance(value, str) and value in ERROR_CODES:
        raise ReplayedNVMLError(ERROR_CODES[value])
    if isinstance(value, Mapping) and "error" in value:
        raise ReplayedNVMLError(_code(value["error"], where), str(value.get("message", "")))
    return value


def _int(value: Any, where: str) -> int:
    value = _answer(value, where)
    if isinstance(value, bool) or not isinstance(value, int):
        raise RecordingError(f"{_WHERE}{where}: expected a whole number, got {value!r:.40}")
    return value


def _str(value: Any, where: str) -> str:
    value = _answer(value, where)
    if not isinstance(value, str):
        raise RecordingError(f"{_WHERE}{where}: expected a str, got {value!r:.40}")
    return value


def _obj(value: Any, where: str) -> Mapping[str, Any]:
    value = _answer(value, where)
    if not isinstance(value, Mapping):
        raise RecordingError(f"{_WHERE}{where}: expected an object, got {value!r:.40}")
    return value


def _unique_uuids(gpus: Sequence[Mapping[str, Any]]) -> None:
    """RecordingError when two GPUs or MIG instances carry one UUID: NVML never answers so (a
    UUID names one device), and a copied entry would otherwise replay as a card hidden from itself."""
    seen: dict[str, str] = {}
    for i, gpu in enumerate(gpus):
        entries = [(f".gpus[{i}].uuid", gpu.get("uuid"))]
        migs = gpu.get("mig", [])
        if isinstance(migs, list):
            entries += [
                (f".gpus[{i}].mig[{j}].uuid", m.get("uuid"))
                for j, m in enumerate(migs)
                if isinstance(m, Mapping)
            ]
        for where, uuid in entries:
            if not isinstance(uuid, str) or not uuid:
                continue  # an error answer, or malformed: said where it is read
            if uuid in seen:
                raise RecordingError(
                    f"{_WHERE}{where}: {uuid!r:.60} is also {seen[uuid]}; each device has its own UUID"
                )
            seen[uuid] = where


class ReplayedNvml:
    """Answers pynvml's calls (same names, same error convention) from recorded answers.

    Not a driver: a malformed answer raises RecordingError naming where it is.
    """

    NVMLError = ReplayedNVMLError
    nvmlMemory_v2 = 0x02000028

    def __init__(self, answers: Mapping[str, Any]) -> None:
        self.recording = _obj(answers, "")
        gpus = self.recording.get("gpus", [])
        if not isinstance(gpus, list) or not all(isinstance(g, Mapping) for g in gpus):
            raise RecordingError(f"{_WHERE}.gpus: expected a list of objects")
        self.gpus: list[Mapping[str, Any]] = gpus
        _unique_uuids(gpus)

    # -- library ------------------------------------------------------------------------------
    def nvmlInit(self) -> None:
        _answer(self.recording.get("init", None), ".init")

    def nvmlShutdown(self) -> None:
        """Nothing to close."""

    def _driver(self, key: str) -> Any:
        driver = _obj(self.recording.get("driver", {}), ".driver")
        if key == "cuda_v2" and key not in driver:
            key = "cuda"
        if key not in driver:
            raise ReplayedNVMLError(ERROR_CODES["NotSupported"])
        return driver[key]

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        return _int(self._driver("cuda"), ".driver.cuda")

    def nvmlSystemGetCudaDriverVersion_v2(self) -> int:
        return _int(self._driver("cuda_v2"), ".driver.cuda_v2")

    def nvmlSystemGetDriverVersion(self) -> str:
        return _str(self._driver("kernel"), ".driver.kernel")

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    # -- handles: ("gpu", i) or ("mig", i, j) -------------------------------------------------
    def _node(self, handle: tuple[Any, ...]) -> tuple[Mapping[str, Any], str]:
        gpu = self.gpus[handle[1]]
        if handle[0] == "gpu":
            return gpu, f".gpus[{handle[1]}]"
        for j, m in enumerate(self._migs(handle[1])):
            if m.get("index") == handle[2]:
                return m, f".gpus[{handle[1]}].mig[{j}]"
        raise ReplayedNVMLError(ERROR_CODES["NotFound"])

    def _migs(self, i: int) -> list[Mapping[str, Any]]:
        migs = self.gpus[i].get("mig", [])
        if not isinstance(migs, list) or not all(isinstance(m, Mapping) for m in migs):
            raise RecordingError(f"{_WHERE}.gpus[{i}].mig: expected a list of objects")
        return migs

    def _field(self, handle: tuple[Any, ...], key: str, default: Any = ...) -> tuple[Any, str]:
        node, where = self._node(handle)
        if key not in node:
            if default is ...:
                raise RecordingError(f"{_WHERE}{where}: no {key!r}")
            return default, f"{where}.{key}"
        return node[key], f"{where}.{key}"

    def nvmlDeviceGetHandleByIndex(self, index: int) -> tuple[Any, ...]:
        _answer(self.gpus[index].get("handle", None), f".gpus[{index}].handle")
        return ("gpu", index)

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> tuple[Any, ...]:
        for i, gpu in enumerate(self.gpus):
            if gpu.get("uuid") == uuid:
                return ("gpu", i)
            for m in self._migs(i):
                if m.get("uuid") == uuid:
                    return ("mig", i, m.get("index"))
        raise ReplayedNVMLError(ERROR_CODES["NotFound"])

    def nvmlDeviceGetName(self, handle: tuple[Any, ...]) -> str:
        return _str(*self._field(handle, "name"))

    def nvmlDeviceGetUUID(self, handle: tuple[Any, ...]) -> str:
        return _str(*self._field(handle, "uuid"))

    def nvmlDeviceGetPciInfo(self, handle: tuple[Any, ...]) -> SimpleNamespace:
        value, where = self._field(handle, "pci")
        pci = _obj(value, where)
        for key in ("domain", "bus", "device"):
            _int(pci.get(key), f"{where}.{key}")
        return SimpleNamespace(
            busId=_str(pci.get("busId", ""), f"{where}.busId"),
            domain=pci["domain"],
            bus=pci["bus"],
            device=pci["device"],
        )

    def nvmlDeviceGetMemoryInfo(self, handle: tuple[Any, ...], version: int | None = None) -> Any:
        value, where = self._field(handle, "memory_v2" if version else "memory_v1", {"error": "NotSupported"})
        memory = _obj(value, where)
        return SimpleNamespace(
            **{k: _int(memory.get(k, 0), f"{where}.{k}") for k in ("total", "free", "reserved", "used")}
        )

    def nvmlDeviceGetCudaComputeCapability(self, handle: tuple[Any, ...]) -> tuple[int, int]:
        value, where = self._field(handle, "compute")
        value = _answer(value, where)
        if not isinstance(value, list) or len(value) != 2:
            raise RecordingError(f"{_WHERE}{where}: expected [major, minor]")
        return _int(value[0], where), _int(value[1], where)

    def nvmlDeviceGetMigMode(self, handle: tuple[Any, ...]) -> list[int]:
        value, where = self._field(handle, "mig_mode", "NotSupported")
        value = _answer(value, where)
        if not isinstance(value, list) or len(value) != 2:
            raise RecordingError(f"{_WHERE}{where}: expected [current, pending]")
        return [_int(v, where) for v in value]

    def nvmlDeviceGetMaxMigDeviceCount(self, handle: tuple[Any, ...]) -> int:
        return min(_int(*self._field(handle, "max_mig", 0)), 64)

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle: tuple[Any, ...], index: int) -> tuple[Any, ...]:
        if not any(m.get("index") == index for m in self._migs(handle[1])):
            raise ReplayedNVMLError(ERROR_CODES["NotFound"])
        return ("mig", handle[1], index)

    def nvmlDeviceGetGpuInstanceId(self, handle: tuple[Any, ...]) -> int:
        return _int(*self._field(handle, "gpu_instance_id"))

    def nvmlDeviceGetComputeInstanceId(self, handle: tuple[Any, ...]) -> int:
        return _int(*self._field(handle, "compute_instance_id"))

    # -- NVLink: "nvlink" is a list of links, {"state", "remote", "type"} each ------------------
    def _link(self, handle: tuple[Any, ...], link: int) -> tuple[Mapping[str, Any], str]:
        value, where = self._field(handle, "nvlink", {"error": "NotSupported"})
        links = _answer(value, where)
        if not isinstance(links, list):
            raise RecordingError(f"{_WHERE}{where}: expected a list of links")
        if not 0 <= link < len(links):
            raise ReplayedNVMLError(ERROR_CODES["InvalidArgument"])
        return _obj(links[link], f"{where}[{link}]"), f"{where}[{link}]"

    def nvmlDeviceGetNvLinkState(self, handle: tuple[Any, ...], link: int) -> int:
        entry, where = self._link(handle, link)
        return _int(entry.get("state", 0), f"{where}.state")

    def nvmlDeviceGetNvLinkRemotePciInfo(self, handle: tuple[Any, ...], link: int) -> SimpleNamespace:
        entry, where = self._link(handle, link)
        pci = _obj(entry.get("remote", {"error": "NotSupported"}), f"{where}.remote")
        for key in ("domain", "bus", "device"):
            _int(pci.get(key), f"{where}.remote.{key}")
        return SimpleNamespace(
            busId=_str(pci.get("busId", ""), f"{where}.remote.busId"),
            domain=pci["domain"],
            bus=pci["bus"],
            device=pci["device"],
        )

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, handle: tuple[Any, ...], link: int) -> int:
        entry, where = self._link(handle, link)
        return _int(entry.get("type", {"error": "NotSupported"}), f"{where}.type")


# -- capture --------------------------------------------------------------------------------------


def _error(nv: Any, exc: BaseException) -> dict[str, Any]:
    code = getattr(exc, "value", None)
    name = _NAMES.get(code) if isinstance(code, int) else None
    return {"error": name or (code if isinstance(code, int) else "Unknown"), "message": str(exc)}


def _try(nv: Any, call: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return call(*args, **kwargs), None
    except nv.NVMLError as exc:
        return None, _error(nv, exc)


def _value(nv: Any, call: Any, *args: Any, convert: Any = None) -> Any:
    value, error = _try(nv, call, *args)
    if error is not None:
        return error
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    return convert(value) if convert else value


def _memory(nv: Any, handle: Any, version: int | None) -> Any:
    kwargs = {"version": version} if version else {}
    info, error = _try(nv, nv.nvmlDeviceGetMemoryInfo, handle, **kwargs)
    if error is not None:
        return error
    return {k: int(getattr(info, k)) for k in ("total", "free", "reserved", "used") if hasattr(info, k)}


def _device(nv: Any, handle: Any) -> dict[str, Any]:
    v2 = getattr(nv, "nvmlMemory_v2", ReplayedNvml.nvmlMemory_v2)
    return {
        "name": _value(nv, nv.nvmlDeviceGetName, handle),
        "uuid": _value(nv, nv.nvmlDeviceGetUUID, handle),
        "memory_v2": _memory(nv, handle, v2),
        "memory_v1": _memory(nv, handle, None),
    }


def capture(nv: Any) -> dict[str, Any]:
    """Everything the CUDA plugin asks NVML, as answers ``ReplayedNvml`` replays (NVML must be
    initialised; a refused call is kept as its error)."""
    driver = {
        "kernel": _value(nv, nv.nvmlSystemGetDriverVersion),
        "cuda": _value(nv, nv.nvmlSystemGetCudaDriverVersion, convert=int),
    }
    if hasattr(nv, "nvmlSystemGetCudaDriverVersion_v2"):
        driver["cuda_v2"] = _value(nv, nv.nvmlSystemGetCudaDriverVersion_v2, convert=int)
    gpus: list[dict[str, Any]] = []
    count, error = _try(nv, nv.nvmlDeviceGetCount)
    for index in range(int(count or 0)):
        handle, error = _try(nv, nv.nvmlDeviceGetHandleByIndex, index)
        if error is not None:
            gpus.append({"handle": error})
            continue
        gpu = _device(nv, handle)
        pci, error = _try(nv, nv.nvmlDeviceGetPciInfo, handle)
        bus_id = getattr(pci, "busId", b"")
        gpu["pci"] = error or {
            "busId": bus_id.decode("ascii", "replace") if isinstance(bus_id, bytes) else str(bus_id),
            "domain": int(pci.domain),
            "bus": int(pci.bus),
            "device": int(pci.device),
        }
        gpu["compute"] = _value(nv, nv.nvmlDeviceGetCudaComputeCapability, handle, convert=list)
        mode = _value(nv, nv.nvmlDeviceGetMigMode, handle, convert=list)
        gpu["mig_mode"] = mode
        if isinstance(mode, list) and mode and int(mode[0]) == 1:
            gpu["max_mig"] = _value(nv, nv.nvmlDeviceGetMaxMigDeviceCount, handle, convert=int)
            gpu["mig"] = _migs(nv, handle, gpu["max_mig"])
        else:
            gpu["nvlink"] = _links(nv, handle)
        gpus.append(gpu)
    return {"driver": driver, "gpus": gpus}


def _migs(nv: Any, handle: Any, count: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for i in range(count if isinstance(count, int) else 0):
        mig, error = _try(nv, nv.nvmlDeviceGetMigDeviceHandleByIndex, handle, i)
        if error is not None:
            continue
        entry = {"index": i, **_device(nv, mig)}
        for key, name in (
            ("gpu_instance_id", "nvmlDeviceGetGpuInstanceId"),
            ("compute_instance_id", "nvmlDeviceGetComputeInstanceId"),
        ):
            call = getattr(nv, name, None)
            if call is not None:
                entry[key] = _value(nv, call, mig, convert=int)
        found.append(entry)
    return found


def _links(nv: Any, handle: Any) -> Any:
    """Every NVLink index NVML answers for (``nvlink.read_links`` walks the same way): its
    state, and for an active one what is at its other end; an error on link 0 for the lot."""
    from gpuscout.plugins.cuda.nvlink import MAX_LINKS, walk_ends

    found: list[dict[str, Any]] = []
    count = MAX_LINKS if hasattr(nv, "nvmlDeviceGetNvLinkState") else 0
    for link in range(count):
        state, error = _try(nv, nv.nvmlDeviceGetNvLinkState, handle, link)
        if error is not None:
            if walk_ends(ERROR_CODES.get(str(error["error"])), link):
                return found or error
            found.append({"state": error})
            continue
        entry: dict[str, Any] = {"state": int(state)}
        if int(state) == 1:
            entry["remote"] = _remote(nv, handle, link)
            entry["type"] = _value(nv, nv.nvmlDeviceGetNvLinkRemoteDeviceType, handle, link, convert=int)
        found.append(entry)
    return found


def _remote(nv: Any, handle: Any, link: int) -> dict[str, Any]:
    """What is at the other end of ``link``, as ``nvmlDeviceGetPciInfo`` is recorded."""
    call = getattr(nv, "nvmlDeviceGetNvLinkRemotePciInfo", None)
    if call is None:
        return {"error": "FunctionNotFound"}
    pci, error = _try(nv, call, handle, link)
    if error is not None:
        return dict(error)
    bus_id = getattr(pci, "busId", b"")
    text = bus_id.decode("ascii", "replace") if isinstance(bus_id, bytes) else str(bus_id)
    return {"busId": text, "domain": int(pci.domain), "bus": int(pci.bus), "device": int(pci.device)}


def init_failure(nv: Any, exc: BaseException) -> dict[str, Any]:
    """The answers of an NVML whose init failed with ``exc``."""
    return {"init": _error(nv, exc), "gpus": []}


class RecordingNvml:
    """The live bindings, passing what NVML answers at init to the recording being made."""

    def __init__(self, nv: Any, context: Any) -> None:
        self._nv = nv
        self._context = context

    def __getattr__(self, name: str) -> Any:
        return getattr(self._nv, name)

    def nvmlInit(self) -> None:
        """Start NVML; record everything it answers (or how its start failed)."""
        try:
            self._nv.nvmlInit()
        except self._nv.NVMLError as exc:
            self._context.record("nvml", init_failure(self._nv, exc))
            raise
        self._context.record("nvml", capture(self._nv))
