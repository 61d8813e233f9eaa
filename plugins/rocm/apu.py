"""Is an AMD GPU an APU, and whose bytes are its memory: the HSA runtime's answer, from sysfs.

What the runtime checks (ROCR-Runtime): libhsakmt ``topology.c``
``topology_get_node_props_from_drm`` sets ``HsaNodeProperties.Integrated`` from the amdgpu DRM
query ``AMDGPU_INFO_DEV_INFO`` (``ids_flags & AMDGPU_IDS_FLAGS_FUSION``, which the kernel sets
when ``adev->flags & AMD_IS_APU``); ROCr ``amd_gpu_agent.cpp`` ``GpuAgent::GetInfoMemoryProperties``
turns it into ``HSA_AMD_MEMORY_PROPERTY_AGENT_IS_APU``, and HIP (ROCm/clr ``rocdevice.cpp``
``Device::populateOCLDeviceConstants``) reads that as ``hostUnifiedMemory`` (``hipDeviceProp_t
.integrated``). ROCr also calls a KFD node with both CPU cores and SIMDs an "APU node"
(``GpuAgent::GpuAgent``: ``is_apu_node = NumCPUCores > 0``, full profile), the fused node of
older kernels' CRAT tables.

sysfs has no file holding ``AMD_IS_APU``; what it shows that follows from it, in the order
``apu_rule`` asks:

1. a KFD GPU node with ``cpu_cores_count > 0`` (ROCr's APU node): an APU;
2. ``board_info`` on the amdgpu device: not an APU (amdgpu_device.c
   ``amdgpu_board_attrs_is_visible`` hides it exactly when ``AMD_IS_APU``; kernels before 6.5 have
   it on no device, so its absence alone proves nothing there);
3. the node's device-local KFD memory bank equal to the GTT ceiling with the carve-out below it:
   an APU (amdgpu_ttm.c ``amdgpu_ttm_init`` sets ``apu_prefer_gtt`` only for ``AMD_IS_APU`` with
   VRAM below the GTT size, and ``amdgpu_amdkfd_get_local_mem_info`` then reports
   ``ttm_tt_pages_limit() << PAGE_SHIFT`` as local memory);
4. ``mem_info_vram_vendor``: not an APU (amdgpu_vram_mgr.c shows it only for a known VRAM vendor;
   an APU's memory is system DRAM);
5. neither board file, in an amdgpu device directory that was read, on a GPU only kernels with
   ``board_info`` drive (gfx11 and later, gfx94x): an APU;
6. otherwise the seed's size rule (no board files, VRAM <= 4 GiB, GTT >= 8 GiB and >= 4 x VRAM),
   kept only here, where nothing better exists, and said so in the device's note.

Memory, as HIP sizes the device: ROCr's GPU memory pool is the node's device-local KFD memory
bank (``hsaKmtGetNodeMemoryProperties``, heap types FB_PUBLIC/FB_PRIVATE), and HIP's total is that
pool (GPU_MAX_HEAP_SIZE 100%). On an APU the kernel fills it with the GTT ceiling
(``apu_prefer_gtt``, step 3: ``ttm.pages_limit`` x 4 KiB, 25165824 pages = 96 GiB = HIP's 98304
MiB) or with the BIOS carve-out (``mem_info_vram_total``, already taken out of ``MemTotal``). A
GTT-backed pool is the system's memory (``shared_memory``; free capped by system free); a
carve-out pool is not (the carve-out is not in the system's figures). Without a KFD bank (a
recording that left ``mem_banks`` out, amdsmi alone) the pool is the one the kernel picks: the
GTT ceiling when the carve-out is below it, else the carve-out; the note says it was inferred.
"""

from __future__ import annotations

import attrs

from gpuscout.plugin import human_bytes

GIB = 1024**3


