"""JSON wire format: the same keys Ollama's runner uses in its ``/info`` reply.

Writing (``to_json``, ``unstructure``) lives in ``gpuscout._records.encode``, which needs no cattrs;
reading is one cattrs converter, built by ``make_converter()`` from the same key tables. Reading
is strict about types (``"5"`` is not an int) and lenient about absence (a missing key or
``null`` reads as the field's default, as Go's decoder does); unknown keys are ignored so newer
runners stay readable.

A ``Discovery`` reads from the ``gpuscout list --json`` document (its ``devices``, ``dropped``,
``system`` and ``plugins``; an ``explain`` key is ignored). The document does not carry the
discovery's own wall time, so ``Discovery.elapsed`` reads as 0.0; a plugin's ``elapsed_ms`` (a
float rounded to 3 decimals) reads back as ``PluginReport.elapsed`` in seconds, exact to the
microsecond.
"""

from __future__ import annotations

import functools
import json
import math
import operator
import time
from collections.abc import Mapping
from functools import cache
from typing import Any, TypeVar, get_args, get_origin, overload

import attrs
import cattrs
from cattrs.errors import IterableValidationNote
from cattrs.gen import make_dict_structure_fn, override

from gpuscout._records.bounds import (
    MAX_JSON_DEPTH,
    MAX_JSON_RECORDS,
    MAX_JSON_SIZE,
    too_deep,
    too_large,
    too_many_objects,
)
from gpuscout._records.device import DeviceInfo
from gpuscout._records.encode import KEYS as _KEYS
from gpuscout._records.encode import NEVER as _NEVER
from gpuscout._records.fields import PeerLink, RecordError
from gpuscout._records.layers import GPULayers, GPULayersList
from gpuscout._records.memory import BackendMemory, DeviceMemory
from gpuscout._records.results import Discovery, Dropped, PluginReport, PluginStatus
from gpuscout.errors import GpuscoutError

T = TypeVar("T")


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


class _NonFinite:
    """What JSON's NaN, Infinity and -Infinity read as: no field accepts it, so the error
    names its path."""

    def __init__(self, token: str) -> None:
        self.token = token

    def __repr__(self) -> str:
        return self.token


def _strict_int(value: Any, _: type) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"expected int, got {value!r:.60}")
    if not -(2**63) <= value < 2**64:
        raise ValueError(f"expected an int that 64 bits hold, got an int of {value.bit_length()} bits")
    return value


def _strict_str(value: Any, _: type) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected str, got {value!r}")
    return value


def _strict_bool(value: Any, _: type) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"expected bool, got {value!r}")
    return value


def _strict_float(value: Any, _: type) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"expected number, got {value!r:.60}")
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise ValueError(f"expected a finite number, got {value!r:.60}")
    return number


def _status(value: Any, _: type) -> PluginStatus:
    if not isinstance(value, str):
        raise TypeError(f"expected str, got {value!r}")
    try:
        return PluginStatus(value)
    except ValueError:
        raise ValueError(f"expected one of {', '.join(map(str, PluginStatus))}, got {value!r:.60}") from None


