"""A small ctypes binding of the Vulkan loader: just enough calls to list physical devices.

Why ctypes and not the PyPI ``vulkan`` package: gpuscout's whole ``list --json`` must start about as
fast as importing its own dependencies, and ``vulkan`` is ~2 MB of generated cffi code, needs
``cffi``, raises at import when no loader exists and was last released in 2024. The nine entry
points used here (create/destroy instance, enumerate devices, properties, properties2, memory
properties(2), features2, device extensions) fit in one module with no dependency. The struct layouts are
written from the Vulkan spec and checked against ``vulkan_core.h`` (sizes in the tests): a wrong
layout would corrupt memory silently.

This module and ``vkstructs`` import only the standard library on purpose: when the environment
to honour differs from the running process's, this file runs as a script in a child
(``python -E -s -S loader.py``: no site-packages, its own folder first on sys.path) and prints one
JSON object. Nothing here raises for a missing loader or driver; :func:`probe` returns the
error text instead.
"""

from __future__ import annotations

import ctypes
import itertools
import json
import sys
import threading
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

try:
    from gpuscout.plugins.vulkan import vkstructs as vk
except ImportError:  # the probe child: this file run as a script, only the stdlib, its folder
    import vkstructs as vk  # type: ignore[import-not-found, no-redef, unused-ignore]

u32, i32, ptr, cstr = vk.u32, vk.i32, vk.ptr, vk.cstr

#: Loader file names tried in order, per ``sys.platform``.
LIBRARY_NAMES: dict[str, tuple[str, ...]] = {
    "linux": ("libvulkan.so.1", "libvulkan.so"),
    "win32": ("vulkan-1.dll",),
    "darwin": (
        "libvulkan.1.dylib",
        "libvulkan.dylib",
        "/usr/local/lib/libvulkan.1.dylib",
        "/opt/homebrew/lib/libvulkan.1.dylib",
        "libMoltenVK.dylib",
    ),
}

VK_SUCCESS, VK_INCOMPLETE = 0, 5
RESULT_NAMES = {
    -1: "VK_ERROR_OUT_OF_HOST_MEMORY",
    -2: "VK_ERROR_OUT_OF_DEVICE_MEMORY",
    -3: "VK_ERROR_INITIALIZATION_FAILED",
    -4: "VK_ERROR_DEVICE_LOST",
    -6: "VK_ERROR_LAYER_NOT_PRESENT",
    -7: "VK_ERROR_EXTENSION_NOT_PRESENT",
    -9: "VK_ERROR_INCOMPATIBLE_DRIVER",
    -13: "VK_ERROR_UNKNOWN",
}


@dataclass
class RawDevice:
    """What the loader said about one physical device, as plain values (JSON-friendly).

    ``uuid`` is deviceUUID as 32 hex digits ("" without VkPhysicalDeviceIDProperties), ``pci``
    [domain, bus, device, function] from VK_EXT_pci_bus_info, ``heaps`` [size, flags] per
    memory heap, ``heap_budget``/``heap_usage`` per heap from VK_EXT_memory_budget,
    ``storage_16bit`` the storageBuffer16BitAccess feature (None when the device cannot be
    asked: no vkGetPhysicalDeviceFeatures2, or neither 1.1 nor VK_KHR_16bit_storage),
    ``max_storage_buffer_range`` VkPhysicalDeviceLimits.maxStorageBufferRange (0 when not
    read).
    """

    index: int
    name: str
    device_type: int
    vendor_id: int
    device_id: int
    api_version: int
    driver_version: int
    extensions: list[str] = field(default_factory=list)
    uuid: str = ""
    driver_id: int = 0
    driver_name: str = ""
    driver_info: str = ""
    pci: list[int] | None = None
    heaps: list[list[int]] = field(default_factory=list)
    heap_budget: list[int] | None = None
    heap_usage: list[int] | None = None
    storage_16bit: bool | None = None
    max_storage_buffer_range: int = 0


@dataclass
class ProbeResult:
    """Devices in raw enumeration order, or the reason there are none (``error``)."""

    devices: list[RawDevice] = field(default_factory=list)
    error: str = ""
    instance_version: int = 0
    library: str = ""

    def to_json(self) -> str:
        """One JSON object (what the child prints)."""
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> ProbeResult:
        """The inverse of :meth:`to_json`."""
        data = json.loads(text)
        devices = [RawDevice(**d) for d in data.pop("devices")]
        return cls(devices=devices, **data)


