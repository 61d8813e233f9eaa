"""Device records: the seed's DeviceID, DeviceInfo, SystemInfo and the comparison enums.

Records are frozen attrs classes. Fields default to Go's zero values, so any record the seed can
express can be built here by keyword, and the wire format (``gpuscout.wire``) round-trips them.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

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


def _str_dict(value: Mapping[str, str] | None) -> dict[str, str]:
    return dict(value) if value else {}


@attrs.frozen(order=True)
class DeviceID:
    """Minimal identity of a device: its ``id`` is unique only among devices of one ``library``."""

    id: str = ""
    library: str = ""


@attrs.frozen
class DeviceInfo:
    """One device as one library reports it (the seed's DeviceInfo, fields in snake_case).

    Extra fields of gpuscout's own (``uuid``, ``free_memory_unknown``, ``software``) default to empty
    and are left out of the wire format when empty.
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
    runner_env_overrides: dict[str, str] = attrs.field(
        factory=dict, converter=_str_dict, hash=False
    )
    #: Vendor UUID in the vendor's own spelling, for matching across processes and libraries.
    uuid: str = ""
    #: True when the library could not say how much memory is free (free_memory is then a guess).
    free_memory_unknown: bool = False
    #: True for software renderers (a CPU posing as a GPU, e.g. llvmpipe).
    software: bool = False

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