def _record_list_hook(conv: cattrs.Converter, item: type) -> Any:
    """A list of records, null as empty; a bad item's error carries its index (for the path)."""

    def structure(value: Any, _: type) -> list[Any]:
        if value is None:
            return []
        if not isinstance(value, list):
            raise TypeError(f"expected list, got {value!r:.60}")
        out: list[Any] = []
        for i, v in enumerate(value):
            try:
                out.append(conv.structure(v, item))
            except Exception as exc:
                exc.__notes__ = [
                    *getattr(exc, "__notes__", []),
                    IterableValidationNote(f"Structuring @ index {i}", i, item),
                ]
                raise cattrs.IterableValidationError("bad item", [exc], list) from None
        return out

    return structure


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
    conv.register_structure_hook(float, _strict_float)
    conv.register_structure_hook(PluginStatus, _status)
    for generic, item, wrap in (
        (tuple[str, ...], str, tuple),
        (tuple[int, ...], int, tuple),
        (tuple[DeviceMemory, ...], DeviceMemory, tuple),
        (list[int], int, list),
        (list[str], str, list),
    ):
        conv.register_structure_hook_func(
            functools.partial(operator.eq, generic), _sequence_hook(conv, item, wrap)
        )
    # A device's peers: records whose error path carries the index.
    peers = _record_list_hook(conv, PeerLink)
    conv.register_structure_hook_func(
        functools.partial(operator.eq, tuple[PeerLink, ...]), lambda v, t: tuple(peers(v, t))
    )
    # runner_env_overrides is never on the wire.
    conv.register_structure_hook_func(lambda t: t == dict[str, str], lambda v, t: {})
    for cls, keys in _KEYS.items():
        st: dict[str, Any] = {}
        for f in attrs.fields(cls):
            never = f.name in _NEVER.get(cls, frozenset())
            st[f.name] = override(omit=True) if never else override(rename=keys.get(f.name, f.name))
        conv.register_structure_hook(cls, _object_hook(make_dict_structure_fn(cls, conv, **st)))
    for listed, record in (
        (list[DeviceInfo], DeviceInfo),
        (list[Dropped], Dropped),
        (list[PluginReport], PluginReport),
    ):
        conv.register_structure_hook_func(
            functools.partial(operator.eq, listed), _record_list_hook(conv, record)
        )
    # The list --json document: no discovery wall time on it; a plugin's time is in ms.
    conv.register_structure_hook(
        Discovery,
        _object_hook(
            make_dict_structure_fn(
                Discovery,
                conv,
                elapsed=override(omit=True),
                budgets=override(omit=True),
                numbering=override(omit=True),
            )
        ),
    )
    conv.register_structure_hook(Dropped, _object_hook(make_dict_structure_fn(Dropped, conv)))
    report = make_dict_structure_fn(PluginReport, conv, elapsed=override(rename="elapsed_ms"))
    conv.register_structure_hook(PluginReport, _object_hook(lambda value, cls: _seconds(report(value, cls))))
    return conv


def _seconds(report: PluginReport) -> PluginReport:
    report.elapsed = round(report.elapsed / 1000, 9)
    return report


def _object_hook(inner: Any) -> Any:
    def structure(value: Any, cls: type) -> Any:
        if not isinstance(value, Mapping):
            raise TypeError(f"expected object, got {value!r:.60}")
        # Go leaves a field at its zero value for null; so do we.
        return inner({k: v for k, v in value.items() if v is not None}, cls)

    return structure


@cache
def converter() -> cattrs.Converter:
    """The shared reading converter of this process (built on first use)."""
    return make_converter()


@overload
def from_json(text: str | bytes, cls: type[T], *, deadline: float | None = None) -> T: ...


@overload
def from_json(text: str | bytes, cls: Any, *, deadline: float | None = None) -> Any: ...


def from_json(text: str | bytes, cls: type[T] | Any, *, deadline: float | None = None) -> T | Any:
    """Parse ``text`` (str, or UTF-8 bytes) into ``cls`` (a record type or ``list[Record]``).

    Raises GpuscoutError, and nothing else, for any bad input: naming the path of the first
    problem (``[2].total_memory: expected int, got 'abc'``), or saying that the text is not
    UTF-8, not JSON, larger than ``MAX_JSON_SIZE``, nested deeper than ``MAX_JSON_DEPTH`` or
    holding more than ``MAX_JSON_RECORDS`` objects (counted before parsing). With
    ``deadline`` (a ``time.monotonic()`` value), TimeoutError once decoding passes it.
    """
    _check_wire_type(cls)
    if isinstance(text, (bytes, bytearray)):
        if len(text) > MAX_JSON_SIZE:
            raise too_large(len(text), "bytes")
        try:
            text = bytes(text).decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise GpuscoutError(f"not valid JSON: not UTF-8 at byte {exc.start}") from None
    elif not isinstance(text, str):
        raise GpuscoutError(f"cannot read JSON from {type(text).__name__}: expected str or bytes")
    if len(text) > MAX_JSON_SIZE:
        raise too_large(len(text), "characters")
    if too_deep(text):
        raise GpuscoutError(f"not readable JSON: arrays and objects nested more than {MAX_JSON_DEPTH} deep")
    if too_many_objects(text):
        raise GpuscoutError(f"not readable JSON: more than {MAX_JSON_RECORDS} objects (records)")
    try:
        data = json.loads(text, parse_constant=_NonFinite)
    except (ValueError, TypeError, RecursionError) as exc:
        raise GpuscoutError(f"not valid JSON: {exc}") from None
    result: T = structure(data, cls, deadline=deadline)
    return result


