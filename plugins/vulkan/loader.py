"""A small ctypes binding of the Vulkan loader: just enough calls to list physical devices.

Why ctypes and not the PyPI ``vulkan`` package: gpuscout's whole ``list --json`` must start about as
fast as importing its own dependencies, and ``vulkan`` is ~2 MB of generated cffi code, needs
``cffi``, raises at import when no loader exists and was last released in 2024. The eight entry
points used here (create/destroy instance, enumerate devices, properties, properties2, memory
properties(2), device extensions) fit in one module with no dependency. The struct layouts are
written from the Vulkan spec and checked against ``vulkan_core.h`` (sizes in the tests): a wrong
layout would corrupt memory silently.

This module imports only the standard library on purpose: when the environment to honour differs
from the running process's, it runs as a script in a child (``python -I -S loader.py``) and prints
one JSON object. Nothing here raises for a missing loader or driver; :func:`probe` returns the
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

u8, u32, i32, u64 = ctypes.c_uint8, ctypes.c_uint32, ctypes.c_int32, ctypes.c_uint64
f32 = ctypes.c_float
ptr, size_t = ctypes.c_void_p, ctypes.c_size_t

#: Loader file names tried in order, per ``sys.platform``.
LIBRARY_NAMES: dict[str, tuple[str, ...]] = {
    "linux": ("libvulkan.so.1", "libvulkan.so"),
    "win32": ("vulkan-1.dll",),
    "darwin": ("libvulkan.1.dylib", "libvulkan.dylib", "/usr/local/lib/libvulkan.1.dylib",
               "/opt/homebrew/lib/libvulkan.1.dylib", "libMoltenVK.dylib"),
}

VK_SUCCESS, VK_INCOMPLETE = 0, 5
RESULT_NAMES = {
    -1: "VK_ERROR_OUT_OF_HOST_MEMORY", -2: "VK_ERROR_OUT_OF_DEVICE_MEMORY",
    -3: "VK_ERROR_INITIALIZATION_FAILED", -4: "VK_ERROR_DEVICE_LOST",
    -6: "VK_ERROR_LAYER_NOT_PRESENT", -7: "VK_ERROR_EXTENSION_NOT_PRESENT",
    -9: "VK_ERROR_INCOMPATIBLE_DRIVER", -13: "VK_ERROR_UNKNOWN",
}
ST_APPLICATION_INFO, ST_INSTANCE_CREATE_INFO = 0, 1
ST_PROPERTIES_2, ST_MEMORY_PROPERTIES_2 = 1000059001, 1000059006
ST_ID_PROPERTIES, ST_DRIVER_PROPERTIES = 1000071004, 1000196000
ST_PCI_BUS_INFO, ST_MEMORY_BUDGET = 1000212000, 1000237000
PORTABILITY_ENUMERATION_BIT = 0x1
EXT_PORTABILITY_ENUMERATION = "VK_KHR_portability_enumeration"
EXT_PROPERTIES_2 = "VK_KHR_get_physical_device_properties2"
EXT_DRIVER_PROPERTIES = "VK_KHR_driver_properties"
EXT_PCI_BUS_INFO = "VK_EXT_pci_bus_info"
EXT_MEMORY_BUDGET = "VK_EXT_memory_budget"
MAX_MEMORY_HEAPS = 16


def make_version(major: int, minor: int, patch: int = 0) -> int:
    """VK_MAKE_API_VERSION with variant 0."""
    return (major << 22) | (minor << 12) | patch


VK_API_VERSION_1_0, VK_API_VERSION_1_1, VK_API_VERSION_1_2 = (
    make_version(1, 0), make_version(1, 1), make_version(1, 2))


def _struct(name: str, fields: list[tuple[str, Any]]) -> Any:
    """A ctypes Structure class for the Vulkan struct ``Vk<name>`` (members in spec order)."""
    return type(name, (ctypes.Structure,), {"_fields_": fields, "__doc__": f"Vk{name}."})


def _u32s(names: str) -> list[tuple[str, Any]]:
    return [(n, u32) for n in names.split()]


_HEAD: list[tuple[str, Any]] = [("sType", u32), ("pNext", ptr)]
cstr, char256 = ctypes.c_char_p, ctypes.c_char * 256
ApplicationInfo = _struct("ApplicationInfo", [
    *_HEAD, ("pApplicationName", cstr), ("applicationVersion", u32), ("pEngineName", cstr),
    ("engineVersion", u32), ("apiVersion", u32)])
InstanceCreateInfo = _struct("InstanceCreateInfo", [
    *_HEAD, ("flags", u32), ("pApplicationInfo", ctypes.POINTER(ApplicationInfo)),
    ("enabledLayerCount", u32), ("ppEnabledLayerNames", ctypes.POINTER(cstr)),
    ("enabledExtensionCount", u32), ("ppEnabledExtensionNames", ctypes.POINTER(cstr))])
ExtensionProperties = _struct("ExtensionProperties", [
    ("extensionName", char256), ("specVersion", u32)])

# VkPhysicalDeviceLimits, member by member in spec order (504 bytes on every 64-bit ABI).
_LIMITS: list[tuple[str, Any]] = [
    *_u32s("maxImageDimension1D maxImageDimension2D maxImageDimension3D maxImageDimensionCube"
           " maxImageArrayLayers maxTexelBufferElements maxUniformBufferRange"
           " maxStorageBufferRange maxPushConstantsSize maxMemoryAllocationCount"
           " maxSamplerAllocationCount"),
    ("bufferImageGranularity", u64), ("sparseAddressSpaceSize", u64),
    *_u32s("maxBoundDescriptorSets maxPerStageDescriptorSamplers"
           " maxPerStageDescriptorUniformBuffers maxPerStageDescriptorStorageBuffers"
           " maxPerStageDescriptorSampledImages maxPerStageDescriptorStorageImages"
           " maxPerStageDescriptorInputAttachments maxPerStageResources maxDescriptorSetSamplers"
           " maxDescriptorSetUniformBuffers maxDescriptorSetUniformBuffersDynamic"
           " maxDescriptorSetStorageBuffers maxDescriptorSetStorageBuffersDynamic"
           " maxDescriptorSetSampledImages maxDescriptorSetStorageImages"
           " maxDescriptorSetInputAttachments maxVertexInputAttributes maxVertexInputBindings"
           " maxVertexInputAttributeOffset maxVertexInputBindingStride maxVertexOutputComponents"
           " maxTessellationGenerationLevel maxTessellationPatchSize"
           " maxTessellationControlPerVertexInputComponents"
           " maxTessellationControlPerVertexOutputComponents"
           " maxTessellationControlPerPatchOutputComponents"
           " maxTessellationControlTotalOutputComponents maxTessellationEvaluationInputComponents"
           " maxTessellationEvaluationOutputComponents maxGeometryShaderInvocations"
           " maxGeometryInputComponents maxGeometryOutputComponents maxGeometryOutputVertices"
           " maxGeometryTotalOutputComponents maxFragmentInputComponents"
           " maxFragmentOutputAttachments maxFragmentDualSrcAttachments"
           " maxFragmentCombinedOutputResources maxComputeSharedMemorySize"),
    ("maxComputeWorkGroupCount", u32 * 3), ("maxComputeWorkGroupInvocations", u32),
    ("maxComputeWorkGroupSize", u32 * 3),
    *_u32s("subPixelPrecisionBits subTexelPrecisionBits mipmapPrecisionBits"
           " maxDrawIndexedIndexValue maxDrawIndirectCount"),
    ("maxSamplerLodBias", f32), ("maxSamplerAnisotropy", f32), ("maxViewports", u32),
    ("maxViewportDimensions", u32 * 2), ("viewportBoundsRange", f32 * 2),
    ("viewportSubPixelBits", u32), ("minMemoryMapAlignment", size_t),
    ("minTexelBufferOffsetAlignment", u64), ("minUniformBufferOffsetAlignment", u64),
    ("minStorageBufferOffsetAlignment", u64), ("minTexelOffset", i32), ("maxTexelOffset", u32),
    ("minTexelGatherOffset", i32), ("maxTexelGatherOffset", u32),
    ("minInterpolationOffset", f32), ("maxInterpolationOffset", f32),
    *_u32s("subPixelInterpolationOffsetBits maxFramebufferWidth maxFramebufferHeight"
           " maxFramebufferLayers framebufferColorSampleCounts framebufferDepthSampleCounts"
           " framebufferStencilSampleCounts framebufferNoAttachmentsSampleCounts"
           " maxColorAttachments sampledImageColorSampleCounts sampledImageIntegerSampleCounts"
           " sampledImageDepthSampleCounts sampledImageStencilSampleCounts"
           " storageImageSampleCounts maxSampleMaskWords timestampComputeAndGraphics"),
    ("timestampPeriod", f32),
    *_u32s("maxClipDistances maxCullDistances maxCombinedClipAndCullDistances"
           " discreteQueuePriorities"),
    ("pointSizeRange", f32 * 2), ("lineWidthRange", f32 * 2), ("pointSizeGranularity", f32),
    ("lineWidthGranularity", f32), ("strictLines", u32), ("standardSampleLocations", u32),
    ("optimalBufferCopyOffsetAlignment", u64), ("optimalBufferCopyRowPitchAlignment", u64),
    ("nonCoherentAtomSize", u64),
]
PhysicalDeviceLimits = _struct("PhysicalDeviceLimits", _LIMITS)
PhysicalDeviceSparseProperties = _struct("PhysicalDeviceSparseProperties", _u32s(
    "residencyStandard2DBlockShape residencyStandard2DMultisampleBlockShape"
    " residencyStandard3DBlockShape residencyAlignedMipSize residencyNonResidentStrict"))
PhysicalDeviceProperties = _struct("PhysicalDeviceProperties", [
    *_u32s("apiVersion driverVersion vendorID deviceID deviceType"), ("deviceName", char256),
    ("pipelineCacheUUID", u8 * 16), ("limits", PhysicalDeviceLimits),
    ("sparseProperties", PhysicalDeviceSparseProperties)])
PhysicalDeviceProperties2 = _struct("PhysicalDeviceProperties2", [
    *_HEAD, ("properties", PhysicalDeviceProperties)])
#: Core 1.1.
PhysicalDeviceIDProperties = _struct("PhysicalDeviceIDProperties", [
    *_HEAD, ("deviceUUID", u8 * 16), ("driverUUID", u8 * 16), ("deviceLUID", u8 * 8),
    ("deviceNodeMask", u32), ("deviceLUIDValid", u32)])
#: VK_KHR_driver_properties, core 1.2.
PhysicalDeviceDriverProperties = _struct("PhysicalDeviceDriverProperties", [
    *_HEAD, ("driverID", u32), ("driverName", char256), ("driverInfo", char256),
    ("conformanceVersion", u8 * 4)])
#: VK_EXT_pci_bus_info.
PhysicalDevicePCIBusInfoPropertiesEXT = _struct("PhysicalDevicePCIBusInfoPropertiesEXT", [
    *_HEAD, *_u32s("pciDomain pciBus pciDevice pciFunction")])
MemoryType = _struct("MemoryType", _u32s("propertyFlags heapIndex"))
MemoryHeap = _struct("MemoryHeap", [("size", u64), ("flags", u32)])
PhysicalDeviceMemoryProperties = _struct("PhysicalDeviceMemoryProperties", [
    ("memoryTypeCount", u32), ("memoryTypes", MemoryType * 32), ("memoryHeapCount", u32),
    ("memoryHeaps", MemoryHeap * MAX_MEMORY_HEAPS)])
PhysicalDeviceMemoryProperties2 = _struct("PhysicalDeviceMemoryProperties2", [
    *_HEAD, ("memoryProperties", PhysicalDeviceMemoryProperties)])
#: VK_EXT_memory_budget.
PhysicalDeviceMemoryBudgetPropertiesEXT = _struct("PhysicalDeviceMemoryBudgetPropertiesEXT", [
    *_HEAD, ("heapBudget", u64 * MAX_MEMORY_HEAPS), ("heapUsage", u64 * MAX_MEMORY_HEAPS)])


@dataclass
class RawDevice:
    """What the loader said about one physical device, as plain values (JSON-friendly)."""

    index: int
    name: str
    device_type: int
    vendor_id: int
    device_id: int
    api_version: int
    driver_version: int
    extensions: list[str] = field(default_factory=list)
    #: deviceUUID as 32 hex digits, "" without VkPhysicalDeviceIDProperties.
    uuid: str = ""
    driver_id: int = 0
    driver_name: str = ""
    driver_info: str = ""
    #: [domain, bus, device, function] from VK_EXT_pci_bus_info, or None.
    pci: list[int] | None = None
    #: [size, flags] per memory heap.
    heaps: list[list[int]] = field(default_factory=list)
    #: Per-heap budget and usage from VK_EXT_memory_budget, or None.
    heap_budget: list[int] | None = None
    heap_usage: list[int] | None = None


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


class _Loader:
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
            raise OSError("Vulkan loader not found (tried " + ", ".join(names) + "): "
                          + (errors[-1] if errors else "no candidates"))
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
        _check("vkEnumerate*ExtensionProperties", result)
        array = (ExtensionProperties * max(count.value, 1))()
        result = enumerate_fn(*head, None, ctypes.byref(count), array)
        _check("vkEnumerate*ExtensionProperties", result)
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
        loader = _Loader(names)
    except OSError as exc:
        return ProbeResult(error=str(exc))
    with _LOCK:
        try:
            return _probe(loader, portability)
        except VulkanError as exc:
            return ProbeResult(error=str(exc), library=loader.name)


def _probe(loader: _Loader, portability: bool) -> ProbeResult:
    version_fn = loader.fn(None, "vkEnumerateInstanceVersion", i32, ctypes.POINTER(u32))
    version = u32(VK_API_VERSION_1_0)
    if version_fn is not None:
        _check("vkEnumerateInstanceVersion", version_fn(ctypes.byref(version)))
    api = version.value & ~0xFFF if version.value >= VK_API_VERSION_1_1 else VK_API_VERSION_1_0
    ext_fn = loader.fn(None, "vkEnumerateInstanceExtensionProperties", i32,
                       ctypes.c_char_p, ctypes.POINTER(u32), ctypes.POINTER(ExtensionProperties))
    available = set(_extension_names(ext_fn)) if ext_fn is not None else set()
    enabled: list[str] = []
    flags = 0
    if portability and EXT_PORTABILITY_ENUMERATION in available:
        enabled.append(EXT_PORTABILITY_ENUMERATION)
        flags |= PORTABILITY_ENUMERATION_BIT
    if api < VK_API_VERSION_1_1 and EXT_PROPERTIES_2 in available:
        enabled.append(EXT_PROPERTIES_2)
    app = ApplicationInfo(sType=ST_APPLICATION_INFO, pApplicationName=b"gpuscout",
                          pEngineName=b"gpuscout", apiVersion=api)
    ext_array = (ctypes.c_char_p * max(len(enabled), 1))(*[e.encode() for e in enabled])
    info = InstanceCreateInfo(sType=ST_INSTANCE_CREATE_INFO, flags=flags,
                              pApplicationInfo=ctypes.pointer(app),
                              enabledExtensionCount=len(enabled), ppEnabledExtensionNames=ext_array)
    create = loader.fn(None, "vkCreateInstance", i32, ctypes.POINTER(InstanceCreateInfo), ptr,
                       ctypes.POINTER(ptr))
    instance = ptr()
    _check("vkCreateInstance", create(ctypes.byref(info), None, ctypes.byref(instance)))
    try:
        devices = _devices(loader, instance.value, api, EXT_PROPERTIES_2 in enabled)
    finally:
        destroy = loader.fn(instance.value, "vkDestroyInstance", None, ptr, ptr)
        destroy(instance, None)
    return ProbeResult(devices=devices, instance_version=api, library=loader.name)


def _devices(loader: _Loader, instance: int | None, api: int, khr2: bool) -> list[RawDevice]:
    enumerate_fn = loader.fn(instance, "vkEnumeratePhysicalDevices", i32, ptr,
                             ctypes.POINTER(u32), ctypes.POINTER(ptr))
    count = u32(0)
    handles: list[int | None] = []
    for _ in range(8):
        _check("vkEnumeratePhysicalDevices", enumerate_fn(instance, ctypes.byref(count), None))
        array = (ptr * max(count.value, 1))()
        result = enumerate_fn(instance, ctypes.byref(count), array)
        _check("vkEnumeratePhysicalDevices", result)
        if result != VK_INCOMPLETE:
            handles = [array[i] for i in range(count.value)]
            break
    suffix = "" if api >= VK_API_VERSION_1_1 else "KHR"
    calls = {
        "props": loader.fn(instance, "vkGetPhysicalDeviceProperties", None, ptr,
                           ctypes.POINTER(PhysicalDeviceProperties)),
        "props2": loader.fn(instance, "vkGetPhysicalDeviceProperties2" + suffix, None, ptr,
                            ctypes.POINTER(PhysicalDeviceProperties2)),
        "mem": loader.fn(instance, "vkGetPhysicalDeviceMemoryProperties", None, ptr,
                         ctypes.POINTER(PhysicalDeviceMemoryProperties)),
        "mem2": loader.fn(instance, "vkGetPhysicalDeviceMemoryProperties2" + suffix, None, ptr,
                          ctypes.POINTER(PhysicalDeviceMemoryProperties2)),
        "exts": loader.fn(instance, "vkEnumerateDeviceExtensionProperties", i32, ptr, cstr,
                          ctypes.POINTER(u32), ctypes.POINTER(ExtensionProperties)),
    }
    if api < VK_API_VERSION_1_1 and not khr2:
        calls["props2"] = calls["mem2"] = None
    return [_device(calls, handle, index, api) for index, handle in enumerate(handles)]


def _device(calls: dict[str, Any], handle: int | None, index: int, api: int) -> RawDevice:
    props = PhysicalDeviceProperties()
    calls["props"](handle, ctypes.byref(props))
    extensions = _extension_names(calls["exts"], handle)
    raw = RawDevice(index=index, name=_text(props.deviceName), device_type=props.deviceType,
                    vendor_id=props.vendorID, device_id=props.deviceID,
                    api_version=props.apiVersion, driver_version=props.driverVersion,
                    extensions=extensions)
    # Physical-device features of version N need both the instance and the device at N.
    effective = min(api, props.apiVersion & ~0xFFF)
    # With a 1.0 instance the KHR functions serve any device; with 1.1+ the device must be 1.1+.
    has2 = calls["props2"] is not None and (
        effective >= VK_API_VERSION_1_1 or api < VK_API_VERSION_1_1)
    if has2:
        _read_properties2(calls["props2"], handle, raw, effective)
    memory = PhysicalDeviceMemoryProperties()
    budget: Any = None
    if has2 and calls["mem2"] is not None and EXT_MEMORY_BUDGET in extensions:
        budget = PhysicalDeviceMemoryBudgetPropertiesEXT(sType=ST_MEMORY_BUDGET)
        mem2 = PhysicalDeviceMemoryProperties2(sType=ST_MEMORY_PROPERTIES_2,
                                               pNext=ctypes.addressof(budget))
        calls["mem2"](handle, ctypes.byref(mem2))
        memory = mem2.memoryProperties
    else:
        calls["mem"](handle, ctypes.byref(memory))
    heaps = min(memory.memoryHeapCount, MAX_MEMORY_HEAPS)
    raw.heaps = [[memory.memoryHeaps[i].size, memory.memoryHeaps[i].flags] for i in range(heaps)]
    if budget is not None:
        raw.heap_budget = [budget.heapBudget[i] for i in range(heaps)]
        raw.heap_usage = [budget.heapUsage[i] for i in range(heaps)]
    return raw


def _read_properties2(props2_fn: Any, handle: int | None, raw: RawDevice, effective: int) -> None:
    chain: list[ctypes.Structure] = []
    ids = driver = pci = None
    if effective >= VK_API_VERSION_1_1:
        ids = PhysicalDeviceIDProperties(sType=ST_ID_PROPERTIES)
        chain.append(ids)
    if effective >= VK_API_VERSION_1_2 or EXT_DRIVER_PROPERTIES in raw.extensions:
        driver = PhysicalDeviceDriverProperties(sType=ST_DRIVER_PROPERTIES)
        chain.append(driver)
    if EXT_PCI_BUS_INFO in raw.extensions:
        pci = PhysicalDevicePCIBusInfoPropertiesEXT(sType=ST_PCI_BUS_INFO)
        chain.append(pci)
    if not chain:
        return
    for first, second in itertools.pairwise(chain):
        first.pNext = ctypes.addressof(second)
    props2 = PhysicalDeviceProperties2(sType=ST_PROPERTIES_2, pNext=ctypes.addressof(chain[0]))
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