class VulkanError(Exception):
    """A Vulkan call returned an error VkResult."""

    def __init__(self, call: str, result: int) -> None:
        self.call, self.result = call, result
        super().__init__(f"{call} failed: {RESULT_NAMES.get(result, f'VkResult {result}')}")


_LOCK = threading.Lock()


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace")


class Loader:
    """Entry points resolved through vkGetInstanceProcAddr (works for the loader and MoltenVK)."""

    def __init__(self, names: Sequence[str]) -> None:
        errors: list[str] = []
        for name in names:
            try:
                self.lib = ctypes.CDLL(name)
                self.name = name
                break
            except OSError as exc:
                errors.append(str(exc))
        else:
            raise OSError(
                "Vulkan loader not found (tried "
                + ", ".join(names)
                + "): "
                + (errors[-1] if errors else "no candidates")
            )
        self.gipa = self.lib.vkGetInstanceProcAddr
        self.gipa.restype, self.gipa.argtypes = ptr, [ptr, ctypes.c_char_p]

    def fn(self, instance: int | None, name: str, restype: Any, *argtypes: Any) -> Any:
        """The entry point ``name`` as a ctypes function, or None when the loader lacks it."""
        address = self.gipa(instance, name.encode())
        if not address:
            return None
        return ctypes.CFUNCTYPE(restype, *argtypes)(address)


def _check(call: str, result: int) -> None:
    if result < 0:
        raise VulkanError(call, result)


def _extension_names(enumerate_fn: Any, *head: Any) -> list[str]:
    count = u32(0)
    for _ in range(8):  # the list may change between the two calls (VK_INCOMPLETE)
        result = enumerate_fn(*head, None, ctypes.byref(count), None)
        _check("vkEnumerate*vk.ExtensionProperties", result)
        array = (vk.ExtensionProperties * max(count.value, 1))()
        result = enumerate_fn(*head, None, ctypes.byref(count), array)
        _check("vkEnumerate*vk.ExtensionProperties", result)
        if result != VK_INCOMPLETE:
            return [_text(array[i].extensionName) for i in range(count.value)]
    return []


def probe(library_names: Sequence[str] | None = None, portability: bool = False) -> ProbeResult:
    """List every physical device through the loader; never raises for a missing loader/driver.

    ``portability`` enables VK_KHR_portability_enumeration (MoltenVK on macOS) when the loader
    offers it. The instance is always destroyed.
    """
    names = library_names or LIBRARY_NAMES.get(sys.platform, LIBRARY_NAMES["linux"])
    try:
        lib = Loader(names)
    except OSError as exc:
        return ProbeResult(error=str(exc))
    with _LOCK:
        try:
            with Instance(lib, portability) as inst:
                calls = inst.device_calls()
                devices = [
                    _device(calls, handle, index, inst.api)
                    for index, handle in enumerate(inst.physical_devices())
                ]
        except VulkanError as exc:
            return ProbeResult(error=str(exc), library=lib.name)
    return ProbeResult(devices=devices, instance_version=inst.api, library=lib.name)


