"""Device records: the seed's DeviceID, DeviceInfo, SystemInfo and the comparison enums.

Records are frozen attrs classes. Fields default to Go's zero values, so any record the seed can
express can be built here by keyword, and the wire format (``gpuscout._records.decode``) round-trips them.
What each field accepts, ``RecordError`` and the link records (``PcieLink``, ``PeerLink``) live in
``gpuscout._records.fields`` and are importable from here as well.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from gpuscout._records.cpulist import MAX_CPULIST, is_cpulist
from gpuscout._records.fields import (
    LINK_KIND,
    MAX_LINK_SPEED,
    MAX_NUMA_NODE,
    MAX_PEERS,
    PcieLink,
    PeerLink,
    RecordError,
    as_env_overrides,
    as_library_path,
    as_notes,
    as_peers,
    bytes_field,
    flag_field,
    in_range,
    is_bytes,
    is_local_cpus,
    is_pcie_link,
    number_field,
    show_value,
    text_field,
)
from gpuscout.errors import GpuscoutError
from gpuscout.sizes import sizes_apart

#: The library name the seed uses for the CPU in its rules (flash attention).
CPU_LIBRARY = "cpu"


@attrs.frozen(order=True)
class DeviceID:
    """Minimal identity of a device: its ``id`` is unique only among devices of one ``library``."""

    id: str = text_field()
    library: str = text_field()


@attrs.frozen
class DeviceInfo:
    """One device as one library reports it (the seed's DeviceInfo, fields in snake_case).

    Extra fields of gpuscout's own (``uuid``, ``free_memory_unknown``, ``software``,
    ``free_memory_stale``, ``unused_reason``, ``max_allocation``, ``hidden_by``, ``notes``,
    ``shared_memory``, ``usable_memory``, and the topology: ``numa_node``, ``local_cpus``,
    ``pcie_link``, ``peers``) default to empty (-1 for ``numa_node``, since node 0 is a node)
    and are left out of the wire format when empty.
    """

    id: str = text_field()
    library: str = text_field()
    name: str = text_field()
    description: str = text_field()
    filter_id: str = text_field()
    integrated: bool = flag_field()
    pci_id: str = text_field()
    total_memory: int = bytes_field()
    free_memory: int = bytes_field()
    compute_major: int = number_field()
    compute_minor: int = number_field()
    driver_major: int = number_field()
    driver_minor: int = number_field()
    nvidia_driver_major: int = number_field()
    gfx_target: str = text_field()
    library_path: tuple[str, ...] = attrs.field(default=(), converter=as_library_path)
    # Compared, but not hashed: a dict has no hash and the overrides never identify a device.
    runner_env_overrides: Mapping[str, str] = attrs.field(
        factory=dict, converter=as_env_overrides, hash=False
    )
    #: Vendor UUID in the vendor's own spelling, for matching across processes and libraries.
    uuid: str = text_field()
    #: True when the library could not say how much memory is free (free_memory is then a guess).
    free_memory_unknown: bool = flag_field()
    #: True for software renderers (a CPU posing as a GPU, e.g. llvmpipe).
    software: bool = flag_field()
    #: True when ``Scout.refresh`` could not bring free_memory up to date (no plugin refreshed
    #: the device): free_memory is then the previous value, not a fresh reading.
    free_memory_stale: bool = flag_field()
    #: Why the runtime in a child would not use this device unless it is selected ("" = it
    #: would): outside ggml-vulkan's default device set, not Metal's system default device.
    #: Such devices rank after the others.
    unused_reason: str = text_field()
    #: Largest single buffer or tensor, in bytes, that the device's runtime can allocate (0 =
    #: unknown). ggml leaves a tensor or buffer larger than this on the CPU, with the ops that
    #: use it (Vulkan: maxStorageBufferRange, 128 MiB on lavapipe).
    max_allocation: int = bytes_field()
    #: What hides the device from its own library in the Scout's environment ("" = nothing):
    #: the visibility variable as ``NAME=value`` (``CUDA_VISIBLE_DEVICES=0``), see
    #: ``gpuscout.plugin.visibility_setting``. A plugin reports hidden devices too, so that the
    #: merge can match their twins in other libraries (the Vulkan view of a card CUDA hides) and
    #: drop them with it; ``discover`` never ranks, selects or hands a hidden device to a child.
    hidden_by: str = text_field()
    #: What a user should know about this device, one sentence each, in the order found: how
    #: the plugin read it ("WSL2: ..."), a fault it shows ("running at PCIe Gen3 x4 of Gen5
    #: x16"), which budget applies. ``list`` and ``--explain`` show them.
    notes: tuple[str, ...] = attrs.field(default=(), converter=as_notes)
    #: True when the device's memory is the system's: what it has free comes out of the
    #: system's free memory (unified-memory parts such as GB10 and Jetson, an APU whose runtime
    #: allocates from GTT, an integrated Vulkan device's host heap). The planner then counts
    #: those bytes once: what sits on such devices and on the CPU draws from one pool
    #: (docs/shared-memory.md). ``integrated`` says what the chip is; this says whose bytes
    #: the figures are (an APU whose runtime uses only its BIOS carve-out is integrated but
    #: not shared: the carve-out is not in the system's memory).
    shared_memory: bool = flag_field()

    #: The bytes of ``total_memory`` that may be planned on, when that is less than the total
    #: (None: all of it): a budget's ``min(total, cap) - reserve`` (docs/budgets.md), or what a
    #: plugin reports as usable (a card whose "usable total" is below its total). Never above
    #: ``total_memory``; 0 is a real figure (a reserve that takes everything).
    usable_memory: int | None = attrs.field(default=None, validator=attrs.validators.optional(is_bytes))

    #: The NUMA node the device is attached to (the kernel's ``numa_node``), -1 when unknown.
    numa_node: int = attrs.field(
        default=-1, validator=in_range(-1, MAX_NUMA_NODE, f"a NUMA node in -1..{MAX_NUMA_NODE}")
    )
    #: The CPUs close to the device, in the kernel's list form (``0-31,64-95``); "" = unknown.
    local_cpus: str = attrs.field(default="", validator=is_local_cpus)
    #: The device's PCIe link (current and maximum speed and width), None when unknown.
    pcie_link: PcieLink | None = attrs.field(default=None, validator=is_pcie_link)
    #: Direct links to other devices of the same discovery (NVLink, xGMI), each once.
    peers: tuple[PeerLink, ...] = attrs.field(default=(), converter=as_peers)

    @property
    def usable_total(self) -> int:
        """``usable_memory`` when set (at most the total), else ``total_memory``."""
        if self.usable_memory is None:
            return self.total_memory
        return min(self.usable_memory, self.total_memory)

    @property
    def usable_free(self) -> int:
        """Free memory under the budget: ``free_memory`` less what the budget takes from the
        total (``total_memory - usable_total``), at least 0; ``free_memory`` without one. What
        the planner, ``fit`` and ``fits:`` use (docs/budgets.md)."""
        if self.usable_memory is None:
            return self.free_memory
        return max(0, self.free_memory - (self.total_memory - self.usable_total))

    @property
    def compute(self) -> str:
        """The seed's compute label: ``gfx%x%02x`` for ROCm (any case), else ``major.minor``."""
        if self.library.lower() == "rocm":
            return f"gfx{self.compute_major:x}{self.compute_minor:02x}"
        return f"{self.compute_major}.{self.compute_minor}"

    @property
    def driver(self) -> str:
        """The seed's driver label ``major.minor``."""
        return f"{self.driver_major}.{self.driver_minor}"

    @property
    def device_id(self) -> DeviceID:
        """The device's DeviceID (id and library)."""
        return DeviceID(self.id, self.library)

    def evolve(self, **changes: Any) -> DeviceInfo:
        """Return a copy with ``changes`` applied."""
        return attrs.evolve(self, **changes)


