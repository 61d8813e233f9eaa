"""Device records: the seed's DeviceID, DeviceInfo, SystemInfo and the comparison enums.

Records are frozen attrs classes. Fields default to Go's zero values, so any record the seed can
express can be built here by keyword, and the wire format (``gpuscout.wire``) round-trips them.
"""

from __future__ import annotations

import enum
import re
import types
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from gpuscout.cpulist import MAX_CPULIST, is_cpulist
from gpuscout.errors import GpuscoutError

#: The library name the seed uses for the CPU in its rules (flash attention).
CPU_LIBRARY = "cpu"


class RecordError(GpuscoutError, ValueError):
    """A record that cannot be built, or one from a plugin that the core cannot use; the
    message names the field and the value, and ``field`` holds the field's name ("" for the
    record as a whole)."""

    def __init__(self, message: str, field: str = "") -> None:
        super().__init__(message)
        self.field = field


#: Largest memory field (bytes): Go's uint64.
MAX_BYTES = 2**64 - 1
#: Range of the other number fields: whatever 64 bits hold, Go's int64 or uint64 (a driver
#: version a plugin parsed as unsigned).
_INT64 = (-(2**63), 2**64 - 1)


def show_value(value: Any) -> str:
    """``value``'s repr cut to 60 characters, for an error message (a huge int by its size)."""
    try:
        if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 100:
            return f"an int of {value.bit_length()} bits"  # no repr: it may not even print
        return f"{value!r:.60}"
    except Exception:
        return f"a {type(value).__name__} that cannot be printed"


def _refuse(instance: Any, name: str, expected: str, value: Any, where: str = "") -> RecordError:
    where = where or f"{type(instance).__name__}.{name}"
    return RecordError(f"{where}: expected {expected}, got {show_value(value)}", name)


def _is_str(instance: Any, attribute: attrs.Attribute[str], value: Any) -> None:
    if not isinstance(value, str):
        raise _refuse(instance, attribute.name, "str", value)


def _is_bool(instance: Any, attribute: attrs.Attribute[bool], value: Any) -> None:
    if not isinstance(value, bool):
        raise _refuse(instance, attribute.name, "bool", value)


def _in_range(low: int, high: int, expected: str) -> Any:
    def check(instance: Any, attribute: attrs.Attribute[int], value: Any) -> None:
        if isinstance(value, bool) or not isinstance(value, int):
            raise _refuse(instance, attribute.name, expected, value)
        if not low <= value <= high:
            bound = f">= {low}" if value < low else f"<= {high_text}"
            raise RecordError(
                f"{type(instance).__name__}.{attribute.name} must be {bound}, got {show_value(value)}",
                attribute.name,
            )

    high_text = "2**64-1" if high == 2**64 - 1 else str(high)
    return check


#: Validator of a byte count: an int (not a bool) in 0..2**64-1.
is_bytes = _in_range(0, MAX_BYTES, "an int of bytes in 0..2**64-1")
#: Validator of a number field: an int (not a bool) that 64 bits hold.
is_int64 = _in_range(*_INT64, "an int in -2**63..2**64-1")


def _library_path(value: Any) -> tuple[str, ...]:
    return _str_tuple(value, "library_path")


def _notes(value: Any) -> tuple[str, ...]:
    return _str_tuple(value, "notes")


