"""Vulkan struct layouts and constants for the loader binding (standard library only).

Written member by member from the Vulkan spec; sizes and offsets are the ones ``vulkan_core.h``
gives on 64-bit ABIs (checked in the tests). A wrong layout would corrupt memory silently.
"""

from __future__ import annotations

import ctypes
from typing import Any

u8, u32, i32, u64 = ctypes.c_uint8, ctypes.c_uint32, ctypes.c_int32, ctypes.c_uint64
f32 = ctypes.c_float
ptr, size_t = ctypes.c_void_p, ctypes.c_size_t


ST_APPLICATION_INFO, ST_INSTANCE_CREATE_INFO = 0, 1
ST_PROPERTIES_2, ST_MEMORY_PROPERTIES_2 = 1000059001, 1000059006
ST_ID_PROPERTIES, ST_DRIVER_PROPERTIES = 1000071004, 1000196000
ST_PCI_BUS_INFO, ST_MEMORY_BUDGET = 1000212000, 1000237000
ST_FEATURES_2, ST_16BIT_STORAGE_FEATURES = 1000059000, 1000083000
PORTABILITY_ENUMERATION_BIT = 0x1
EXT_PORTABILITY_ENUMERATION = "VK_KHR_portability_enumeration"
EXT_PROPERTIES_2 = "VK_KHR_get_physical_device_properties2"
EXT_DRIVER_PROPERTIES = "VK_KHR_driver_properties"
EXT_PCI_BUS_INFO = "VK_EXT_pci_bus_info"
EXT_MEMORY_BUDGET = "VK_EXT_memory_budget"
EXT_16BIT_STORAGE = "VK_KHR_16bit_storage"
MAX_MEMORY_HEAPS = 16


#: VK_MAKE_API_VERSION(0, 1, minor, 0).
VK_API_VERSION_1_0, VK_API_VERSION_1_1, VK_API_VERSION_1_2 = (1 << 22, 1 << 22 | 1 << 12, 1 << 22 | 2 << 12)


def _struct(name: str, fields: list[tuple[str, Any]]) -> Any:
    """A ctypes Structure class for the Vulkan struct ``Vk<name>`` (members in spec order)."""
    return type(name, (ctypes.Structure,), {"_fields_": fields, "__doc__": f"Vk{name}."})


def _u32s(names: str) -> list[tuple[str, Any]]:
    return [(n, u32) for n in names.split()]


_HEAD: list[tuple[str, Any]] = [("sType", u32), ("pNext", ptr)]
cstr, char256 = ctypes.c_char_p, ctypes.c_char * 256
ApplicationInfo = _struct(
    "ApplicationInfo",
    [
        *_HEAD,
        ("pApplicationName", cstr),
        ("applicationVersion", u32),
        ("pEngineName", cstr),
        ("engineVersion", u32),
        ("apiVersion", u32),
    ],
)
InstanceCreateInfo = _struct(
    "InstanceCreateInfo",
    [
        *_HEAD,
        ("flags", u32),
        ("pApplicationInfo", ctypes.POINTER(ApplicationInfo)),
        ("enabledLayerCount", u32),
        ("ppEnabledLayerNames", ctypes.POINTER(cstr)),
        ("enabledExtensionCount", u32),
        ("ppEnabledExtensionNames", ctypes.POINTER(cstr)),
    ],
)
ExtensionProperties = _struct("ExtensionProperties", [("extensionName", char256), ("specVersion", u32)])

