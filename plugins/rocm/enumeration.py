"""ROCm enumeration: amdsmi on a live Linux root when it works, else the KFD topology in sysfs.

KFD is always the authority for order, UUID and gfx target when it can be read (it is what ROCr
enumerates); amdsmi adds the marketing name and its memory counters. Only what the HSA runtime in
a child would see is reported: nothing without /dev/kfd, no node whose render node cannot be
opened, nothing at all under a malformed gfx override (``hsakmt``), and nothing hidden by
ROCR_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import attrs

from gpuscout.plugin import Context, DeviceInfo, is_wsl2, system_memory
from gpuscout.plugins.rocm import devices, diagnosis, gfx, hsakmt, smi, sysfs, visibility, xgmi
from gpuscout.plugins.rocm.names import LIBRARY


def _is_live(context: Context) -> bool:
    return context.root in ("", "/")


def _read_smi(context: Context) -> tuple[list[smi.SmiGpu] | None, str]:
    """amdsmi's GPUs, or (None, why not). Only on the live root: amdsmi cannot read a tree.

    A replay never asks amdsmi (the recorded sysfs answers); why it was not used when the
    recording was made is kept as the answer ``amdsmi`` and said again."""
    if context.replaying:
        return None, str(context.recorded("amdsmi", ""))[:500]
    if not _is_live(context):
        return None, f"amdsmi not used for root {context.root!r}"
    module, why = smi.import_amdsmi()
    if module is None:
        context.record("amdsmi", why)
        return None, why
    try:
        return smi.read_all(module), ""
    except Exception as exc:  # amdsmi raises its own exceptions for a missing or old driver
        context.record("amdsmi", f"amdsmi failed ({type(exc).__name__}: {exc})")
        return None, f"amdsmi failed ({type(exc).__name__}: {exc})"


def facts_from_sysfs(context: Context, nodes: Sequence[sysfs.KfdNode]) -> list[devices.GpuFacts]:
    """One GpuFacts per KFD GPU node, joined to its amdgpu device."""
    driver = sysfs.read_driver_version(context)
    pages_limit = sysfs.read_ttm_pages_limit(context)
    slots = Counter(n.slot for n in nodes)
    facts = []
    for ordinal, node in enumerate(nodes):
        drm = sysfs.read_drm_device(context, node)
        if not drm.source:
            minor = node.prop("drm_render_minor")
            paths = [f"{sysfs.DRM}/renderD{minor}/device"] if minor else []
            paths += [f"{sysfs.PCI_DEVICES}/{node.slot}"] if node.slot else []
            where = " or ".join(context.shown(p) for p in paths)
            place = f" under {where}" if where else " (no drm_render_minor or location_id)"
            context.note(
                f"KFD node {node.node}: no amdgpu device with mem_info_vram_total found{place}, "
                "so sysfs gives it no memory figures"
            )
        facts.append(
            devices.GpuFacts(
                ordinal=ordinal,
                gfx_version=node.prop("gfx_target_version"),
                device_id=node.prop("device_id"),
                unique_id=node.prop("unique_id"),
                slot=drm.slot or node.slot,
                market_name=drm.product_name,
                vram_total=drm.vram_total,
                vram_used=drm.vram_used,
                gtt_total=drm.gtt_total,
                gtt_used=drm.gtt_used,
                board_files=drm.board_files,
                partitions=slots[node.slot] if node.slot else 1,
                partition_memory=node.bank_size,
                driver=driver,
                cpu_cores=node.prop("cpu_cores_count"),
                board_info=drm.board_info,
                ttm_pages_limit=pages_limit,
            )
        )
    return facts


def overlay_smi(
    facts: list[devices.GpuFacts], gpus: Sequence[smi.SmiGpu], nodes: Sequence[sysfs.KfdNode]
) -> list[devices.GpuFacts]:
    """``facts`` plus amdsmi's name and (whole cards) memory, matched by KFD node or slot."""
    by_node = {g.kfd_node: g for g in gpus if g.kfd_node is not None}
    by_slot = {g.bdf: g for g in gpus if g.bdf}
    out = []
    for f, node in zip(facts, nodes, strict=True):
        g = by_node.get(node.node) or (by_slot.get(f.slot) if f.partitions == 1 else None)
        if g is None:
            out.append(f)
            continue
        f = attrs.evolve(f, market_name=g.market_name or f.market_name)
        if f.partitions == 1 and g.vram_total is not None:
            f = attrs.evolve(
                f,
                vram_total=g.vram_total,
                vram_used=g.vram_used,
                gtt_total=g.gtt_total if g.gtt_total is not None else f.gtt_total,
                gtt_used=g.gtt_used if g.gtt_used is not None else f.gtt_used,
            )
        out.append(f)
    return out


def facts_from_smi(gpus: Sequence[smi.SmiGpu]) -> list[devices.GpuFacts]:
    """GpuFacts from amdsmi alone (no readable KFD topology), in KFD node order where known."""
    ordered = sorted(enumerate(gpus), key=lambda p: (p[1].kfd_node is None, p[1].kfd_node or 0, p[0]))
    slots = Counter(g.bdf for g in gpus)
    return [
        devices.GpuFacts(
            ordinal=ordinal,
            gfx_version=g.gfx_version,
            device_id=g.device_id,
            unique_id=g.unique_id,
            slot=g.bdf,
            market_name=g.market_name,
            vram_total=g.vram_total,
            vram_used=g.vram_used,
            gtt_total=g.gtt_total,
            gtt_used=g.gtt_used,
            partitions=slots[g.bdf] if g.bdf else 1,
            from_kfd=False,
        )
        for ordinal, (_, g) in enumerate(ordered)
    ]


