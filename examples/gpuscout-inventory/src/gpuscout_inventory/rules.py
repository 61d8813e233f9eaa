"""The per-device rules an inventory file gives (``flash_attention``, ``minimum_memory``).

The rule hooks receive only a device, no context and no file, so what enumerate read is kept
here, keyed by the device as enumerated apart from its free memory (which a refresh changes).
A record built by hand that matches no enumerated device gets no answer (the core's default).
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from gpuscout.plugin import DeviceInfo

#: The most devices remembered; the oldest are forgotten first (a host that re-reads many
#: files must not grow without bound).
MAX_REMEMBERED = 4096


def _key(device: DeviceInfo) -> DeviceInfo:
    return device.evolve(free_memory=0, free_memory_unknown=False)


class RuleBook:
    """Rules by device, safe to use from the host's worker threads."""

    def __init__(self, limit: int = MAX_REMEMBERED) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._rules: OrderedDict[DeviceInfo, tuple[bool | None, int | None]] = OrderedDict()

    def remember(self, device: DeviceInfo, flash_attention: bool | None, minimum_memory: int | None) -> None:
        """Keep ``device``'s rules (a later read of the same device replaces them)."""
        key = _key(device)
        with self._lock:
            self._rules.pop(key, None)
            if flash_attention is None and minimum_memory is None:
                return
            self._rules[key] = (flash_attention, minimum_memory)
            while len(self._rules) > self.limit:
                self._rules.popitem(last=False)

    def flash_attention(self, device: DeviceInfo) -> bool | None:
        """The file's ``flash_attention`` for ``device``, or None."""
        with self._lock:
            return self._rules.get(_key(device), (None, None))[0]

    def minimum_memory(self, device: DeviceInfo) -> int | None:
        """The file's ``minimum_memory`` for ``device`` in bytes, or None."""
        with self._lock:
            return self._rules.get(_key(device), (None, None))[1]

    def __len__(self) -> int:
        with self._lock:
            return len(self._rules)


__all__ = ["MAX_REMEMBERED", "RuleBook"]