@attrs.frozen
class SystemInfo:
    """System memory in bytes; zeros where the machine did not say. ``notes``: sentences about
    what the figures are (the memory of WSL2's virtual machine, macOS's VM statistics), gpuscout's
    own wire key, omitted when empty."""

    total_memory: int = bytes_field()
    free_memory: int = bytes_field()
    free_swap: int = bytes_field()
    notes: tuple[str, ...] = attrs.field(default=(), converter=as_notes)


class DeviceComparison(enum.IntEnum):
    """How two device records relate (the seed's DeviceComparison)."""

    UNIQUE = 0
    #: The same device reported twice by the same library.
    SAME_BACKEND = 1
    #: The same physical device reported by two libraries.
    DUPLICATE = 2


class FlashAttention(enum.IntEnum):
    """Flash-attention setting, aligned with llama_flash_attn_type."""

    AUTO = -1
    DISABLED = 0
    ENABLED = 1

    def __str__(self) -> str:
        return {-1: "Auto", 0: "Disabled", 1: "Enabled"}[self.value]


#: Largest magnitude of a number field: the wire format is Go's int64/uint64.
_INT_LIMIT = 2**63
_PCI_ID = re.compile(r"[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]", re.ASCII | re.IGNORECASE)
_STR_FIELDS = (
    "id",
    "library",
    "name",
    "description",
    "filter_id",
    "pci_id",
    "gfx_target",
    "uuid",
    "unused_reason",
    "hidden_by",
)
_BOOL_FIELDS = ("integrated", "free_memory_unknown", "software", "free_memory_stale", "shared_memory")
_SIZE_FIELDS = ("total_memory", "free_memory", "max_allocation")
_INT_FIELDS = ("compute_major", "compute_minor", "driver_major", "driver_minor", "nvidia_driver_major")
#: Longest text field accepted (a description is a line, not a document).
_MAX_TEXT = 4096
#: Most notes one device may carry (each one a sentence, not a log).
_MAX_NOTES = 32


