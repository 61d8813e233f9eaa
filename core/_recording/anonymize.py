"""``gpuscout record --anonymize``: identifiers replaced consistently within one recording.

UUIDs (``GPU-…``, ``MIG-…``, any 8-4-4-4-12 hex form, and the 16-byte lists Vulkan reports),
serial numbers, unique ids and the host name are replaced by values derived from a random salt
drawn per recording: the same identifier gets the same replacement in every file and answer
(so a card's NVML UUID and its Vulkan deviceUUID still match), and nothing maps back.
"""

from __future__ import annotations

import hashlib
import os
import re
from typing import Any

#: A UUID wherever it stands, glued to a word too (``pod<uuid>`` in a cgroup path: exactly
#: eight hex digits before the first separator find its start), its groups joined by ``-`` or,
#: as systemd's slice names write them, ``_``.
_UUID = re.compile(
    r"([0-9a-fA-F]{8})([-_])([0-9a-fA-F]{4})\2([0-9a-fA-F]{4})\2([0-9a-fA-F]{4})\2([0-9a-fA-F]{12})"
)
#: A long run of hex digits (a container's 64-digit id, a 32-digit machine id or deviceUUID).
_HEX_RUN = re.compile(r"(?<![0-9a-fA-F])[0-9a-fA-F]{32,64}(?![0-9a-fA-F])")
#: Files whose whole content is an identifier (amdgpu, KFD, the kernel's host name).
_ID_FILES = ("serial_number", "unique_id", "hostname", "product_serial", "board_serial")
#: JSON keys whose values are identifiers.
_ID_KEYS = re.compile(r"uuid|serial|unique_id|hostname", re.IGNORECASE)
_NUMBER_LINE = re.compile(rb"^(unique_id\s+)(\d+)\s*$", re.MULTILINE)


class Anonymizer:
    """One recording's replacements (``host`` is this machine's name, replaced wherever seen)."""

    def __init__(self, host: str) -> None:
        self._salt = os.urandom(16)
        self._host = host if len(host) >= 3 else ""

    def _digest(self, text: str) -> bytes:
        return hashlib.sha256(self._salt + text.encode("utf-8", "replace")).digest()

    def _hex(self, hexdigits: str) -> str:
        return self._digest(hexdigits.lower()).hex()[: len(hexdigits)]

    def _uuid(self, match: re.Match[str]) -> str:
        groups = [match.group(i) for i in (1, 3, 4, 5, 6)]
        joined = "".join(groups)
        new = self._hex(joined)
        if joined.isupper():
            new = new.upper()
        parts, at = [], 0
        for group in groups:
            parts.append(new[at : at + len(group)])
            at += len(group)
        return match.group(2).join(parts)

    def _run(self, match: re.Match[str]) -> str:
        run = match.group(0)
        new = self._hex(run)
        return new.upper() if run.isupper() else new

    def _number(self, value: int) -> int:
        return int.from_bytes(self._digest(str(value))[:7], "big")

    def text(self, text: str) -> str:
        """``text`` with every UUID and the host name replaced."""
        text = _UUID.sub(self._uuid, text)
        text = _HEX_RUN.sub(self._run, text)
        if self._host:
            text = text.replace(self._host, "host-0")
        return text

    def file(self, path: str, data: bytes) -> bytes:
        """The content of recorded file ``path`` with its identifiers replaced."""
        name = os.path.basename(path)
        if name in _ID_FILES:
            value = data.strip().decode("utf-8", "replace")
            if name == "hostname":
                return b"host-0\n"
            if value.isdigit():
                return b"%d\n" % self._number(int(value))
            return (self._digest(value).hex()[: max(len(value), 8)] + "\n").encode()
        data = _NUMBER_LINE.sub(lambda m: m.group(1) + b"%d" % self._number(int(m.group(2))), data)
        return self.text(data.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")

    def json(self, value: Any, key: str = "") -> Any:
        """A JSON value with identifiers replaced (``key`` the name it is held under)."""
        if isinstance(value, dict):
            return {k: self.json(v, k) for k, v in value.items()}
        if isinstance(value, list):
            if (
                _ID_KEYS.search(key)
                and len(value) == 16
                and all(isinstance(b, int) and not isinstance(b, bool) and 0 <= b < 256 for b in value)
            ):
                return list(bytes.fromhex(self._hex(bytes(value).hex())))
            return [self.json(v, key) for v in value]
        if isinstance(value, str):
            if _ID_KEYS.search(key) and re.fullmatch(r"[0-9a-fA-F]{32}", value):
                return self._hex(value)  # Vulkan's deviceUUID: the same bytes as NVML's UUID
            if _ID_KEYS.search(key) and not _UUID.search(value) and value:
                return self._digest(value).hex()[: max(len(value), 8)]
            return self.text(value)
        if isinstance(value, int) and not isinstance(value, bool) and _ID_KEYS.search(key):
            return self._number(value)
        return value
