"""The Vulkan loader's answer in a recording (``answers/vulkan.json`` key ``probe``), replayed.

A recording holds what ``ProbeResult.to_json`` writes: the loader's devices (``loader.RawDevice``
fields), its error and version. Every field is checked against the type the loader gives before
it is believed, so a hand-edited or hostile recording fails with a ``RecordingError`` naming the
field, never as a wrong device.
"""

from __future__ import annotations

import json
import re
from typing import Any

from gpuscout.plugin import Context, RecordingError
from gpuscout.plugins.vulkan.loader import ProbeResult


def replayed(context: Context) -> ProbeResult:
    """The loader's answer as the recording holds it (``answers/vulkan.json`` key ``probe``:
    what ``ProbeResult.to_json`` writes)."""
    answer = context.recorded("probe")
    if answer is None:
        return ProbeResult(error="the recording holds no answer of the Vulkan loader")
    try:
        _check_answer(answer)
        return ProbeResult.from_json(json.dumps(answer))
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise RecordingError(
            f"answers/vulkan.json: probe: not what the Vulkan probe answers ({type(exc).__name__}: {exc})"
        ) from None


#: The JSON type of each recorded field of a device (``loader.RawDevice``).
_DEVICE_FIELDS: dict[str, str] = {
    "index": "int",
    "name": "str",
    "device_type": "int",
    "vendor_id": "int",
    "device_id": "int",
    "api_version": "int",
    "driver_version": "int",
    "extensions": "list[str]",
    "uuid": "str",
    "driver_id": "int",
    "driver_name": "str",
    "driver_info": "str",
    "pci": "list[int]?",
    "heaps": "list[list[int]]",
    "heap_budget": "list[int]?",
    "heap_usage": "list[int]?",
    "storage_16bit": "bool?",
    "max_storage_buffer_range": "int",
}


#: deviceUUID as the loader records it: 16 bytes, 32 hex digits.
_UUID_HEX = re.compile(r"[0-9a-fA-F]{32}")


def _is(value: Any, kind: str) -> bool:
    if kind.endswith("?"):
        return value is None or _is(value, kind[:-1])
    if kind.startswith("list["):
        return isinstance(value, list) and len(value) <= 4096 and all(_is(v, kind[5:-1]) for v in value)
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 64
    return isinstance(value, {"str": str, "bool": bool}[kind])


def _check_answer(answer: Any) -> None:
    """Raise ValueError naming the first field of a recorded probe that has the wrong type."""
    if not isinstance(answer, dict) or not isinstance(answer.get("devices"), list):
        raise ValueError("expected an object with a list 'devices'")
    for key, kind in (("error", "str"), ("instance_version", "int"), ("library", "str")):
        if key in answer and not _is(answer[key], kind):
            raise ValueError(f"{key} must be {kind}")
    for i, device in enumerate(answer["devices"]):
        if not isinstance(device, dict):
            raise ValueError(f"devices[{i}] must be an object")
        for key, value in device.items():
            field = _DEVICE_FIELDS.get(key)
            if field is None:
                raise ValueError(f"devices[{i}].{key}: not a field of a Vulkan device")
            if not _is(value, field):
                raise ValueError(f"devices[{i}].{key} must be {field}, got {value!r:.40}")
        # Every physical device has at least one memory heap (the spec's memoryHeapCount >= 1),
        # each written as [size, flags]; without one its memory would replay as 0 B unexplained.
        heaps = device.get("heaps")
        if not heaps:
            raise ValueError(
                f"devices[{i}].heaps: a Vulkan device has at least one memory heap, got {heaps!r:.40}"
            )
        if any(len(heap) != 2 for heap in heaps):
            raise ValueError(f"devices[{i}].heaps: each heap is [size, flags], got {heaps!r:.60}")
        uuid = device.get("uuid", "")
        if uuid and _UUID_HEX.fullmatch(uuid) is None:
            # The loader writes deviceUUID's 16 bytes as 32 hex digits, or "" without one.
            raise ValueError(f"devices[{i}].uuid must be 32 hex digits or empty, got {uuid!r:.40}")