class Instance:
    """A VkInstance for the duration of a ``with`` block (destroyed on the way out).

    ``api`` is the apiVersion asked for: the loader's own (patch dropped) when it is 1.1+,
    else 1.0 with VK_KHR_get_physical_device_properties2 enabled when offered.
    """

    def __init__(self, lib: Loader, portability: bool = False) -> None:
        self.lib, self.portability = lib, portability
        self.handle: int | None = None
        self.api = vk.VK_API_VERSION_1_0
        self.khr2 = False

    def __enter__(self) -> Instance:
        lib = self.lib
        version_fn = lib.fn(None, "vkEnumerateInstanceVersion", i32, ctypes.POINTER(u32))
        version = u32(vk.VK_API_VERSION_1_0)
        if version_fn is not None:
            _check("vkEnumerateInstanceVersion", version_fn(ctypes.byref(version)))
        if version.value >= vk.VK_API_VERSION_1_1:
            self.api = version.value & ~0xFFF
        ext_fn = lib.fn(
            None,
            "vkEnumerateInstanceExtensionProperties",
            i32,
            cstr,
            ctypes.POINTER(u32),
            ctypes.POINTER(vk.ExtensionProperties),
        )
        available = set(_extension_names(ext_fn)) if ext_fn is not None else set()
        enabled: list[str] = []
        flags = 0
        if self.portability and vk.EXT_PORTABILITY_ENUMERATION in available:
            enabled.append(vk.EXT_PORTABILITY_ENUMERATION)
            flags |= vk.PORTABILITY_ENUMERATION_BIT
        if self.api < vk.VK_API_VERSION_1_1 and vk.EXT_PROPERTIES_2 in available:
            enabled.append(vk.EXT_PROPERTIES_2)
            self.khr2 = True
        app = vk.ApplicationInfo(
            sType=vk.ST_APPLICATION_INFO,
            pApplicationName=b"gpuscout",
            pEngineName=b"gpuscout",
            apiVersion=self.api,
        )
        names = (cstr * max(len(enabled), 1))(*[e.encode() for e in enabled])
        info = vk.InstanceCreateInfo(
            sType=vk.ST_INSTANCE_CREATE_INFO,
            flags=flags,
            pApplicationInfo=ctypes.pointer(app),
            enabledExtensionCount=len(enabled),
            ppEnabledExtensionNames=names,
        )
        create = lib.fn(
            None, "vkCreateInstance", i32, ctypes.POINTER(vk.InstanceCreateInfo), ptr, ctypes.POINTER(ptr)
        )
        handle = ptr()
        _check("vkCreateInstance", create(ctypes.byref(info), None, ctypes.byref(handle)))
        self.handle = handle.value
        return self

    def __exit__(self, *exc: object) -> None:
        if self.handle is not None:
            self.lib.fn(self.handle, "vkDestroyInstance", None, ptr, ptr)(self.handle, None)
            self.handle = None

    def physical_devices(self) -> list[int | None]:
        """VkPhysicalDevice handles in the loader's order (after any layer reordering)."""
        enumerate_fn = self.lib.fn(
            self.handle, "vkEnumeratePhysicalDevices", i32, ptr, ctypes.POINTER(u32), ctypes.POINTER(ptr)
        )
        count = u32(0)
        for _ in range(8):  # the list may grow between the two calls (VK_INCOMPLETE)
            _check("vkEnumeratePhysicalDevices", enumerate_fn(self.handle, ctypes.byref(count), None))
            array = (ptr * max(count.value, 1))()
            result = enumerate_fn(self.handle, ctypes.byref(count), array)
            _check("vkEnumeratePhysicalDevices", result)
            if result != VK_INCOMPLETE:
                return [array[i] for i in range(count.value)]
        return []

    def device_calls(self) -> dict[str, Any]:
        """The per-device entry points; ``props2``/``mem2`` None when neither 1.1 nor KHR."""
        fn, h = self.lib.fn, self.handle
        suffix = "" if self.api >= vk.VK_API_VERSION_1_1 else "KHR"
        calls = {
            "props": fn(
                h, "vkGetPhysicalDeviceProperties", None, ptr, ctypes.POINTER(vk.PhysicalDeviceProperties)
            ),
            "props2": fn(
                h,
                "vkGetPhysicalDeviceProperties2" + suffix,
                None,
                ptr,
                ctypes.POINTER(vk.PhysicalDeviceProperties2),
            ),
            "mem": fn(
                h,
                "vkGetPhysicalDeviceMemoryProperties",
                None,
                ptr,
                ctypes.POINTER(vk.PhysicalDeviceMemoryProperties),
            ),
            "mem2": fn(
                h,
                "vkGetPhysicalDeviceMemoryProperties2" + suffix,
                None,
                ptr,
                ctypes.POINTER(vk.PhysicalDeviceMemoryProperties2),
            ),
            "exts": fn(
                h,
                "vkEnumerateDeviceExtensionProperties",
                i32,
                ptr,
                cstr,
                ctypes.POINTER(u32),
                ctypes.POINTER(vk.ExtensionProperties),
            ),
            "feats2": fn(
                h,
                "vkGetPhysicalDeviceFeatures2" + suffix,
                None,
                ptr,
                ctypes.POINTER(vk.PhysicalDeviceFeatures2),
            ),
        }
        if self.api < vk.VK_API_VERSION_1_1 and not self.khr2:
            calls["props2"] = calls["mem2"] = calls["feats2"] = None
        return calls


