"""The ctypes struct layouts match the Vulkan headers and what a real driver writes."""

from __future__ import annotations

import ctypes
import struct
import sys
from collections.abc import Iterator

import pytest

from gpuscout.plugins.vulkan import vkstructs as vk
from gpuscout.plugins.vulkan.loader import LIBRARY_NAMES, Instance, Loader

CANARY = 0xA5
#: An open instance on lavapipe and its one physical device handle.
LavapipeDevice = tuple[Instance, int | None]

# sizeof/offsetof printed by a C program compiled against vulkan_core.h 1.3.239 (x86_64).
HEADER_SIZES = {
    vk.ApplicationInfo: 48,
    vk.InstanceCreateInfo: 64,
    vk.ExtensionProperties: 260,
    vk.PhysicalDeviceLimits: 504,
    vk.PhysicalDeviceSparseProperties: 20,
    vk.PhysicalDeviceProperties: 824,
    vk.PhysicalDeviceProperties2: 840,
    vk.PhysicalDeviceIDProperties: 64,
    vk.PhysicalDeviceDriverProperties: 536,
    vk.PhysicalDevicePCIBusInfoPropertiesEXT: 32,
    vk.PhysicalDeviceMemoryProperties: 520,
    vk.PhysicalDeviceMemoryProperties2: 536,
    vk.PhysicalDeviceMemoryBudgetPropertiesEXT: 272,
    vk.PhysicalDeviceFeatures: 220,
    vk.PhysicalDeviceFeatures2: 240,
    vk.PhysicalDevice16BitStorageFeatures: 32,
}
HEADER_OFFSETS = [
    (vk.PhysicalDeviceProperties, "limits", 296),
    (vk.PhysicalDeviceProperties, "sparseProperties", 800),
    (vk.PhysicalDeviceLimits, "bufferImageGranularity", 48),
    (vk.PhysicalDeviceLimits, "maxComputeSharedMemorySize", 216),
    (vk.PhysicalDeviceLimits, "timestampPeriod", 424),
    (vk.PhysicalDeviceLimits, "minMemoryMapAlignment", 304),
    (vk.PhysicalDeviceLimits, "nonCoherentAtomSize", 496),
    (vk.PhysicalDeviceIDProperties, "deviceLUIDValid", 60),
    (vk.PhysicalDeviceDriverProperties, "conformanceVersion", 532),
    (vk.PhysicalDeviceMemoryProperties, "memoryHeapCount", 260),
    (vk.PhysicalDeviceMemoryProperties, "memoryHeaps", 264),
    (vk.PhysicalDeviceMemoryBudgetPropertiesEXT, "heapUsage", 144),
]
STRUCTURE_TYPES = {  # VkStructureType values from the header
    "ST_PROPERTIES_2": 1000059001,
    "ST_MEMORY_PROPERTIES_2": 1000059006,
    "ST_ID_PROPERTIES": 1000071004,
    "ST_DRIVER_PROPERTIES": 1000196000,
    "ST_PCI_BUS_INFO": 1000212000,
    "ST_MEMORY_BUDGET": 1000237000,
    "ST_FEATURES_2": 1000059000,
    "ST_16BIT_STORAGE_FEATURES": 1000083000,
}

needs_64_bit = pytest.mark.skipif(
    ctypes.sizeof(ctypes.c_void_p) != 8, reason="the recorded sizes are those of 64-bit ABIs"
)


@needs_64_bit
@pytest.mark.parametrize("cls", list(HEADER_SIZES), ids=lambda c: c.__name__)
def test_struct_size_matches_the_vulkan_header(cls: type[ctypes.Structure]) -> None:
    """Each struct has the size vulkan_core.h gives it."""
    assert ctypes.sizeof(cls) == HEADER_SIZES[cls]


@needs_64_bit
@pytest.mark.parametrize(
    ("cls", "member", "offset"), HEADER_OFFSETS, ids=[f"{c.__name__}.{m}" for c, m, _ in HEADER_OFFSETS]
)
def test_member_offset_matches_the_vulkan_header(
    cls: type[ctypes.Structure], member: str, offset: int
) -> None:
    """Members that follow padding or embedded structs sit where the header puts them."""
    assert getattr(cls, member).offset == offset


def test_structure_type_values_match_the_vulkan_header() -> None:
    """The sType values chained into pNext are the header's."""
    assert {name: getattr(vk, name) for name in STRUCTURE_TYPES} == STRUCTURE_TYPES


def canary_buffer(cls: type[ctypes.Structure], head: bytes = b"") -> ctypes.Array[ctypes.c_char]:
    size = ctypes.sizeof(cls) + 64
    buf = ctypes.create_string_buffer(bytes([CANARY]) * size, size)
    ctypes.memmove(buf, head, len(head))
    return buf


def as_pointer(buf: ctypes.Array[ctypes.c_char], cls: type[ctypes.Structure]) -> object:
    return ctypes.cast(buf, ctypes.POINTER(cls))


