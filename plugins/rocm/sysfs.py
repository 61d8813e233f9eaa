"""Reading AMD GPUs from Linux sysfs: the KFD topology joined to the amdgpu DRM device.

Only the amdgpu kernel driver is needed (no ROCm). Every path goes through the context, so a
recorded tree under the Scout's ``root`` reads like the live ``/sys``.
"""

from __future__ import annotations

import re

import attrs

from gpuscout.plugin import U64_LIMIT, Context, parse_u64

TOPOLOGY = "/sys/class/kfd/kfd/topology/nodes"
DRM = "/sys/class/drm"
PCI_DEVICES = "/sys/bus/pci/devices"
DRIVER_VERSION = "/sys/module/amdgpu/version"
#: TTM's page limit (4 KiB pages): the GTT ceiling amdgpu uses when amdgpu.gttsize is unset.
TTM_PAGES_LIMIT = "/sys/module/ttm/parameters/pages_limit"
#: KFD heap types of device-local memory banks (frame buffer public and private).
_LOCAL_HEAPS = (1, 2)
#: The largest value of a kernel counter (KFD properties and amdgpu counters are 64-bit).
U64_MAX = U64_LIMIT - 1
#: A PCI slot as the kernel names it (PCI_SLOT_NAME), in lower case.
_SLOT = re.compile(r"[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]")
#: Longer than any marketing name; a longer product_name is cut here.
_NAME_MAX = 256


def parse_properties(text: str) -> dict[str, int]:
    """KFD ``properties`` text (``key value`` lines, decimal) as a dict.

    Odd lines are skipped: not two fields, or a value that is not a 64-bit unsigned decimal.
    """
    values: dict[str, int] = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) == 2:
            value = parse_u64(fields[1])
            if value is not None:
                values[fields[0]] = value
    return values