@attrs.frozen
class ApuFacts:
    """What sysfs says that bears on the APU question and the memory figure (bytes; None where
    the kernel wrote nothing)."""

    gfx_version: int = 0
    cpu_cores: int = 0
    board_info: bool = False
    vram_vendor: bool = False
    vram_total: int | None = None
    vram_used: int | None = None
    gtt_total: int | None = None
    gtt_used: int | None = None
    #: Sum of the node's device-local KFD memory banks (ROCr's GPU pool); 0 unknown.
    bank: int = 0
    #: ``/sys/module/ttm/parameters/pages_limit`` (4 KiB pages), None when not readable.
    ttm_pages_limit: int | None = None


def _board_info_era(gfx_version: int) -> bool:
    """Whether every kernel that drives this target has ``board_info`` (6.5 and later):
    gfx11 and later, and gfx94x (MI300)."""
    return gfx_version >= 110000 or 90400 <= gfx_version < 90500


def _gtt_pool(f: ApuFacts) -> bool:
    """Whether the kernel gave KFD the GTT ceiling as local memory (``apu_prefer_gtt``): seen in
    the bank when there is one, else inferred as the kernel decides, carve-out below GTT."""
    if f.gtt_total is None or (f.vram_total or 0) >= f.gtt_total:
        return False
    return f.bank == f.gtt_total if f.bank else True


def seed_rule(f: ApuFacts) -> bool:
    """The seed's rule: no board files, VRAM <= 4 GiB, GTT >= 8 GiB and GTT >= 4 x VRAM."""
    if f.board_info or f.vram_vendor or f.vram_total is None or f.gtt_total is None:
        return False
    vram, gtt = f.vram_total, f.gtt_total
    return vram <= 4 * GIB and gtt >= 8 * GIB and gtt >= 4 * vram


def apu_rule(f: ApuFacts) -> tuple[bool, str]:
    """(is an APU, how that was decided: '' for a discrete card told by a board file, else a
    sentence for the device's note)."""
    if f.cpu_cores > 0:
        return True, "APU: its KFD node has CPU cores and SIMDs (ROCr's APU node)"
    if f.board_info:
        return False, ""
    if f.bank and _gtt_pool(f):
        return True, "APU: its KFD local memory is the GTT ceiling (the kernel's apu_prefer_gtt)"
    if f.vram_vendor or f.vram_total is None:
        return False, ""  # a VRAM vendor, or no amdgpu device directory read: nothing to go on
    if _board_info_era(f.gfx_version):
        return True, "APU: amdgpu shows no board_info, which it hides only on APUs"
    if seed_rule(f):
        return True, (
            "integrated by the seed's size rule (VRAM <= 4 GiB, GTT >= 8 GiB and >= 4 x VRAM): "
            "this kernel shows nothing the HSA runtime's APU flag follows from"
        )
    return False, ""


def _gib(n: int) -> str:
    return human_bytes(n)


def apu_memory(f: ApuFacts, system_free: int) -> tuple[int, int, bool, str]:
    """(total, free, shared with the system, note) of an APU as HIP sizes it (module docstring)."""
    vram_total = f.vram_total or 0
    gtt_total = f.gtt_total or 0
    gtt_free = max(0, gtt_total - (f.gtt_used or 0))
    if system_free:
        gtt_free = min(gtt_free, system_free)
    guessed = (
        ""
        if f.bank
        else " (no KFD memory bank: the pool the kernel picks, GTT when the carve-out is smaller)"
    )
    if _gtt_pool(f):
        limit = (
            f" (ttm.pages_limit {f.ttm_pages_limit} x 4 KiB)"
            if f.ttm_pages_limit is not None and f.ttm_pages_limit * 4096 == gtt_total
            else ""
        )
        return (
            gtt_total,
            gtt_free,
            True,
            f"HIP's memory is the GTT ceiling, {_gib(gtt_total)}{limit}: system memory, shared "
            f"with the CPU (BIOS carve-out {_gib(vram_total)} unused by HIP){guessed}",
        )
    pool = f.bank or vram_total
    return (
        pool,
        min(max(0, pool - (f.vram_used or 0)), pool),
        False,
        f"HIP's memory is the BIOS carve-out, {_gib(pool)}, already out of system memory "
        f"(GTT ceiling {_gib(gtt_total)} not used by HIP here; Vulkan counts both){guessed}",
    )
