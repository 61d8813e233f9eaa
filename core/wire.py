"""JSON wire format: the same keys Ollama's runner uses in its ``/info`` reply.

One cattrs converter, built by ``make_converter()`` with explicit per-field key renames and
omit-when-empty rules. Reading is strict about types (``"5"`` is not an int) and lenient about
absence (a missing key or ``null`` reads as the field's default, as Go's decoder does); unknown keys
are ignored so newer runners stay readable.
"""

from __future__ import annotations

import functools
import json
import operator
from collections.abc import Mapping
from functools import cache
from typing import Any, TypeVar, get_args, get_origin

import attrs
import cattrs
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from gpuscout.errors import GpuscoutError
from gpuscout.host import PluginReport
from gpuscout.layers import GPULayers, GPULayersList
from gpuscout.memory import BackendMemory, DeviceMemory
from gpuscout.merge import Dropped
from gpuscout.records import DeviceID, DeviceInfo, SystemInfo
from gpuscout.scout import Discovery

T = TypeVar("T")

# Python field -> wire key; fields not named keep their name. "omit" fields are never written.
_KEYS: dict[type, dict[str, str]] = {
    DeviceID: {"library": "backend"},
    DeviceInfo: {
        "library": "backend", "integrated": "integration", "compute_major": "ComputeMajor",
        "compute_minor": "ComputeMinor", "library_path": "LibraryPath",
    },
    SystemInfo: {},
    DeviceMemory: {"library": "backend", "name": "Name", "weights": "Weights",
                   "cache": "Cache", "graph": "Graph"},
    BackendMemory: {"input_weights": "InputWeights", "cpu": "CPU", "gpus": "GPUs"},
    GPULayers: {"library": "backend", "layers": "Layers"},
}
_OMIT_IF_EMPTY: dict[type, set[str]] = {
    DeviceID: {"library"},
    DeviceInfo: {"library", "filter_id", "integrated", "pci_id", "free_memory", "driver_major",
                 "driver_minor", "gfx_target", "uuid", "free_memory_unknown", "software"},
    SystemInfo: {"total_memory", "free_memory", "free_swap"},
    DeviceMemory: {"library"},
    BackendMemory: set(),
    GPULayers: {"library"},
}
_NEVER: dict[type, set[str]] = {DeviceInfo: {"runner_env_overrides", "nvidia_driver_major"}}
# Sequences Go writes as null when empty.
_NULL_IF_EMPTY = {"library_path", "weights", "cache", "layers", "gpus"}


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _strict_int(value: Any, _: type) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"expected int, got {value!r}")
    return value


def _strict_str(value: Any, _: type) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected str, got {value!r}")
    return value


def _strict_bool(value: Any, _: type) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"expected bool, got {value!r}")
    return value


def _sequence_hook(conv: cattrs.Converter, item: type, wrap: Any) -> Any:
    def structure(value: Any, cls: type) -> Any:
        return wrap(_seq(item)(value, cls, conv))
    return structure


def _seq(item_type: type) -> Any:
    def structure(value: Any, _: type, conv: cattrs.Converter) -> tuple[Any, ...]:
        if value is None:
            return ()
        if not isinstance(value, list):
            raise TypeError(f"expected list, got {value!r:.60}")
        return tuple(conv.structure(v, item_type) for v in value)
    return structure


def make_converter() -> cattrs.Converter:
    """The converter for every wire record (a new one each call; never the global converter)."""
    conv = cattrs.Converter(forbid_extra_keys=False, detailed_validation=True)
    conv.register_structure_hook(int, _strict_int)
    conv.register_structure_hook(str, _strict_str)
    conv.register_structure_hook(bool, _strict_bool)
    for generic, item, wrap in (
        (tuple[str, ...], str, tuple), (tuple[int, ...], int, tuple),
        (tuple[DeviceMemory, ...], DeviceMemory, tuple), (list[int], int, list),
    ):
        conv.register_structure_hook_func(
            functools.partial(operator.eq, generic), _sequence_hook(conv, item, wrap))
    conv.register_unstructure_hook(Discovery, functools.partial(_discovery, conv))
    conv.register_unstructure_hook(Dropped, functools.partial(_dropped, conv))
    conv.register_unstructure_hook(PluginReport, _report)
    # runner_env_overrides is never on the wire.
    conv.register_structure_hook_func(lambda t: t == dict[str, str], lambda v, t: {})
    for cls, keys in _KEYS.items():
        fields = attrs.fields(cls)
        un: dict[str, Any] = {}
        st: dict[str, Any] = {}
        for f in fields:
            if f.name in _NEVER.get(cls, set()):
                un[f.name] = override(omit=True)
                st[f.name] = override(omit=True)
                continue
            key = keys.get(f.name, f.name)
            hook = functools.partial(_null_if_empty, conv) if f.name in _NULL_IF_EMPTY else None
            un[f.name] = override(rename=key, omit_if_default=f.name in _OMIT_IF_EMPTY[cls],
                                  unstruct_hook=hook)
            st[f.name] = override(rename=key)
        order = [keys.get(f.name, f.name) for f in fields]
        conv.register_unstructure_hook(
            cls, _ordered(make_dict_unstructure_fn(cls, conv, **un), order))
        conv.register_structure_hook(cls, _object_hook(make_dict_structure_fn(cls, conv, **st)))
    return conv


def _discovery(conv: cattrs.Converter, found: Discovery) -> dict[str, Any]:
    """The ``gpuscout list --json`` document."""
    return {
        "devices": [conv.unstructure(d) for d in found.devices],
        "dropped": [conv.unstructure(d) for d in found.dropped],
        # All three keys always, so readers need no defaults (a bare SystemInfo on the wire
        # omits zeros, as the seed does).
        "system": {
            "total_memory": found.system.total_memory,
            "free_memory": found.system.free_memory,
            "free_swap": found.system.free_swap,
        },
        "plugins": [_report(r) for r in found.plugins],
    }


