"""Turning what sysfs or amdsmi says about one AMD GPU into a DeviceInfo.

The rules here are pure: identity (UUID or ordinal), the seed's integrated-GPU rule, the memory
figure reported for discrete cards, APUs and partitions, gfx target and override, and the name.
"""

from __future__ import annotations

import attrs

from gpuscout.plugin import DeviceInfo
from gpuscout.plugins.rocm import gfx
from gpuscout.plugins.rocm.names import LIBRARY
from gpuscout.plugins.rocm.sysfs import U64_MAX
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
    #: The node's own share of device memory (KFD memory banks), used for partitions.
    partition_memory: int = 0
    driver: tuple[int, int] = (0, 0)


def is_integrated(facts: GpuFacts) -> bool:
    """The seed's rule: no vendor/board files, VRAM <= 4 GiB, GTT >= 8 GiB and GTT >= 4 x VRAM."""
    if facts.board_files or facts.vram_total is None or facts.gtt_total is None:
        return False
    vram, gtt = facts.vram_total, facts.gtt_total
    return vram <= 4 * GIB and gtt >= 8 * GIB and gtt >= 4 * vram


def memory(facts: GpuFacts, integrated: bool, system_free: int) -> tuple[int, int, bool]:
    """(total, free, free unknown) in bytes.

    Discrete: VRAM total and VRAM total - used. Integrated: the carve-out plus GTT (the system
    memory the driver lets the GPU map), free = carve-out free + min(GTT free, system available)
    since GTT pages come out of system memory. Partition: the node's own memory-bank share, free
    = share - used/partitions (the card-wide used counter split evenly: a guess, flagged).
    Sums stop at 2**64 - 1, the most any counter can say.
    """
    vram_total = facts.vram_total or 0
    vram_free = max(0, vram_total - (facts.vram_used or 0))
    if integrated:
        gtt_total = facts.gtt_total or 0
        gtt_free = max(0, gtt_total - (facts.gtt_used or 0))
        if system_free:
            gtt_free = min(gtt_free, system_free)
        return min(vram_total + gtt_total, U64_MAX), min(vram_free + gtt_free, U64_MAX), False
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
    integrated = is_integrated(facts)
    total, free, unknown = memory(facts, integrated, system_free)
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
    )