def build_visible(
    context: Context,
    facts: Sequence[devices.GpuFacts],
    overrides: Sequence[gfx.Version | None] = (),
) -> list[DeviceInfo]:
    """The DeviceInfo of each GPU the environment leaves visible, in HIP's device order, then
    each GPU it hides, in KFD order, marked ``hidden_by`` (the core drops them and their twins).

    ``overrides[i]`` is the gfx override libhsakmt applies to GPU i (none when left out).
    """
    uuids = [visibility.rocr_uuid(f.unique_id) for f in facts]
    order = visibility.visible_order(context.env, uuids)
    hidden = len(facts) - len(order)
    if hidden:
        context.note(
            f"{hidden} of {len(facts)} AMD GPUs hidden by "
            f"{visibility.ROCR}/{visibility.HIP}/{visibility.CUDA}"
        )
    repeated = Counter(u for u in uuids if u)
    system_free = 0
    if any(devices.is_integrated(facts[i]) for i in order):
        system_free = system_memory(context).free_memory
    shown = [
        devices.build(
            facts[i],
            position,
            unique=repeated[uuids[i]] <= 1,
            override=overrides[i] if i < len(overrides) else None,
            system_free=system_free,
        )
        for position, i in enumerate(order)
    ]
    return shown + [
        devices.build(
            facts[i],
            -1,
            unique=repeated[uuids[i]] <= 1,
            override=overrides[i] if i < len(overrides) else None,
            hidden_by=why,
        )
        for i, why in visibility.hidden_by(context.env, uuids).items()
    ]


def _runtime_view(
    context: Context,
    nodes: Sequence[sysfs.KfdNode] | None,
    gpus: Sequence[smi.SmiGpu] | None,
) -> tuple[list[sysfs.KfdNode], list[int | None]] | None:
    """The GPU nodes libhsakmt keeps and their HSA node ids (with amdsmi alone: amdsmi's KFD
    node ids, in facts_from_smi's order), or None, with a note, when it keeps no GPU at all."""
    why = hsakmt.kfd_failure(context)
    if why:
        hint = diagnosis.kfd_problem(context)  # one note: callers read the last one for /dev/kfd
        context.note(f"no AMD GPU: {why}" + (f"; {hint}" if hint else ""))
        return None
    if not nodes:
        ordered = sorted(gpus or [], key=lambda g: (g.kfd_node is None, g.kfd_node or 0))
        return [], [g.kfd_node for g in ordered]
    survivors = hsakmt.supported_nodes(context, nodes)
    if survivors.failure:
        context.note(f"no AMD GPU: {survivors.failure}")
        diagnosis.explain_render_failure(context)
        return None
    for line in survivors.skipped:
        context.note(line)
    if not survivors.nodes:
        context.note(
            f"no AMD GPU: none of {len(nodes)} KFD GPU nodes has a render node the HSA runtime can open"
        )
        diagnosis.explain_render_failure(context)
        return None
    return survivors.nodes, list(survivors.hsa_ids)


def enumerate_devices(context: Context) -> list[DeviceInfo]:
    """Every visible AMD GPU; [] with a note naming the reason when there is none."""
    gpus, smi_why = _read_smi(context)
    if context.platform != "linux":
        if gpus:
            return build_visible(context, facts_from_smi(gpus))
        context.note(f"ROCm discovery reads Linux sysfs; none on {context.platform} ({smi_why})")
        return []
    nodes = sysfs.read_kfd_gpu_nodes(context)
    if not nodes and not gpus:
        where = "no KFD topology" if nodes is None else "no KFD GPU nodes"
        if nodes is None and not is_wsl2(context):  # WSL2 never loads amdgpu: no guess there
            where += " (amdgpu not loaded?)"
        context.note(
            f"no AMD GPU: {where} under {context.shown(sysfs.TOPOLOGY)}"
            + (f"; {smi_why}" if smi_why and (_is_live(context) or context.replaying) else "")
        )
        diagnosis.explain_no_topology(context, topology=nodes is not None)
        return []
    view = _runtime_view(context, nodes, gpus)
    if view is None:
        return []
    kept, hsa_ids = view
    if kept:
        facts = facts_from_sysfs(context, kept)
        if gpus:
            facts = overlay_smi(facts, gpus, kept)
    else:
        facts = facts_from_smi(gpus or [])
    found, failure = hsakmt.overrides(context.env, hsa_ids)
    if failure:
        context.note(f"no AMD GPU: {failure}")
        return []
    context.log.debug(
        "rocm.enumerate", source="amdsmi" if gpus else "sysfs", gpus=len(facts), amdsmi=smi_why or "ok"
    )
    shown = build_visible(context, facts, found)
    return xgmi.with_peers(shown, kept, facts, xgmi.read_xgmi(context, kept)) if kept else shown


def refresh_devices(devices_in: Sequence[DeviceInfo], context: Context) -> list[DeviceInfo]:
    """This library's ``devices_in`` with free memory re-read (cheap: a few sysfs files, or
    amdsmi on a live root), matched by id and PCI id.

    A device that is gone, now sits elsewhere, or whose counter can no longer be read (the
    fresh figure is unknown where the old one was known) is left out, so the core keeps its
    previous value, stale, instead of a guess or a 0 that only means "no reading".
    """
    fresh = {d.id: d for d in enumerate_devices(context) if not d.hidden_by}
    out = []
    for d in devices_in:
        now = fresh.get(d.id) if d.library == LIBRARY else None
        if now is None or now.pci_id.lower() != d.pci_id.lower():
            continue
        if now.free_memory_unknown and not d.free_memory_unknown:
            continue
        out.append(
            d.evolve(
                free_memory=min(now.free_memory, d.total_memory), free_memory_unknown=now.free_memory_unknown
            )
        )
    return out