def _dropped(conv: cattrs.Converter, drop: Dropped) -> dict[str, Any]:
    return {
        "device": conv.unstructure(drop.device),
        "reason": drop.reason,
        "duplicate_of": None if drop.duplicate_of is None else conv.unstructure(drop.duplicate_of),
    }


def _report(r: PluginReport) -> dict[str, Any]:
    return {
        "name": r.name, "version": r.version, "distribution": r.distribution,
        "hooks": list(r.hooks), "status": str(r.status), "error": r.error, "note": r.note,
        "devices": r.devices, "elapsed_ms": round(r.elapsed * 1000, 3),
    }


def _ordered(inner: Any, order: list[str]) -> Any:
    # cattrs writes omit-if-default fields last; the wire order is the field order, always.
    def unstructure(obj: Any) -> dict[str, Any]:
        data = inner(obj)
        return {k: data[k] for k in order if k in data}
    return unstructure


def _null_if_empty(conv: cattrs.Converter, value: Any) -> Any:
    # Items go through the converter too, so records in a sequence (BackendMemory.GPUs) get
    # their own wire keys.
    return [conv.unstructure(v) for v in value] if value else None


def _object_hook(inner: Any) -> Any:
    def structure(value: Any, cls: type) -> Any:
        if not isinstance(value, Mapping):
            raise TypeError(f"expected object, got {value!r:.60}")
        # Go leaves a field at its zero value for null; so do we.
        return inner({k: v for k, v in value.items() if v is not None}, cls)
    return structure


@cache
def converter() -> cattrs.Converter:
    """The shared converter of this process (built on first use, to keep imports cheap)."""
    return make_converter()


def unstructure(obj: Any) -> Any:
    """``obj`` (a record, or a list of records) as plain JSON-ready values."""
    conv = converter()
    if isinstance(obj, (list, tuple)):
        return [unstructure(o) for o in obj]
    return conv.unstructure(obj)


def to_json(obj: Any, indent: int | None = None) -> str:
    """Serialize a record, or a list of records, to JSON with the wire keys, in a fixed order.

    A Discovery becomes the ``gpuscout list --json`` document.
    """
    separators = (",", ":") if indent is None else (",", ": ")
    return json.dumps(unstructure(obj), indent=indent, separators=separators)


def from_json(text: str | bytes, cls: type[T] | Any) -> T:
    """Parse ``text`` into ``cls`` (a record type or ``list[Record]``).

    Raises GpuscoutError naming the path of the first problem, e.g.
    ``[2].total_memory: expected int, got 'abc'``.
    """
    try:
        data = json.loads(text)
    except (ValueError, TypeError) as exc:
        raise GpuscoutError(f"not valid JSON: {exc}") from None
    result: T = structure(data, cls)
    return result


def structure(data: Any, cls: type[T] | Any) -> T:
    """Plain values (as parsed from JSON) into ``cls``; see ``from_json``."""
    conv = converter()
    if get_origin(cls) is list:
        (item,) = get_args(cls)
        if not isinstance(data, list):
            raise GpuscoutError(f"$: expected list, got {_type_name(data)}")
        out = [_structure_one(conv, v, item, f"[{i}]") for i, v in enumerate(data)]
        return GPULayersList(out) if item is GPULayers else out  # type: ignore[return-value]
    if cls not in _KEYS:
        raise GpuscoutError(f"cannot read {cls!r} from JSON: not a wire record type")
    result: T = _structure_one(conv, data, cls, "")
    return result


def _structure_one(conv: cattrs.Converter, data: Any, cls: type, path: str) -> Any:
    try:
        return conv.structure(data, cls)
    except Exception as exc:
        where, problem = _first_problem(exc, cls)
        full = (path + where).lstrip(".") or "$"
        raise GpuscoutError(f"{full}: {problem}") from None


def _first_problem(exc: BaseException, cls: type | None) -> tuple[str, str]:
    """Walk a cattrs error tree to its first leaf: (path suffix, message)."""
    if isinstance(exc, cattrs.ClassValidationError | cattrs.IterableValidationError):
        for sub in exc.exceptions:
            step = ""
            for note in getattr(sub, "__notes__", []):
                name = getattr(note, "name", None)
                index = getattr(note, "index", None)
                if name is not None and cls is not None:
                    step = "." + _KEYS.get(cls, {}).get(name, name)
                    sub_cls = _field_type(cls, name)
                    where, problem = _first_problem(sub, sub_cls)
                    return step + where, problem
                if index is not None:
                    where, problem = _first_problem(sub, _item_type(cls))
                    return f"[{index}]" + where, problem
            return _first_problem(sub, None)
    if isinstance(exc, (ValueError, TypeError)) and str(exc):
        return "", str(exc)
    return "", f"{type(exc).__name__}: {exc}"


def _field_type(cls: type, name: str) -> type | None:
    if not attrs.has(cls):
        return None
    t = attrs.fields_dict(cls)[name].type
    if isinstance(t, type) and attrs.has(t):
        return t
    args = get_args(t)
    return args[0] if args and isinstance(args[0], type) and attrs.has(args[0]) else None


def _item_type(cls: type | None) -> type | None:
    # Items of the top-level list are structured one by one in structure(), so a list met here
    # is a field's sequence of plain values (or of DeviceMemory for BackendMemory.gpus).
    return DeviceMemory if cls is BackendMemory else None