# VkPhysicalDeviceLimits, member by member in spec order (504 bytes on every 64-bit ABI).
_LIMITS: list[tuple[str, Any]] = [
    *_u32s(
        "maxImageDimension1D maxImageDimension2D maxImageDimension3D maxImageDimensionCube"
        " maxImageArrayLayers maxTexelBufferElements maxUniformBufferRange"
        " maxStorageBufferRange maxPushConstantsSize maxMemoryAllocationCount"
        " maxSamplerAllocationCount"
    ),
    ("bufferImageGranularity", u64),
    ("sparseAddressSpaceSize", u64),
    *_u32s(
        "maxBoundDescriptorSets maxPerStageDescriptorSamplers"
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
        " maxFragmentCombinedOutputResources maxComputeSharedMemorySize"
    ),
    ("maxComputeWorkGroupCount", u32 * 3),
    ("maxComputeWorkGroupInvocations", u32),
    ("maxComputeWorkGroupSize", u32 * 3),
    *_u32s(
        "subPixelPrecisionBits subTexelPrecisionBits mipmapPrecisionBits"
        " maxDrawIndexedIndexValue maxDrawIndirectCount"
    ),
    ("maxSamplerLodBias", f32),
    ("maxSamplerAnisotropy", f32),
    ("maxViewports", u32),
    ("maxViewportDimensions", u32 * 2),
    ("viewportBoundsRange", f32 * 2),
    ("viewportSubPixelBits", u32),
    ("minMemoryMapAlignment", size_t),
    ("minTexelBufferOffsetAlignment", u64),
    ("minUniformBufferOffsetAlignment", u64),
    ("minStorageBufferOffsetAlignment", u64),
    ("minTexelOffset", i32),
    ("maxTexelOffset", u32),
    ("minTexelGatherOffset", i32),
    ("maxTexelGatherOffset", u32),
    ("minInterpolationOffset", f32),
    ("maxInterpolationOffset", f32),
    *_u32s(
        "subPixelInterpolationOffsetBits maxFramebufferWidth maxFramebufferHeight"
        " maxFramebufferLayers framebufferColorSampleCounts framebufferDepthSampleCounts"
        " framebufferStencilSampleCounts framebufferNoAttachmentsSampleCounts"
        " maxColorAttachments sampledImageColorSampleCounts sampledImageIntegerSampleCounts"
        " sampledImageDepthSampleCounts sampledImageStencilSampleCounts"
        " storageImageSampleCounts maxSampleMaskWords timestampComputeAndGraphics"
    ),
    ("timestampPeriod", f32),
    *_u32s("maxClipDistances maxCullDistances maxCombinedClipAndCullDistances discreteQueuePriorities"),
    ("pointSizeRange", f32 * 2),
    ("lineWidthRange", f32 * 2),
    ("pointSizeGranularity", f32),
    ("lineWidthGranularity", f32),
    ("strictLines", u32),
    ("standardSampleLocations", u32),
    ("optimalBufferCopyOffsetAlignment", u64),
    ("optimalBufferCopyRowPitchAlignment", u64),
    ("nonCoherentAtomSize", u64),
]
PhysicalDeviceLimits = _struct("PhysicalDeviceLimits", _LIMITS)
PhysicalDeviceSparseProperties = _struct(
    "PhysicalDeviceSparseProperties",
    _u32s(
        "residencyStandard2DBlockShape residencyStandard2DMultisampleBlockShape"
        " residencyStandard3DBlockShape residencyAlignedMipSize residencyNonResidentStrict"
    ),
)
PhysicalDeviceProperties = _struct(
    "PhysicalDeviceProperties",
    [
        *_u32s("apiVersion driverVersion vendorID deviceID deviceType"),
        ("deviceName", char256),
        ("pipelineCacheUUID", u8 * 16),
        ("limits", PhysicalDeviceLimits),
        ("sparseProperties", PhysicalDeviceSparseProperties),
    ],
)
PhysicalDeviceProperties2 = _struct(
    "PhysicalDeviceProperties2", [*_HEAD, ("properties", PhysicalDeviceProperties)]
)
#: Core 1.1.
PhysicalDeviceIDProperties = _struct(
    "PhysicalDeviceIDProperties",
    [
        *_HEAD,
        ("deviceUUID", u8 * 16),
        ("driverUUID", u8 * 16),
        ("deviceLUID", u8 * 8),
        ("deviceNodeMask", u32),
        ("deviceLUIDValid", u32),
    ],
)
#: VK_KHR_driver_properties, core 1.2.
PhysicalDeviceDriverProperties = _struct(
    "PhysicalDeviceDriverProperties",
    [
        *_HEAD,
        ("driverID", u32),
        ("driverName", char256),
        ("driverInfo", char256),
        ("conformanceVersion", u8 * 4),
    ],
)
#: VK_EXT_pci_bus_info.
PhysicalDevicePCIBusInfoPropertiesEXT = _struct(
    "PhysicalDevicePCIBusInfoPropertiesEXT", [*_HEAD, *_u32s("pciDomain pciBus pciDevice pciFunction")]
)
MemoryType = _struct("MemoryType", _u32s("propertyFlags heapIndex"))
MemoryHeap = _struct("MemoryHeap", [("size", u64), ("flags", u32)])
PhysicalDeviceMemoryProperties = _struct(
    "PhysicalDeviceMemoryProperties",
    [
        ("memoryTypeCount", u32),
        ("memoryTypes", MemoryType * 32),
        ("memoryHeapCount", u32),
        ("memoryHeaps", MemoryHeap * MAX_MEMORY_HEAPS),
    ],
)
PhysicalDeviceMemoryProperties2 = _struct(
    "PhysicalDeviceMemoryProperties2", [*_HEAD, ("memoryProperties", PhysicalDeviceMemoryProperties)]
)
#: VK_EXT_memory_budget.
PhysicalDeviceMemoryBudgetPropertiesEXT = _struct(
    "PhysicalDeviceMemoryBudgetPropertiesEXT",
    [*_HEAD, ("heapBudget", u64 * MAX_MEMORY_HEAPS), ("heapUsage", u64 * MAX_MEMORY_HEAPS)],
)
#: VkPhysicalDeviceFeatures: 55 VkBool32 in spec order; only its size matters here.
PhysicalDeviceFeatures = _struct("PhysicalDeviceFeatures", [("features", u32 * 55)])
PhysicalDeviceFeatures2 = _struct("PhysicalDeviceFeatures2", [*_HEAD, ("features", PhysicalDeviceFeatures)])
#: Core 1.1 (VK_KHR_16bit_storage): storageBuffer16BitAccess is what ggml-vulkan requires.
PhysicalDevice16BitStorageFeatures = _struct(
    "PhysicalDevice16BitStorageFeatures",
    [
        *_HEAD,
        *_u32s(
            "storageBuffer16BitAccess uniformAndStorageBuffer16BitAccess"
            " storagePushConstant16 storageInputOutput16"
        ),
    ],
)