def _plain_str(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise RecordError(f"{where}: expected str, got {show_value(value)}")
    if len(value) > _MAX_TEXT:
        raise RecordError(f"{where}: text of {len(value)} characters, at most {_MAX_TEXT} allowed")
    return str.__str__(value)


def _plain_int(value: Any, where: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise RecordError(f"{where}: expected int, got {show_value(value)}")
    if not minimum <= value < _INT_LIMIT:
        shown = (
            f"{value}"
            if abs(value) < 10**30
            else f"a {len(str(abs(value)))}-digit number"
            if value.bit_length() < 10000
            else "a number of over 3000 digits"
        )
        raise RecordError(f"{where}: expected an int in {minimum}..2**63-1, got {shown}")
    return int.__index__(value)


def check_device(value: Any, where: str = "") -> DeviceInfo:
    """``value`` as a plain DeviceInfo whose every field has the right type and range.

    Used at the border, on every record a plugin returns: a subclass, a str subclass or a
    mutable mapping is copied into plain values, so nothing a plugin handed over can change later.
    Raises RecordError naming the field and the value (``[0].pci_id: expected str, got 1234``).
    """
    if not isinstance(value, DeviceInfo):
        raise RecordError(f"{where or '$'}: expected DeviceInfo, got {show_value(value)}")
    fields: dict[str, Any] = {}
    for name in _STR_FIELDS:
        fields[name] = _plain_str(getattr(value, name), f"{where}.{name}")
    for name in _BOOL_FIELDS:
        flag = getattr(value, name)
        if not isinstance(flag, bool):
            raise RecordError(f"{where}.{name}: expected bool, got {show_value(flag)}")
        fields[name] = bool(flag)
    for name in _SIZE_FIELDS:
        fields[name] = _plain_int(getattr(value, name), f"{where}.{name}", 0)
    for name in _INT_FIELDS:
        fields[name] = _plain_int(getattr(value, name), f"{where}.{name}", -_INT_LIMIT)
    if fields["pci_id"] and not _PCI_ID.fullmatch(fields["pci_id"]):
        raise RecordError(
            f"{where}.pci_id: expected a PCI id like 0000:c4:00.0, got {show_value(fields['pci_id'])}"
        )
    paths = value.library_path
    if not isinstance(paths, tuple):
        raise RecordError(f"{where}.library_path: expected a sequence of str, got {show_value(paths)}")
    fields["library_path"] = tuple(_plain_str(p, f"{where}.library_path[{i}]") for i, p in enumerate(paths))
    notes = value.notes
    if not isinstance(notes, tuple):
        raise RecordError(f"{where}.notes: expected a sequence of str, got {show_value(notes)}")
    if len(notes) > _MAX_NOTES:
        raise RecordError(f"{where}.notes: {len(notes)} notes, at most {_MAX_NOTES} allowed")
    fields["notes"] = tuple(_plain_str(n, f"{where}.notes[{i}]") for i, n in enumerate(notes))
    usable = value.usable_memory
    if usable is not None:
        usable = _plain_int(usable, f"{where}.usable_memory", 0)
        if usable > fields["total_memory"]:
            shown, total = sizes_apart(usable, fields["total_memory"])
            raise RecordError(
                f"{where}.usable_memory: {shown} is more than total_memory "
                f"({total}); leave it unset (None) when all of it is usable"
            )
    fields["usable_memory"] = usable
    fields.update(_checked_topology(value, where))
    overrides = value.runner_env_overrides
    if not isinstance(overrides, Mapping):
        raise RecordError(f"{where}.runner_env_overrides: expected a mapping, got {show_value(overrides)}")
    fields["runner_env_overrides"] = {
        _plain_str(k, f"{where}.runner_env_overrides key"): _plain_str(
            v, f"{where}.runner_env_overrides[{k!r:.40}]"
        )
        for k, v in overrides.items()
    }
    return DeviceInfo(**fields)


def _checked_topology(value: DeviceInfo, where: str) -> dict[str, Any]:
    """The topology fields of ``value`` as plain values (see ``check_device``)."""
    numa = _plain_int(value.numa_node, f"{where}.numa_node", -1)
    if numa > MAX_NUMA_NODE:
        raise RecordError(f"{where}.numa_node: expected a NUMA node in -1..{MAX_NUMA_NODE}, got {numa}")
    cpus = value.local_cpus
    if not isinstance(cpus, str):
        raise RecordError(f"{where}.local_cpus: expected str, got {show_value(cpus)}")
    if len(cpus) > MAX_CPULIST or not is_cpulist(cpus) or cpus != cpus.strip():
        raise RecordError(
            f"{where}.local_cpus: expected a CPU list in the kernel's form ('0-3,8-11'), "
            f"got {show_value(cpus)}"
        )
    link = value.pcie_link
    if link is not None:
        if not isinstance(link, PcieLink):
            raise RecordError(f"{where}.pcie_link: expected a PcieLink or None, got {show_value(link)}")
        speed = _plain_speed(link.speed, f"{where}.pcie_link.speed")
        width = _plain_int(link.width, f"{where}.pcie_link.width", 0)
        max_speed = _plain_speed(link.max_speed, f"{where}.pcie_link.max_speed")
        max_width = _plain_int(link.max_width, f"{where}.pcie_link.max_width", 0)
        try:
            link = PcieLink(speed=speed, width=width, max_speed=max_speed, max_width=max_width)
        except RecordError as exc:
            raise RecordError(f"{where}.pcie_link: {exc}") from None
        link = link if link.known else None
    peers = value.peers
    if not isinstance(peers, tuple):
        raise RecordError(f"{where}.peers: expected a sequence of PeerLink, got {show_value(peers)}")
    if len(peers) > MAX_PEERS:
        raise RecordError(f"{where}.peers: {len(peers)} peers, at most {MAX_PEERS} allowed")
    plain: list[PeerLink] = []
    for i, peer in enumerate(peers):
        if not isinstance(peer, PeerLink):
            raise RecordError(f"{where}.peers[{i}]: expected PeerLink, got {show_value(peer)}")
        kind = _plain_str(peer.link, f"{where}.peers[{i}].link")
        if LINK_KIND.fullmatch(kind) is None:
            raise RecordError(
                f"{where}.peers[{i}].link: expected a link kind such as 'nvlink', got {kind!r:.40}"
            )
        plain.append(
            PeerLink(
                _plain_str(peer.id, f"{where}.peers[{i}].id"),
                _plain_str(peer.library, f"{where}.peers[{i}].library"),
                kind,
            )
        )
    return {"numa_node": numa, "local_cpus": str.__str__(cpus), "pcie_link": link, "peers": tuple(plain)}


def _plain_speed(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise RecordError(f"{where}: expected a number of GT/s, got {show_value(value)}")
    number = float(value)
    if not 0 <= number <= MAX_LINK_SPEED:
        raise RecordError(f"{where}: expected GT/s in 0..{MAX_LINK_SPEED:g}, got {show_value(value)}")
    return number


def model_name(device: DeviceInfo) -> str:
    """The device's model as people name it: its ``description`` ("AMD Instinct MI300X"), or
    its ``name`` when the library gives no description (some name devices by position, such as
    ROCm's "ROCm0")."""
    return device.description or device.name


def is_size(value: Any) -> bool:
    """Whether ``value`` is a byte count: an int (not a bool) from 0 up to 2**63."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**63


def device_list(value: Any, where: str) -> list[DeviceInfo]:
    """``value`` as a list of DeviceInfo; GpuscoutError naming ``where`` for a str, a mapping,
    a non-iterable or an item that is no DeviceInfo."""
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise GpuscoutError(f"{where}: expected a list of DeviceInfo, got {type(value).__name__}")
    items = list(value)
    bad = next((i for i, d in enumerate(items) if not isinstance(d, DeviceInfo)), None)
    if bad is not None:
        raise GpuscoutError(f"{where}[{bad}]: expected a DeviceInfo, found {type(items[bad]).__name__}")
    return items
