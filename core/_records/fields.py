"""What the records' fields accept: ``RecordError``, the validators, converters and field
makers the records in ``gpuscout._records.device`` are built with, and the two small records a
DeviceInfo holds (``PcieLink``, ``PeerLink``) with their limits."""

from __future__ import annotations

import re
import types
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from gpuscout._records.cpulist import is_cpulist
from gpuscout.errors import GpuscoutError


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


def in_range(low: int, high: int, expected: str) -> Any:
    """A validator of an int field (not a bool) in ``low..high``; ``expected`` says what the
    field holds, for the message."""

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
is_bytes = in_range(0, MAX_BYTES, "an int of bytes in 0..2**64-1")
#: Validator of a number field: an int (not a bool) that 64 bits hold.
is_int64 = in_range(*_INT64, "an int in -2**63..2**64-1")


def as_library_path(value: Any) -> tuple[str, ...]:
    """Converter of ``DeviceInfo.library_path``: a tuple of str (a lone str is one path)."""
    return _str_tuple(value, "library_path")


def as_notes(value: Any) -> tuple[str, ...]:
    """Converter of a record's ``notes``: a tuple of str."""
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


def as_env_overrides(value: Any) -> Mapping[str, str]:
    """Converter of ``DeviceInfo.runner_env_overrides``: a read-only mapping of str to str."""
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


def text_field(default: str = "") -> Any:
    """A str field, "" unless ``default`` says otherwise."""
    return attrs.field(default=default, validator=_is_str)


def flag_field() -> Any:
    """A bool field, False by default."""
    return attrs.field(default=False, validator=_is_bool)


def bytes_field() -> Any:
    """A byte-count field (0..2**64-1), 0 by default."""
    return attrs.field(default=0, validator=is_bytes)


def number_field() -> Any:
    """A number field (what 64 bits hold), 0 by default."""
    return attrs.field(default=0, validator=is_int64)


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
        default=0, validator=in_range(0, MAX_LINK_WIDTH, f"lanes in 0..{MAX_LINK_WIDTH}")
    )
    max_speed: float = attrs.field(default=0.0, converter=_speed, validator=_link_speed)
    max_width: int = attrs.field(
        default=0, validator=in_range(0, MAX_LINK_WIDTH, f"lanes in 0..{MAX_LINK_WIDTH}")
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

    id: str = text_field()
    library: str = text_field()
    link: str = attrs.field(default="", validator=_link_kind)


def as_peers(value: Any) -> tuple[PeerLink, ...]:
    """Converter of ``DeviceInfo.peers``: a tuple of at most ``MAX_PEERS`` PeerLink."""
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


def is_local_cpus(instance: Any, attribute: attrs.Attribute[str], value: Any) -> None:
    """Validator of ``DeviceInfo.local_cpus``: a CPU list in the kernel's form, or ""."""
    if not isinstance(value, str):
        raise _refuse(instance, attribute.name, "str", value)
    if not is_cpulist(value) or value != value.strip():
        raise _refuse(
            instance, attribute.name, "a CPU list in the kernel's form ('0-3,8-11', '5', '')", value
        )


def is_pcie_link(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    """Validator of ``DeviceInfo.pcie_link``: a PcieLink or None."""
    if value is not None and not isinstance(value, PcieLink):
        raise _refuse(instance, attribute.name, "a PcieLink or None", value)
