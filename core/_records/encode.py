"""Writing the JSON wire format (the keys Ollama's runner uses in its ``/info`` reply), without
cattrs: ``gpuscout list --json`` and a runner's reply need no converter, and importing cattrs
and generating one cost a fifth of the command's start-up.

The key tables here are the wire format's one statement: ``gpuscout._records.decode`` reads with the same
tables (through cattrs, for its strict types and error paths).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import attrs

from gpuscout._records.device import DeviceID, DeviceInfo, SystemInfo
from gpuscout._records.fields import PcieLink, PeerLink
from gpuscout._records.layers import GPULayers
from gpuscout._records.memory import BackendMemory, DeviceMemory
from gpuscout._records.results import Discovery, Dropped, PluginReport
from gpuscout.errors import GpuscoutError

#: Python field -> wire key, per wire record; fields not named keep their name.
KEYS: dict[type, dict[str, str]] = {
    DeviceID: {"library": "backend"},
    DeviceInfo: {
        "library": "backend",
        "integrated": "integration",
        "compute_major": "ComputeMajor",
        "compute_minor": "ComputeMinor",
        "library_path": "LibraryPath",
    },
    SystemInfo: {},
    PcieLink: {},
    PeerLink: {"library": "backend"},
    DeviceMemory: {
        "library": "backend",
        "name": "Name",
        "weights": "Weights",
        "cache": "Cache",
        "graph": "Graph",
    },
    BackendMemory: {"input_weights": "InputWeights", "cpu": "CPU", "gpus": "GPUs"},
    GPULayers: {"library": "backend", "layers": "Layers"},
}
#: Fields left out when they hold their default (the seed's ``omitempty``).
OMIT_IF_EMPTY: dict[type, frozenset[str]] = {
    DeviceID: frozenset({"library"}),
    DeviceInfo: frozenset(
        {
            "library",
            "filter_id",
            "integrated",
            "pci_id",
            "free_memory",
            "driver_major",
            "driver_minor",
            "gfx_target",
            "uuid",
            "free_memory_unknown",
            "software",
            "free_memory_stale",
            "unused_reason",
            "max_allocation",
            "hidden_by",
            "notes",
            "shared_memory",
            "usable_memory",
            "numa_node",
            "local_cpus",
            "pcie_link",
            "peers",
        }
    ),
    SystemInfo: frozenset({"total_memory", "free_memory", "free_swap", "notes"}),
    # A part of the link the kernel did not say (0) is left out.
    PcieLink: frozenset({"speed", "width", "max_speed", "max_width"}),
    PeerLink: frozenset(),
    DeviceMemory: frozenset({"library"}),
    BackendMemory: frozenset(),
    GPULayers: frozenset({"library"}),
}
#: Fields never on the wire (read back as their default).
NEVER: dict[type, frozenset[str]] = {
    DeviceInfo: frozenset({"runner_env_overrides", "nvidia_driver_major"}),
}
#: Sequences Go writes as null when empty.
NULL_IF_EMPTY = frozenset({"library_path", "weights", "cache", "layers", "gpus"})

# (field, wire key, omit when equal to this default or _KEEP, null when empty)
_Plan = list[tuple[str, str, Any, bool]]
_KEEP = object()
_PLANS: dict[type, _Plan] = {}


def _plan(cls: type) -> _Plan:
    plan = _PLANS.get(cls)
    if plan is None:
        keys, omit, never = KEYS[cls], OMIT_IF_EMPTY[cls], NEVER.get(cls, frozenset())
        plan = []
        for f in attrs.fields(cls):
            if f.name in never:
                continue
            default: Any = _KEEP
            if f.name in omit:
                factory = getattr(f.default, "factory", None)  # attrs.Factory
                default = factory() if factory is not None else f.default
            plan.append((f.name, keys.get(f.name, f.name), default, f.name in NULL_IF_EMPTY))
        _PLANS[cls] = plan
    return plan


def _record(obj: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, key, default, null_if_empty in _plan(type(obj)):
        value = getattr(obj, name)
        if default is not _KEEP and value == default:
            continue
        if null_if_empty:
            value = [unstructure(v) for v in value] if value else None
        elif type(value) in KEYS:
            value = _record(value)
        elif isinstance(value, tuple) and value and type(value[0]) in KEYS:
            value = [_record(v) for v in value]  # peers
        out[key] = value
    return out


def _discovery(found: Discovery) -> dict[str, Any]:
    """The ``gpuscout list --json`` document."""
    return {
        "devices": [_record(d) for d in found.devices],
        "dropped": [_dropped(d) for d in found.dropped],
        # All three keys always, so readers need no defaults (a bare SystemInfo on the wire
        # omits zeros, as the seed does).
        "system": {
            "total_memory": found.system.total_memory,
            "free_memory": found.system.free_memory,
            "free_swap": found.system.free_swap,
            # What the figures are (WSL2's VM, macOS's VM statistics), only when said.
            **({"notes": list(found.system.notes)} if found.system.notes else {}),
        },
        "plugins": [_report(r) for r in found.plugins],
    }


def _dropped(drop: Dropped) -> dict[str, Any]:
    return {
        "device": _record(drop.device),
        "reason": drop.reason,
        "duplicate_of": None if drop.duplicate_of is None else _record(drop.duplicate_of),
    }


def _report(r: PluginReport) -> dict[str, Any]:
    return {
        "name": r.name,
        "version": r.version,
        "distribution": r.distribution,
        "hooks": list(r.hooks),
        "status": str(r.status),
        "error": r.error,
        "note": r.note,
        "devices": r.devices,
        "elapsed_ms": round(r.elapsed * 1000, 3),
    }


_SPECIAL: dict[type, Callable[[Any], dict[str, Any]]] = {
    Discovery: _discovery,
    Dropped: _dropped,
    PluginReport: _report,
}


def unstructure(obj: Any) -> Any:
    """``obj`` (a record, or a list of records) as plain JSON-ready values, keys in field order."""
    if isinstance(obj, (list, tuple)):
        return [unstructure(o) for o in obj]
    special = _SPECIAL.get(type(obj))
    if special is not None:
        return special(obj)
    if type(obj) in KEYS:
        return _record(obj)
    return obj


def to_json(obj: Any, indent: int | None = None) -> str:
    """Serialize a record, or a list of records, to JSON with the wire keys, in a fixed order.

    A Discovery becomes the ``gpuscout list --json`` document.
    """
    separators = (",", ":") if indent is None else (",", ": ")
    return dumps(unstructure(obj), indent=indent, separators=separators)


def dumps(data: Any, **options: Any) -> str:
    """``json.dumps`` that writes only JSON: a NaN or infinite float (which Python would write
    as the non-JSON token ``NaN``) raises GpuscoutError instead, as does a value JSON has no
    form for (an object that is no record, a set)."""
    try:
        return json.dumps(data, allow_nan=False, **options)
    except (ValueError, TypeError) as exc:
        raise GpuscoutError(f"cannot write JSON: {exc}") from None


__all__ = ["KEYS", "NEVER", "NULL_IF_EMPTY", "OMIT_IF_EMPTY", "dumps", "to_json", "unstructure"]