def _device(calls: dict[str, Any], handle: int | None, index: int, api: int) -> RawDevice:
    props = vk.PhysicalDeviceProperties()
    calls["props"](handle, ctypes.byref(props))
    extensions = _extension_names(calls["exts"], handle)
    raw = RawDevice(
        index=index,
        name=_text(props.deviceName),
        device_type=props.deviceType,
        vendor_id=props.vendorID,
        device_id=props.deviceID,
        api_version=props.apiVersion,
        driver_version=props.driverVersion,
        extensions=extensions,
        max_storage_buffer_range=props.limits.maxStorageBufferRange,
    )
    # Physical-device features of version N need both the instance and the device at N.
    effective = min(api, props.apiVersion & ~0xFFF)
    # With a 1.0 instance the KHR functions serve any device; with 1.1+ the device must be 1.1+.
    has2 = calls["props2"] is not None and (effective >= vk.VK_API_VERSION_1_1 or api < vk.VK_API_VERSION_1_1)
    if has2:
        _read_properties2(calls["props2"], handle, raw, effective)
        if calls["feats2"] is not None and (
            effective >= vk.VK_API_VERSION_1_1 or vk.EXT_16BIT_STORAGE in extensions
        ):
            raw.storage_16bit = _storage_16bit(calls["feats2"], handle)
    memory = vk.PhysicalDeviceMemoryProperties()
    budget: Any = None
    if has2 and calls["mem2"] is not None and vk.EXT_MEMORY_BUDGET in extensions:
        budget = vk.PhysicalDeviceMemoryBudgetPropertiesEXT(sType=vk.ST_MEMORY_BUDGET)
        mem2 = vk.PhysicalDeviceMemoryProperties2(
            sType=vk.ST_MEMORY_PROPERTIES_2, pNext=ctypes.addressof(budget)
        )
        calls["mem2"](handle, ctypes.byref(mem2))
        memory = mem2.memoryProperties
    else:
        calls["mem"](handle, ctypes.byref(memory))
    heaps = min(memory.memoryHeapCount, vk.MAX_MEMORY_HEAPS)
    raw.heaps = [[memory.memoryHeaps[i].size, memory.memoryHeaps[i].flags] for i in range(heaps)]
    if budget is not None:
        raw.heap_budget = [budget.heapBudget[i] for i in range(heaps)]
        raw.heap_usage = [budget.heapUsage[i] for i in range(heaps)]
    return raw


def _storage_16bit(feats2_fn: Any, handle: int | None) -> bool:
    """storageBuffer16BitAccess, the one feature ggml-vulkan's default device set requires."""
    storage = vk.PhysicalDevice16BitStorageFeatures(sType=vk.ST_16BIT_STORAGE_FEATURES)
    feats2 = vk.PhysicalDeviceFeatures2(sType=vk.ST_FEATURES_2, pNext=ctypes.addressof(storage))
    feats2_fn(handle, ctypes.byref(feats2))
    return bool(storage.storageBuffer16BitAccess)


def _read_properties2(props2_fn: Any, handle: int | None, raw: RawDevice, effective: int) -> None:
    chain: list[ctypes.Structure] = []
    ids = driver = pci = None
    if effective >= vk.VK_API_VERSION_1_1:
        ids = vk.PhysicalDeviceIDProperties(sType=vk.ST_ID_PROPERTIES)
        chain.append(ids)
    if effective >= vk.VK_API_VERSION_1_2 or vk.EXT_DRIVER_PROPERTIES in raw.extensions:
        driver = vk.PhysicalDeviceDriverProperties(sType=vk.ST_DRIVER_PROPERTIES)
        chain.append(driver)
    if vk.EXT_PCI_BUS_INFO in raw.extensions:
        pci = vk.PhysicalDevicePCIBusInfoPropertiesEXT(sType=vk.ST_PCI_BUS_INFO)
        chain.append(pci)
    if not chain:
        return
    for first, second in itertools.pairwise(chain):
        first.pNext = ctypes.addressof(second)
    props2 = vk.PhysicalDeviceProperties2(sType=vk.ST_PROPERTIES_2, pNext=ctypes.addressof(chain[0]))
    props2_fn(handle, ctypes.byref(props2))
    if ids is not None:
        raw.uuid = bytes(ids.deviceUUID).hex()
    if driver is not None:
        raw.driver_id = driver.driverID
        raw.driver_name = _text(driver.driverName)
        raw.driver_info = _text(driver.driverInfo)
    if pci is not None:
        raw.pci = [pci.pciDomain, pci.pciBus, pci.pciDevice, pci.pciFunction]


def main(argv: Sequence[str]) -> int:
    """Child entry: print one ProbeResult as JSON (``--portability`` enables MoltenVK)."""
    sys.stdout.write(probe(portability="--portability" in argv).to_json() + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