#: Wire records plus the ``gpuscout list --json`` document and its parts.
_READABLE: frozenset[type] = frozenset({*_KEYS, Discovery, Dropped, PluginReport})
#: The wire key of a field whose name differs from it, beyond the record tables.
_DOCUMENT_KEYS: dict[type, dict[str, str]] = {PluginReport: {"elapsed": "elapsed_ms"}}


def _is_wire_record(cls: Any) -> bool:
    return isinstance(cls, type) and cls in _READABLE


def _check_wire_type(cls: Any) -> None:
    """Raise GpuscoutError unless ``cls`` is a wire record type or ``list[record type]``."""
    if get_origin(cls) is list:
        args = get_args(cls)
        if len(args) == 1 and _is_wire_record(args[0]):
            return
    elif _is_wire_record(cls):
        return
    try:
        shown = f"{cls!r:.80}"
    except Exception:  # a repr that fails (an int of over 4300 digits) still gets an answer
        shown = f"a {type(cls).__name__}"
    raise GpuscoutError(
        f"cannot read {shown} from JSON: expected a wire record type "
        f"({', '.join(sorted(c.__name__ for c in _READABLE))}) or a list of one"
    )


def structure(data: Any, cls: type[T] | Any, *, deadline: float | None = None) -> T:
    """Plain values (as parsed from JSON) into ``cls``; see ``from_json`` (TimeoutError once
    ``deadline`` has passed, looked at every thousand records)."""
    _check_wire_type(cls)
    conv = converter()
    if get_origin(cls) is list:
        (item,) = get_args(cls)
        if not isinstance(data, list):
            raise GpuscoutError(f"$: expected list, got {_type_name(data)}")
        out = []
        for i, v in enumerate(data):
            if deadline is not None and i % 1000 == 999 and time.monotonic() >= deadline:
                raise TimeoutError(f"decoding {len(data)} records passed the deadline")
            out.append(_structure_one(conv, v, item, f"[{i}]"))
        return GPULayersList(out) if item is GPULayers else out  # type: ignore[return-value]
    result: T = _structure_one(conv, data, cls, "")
    return result


#: Longest problem text in an error message (a bad value's repr can be megabytes).
_MAX_PROBLEM = 300


def _structure_one(conv: cattrs.Converter, data: Any, cls: type, path: str) -> Any:
    try:
        return conv.structure(data, cls)
    except Exception as exc:
        where, problem = _first_problem(exc, cls)
        full = (path + where).lstrip(".") or "$"
        if len(problem) > _MAX_PROBLEM:
            problem = problem[:_MAX_PROBLEM] + "..."
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
                    keys = _KEYS.get(cls) or _DOCUMENT_KEYS.get(cls, {})
                    step = "." + keys.get(name, name)
                    sub_cls = _field_type(cls, name)
                    where, problem = _first_problem(sub, sub_cls)
                    return step + where, problem
                if index is not None:
                    where, problem = _first_problem(sub, _item_type(cls))
                    return f"[{index}]" + where, problem
            return _first_problem(sub, cls)  # the record's own check (RecordError)
    if isinstance(exc, RecordError) and exc.field and cls is not None:
        # A record's own check: its field, by its wire key, extends the path.
        keys = _KEYS.get(cls) or _DOCUMENT_KEYS.get(cls, {})
        return "." + keys.get(exc.field, exc.field), str(exc)
    if isinstance(exc, (ValueError, TypeError)) and str(exc):
        return "", str(exc)
    return "", f"{type(exc).__name__}: {exc}"


def _field_type(cls: type, name: str) -> type | None:
    if not attrs.has(cls):
        return None
    t = attrs.fields_dict(attrs.resolve_types(cls))[name].type
    if isinstance(t, type) and attrs.has(t):
        return t
    args = get_args(t)
    return args[0] if args and isinstance(args[0], type) and attrs.has(args[0]) else None


def _item_type(cls: type | None) -> type | None:
    # Items of the top-level list are structured one by one in structure(), so a list met here
    # is a field's sequence of plain values (or of DeviceMemory for BackendMemory.gpus).
    # Lists of records (Discovery's) were named by their field, whose type is the item's already.
    return DeviceMemory if cls is BackendMemory else cls if cls in _READABLE else None


__all__ = ["MAX_JSON_DEPTH", "MAX_JSON_SIZE", "converter", "from_json", "make_converter", "structure"]