def parse_uevent(text: str) -> dict[str, str]:
    """A sysfs ``uevent`` file (``KEY=value`` lines) as a dict; lines without ``=`` are skipped."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        key, equals, value = line.partition("=")
        if equals:
            values[key] = value
    return values


def parse_slot(text: str) -> str:
    """A ``PCI_SLOT_NAME`` value in lower case, '' when it is not ``dddd:bb:dd.f``."""
    slot = text.strip().lower()
    return slot if _SLOT.fullmatch(slot) else ""


def pci_slot(domain: int, location_id: int) -> str:
    """``%04x:%02x:%02x.%x`` from KFD's domain and location_id ((bus << 8) | devfn).

    Newer kernels put a partition number in bits 31:28 of location_id; it is not part of the slot.
    The domain is 32 bits in the kernel; higher bits of a bad value are dropped.
    """
    bus, devfn = (location_id >> 8) & 0xFF, location_id & 0xFF
    return f"{domain & 0xFFFFFFFF:04x}:{bus:02x}:{devfn >> 3:02x}.{devfn & 7:x}"


@attrs.frozen
class KfdNode:
    """One KFD topology GPU node: its node number, its ``properties`` and local memory banks."""

    node: int
    props: dict[str, int]
    #: Sum of the node's device-local memory banks in bytes (a partition's share of the card).
    bank_size: int = 0

    def prop(self, key: str) -> int:
        """The property ``key``, 0 when the kernel did not write it."""
        return self.props.get(key, 0)

    @property
    def slot(self) -> str:
        """The PCI slot from the node's domain and location_id; "" when the node has no
        location_id (0000:00:00.0, the host bridge, would be a made-up address)."""
        if "location_id" not in self.props:
            return ""
        return pci_slot(self.prop("domain"), self.prop("location_id"))


def _bank_size(ctx: Context, node_dir: str) -> int:
    total = 0
    for bank in ctx.list_dir(f"{node_dir}/mem_banks") or []:
        props = parse_properties(ctx.read_text(f"{node_dir}/mem_banks/{bank}/properties") or "")
        if props.get("heap_type") in _LOCAL_HEAPS:
            total += props.get("size_in_bytes", 0)
    return min(total, U64_MAX)


def read_kfd_gpu_nodes(ctx: Context) -> list[KfdNode] | None:
    """Every KFD GPU node (simd_count > 0) in node order; None when there is no KFD topology."""
    names = ctx.list_dir(TOPOLOGY)
    if names is None:
        return None
    numbered = ((parse_u64(n), n) for n in names)
    nodes: list[KfdNode] = []
    for number, name in sorted((i, n) for i, n in numbered if i is not None):
        text = ctx.read_text(f"{TOPOLOGY}/{name}/properties")
        if text is None:
            continue
        props = parse_properties(text)
        if props.get("simd_count", 0) == 0:
            continue  # a CPU node
        nodes.append(KfdNode(number, props, _bank_size(ctx, f"{TOPOLOGY}/{name}")))
    return nodes


@attrs.frozen
class DrmDevice:
    """What the amdgpu device directory says: PCI slot, memory counters in bytes, board files."""

    slot: str = ""
    vram_total: int | None = None
    vram_used: int | None = None
    gtt_total: int | None = None
    gtt_used: int | None = None
    #: ``mem_info_vram_vendor`` or ``board_info`` exists: the seed's sign of a discrete card.
    board_files: bool = False
    #: ``board_info`` exists (amdgpu hides it exactly on APUs, kernels 6.5 and later).
    board_info: bool = False
    product_name: str = ""
    #: The directory the values came from (relative to the root), for diagnostics.
    source: str = ""


def _read_device_dir(ctx: Context, directory: str) -> DrmDevice | None:
    """The amdgpu attributes of ``directory``; None when it holds no ``mem_info_vram_total``."""
    vram_total = ctx.read_u64(f"{directory}/mem_info_vram_total")
    if vram_total is None:
        return None
    uevent = parse_uevent(ctx.read_text(f"{directory}/uevent") or "")
    return DrmDevice(
        slot=parse_slot(uevent.get("PCI_SLOT_NAME", "")),
        vram_total=vram_total,
        vram_used=ctx.read_u64(f"{directory}/mem_info_vram_used"),
        gtt_total=ctx.read_u64(f"{directory}/mem_info_gtt_total"),
        gtt_used=ctx.read_u64(f"{directory}/mem_info_gtt_used"),
        board_files=any(ctx.exists(f"{directory}/{f}") for f in ("mem_info_vram_vendor", "board_info")),
        board_info=ctx.exists(f"{directory}/board_info"),
        product_name=_first_line(ctx.read_text(f"{directory}/product_name") or "")[:_NAME_MAX],
        source=directory,
    )


def _first_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[0].strip() if lines else ""


def read_drm_device(ctx: Context, node: KfdNode) -> DrmDevice:
    """The amdgpu device of ``node``: through ``renderD<drm_render_minor>``, else its PCI slot.

    A partition's render node belongs to a platform device without memory counters; the PCI
    device found from location_id and domain then answers. An empty DrmDevice when neither does.
    """
    candidates = []
    minor = node.props.get("drm_render_minor")
    if minor:
        candidates.append(f"{DRM}/renderD{minor}/device")
    if node.slot:
        candidates.append(f"{PCI_DEVICES}/{node.slot}")
    for directory in candidates:
        found = _read_device_dir(ctx, directory)
        if found is not None:
            return found if found.slot else attrs.evolve(found, slot=node.slot)
    return DrmDevice(slot=node.slot)


def read_driver_version(ctx: Context) -> tuple[int, int]:
    """(major, minor) of a DKMS amdgpu module's ``version`` file; (0, 0) for the in-tree driver."""
    text = (ctx.read_text(DRIVER_VERSION) or "").strip()
    parts = text.split(".")
    major, minor = (parse_u64(p) for p in [*parts, "", ""][:2])
    if major is None or minor is None:
        return 0, 0
    return major, minor


def read_ttm_pages_limit(ctx: Context) -> int | None:
    """``ttm.pages_limit`` (pages of 4 KiB), None when the file is missing or not a number."""
    return ctx.read_u64(TTM_PAGES_LIMIT)
