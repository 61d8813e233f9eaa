"""The inventory file format: JSON or TOML text -> device records, or the first problem found.

Pure functions over text, so a test feeds a string and checks the records or the message. The
format is a top-level ``devices`` list of tables (objects) whose keys are ``DeviceInfo`` field
names, plus two rule keys of this plugin (``flash_attention``, ``minimum_memory``)::

    [[devices]]
    id = "card-a"
    name = "Test card"
    total_memory = "24GiB"        # or a whole number of bytes
    free_memory = 20_000_000_000
    flash_attention = true

Anything unexpected (an unknown key, a wrong type, negative memory, a duplicate id) rejects the
whole file with an ``InventoryError`` naming the device index and the key: half an inventory is
worse than none for a test that counts devices.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from gpuscout.plugin import DeviceInfo, GpuscoutError

#: The file kinds this plugin reads, by file name suffix (compared without case).
KINDS = {".json": "json", ".toml": "toml"}

#: The key of the device list; the only top-level key.
DEVICES_KEY = "devices"

# The DeviceInfo fields a file may set, by kind of value. Written out rather than read from the
# record class: the file format is documented and must not grow when gpuscout adds a field.
STR_FIELDS = ("id", "library", "name", "description", "filter_id", "pci_id", "gfx_target", "uuid")
BOOL_FIELDS = ("integrated", "free_memory_unknown", "software")
SIZE_FIELDS = ("total_memory", "free_memory")
INT_FIELDS = ("compute_major", "compute_minor", "driver_major", "driver_minor", "nvidia_driver_major")
LIST_FIELDS = ("library_path",)
TABLE_FIELDS = ("runner_env_overrides",)
#: Keys that are this plugin's rules for the device, not DeviceInfo fields.
RULE_KEYS = ("flash_attention", "minimum_memory")
KNOWN_KEYS = (*STR_FIELDS, *BOOL_FIELDS, *SIZE_FIELDS, *INT_FIELDS, *LIST_FIELDS, *TABLE_FIELDS, *RULE_KEYS)

#: Numbers travel as Go's int64 on the wire: anything from 2**63 on is refused here, so the core
#: never has to fail the plugin for it.
INT_LIMIT = 1 << 63
#: Longest text value (the core refuses longer ones).
MAX_TEXT = 4096

#: Binary units a memory string may carry (compared without case), in bytes.
UNITS = {"b": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40, "pib": 1 << 50}
_SIZE = re.compile(r"\s*([0-9]{1,20}(?:\.[0-9]{1,20})?)\s*([a-z]{1,3})\s*", re.ASCII | re.IGNORECASE)
_DECIMAL_UNITS = {"kb", "mb", "gb", "tb", "pb"}
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*", re.ASCII)
_PCI = re.compile(r"(?:([0-9a-f]{4,8}):)?([0-9a-f]{2}):([0-9a-f]{2})\.([0-7])", re.ASCII | re.IGNORECASE)


class InventoryError(GpuscoutError):
    """An inventory that cannot be used; ``index`` and ``key`` say where (None: the whole file)."""

    def __init__(self, problem: str, index: int | None = None, key: str | None = None) -> None:
        self.problem = problem
        self.index = index
        self.key = key
        where = [] if index is None else [f"device {index}"]
        if key is not None:
            where.append(f"key {key!r}")
        super().__init__(f"{', '.join(where)}: {problem}" if where else problem)


@dataclasses.dataclass(frozen=True)
class Entry:
    """One device of the file and this plugin's rules for it (None: the file does not say)."""

    device: DeviceInfo
    flash_attention: bool | None = None
    minimum_memory: int | None = None


def kind_of(path: str) -> str | None:
    """``"json"`` or ``"toml"`` by the suffix of ``path``, or None for anything else."""
    lower = path.lower()
    return next((kind for suffix, kind in KINDS.items() if lower.endswith(suffix)), None)


def load_document(text: str, kind: str) -> Any:
    """The parsed JSON or TOML document; InventoryError for text that is not one."""
    try:
        if kind == "toml":
            import tomllib  # about 7 ms, paid only by TOML inventories

            return tomllib.loads(text)
        if kind == "json":
            return json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_no_constant)
    except InventoryError:
        raise
    except (ValueError, RecursionError) as exc:  # JSONDecodeError and TOMLDecodeError included
        raise InventoryError(f"not valid {kind.upper()}: {str(exc)[:200]}") from None
    raise InventoryError(f"unknown file kind {kind!r}; expected json or toml")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # json keeps the last of two equal keys without a word; TOML refuses them, so JSON does too.
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise InventoryError(f"not valid JSON: key {key!r} appears twice in one object")
        out[key] = value
    return out


