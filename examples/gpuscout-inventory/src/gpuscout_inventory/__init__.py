"""gpuscout-inventory: devices read from an inventory file instead of a driver.

For air-gapped fleets (the inventory is what the asset database says), CI machines without
accelerators, and testing a host application against a machine it does not have. The file is
named by ``GPUSCOUT_INVENTORY`` (JSON ``.json`` or TOML ``.toml``; format: ``fileformat``), the
devices a process sees by ``GPUSCOUT_INVENTORY_VISIBLE_DEVICES`` (``visibility``), which
``gpuscout env`` and ``gpuscout exec`` write for a selection.

Written exactly as a third party writes a plugin: it imports only ``gpuscout.plugin`` and the
standard library, and is found through its ``gpuscout`` entry point. Importing it is cheap (the
file format is loaded when there is a file to read), since every discovery imports every plugin.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from gpuscout.plugin import Context, DeviceInfo, EnvEntry, devices_of, for_library, get_logger, hookimpl
from gpuscout_inventory.rules import RuleBook
from gpuscout_inventory.visibility import visible_indices

if TYPE_CHECKING:
    from gpuscout_inventory.fileformat import Entry

#: The hook API this plugin was written for.
GPUSCOUT_API_VERSION = 1

#: The library of every device the file does not give another one.
LIBRARY = "Inventory"
#: The variable naming the inventory file (an absolute path, read under the Scout's root).
INVENTORY_ENV = "GPUSCOUT_INVENTORY"
#: The variable listing the devices a process sees (unset: all; empty: none).
VISIBLE_ENV = "GPUSCOUT_INVENTORY_VISIBLE_DEVICES"

#: What the last enumerate read for the rule hooks, which see a device and nothing else.
RULES = RuleBook()


def read_inventory(context: Context) -> list[Entry] | None:
    """Every entry of the file ``GPUSCOUT_INVENTORY`` names, or None (with a note) when the
    variable is unset or the file cannot be used. Never raises."""
    path = context.env.get(INVENTORY_ENV)
    if path is None or not path.strip():
        state = "not set" if path is None else "empty"
        context.note(
            f"{INVENTORY_ENV} is {state}: set it to the absolute path of a .json or "
            f".toml inventory file (read under the root {context.root!r}) to report "
            "its devices"
        )
        return None
    from gpuscout_inventory.fileformat import InventoryError

    try:
        return _load(context, path)
    except InventoryError as error:
        context.note(f"{INVENTORY_ENV}={path}: {error}; no device read from this file")
        get_logger(plugin=context.plugin).warning(
            "inventory.file_rejected", path=path, device=error.index, key=error.key, problem=error.problem
        )
        return None


def _load(context: Context, path: str) -> list[Entry]:
    from gpuscout_inventory.fileformat import KINDS, InventoryError, kind_of, parse_inventory

    where = f"the root {context.root!r}"
    if not os.path.isabs(path):
        raise InventoryError(
            f"{INVENTORY_ENV} must be an absolute path: files are read under "
            f"{where}, not the working directory"
        )
    kind = kind_of(path)
    if kind is None:
        raise InventoryError(f"expected a file ending in {' or '.join(KINDS)}")
    text = context.read_text(path)
    if text is None:
        raise InventoryError(
            f"cannot read it under {where} (missing, unreadable, not a "
            "regular file, too large, or out of time)"
        )
    return parse_inventory(text, kind, LIBRARY)


@hookimpl
def gpuscout_enumerate(context: Context) -> list[DeviceInfo]:
    """The devices of the inventory file that ``GPUSCOUT_INVENTORY_VISIBLE_DEVICES`` shows."""
    entries = read_inventory(context)
    if entries is None:
        return []
    if not entries:
        context.note(f"{INVENTORY_ENV}={context.env[INVENTORY_ENV]} lists no devices")
        return []
    shown, unknown = visible_indices(context.env.get(VISIBLE_ENV), [e.device for e in entries])
    if unknown:
        context.note(
            f"{VISIBLE_ENV}: {', '.join(repr(t) for t in unknown[:10])} named no "
            "device (expected an id, a filter_id or a 0-based index); ignored"
        )
    if not shown:
        context.note(
            f"{VISIBLE_ENV}={context.env.get(VISIBLE_ENV, '')!r} hides every device of the inventory"
        )
    for entry in entries:
        RULES.remember(entry.device, entry.flash_attention, entry.minimum_memory)
    return [entries[i].device for i in shown]


@hookimpl
def gpuscout_visible_env(selection: Sequence[DeviceInfo], context: Context) -> list[EnvEntry] | None:
    """``GPUSCOUT_INVENTORY_VISIBLE_DEVICES`` for every Inventory device of the selection,
    whatever else is selected (the filter_id, else the id)."""
    mine = devices_of(selection, LIBRARY)
    if not mine:
        return None
    return [EnvEntry(i, VISIBLE_ENV, d.filter_id or d.id) for i, d in mine]


@hookimpl
def gpuscout_isolate_env(
    selection: Sequence[DeviceInfo], env: Mapping[str, str], context: Context
) -> dict[str, str] | None:
    """Hide every Inventory device when none is selected (the empty list shows none)."""
    return None if devices_of(selection, LIBRARY) else {VISIBLE_ENV: ""}


@for_library(LIBRARY)
def gpuscout_flash_attention(device: DeviceInfo) -> bool | None:
    """The device's ``flash_attention`` key; None without one (the core then says no)."""
    return RULES.flash_attention(device)


@for_library(LIBRARY)
def gpuscout_minimum_memory(device: DeviceInfo) -> int | None:
    """The device's ``minimum_memory`` key in bytes; None without one (the core's 457 MiB)."""
    return RULES.minimum_memory(device)


@for_library(LIBRARY)
def gpuscout_refresh(devices: Sequence[DeviceInfo], context: Context) -> list[DeviceInfo] | None:
    """The Inventory devices among ``devices`` with free memory read again from the file (the
    way to simulate memory pressure); None when the file cannot be read now."""
    entries = read_inventory(context)
    if entries is None:
        return None
    free = {e.device.id: e.device for e in entries if e.device.library == LIBRARY}
    return [
        d.evolve(free_memory=free[d.id].free_memory, free_memory_unknown=free[d.id].free_memory_unknown)
        for _, d in devices_of(devices, LIBRARY)
        if d.id in free
    ]


__all__ = ["GPUSCOUT_API_VERSION", "INVENTORY_ENV", "LIBRARY", "RULES", "VISIBLE_ENV", "read_inventory"]
