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

from gpuscout.errors import GpuscoutError

#: The library name the seed uses for the CPU in its rules (flash attention).
CPU_LIBRARY = "cpu"


def _non_negative(instance: Any, attribute: attrs.Attribute[int], value: int) -> None:
    if value < 0:
        raise ValueError(f"{type(instance).__name__}.{attribute.name} must be >= 0, got {value}")


def _str_tuple(value: Iterable[str] | None) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        # A lone string is one path, not a sequence of one-character paths.
        return (value,)
    return tuple(value)


def _str_dict(value: Mapping[str, str] | None) -> Mapping[str, str]:
    # A private, read-only copy: a frozen record must not change under whoever holds it.
    return types.MappingProxyType(dict(value) if value else {})


@attrs.frozen(order=True)
class DeviceID:
    """Minimal identity of a device: its ``id`` is unique only among devices of one ``library``."""

    id: str = ""
    library: str = ""


@attrs.frozen
class DeviceInfo:
    """One device as one library reports it (the seed's DeviceInfo, fields in snake_case).

    Extra fields of gpuscout's own (``uuid``, ``free_memory_unknown``, ``software``,
    ``free_memory_stale``, ``unused_reason``, ``max_allocation``, ``hidden_by``) default to
    empty and are left out of the wire format when empty.
    """

    id: str = ""
    library: str = ""
    name: str = ""
    description: str = ""
    filter_id: str = ""
    integrated: bool = False
    pci_id: str = ""
    total_memory: int = attrs.field(default=0, validator=_non_negative)
    free_memory: int = attrs.field(default=0, validator=_non_negative)
    compute_major: int = 0
    compute_minor: int = 0
    driver_major: int = 0
    driver_minor: int = 0
    nvidia_driver_major: int = 0
    gfx_target: str = ""
    library_path: tuple[str, ...] = attrs.field(default=(), converter=_str_tuple)
    # Compared, but not hashed: a dict has no hash and the overrides never identify a device.
    runner_env_overrides: Mapping[str, str] = attrs.field(
        factory=dict, converter=_str_dict, hash=False
    )
    #: Vendor UUID in the vendor's own spelling, for matching across processes and libraries.
    uuid: str = ""
    #: True when the library could not say how much memory is free (free_memory is then a guess).
    free_memory_unknown: bool = False
    #: True for software renderers (a CPU posing as a GPU, e.g. llvmpipe).
    software: bool = False
    #: True when ``Scout.refresh`` could not bring free_memory up to date (no plugin refreshed
    #: the device): free_memory is then the previous value, not a fresh reading.
    free_memory_stale: bool = False
    #: Why the runtime in a child would not use this device unless it is selected ("" = it
    #: would): outside ggml-vulkan's default device set, not Metal's system default device.
    #: Such devices rank after the others.
    unused_reason: str = ""
    #: Largest single buffer or tensor, in bytes, that the device's runtime can allocate (0 =
    #: unknown). ggml leaves a tensor or buffer larger than this on the CPU, with the ops that
    #: use it (Vulkan: maxStorageBufferRange, 128 MiB on lavapipe).
    max_allocation: int = attrs.field(default=0, validator=_non_negative)
    #: What hides the device from its own library in the Scout's environment ("" = nothing):
    #: the visibility variable as ``NAME=value`` (``CUDA_VISIBLE_DEVICES=0``), see
    #: ``gpuscout.plugin.visibility_setting``. A plugin reports hidden devices too, so that the
    #: merge can match their twins in other libraries (the Vulkan view of a card CUDA hides) and
    #: drop them with it; ``discover`` never ranks, selects or hands a hidden device to a child.
    hidden_by: str = ""

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

    total_memory: int = attrs.field(default=0, validator=_non_negative)
    free_memory: int = attrs.field(default=0, validator=_non_negative)
    free_swap: int = attrs.field(default=0, validator=_non_negative)


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


class RecordError(GpuscoutError):
    """A record from a plugin that the core cannot use; the message names the field and value."""