def _str_tuple(value: Any, name: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        # A lone string is one path, not a sequence of one-character paths.
        return (value,)
    if isinstance(value, (bytes, Mapping)) or not isinstance(value, Iterable):
        raise _refuse(None, name, "a sequence of str", value, f"DeviceInfo.{name}")
    items = tuple(value)
    bad = next((i for i, v in enumerate(items) if not isinstance(v, str)), None)
    if bad is not None:
        raise _refuse(None, name, "str", items[bad], f"DeviceInfo.{name}[{bad}]")
    return items


def _str_dict(value: Any) -> Mapping[str, str]:
    # A private, read-only copy: a frozen record must not change under whoever holds it.
    if not value:
        if value is None or isinstance(value, Mapping):
            return types.MappingProxyType({})
    if not isinstance(value, Mapping):
        raise _refuse(
            None, "runner_env_overrides", "a mapping of str to str", value, "DeviceInfo.runner_env_overrides"
        )
    copy = dict(value)
    odd = next(((k, v) for k, v in copy.items() if not isinstance(k, str) or not isinstance(v, str)), None)
    if odd is not None:
        raise RecordError(
            f"DeviceInfo.runner_env_overrides: expected a mapping of str to str, "
            f"got {show_value(odd[0])} -> {show_value(odd[1])}",
            "runner_env_overrides",
        )
    return types.MappingProxyType(copy)


def _text(default: str = "") -> Any:
    return attrs.field(default=default, validator=_is_str)


def _flag() -> Any:
    return attrs.field(default=False, validator=_is_bool)


def _bytes() -> Any:
    return attrs.field(default=0, validator=is_bytes)


def _number() -> Any:
    return attrs.field(default=0, validator=is_int64)


@attrs.frozen(order=True)
class DeviceID:
    """Minimal identity of a device: its ``id`` is unique only among devices of one ``library``."""

    id: str = _text()
    library: str = _text()


#: Fastest PCIe link speed accepted, GT/s (PCIe 7.0 is 128).
MAX_LINK_SPEED = 1024.0
#: Widest PCIe link accepted (the Link Status register's width field has 6 bits).
MAX_LINK_WIDTH = 64
#: Highest NUMA node number accepted (Linux's MAX_NUMNODES is at most 1024).
MAX_NUMA_NODE = 65535
#: Most peers one device may list (an NVL72 rack has 71 per GPU).
MAX_PEERS = 1024
#: What a peer link's kind looks like: a short lower-case word (``nvlink``, ``xgmi``).
LINK_KIND = re.compile(r"[a-z0-9][a-z0-9_.-]{0,31}", re.ASCII)


def _link_speed(instance: Any, attribute: attrs.Attribute[float], value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _refuse(instance, attribute.name, "a number of GT/s", value)
    if not 0 <= value <= MAX_LINK_SPEED:  # NaN fails this too
        raise _refuse(instance, attribute.name, f"GT/s in 0..{MAX_LINK_SPEED:g} (0 = unknown)", value)


def _speed(value: Any) -> Any:
    # An int speed (8) is the float 8.0; anything else is left for the validator to refuse.
    return float(value) if isinstance(value, int) and not isinstance(value, bool) else value


@attrs.frozen
class PcieLink:
    """A device's PCIe link as the kernel reports it: the current and the maximum speed (GT/s,
    the kernel's ``current_link_speed``/``max_link_speed``: 2.5, 5.0, 8.0, 16.0, 32.0, 64.0)
    and width (lanes, ``current_link_width``/``max_link_width``). 0 is "unknown" for each.
    Wire keys ``speed``, ``width``, ``max_speed``, ``max_width``, each left out when unknown.
    """

    speed: float = attrs.field(default=0.0, converter=_speed, validator=_link_speed)
    width: int = attrs.field(
        default=0, validator=_in_range(0, MAX_LINK_WIDTH, f"lanes in 0..{MAX_LINK_WIDTH}")
    )
    max_speed: float = attrs.field(default=0.0, converter=_speed, validator=_link_speed)
    max_width: int = attrs.field(
        default=0, validator=_in_range(0, MAX_LINK_WIDTH, f"lanes in 0..{MAX_LINK_WIDTH}")
    )

    @property
    def known(self) -> bool:
        """Whether any part of the link is known."""
        return bool(self.speed or self.width or self.max_speed or self.max_width)


def _link_kind(instance: Any, attribute: attrs.Attribute[str], value: Any) -> None:
    if not isinstance(value, str) or LINK_KIND.fullmatch(value) is None:
        raise _refuse(instance, attribute.name, "a link kind such as 'nvlink' ([a-z0-9_.-], 1-32)", value)


@attrs.frozen(order=True)
class PeerLink:
    """A direct link from a device to another device of the same discovery: the peer's ``id``
    and ``library`` (wire key ``backend``) and the kind of ``link`` (``nvlink``, ``xgmi``)."""

    id: str = _text()
    library: str = _text()
    link: str = attrs.field(default="", validator=_link_kind)


def _peers(value: Any) -> tuple[PeerLink, ...]:
    if value is None:
        return ()
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise _refuse(None, "peers", "a sequence of PeerLink", value, "DeviceInfo.peers")
    items = tuple(value)
    bad = next((i for i, v in enumerate(items) if not isinstance(v, PeerLink)), None)
    if bad is not None:
        raise _refuse(None, "peers", "PeerLink", items[bad], f"DeviceInfo.peers[{bad}]")
    if len(items) > MAX_PEERS:
        raise RecordError(f"DeviceInfo.peers: {len(items)} peers, at most {MAX_PEERS} allowed", "peers")
    return items


def _local_cpus(instance: Any, attribute: attrs.Attribute[str], value: Any) -> None:
    if not isinstance(value, str):
        raise _refuse(instance, attribute.name, "str", value)
    if not is_cpulist(value) or value != value.strip():
        raise _refuse(
            instance, attribute.name, "a CPU list in the kernel's form ('0-3,8-11', '5', '')", value
        )


def _pcie_link(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and not isinstance(value, PcieLink):
        raise _refuse(instance, attribute.name, "a PcieLink or None", value)


@attrs.frozen
class DeviceInfo:
    """One device as one library reports it (the seed's DeviceInfo, fields in snake_case).

    Extra fields of gpuscout's own (``uuid``, ``free_memory_unknown``, ``software``,
    ``free_memory_stale``, ``unused_reason``, ``max_allocation``, ``hidden_by``, ``notes``, and the
    topology: ``numa_node``, ``local_cpus``, ``pcie_link``, ``peers``) default to empty (-1 for
    ``numa_node``, since node 0 is a node) and are left out of the wire format when empty.
    """

    id: str = _text()
    library: str = _text()
    name: str = _text()
    description: str = _text()
    filter_id: str = _text()
    integrated: bool = _flag()
    pci_id: str = _text()
    total_memory: int = _bytes()
    free_memory: int = _bytes()
    compute_major: int = _number()
    compute_minor: int = _number()
    driver_major: int = _number()
    driver_minor: int = _number()
    nvidia_driver_major: int = _number()
    gfx_target: str = _text()
    library_path: tuple[str, ...] = attrs.field(default=(), converter=_library_path)
    # Compared, but not hashed: a dict has no hash and the overrides never identify a device.
    runner_env_overrides: Mapping[str, str] = attrs.field(factory=dict, converter=_str_dict, hash=False)
    #: Vendor UUID in the vendor's own spelling, for matching across processes and libraries.
    uuid: str = _text()
    #: True when the library could not say how much memory is free (free_memory is then a guess).
    free_memory_unknown: bool = _flag()
    #: True for software renderers (a CPU posing as a GPU, e.g. llvmpipe).
    software: bool = _flag()
    #: True when ``Scout.refresh`` could not bring free_memory up to date (no plugin refreshed
    #: the device): free_memory is then the previous value, not a fresh reading.
    free_memory_stale: bool = _flag()
    #: Why the runtime in a child would not use this device unless it is selected ("" = it
    #: would): outside ggml-vulkan's default device set, not Metal's system default device.
    #: Such devices rank after the others.
    unused_reason: str = _text()
    #: Largest single buffer or tensor, in bytes, that the device's runtime can allocate (0 =
    #: unknown). ggml leaves a tensor or buffer larger than this on the CPU, with the ops that
    #: use it (Vulkan: maxStorageBufferRange, 128 MiB on lavapipe).
    max_allocation: int = _bytes()
    #: What hides the device from its own library in the Scout's environment ("" = nothing):
    #: the visibility variable as ``NAME=value`` (``CUDA_VISIBLE_DEVICES=0``), see
    #: ``gpuscout.plugin.visibility_setting``. A plugin reports hidden devices too, so that the
    #: merge can match their twins in other libraries (the Vulkan view of a card CUDA hides) and
    #: drop them with it; ``discover`` never ranks, selects or hands a hidden device to a child.
    hidden_by: str = _text()
    #: What a user should know about this device, one sentence each, in the order found: how
    #: the plugin read it ("WSL2: ..."), a fault it shows ("running at PCIe Gen3 x4 of Gen5
    #: x16"), which budget applies. ``list`` and ``--explain`` show them.
    notes: tuple[str, ...] = attrs.field(default=(), converter=_notes)
    #: The NUMA node the device is attached to (the kernel's ``numa_node``), -1 when unknown.
    numa_node: int = attrs.field(
        default=-1, validator=_in_range(-1, MAX_NUMA_NODE, f"a NUMA node in -1..{MAX_NUMA_NODE}")
    )
    #: The CPUs close to the device, in the kernel's list form (``0-31,64-95``); "" = unknown.
    local_cpus: str = attrs.field(default="", validator=_local_cpus)
    #: The device's PCIe link (current and maximum speed and width), None when unknown.
    pcie_link: PcieLink | None = attrs.field(default=None, validator=_pcie_link)
    #: Direct links to other devices of the same discovery (NVLink, xGMI), each once.
    peers: tuple[PeerLink, ...] = attrs.field(default=(), converter=_peers)

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
    """System memory in bytes; zeros where the machine did not say."""

    total_memory: int = _bytes()
    free_memory: int = _bytes()
    free_swap: int = _bytes()


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
_BOOL_FIELDS = ("integrated", "free_memory_unknown", "software", "free_memory_stale")
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