def _no_constant(name: str) -> Any:
    raise InventoryError(f"not valid JSON: {name} is not a JSON number")


def parse_inventory(text: str, kind: str, default_library: str) -> list[Entry]:
    """The entries of an inventory file's ``text`` (``kind`` json or toml), in file order.

    A device without ``library`` gets ``default_library`` (any case of that name is written as
    given here); one without ``id`` gets its 0-based index in the file. Raises InventoryError
    for the first problem.
    """
    document = load_document(text, kind)
    if not isinstance(document, dict):
        raise InventoryError(
            f"expected a top-level object with a {DEVICES_KEY!r} list, got {_kind(document)}"
        )
    extra = sorted(set(document) - {DEVICES_KEY})
    if extra:
        raise InventoryError(f"unknown top-level key {extra[0]!r}: the only one is {DEVICES_KEY!r}")
    if DEVICES_KEY not in document:
        raise InventoryError(f"no {DEVICES_KEY!r} list")
    items = document[DEVICES_KEY]
    if not isinstance(items, list):
        raise InventoryError(f"{DEVICES_KEY!r} must be a list of tables, got {_kind(items)}")
    entries = [_entry(i, item, default_library) for i, item in enumerate(items)]
    _check_unique(entries)
    return entries


def _entry(index: int, item: Any, default_library: str) -> Entry:
    if not isinstance(item, dict):
        raise InventoryError(f"expected a table of DeviceInfo fields, got {_kind(item)}", index)
    for key in item:
        if key not in KNOWN_KEYS:
            import difflib

            close = difflib.get_close_matches(str(key), KNOWN_KEYS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise InventoryError(
                f"unknown key{hint}; known keys: {', '.join(KNOWN_KEYS)}", index, str(key)[:80]
            )
    fields: dict[str, Any] = {}
    for key, value in item.items():
        if key in RULE_KEYS:
            continue
        fields[key] = _FIELD_READERS[_field_kind(key)](value, index, key)
    fields.setdefault("id", str(index))
    fields.setdefault("library", default_library)
    if fields["library"].lower() == default_library.lower():
        fields["library"] = default_library
    flash = _flag(item["flash_attention"], index, "flash_attention") if "flash_attention" in item else None
    reserve = _size(item["minimum_memory"], index, "minimum_memory") if "minimum_memory" in item else None
    return Entry(DeviceInfo(**fields), flash, reserve)


def _field_kind(key: str) -> str:
    for kind, names in (
        ("str", STR_FIELDS),
        ("bool", BOOL_FIELDS),
        ("size", SIZE_FIELDS),
        ("int", INT_FIELDS),
        ("list", LIST_FIELDS),
        ("table", TABLE_FIELDS),
    ):
        if key in names:
            return kind
    raise AssertionError(key)  # pragma: no cover - KNOWN_KEYS and the tables agree


def _text(value: Any, index: int, key: str) -> str:
    if not isinstance(value, str):
        raise InventoryError(f"expected a string, got {_show(value)}", index, key)
    if len(value) > MAX_TEXT:
        raise InventoryError(f"a string of {len(value)} characters, at most {MAX_TEXT}", index, key)
    if key in ("id", "filter_id"):
        # These become tokens of a comma list in an environment variable.
        if not value or value != value.strip() or "," in value or not value.isprintable():
            raise InventoryError(
                f"expected a non-empty printable string without commas or surrounding spaces "
                f"(it is written into a comma list), got {_show(value)}",
                index,
                key,
            )
    elif key == "library":
        if not value.strip():
            raise InventoryError("expected a library name, got an empty string", index, key)
    elif key == "pci_id" and value:
        return _pci_id(value, index, key)
    return value


def _pci_id(value: str, index: int, key: str) -> str:
    match = _PCI.fullmatch(value)
    if not match:
        raise InventoryError(f"expected a PCI id like '0000:c4:00.0', got {_show(value)}", index, key)
    domain, bus, device, function = match.groups()
    return f"{int(domain or '0', 16):04x}:{bus}:{device}.{function}".lower()


def _flag(value: Any, index: int, key: str) -> bool:
    if not isinstance(value, bool):
        raise InventoryError(f"expected true or false, got {_show(value)}", index, key)
    return value


def _number(value: Any, index: int, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InventoryError(f"expected a whole number, got {_show(value)}", index, key)
    if not -INT_LIMIT <= value < INT_LIMIT:
        raise InventoryError("a number out of the 64-bit range", index, key)
    return value


def _size(value: Any, index: int, key: str) -> int:
    """Bytes: a whole number, or a string with a binary unit (``"24GiB"``, ``"1.5 TiB"``)."""
    if isinstance(value, str):
        return _size_text(value, index, key)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InventoryError(
            f"expected a size in bytes (a whole number, or a string such as '24GiB'), got {_show(value)}",
            index,
            key,
        )
    if value < 0:
        raise InventoryError(f"memory must not be negative, got {value}", index, key)
    if value >= INT_LIMIT:
        raise InventoryError(f"{value} bytes is more than 2**63-1", index, key)
    return value


def _size_text(text: str, index: int, key: str) -> int:
    match = _SIZE.fullmatch(text) if len(text) <= 64 else None
    unit = match.group(2).lower() if match else ""
    if match is None or unit not in UNITS:
        if match is not None and unit in _DECIMAL_UNITS:
            hint = f"; {match.group(2)} is a decimal unit, use {match.group(2)[0].upper()}iB"
        elif text.strip().startswith("-"):
            hint = "; memory must not be negative"
        else:
            hint = ""
        raise InventoryError(
            f"expected a size such as '24GiB' (units B, KiB, MiB, GiB, TiB, PiB), got {_show(text)}{hint}",
            index,
            key,
        )
    from decimal import Decimal

    size = int(Decimal(match.group(1)) * UNITS[unit])  # a fraction of a byte is dropped
    if size >= INT_LIMIT:
        raise InventoryError(f"{text.strip()} is more than 2**63-1 bytes", index, key)
    return size


def _paths(value: Any, index: int, key: str) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise InventoryError(f"expected a list of strings, got {_show(value)}", index, key)
    return tuple(_text(v, index, f"{key}[{i}]") for i, v in enumerate(value))


def _table(value: Any, index: int, key: str) -> dict[str, str]:
    if not isinstance(value, dict):
        raise InventoryError(f"expected a table of strings, got {_show(value)}", index, key)
    out: dict[str, str] = {}
    for name, text in value.items():
        # These go into a child's environment, which takes no other names and no NUL.
        if not _ENV_NAME.fullmatch(name):
            raise InventoryError(f"{name[:60]!r} is not an environment variable name", index, key)
        out[name] = _text(text, index, f"{key}.{name}")
        if "\0" in out[name]:
            raise InventoryError("a value with a NUL character", index, f"{key}.{name}")
    return out


_FIELD_READERS: Mapping[str, Callable[[Any, int, str], Any]] = {
    "str": _text,
    "bool": _flag,
    "size": _size,
    "int": _number,
    "list": _paths,
    "table": _table,
}


def _check_unique(entries: list[Entry]) -> None:
    """Every id and filter id names one device: they are the tokens of the visibility list."""
    owner: dict[str, int] = {}
    for index, entry in enumerate(entries):
        device = entry.device
        for key, name in (("id", device.id), ("filter_id", device.filter_id)):
            first = owner.setdefault(name, index) if name else index
            if first != index:
                raise InventoryError(
                    f"{name!r} already names device {first} (every id and filter_id must name one device)",
                    index,
                    key,
                )


def _kind(value: Any) -> str:
    names = {
        dict: "a table",
        list: "a list",
        str: "a string",
        bool: "a boolean",
        int: "a number",
        float: "a number",
        type(None): "null",
    }
    return names.get(type(value), f"a {type(value).__name__}")


def _show(value: Any) -> str:
    text = repr(value) if isinstance(value, (str, int, float, bool)) else _kind(value)
    return text if len(text) <= 60 else text[:57] + "..."


__all__ = [
    "KINDS",
    "KNOWN_KEYS",
    "RULE_KEYS",
    "UNITS",
    "Entry",
    "InventoryError",
    "kind_of",
    "load_document",
    "parse_inventory",
]
