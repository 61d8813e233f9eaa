"""Metal's answers in a recording (``answers/metal.json`` key ``metal``), captured on macOS and
replayed anywhere::

    {"devices": [{"name": "Apple M2 Max", "registryID": 4294970964, "hasUnifiedMemory": true,
                  "recommendedMaxWorkingSetSize": 22906503168, "currentAllocatedSize": 0}],
     "default": 4294970964}

``default`` is the registryID of ``MTLCreateSystemDefaultDevice()`` (null when it answered
None). ``ReplayedMetal`` stands in for pyobjc's ``Metal`` module with exactly those answers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpuscout.plugin import RecordingError

_WHERE = "answers/metal.json: metal"
_FIELDS = {
    "name": str,
    "registryID": int,
    "hasUnifiedMemory": bool,
    "recommendedMaxWorkingSetSize": int,
    "currentAllocatedSize": int,
}


class ReplayedDevice:
    """One recorded MTLDevice (its methods answer the recorded values)."""

    def __init__(self, values: Mapping[str, Any], where: str) -> None:
        for key, kind in _FIELDS.items():
            value = values.get(key)
            ok = isinstance(value, kind) and (kind is bool or not isinstance(value, bool))
            if not ok or (isinstance(value, int) and not 0 <= value < 1 << 64):
                raise RecordingError(f"{_WHERE}{where}.{key}: expected {kind.__name__}, got {value!r:.40}")
        self._values = dict(values)

    def name(self) -> str:
        return str(self._values["name"])

    def registryID(self) -> int:
        return int(self._values["registryID"])

    def hasUnifiedMemory(self) -> bool:
        return bool(self._values["hasUnifiedMemory"])

    def recommendedMaxWorkingSetSize(self) -> int:
        return int(self._values["recommendedMaxWorkingSetSize"])

    def currentAllocatedSize(self) -> int:
        return int(self._values["currentAllocatedSize"])


class ReplayedMetal:
    """Stands in for pyobjc's ``Metal`` module: the two calls the plugin makes."""

    def __init__(self, answers: Any) -> None:
        if not isinstance(answers, Mapping) or not isinstance(answers.get("devices"), list):
            raise RecordingError(f"{_WHERE}: expected an object with a list 'devices'")
        self._devices = [
            ReplayedDevice(d if isinstance(d, Mapping) else {}, f".devices[{i}]")
            for i, d in enumerate(answers["devices"])
        ]
        self._default = answers.get("default")
        if self._default is not None and (
            isinstance(self._default, bool) or not isinstance(self._default, int)
        ):
            raise RecordingError(f"{_WHERE}.default: expected a registryID or null")

    def MTLCopyAllDevices(self) -> list[ReplayedDevice]:
        return list(self._devices)

    def MTLCreateSystemDefaultDevice(self) -> ReplayedDevice | None:
        return next((d for d in self._devices if d.registryID() == self._default), None)


def capture(framework: Any) -> dict[str, Any]:
    """What the plugin asks pyobjc's ``Metal``, as ``ReplayedMetal`` replays it."""
    copy_all = getattr(framework, "MTLCopyAllDevices", None)
    devices = list(copy_all() or ()) if copy_all is not None else []
    create = getattr(framework, "MTLCreateSystemDefaultDevice", None)
    default = create() if create is not None else None
    if default is not None and not any(int(d.registryID()) == int(default.registryID()) for d in devices):
        devices.append(default)
    return {
        "devices": [
            {
                "name": str(d.name()),
                "registryID": int(d.registryID()),
                "hasUnifiedMemory": bool(d.hasUnifiedMemory()),
                "recommendedMaxWorkingSetSize": int(d.recommendedMaxWorkingSetSize()),
                "currentAllocatedSize": int(d.currentAllocatedSize()),
            }
            for d in devices
        ],
        "default": None if default is None else int(default.registryID()),
    }