#: Largest magnitude of a number field: the wire format is Go's int64/uint64.
_INT_LIMIT = 2**63
_PCI_ID = re.compile(r"[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]", re.ASCII | re.IGNORECASE)
_STR_FIELDS = ("id", "library", "name", "description", "filter_id", "pci_id", "gfx_target", "uuid",
               "unused_reason", "hidden_by")
_BOOL_FIELDS = ("integrated", "free_memory_unknown", "software", "free_memory_stale")
_SIZE_FIELDS = ("total_memory", "free_memory", "max_allocation")
_INT_FIELDS = ("compute_major", "compute_minor", "driver_major", "driver_minor",
               "nvidia_driver_major")
#: Longest text field accepted (a description is a line, not a document).
_MAX_TEXT = 4096


def _plain_str(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise RecordError(f"{where}: expected str, got {_show(value)}")
    if len(value) > _MAX_TEXT:
        raise RecordError(f"{where}: text of {len(value)} characters, at most {_MAX_TEXT} allowed")
    return str.__str__(value)


def _plain_int(value: Any, where: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise RecordError(f"{where}: expected int, got {_show(value)}")
    if not minimum <= value < _INT_LIMIT:
        shown = f"{value}" if abs(value) < 10**30 else f"a {len(str(abs(value)))}-digit number" \
            if value.bit_length() < 10000 else "a number of over 3000 digits"
        raise RecordError(f"{where}: expected an int in {minimum}..2**63-1, got {shown}")
    return int.__index__(value)


def _show(value: Any) -> str:
    try:
        return f"{value!r:.60}"
    except Exception:
        return f"a {type(value).__name__} that cannot be printed"


def check_device(value: Any, where: str = "") -> DeviceInfo:
    """``value`` as a plain DeviceInfo whose every field has the right type and range.

    Used at the border, on every record a plugin returns: a subclass, a str subclass or a
    mutable mapping is copied into plain values, so nothing a plugin handed over can change later.
    Raises RecordError naming the field and the value (``[0].pci_id: expected str, got 1234``).
    """
    if not isinstance(value, DeviceInfo):
        raise RecordError(f"{where or '$'}: expected DeviceInfo, got {_show(value)}")
    fields: dict[str, Any] = {}
    for name in _STR_FIELDS:
        fields[name] = _plain_str(getattr(value, name), f"{where}.{name}")
    for name in _BOOL_FIELDS:
        flag = getattr(value, name)
        if not isinstance(flag, bool):
            raise RecordError(f"{where}.{name}: expected bool, got {_show(flag)}")
        fields[name] = bool(flag)
    for name in _SIZE_FIELDS:
        fields[name] = _plain_int(getattr(value, name), f"{where}.{name}", 0)
    for name in _INT_FIELDS:
        fields[name] = _plain_int(getattr(value, name), f"{where}.{name}", -_INT_LIMIT)
    if fields["pci_id"] and not _PCI_ID.fullmatch(fields["pci_id"]):
        raise RecordError(f"{where}.pci_id: expected a PCI id like 0000:c4:00.0, "
                          f"got {_show(fields['pci_id'])}")
    paths = value.library_path
    if not isinstance(paths, tuple):
        raise RecordError(f"{where}.library_path: expected a sequence of str, got {_show(paths)}")
    fields["library_path"] = tuple(
        _plain_str(p, f"{where}.library_path[{i}]") for i, p in enumerate(paths))
    overrides = value.runner_env_overrides
    if not isinstance(overrides, Mapping):
        raise RecordError(f"{where}.runner_env_overrides: expected a mapping, got {_show(overrides)}")
    fields["runner_env_overrides"] = {
        _plain_str(k, f"{where}.runner_env_overrides key"):
        _plain_str(v, f"{where}.runner_env_overrides[{k!r:.40}]") for k, v in overrides.items()
    }
    return DeviceInfo(**fields)


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
    bad = next((d for d in items if not isinstance(d, DeviceInfo)), None)
    if bad is not None:
        raise GpuscoutError(f"{where}: expected a list of DeviceInfo, found a {type(bad).__name__}")
    return items

