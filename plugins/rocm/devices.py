"""Turning what sysfs or amdsmi says about one AMD GPU into a DeviceInfo.

The rules here are pure: identity (UUID or ordinal), the APU rule (``apu``), the memory figure
reported for discrete cards, APUs and partitions, gfx target and override, and the name.
"""

from __future__ import annotations

import attrs

from gpuscout.plugin import DeviceInfo
from gpuscout.plugins.rocm import apu, gfx
from gpuscout.plugins.rocm.names import LIBRARY
from gpuscout.plugins.rocm.visibility import rocr_uuid

GIB = 1024**3
AMD_VENDOR_ID = 0x1002


@attrs.frozen
class GpuFacts:
    """Everything known about one GPU (one KFD GPU node), whichever source said it.

    Memory figures are bytes, None where the source had none. ``ordinal`` is the node's index
    among KFD GPU nodes (what ROCR_VISIBLE_DEVICES counts), ``partitions`` how many GPU nodes
    share its PCI device (several for a partitioned MI300).
    """

    ordinal: int
    gfx_version: int = 0
    device_id: int = 0
    unique_id: int = 0
    slot: str = ""
    market_name: str = ""
    vram_total: int | None = None
    vram_used: int | None = None
    gtt_total: int | None = None
    gtt_used: int | None = None
    board_files: bool = False
    partitions: int = 1
    #: The node's own share of device memory (KFD memory banks): a partition's share, an
    #: APU's HIP pool (``apu``).
    partition_memory: int = 0
    driver: tuple[int, int] = (0, 0)
    #: KFD ``cpu_cores_count`` of the GPU node (ROCr's APU node when > 0).
    cpu_cores: int = 0
    #: ``board_info`` exists (amdgpu hides it on APUs); ``board_files`` also counts
    #: ``mem_info_vram_vendor``.
    board_info: bool = False
    #: ``/sys/module/ttm/parameters/pages_limit``, None when not read.
    ttm_pages_limit: int | None = None
    #: Whether KFD properties were read (False: amdsmi alone, where only the seed's rule applies).
    from_kfd: bool = True


def apu_facts(facts: GpuFacts) -> apu.ApuFacts:
    """The part of ``facts`` the APU rule and an APU's memory figure read."""
    return apu.ApuFacts(
        gfx_version=facts.gfx_version if facts.from_kfd else 0,
        cpu_cores=facts.cpu_cores,
        board_info=facts.board_info,
        vram_vendor=facts.board_files and not facts.board_info,
        vram_total=facts.vram_total,
        vram_used=facts.vram_used,
        gtt_total=facts.gtt_total,
        gtt_used=facts.gtt_used,
        bank=facts.partition_memory if facts.partitions == 1 else 0,
        ttm_pages_limit=facts.ttm_pages_limit,
    )


def is_integrated(facts: GpuFacts) -> bool:
    """Whether the HSA runtime calls the GPU an APU, as far as sysfs shows it (``apu.apu_rule``;
    the seed's size rule only where nothing better exists). A partition never is."""
    return facts.partitions == 1 and apu.apu_rule(apu_facts(facts))[0]


def memory(facts: GpuFacts, integrated: bool, system_free: int) -> tuple[int, int, bool]:
    """(total, free, free unknown) in bytes.

    Discrete: VRAM total and VRAM total - used. Integrated: HIP's pool (``apu.apu_memory``).
    Partition: the node's own memory-bank share, free = share - used/partitions (the card-wide
    used counter split evenly: a guess, flagged). Sums stop at 2**64 - 1, the most any counter
    can say.
    """
    vram_total = facts.vram_total or 0
    vram_free = max(0, vram_total - (facts.vram_used or 0))
    if integrated:
        total, free, _shared, _note = apu.apu_memory(apu_facts(facts), system_free)
        return total, free, False
    if facts.partitions > 1 and facts.partition_memory:
        share = facts.partition_memory
        used = (facts.vram_used or 0) // facts.partitions
        return share, max(0, share - used), True
    if facts.vram_total is None:
        return 0, 0, True
    return vram_total, vram_free, facts.vram_used is None


def description(facts: GpuFacts, target: str) -> str:
    """The marketing name when known, else ``AMD GPU gfxNNNN [1002:dddd]``."""
    if facts.market_name:
        return facts.market_name
    label = target or "gfx?"
    return f"AMD GPU {label} [{AMD_VENDOR_ID:04x}:{facts.device_id:04x}]"


def build(
    facts: GpuFacts,
    position: int,
    *,
    unique: bool = True,
    override: gfx.Version | None = None,
    system_free: int = 0,
    hidden_by: str = "",
) -> DeviceInfo:
    """The DeviceInfo of ``facts`` as the ``position``-th visible device, or, with
    ``hidden_by`` (the setting that hides it, ``visibility.hidden_by``), as a hidden one: HIP
    gives it no position, so its name is the library's alone.

    ``unique`` is False when another GPU node reports the same UUID (partitions on older
    kernels): ROCr cannot select by it, so id and filter_id fall back to the KFD ordinal.
    ``override`` is the (major, minor, stepping) libhsakmt reads from HSA_OVERRIDE_GFX_VERSION(_n)
    for this GPU, applied to gfx and compute (a triple without a target name reads as unknown).
    """
    uuid = rocr_uuid(facts.unique_id)
    ident = uuid if uuid and unique else str(facts.ordinal)
    if override is not None:
        target = gfx.version_name(override)
        major, minor = gfx.version_compute(override)
    else:
        target = gfx.target_name(facts.gfx_version)
        major, minor = gfx.compute_pair(facts.gfx_version)
    integrated, how = apu.apu_rule(apu_facts(facts)) if facts.partitions == 1 else (False, "")
    total, free, unknown = memory(facts, integrated, system_free)
    shared, notes = False, ([how] if how else [])
    if integrated:
        _total, _free, shared, note = apu.apu_memory(apu_facts(facts), system_free)
        notes.append(note)
    return DeviceInfo(
        id=ident,
        library=LIBRARY,
        name=LIBRARY if hidden_by else f"ROCm{position}",
        description=description(facts, gfx.target_name(facts.gfx_version)),
        filter_id=ident,
        integrated=integrated,
        pci_id=facts.slot,
        total_memory=total,
        free_memory=min(free, total),
        compute_major=major,
        compute_minor=minor,
        driver_major=facts.driver[0],
        driver_minor=facts.driver[1],
        gfx_target=target,
        uuid=uuid,
        free_memory_unknown=unknown,
        hidden_by=hidden_by,
        shared_memory=shared,
        notes=notes,
    )