@pytest.fixture
def lavapipe_device(lavapipe_icd: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[LavapipeDevice]:
    """An open instance on lavapipe alone and its one physical device handle."""
    monkeypatch.setenv("VK_DRIVER_FILES", lavapipe_icd)
    with Instance(Loader(LIBRARY_NAMES[sys.platform])) as inst:
        handles = inst.physical_devices()
        assert len(handles) == 1
        yield inst, handles[0]


def test_driver_writes_exactly_the_properties_struct(lavapipe_device: LavapipeDevice) -> None:
    """vkGetPhysicalDeviceProperties fills the struct to its last member and not beyond."""
    inst, handle = lavapipe_device
    buf = canary_buffer(vk.PhysicalDeviceProperties)
    inst.device_calls()["props"](handle, as_pointer(buf, vk.PhysicalDeviceProperties))
    size = ctypes.sizeof(vk.PhysicalDeviceProperties)
    assert set(buf.raw[size:]) == {CANARY}
    props = vk.PhysicalDeviceProperties.from_buffer_copy(buf.raw[:size])
    sparse = props.sparseProperties
    assert {sparse.residencyStandard2DBlockShape, sparse.residencyNonResidentStrict} <= {0, 1}
    atom = props.limits.nonCoherentAtomSize
    assert atom > 0 and atom & (atom - 1) == 0  # a power of two, not canary bytes


def test_properties2_embeds_the_same_properties(lavapipe_device: LavapipeDevice) -> None:
    """vkGetPhysicalDeviceProperties2 writes the same bytes at offset 16, nothing past the end."""
    inst, handle = lavapipe_device
    calls = inst.device_calls()
    plain = vk.PhysicalDeviceProperties()
    calls["props"](handle, ctypes.byref(plain))
    head = struct.pack("<I4xQ", vk.ST_PROPERTIES_2, 0)
    buf = canary_buffer(vk.PhysicalDeviceProperties2, head)
    calls["props2"](handle, as_pointer(buf, vk.PhysicalDeviceProperties2))
    size = ctypes.sizeof(vk.PhysicalDeviceProperties2)
    assert buf.raw[16:size] == bytes(plain)
    assert set(buf.raw[size:]) == {CANARY}


def test_driver_properties_tail_member_is_read_where_the_driver_wrote_it(
    lavapipe_device: LavapipeDevice,
) -> None:
    """Through a pNext chain the driver name and the last member (conformance) read sanely."""
    inst, handle = lavapipe_device
    head = struct.pack("<I4xQ", vk.ST_DRIVER_PROPERTIES, 0)
    buf = canary_buffer(vk.PhysicalDeviceDriverProperties, head)
    props2 = vk.PhysicalDeviceProperties2(sType=vk.ST_PROPERTIES_2, pNext=ctypes.addressof(buf))
    inst.device_calls()["props2"](handle, ctypes.byref(props2))
    size = ctypes.sizeof(vk.PhysicalDeviceDriverProperties)
    driver = vk.PhysicalDeviceDriverProperties.from_buffer_copy(buf.raw[:size])
    assert driver.driverName == b"llvmpipe"
    assert bytes(driver.conformanceVersion)[0] == 1  # major conformance version 1.x
    assert set(buf.raw[size:]) == {CANARY}


def test_memory_properties_fill_the_struct_and_not_beyond(lavapipe_device: LavapipeDevice) -> None:
    """vkGetPhysicalDeviceMemoryProperties writes within the struct; heap 0 is device-local."""
    inst, handle = lavapipe_device
    buf = canary_buffer(vk.PhysicalDeviceMemoryProperties)
    inst.device_calls()["mem"](handle, as_pointer(buf, vk.PhysicalDeviceMemoryProperties))
    size = ctypes.sizeof(vk.PhysicalDeviceMemoryProperties)
    assert set(buf.raw[size:]) == {CANARY}
    memory = vk.PhysicalDeviceMemoryProperties.from_buffer_copy(buf.raw[:size])
    assert 1 <= memory.memoryHeapCount <= vk.MAX_MEMORY_HEAPS
    assert memory.memoryHeaps[0].flags & 1 and memory.memoryHeaps[0].size > 0


def test_driver_writes_16_bit_storage_features_within_the_struct(lavapipe_device: LavapipeDevice) -> None:
    """Through vkGetPhysicalDeviceFeatures2 the 16-bit storage struct is filled, not overrun;
    lavapipe has storageBuffer16BitAccess (what ggml-vulkan's default set requires)."""
    inst, handle = lavapipe_device
    head = struct.pack("<I4xQ", vk.ST_16BIT_STORAGE_FEATURES, 0)
    buf = canary_buffer(vk.PhysicalDevice16BitStorageFeatures, head)
    feats2 = vk.PhysicalDeviceFeatures2(sType=vk.ST_FEATURES_2, pNext=ctypes.addressof(buf))
    inst.device_calls()["feats2"](handle, ctypes.byref(feats2))
    size = ctypes.sizeof(vk.PhysicalDevice16BitStorageFeatures)
    storage = vk.PhysicalDevice16BitStorageFeatures.from_buffer_copy(buf.raw[:size])
    assert storage.storageBuffer16BitAccess == 1
    assert storage.storageInputOutput16 in (0, 1)
    assert set(buf.raw[size:]) == {CANARY}
