"""Which GPUs a ROCm child process sees: ROCR_VISIBLE_DEVICES, then HIP_VISIBLE_DEVICES.

Pure functions over the environment and the ROCr UUID of each GPU. The rules follow the runtimes'
sources (ROCr ``amd_filter_device``, ROCclr ``rocdevice.cpp``), not their summaries:

- ROCr first: ``ROCR_VISIBLE_DEVICES`` picks and orders GPUs among the KFD GPU nodes, by index or
  by UUID (``GPU-`` + 16 hex digits, any case, a prefix of 5 to 20 characters is enough). Set but
  empty, ``-1`` or ``GPU-XX`` show nothing; the first invalid, out-of-range, unmatched, ambiguous
  or repeated token ends the list.
- HIP then indexes ROCr's survivors with ``HIP_VISIBLE_DEVICES`` (or ``CUDA_VISIBLE_DEVICES``
  when that is empty or unset; both empty: no filter): decimal indices written plainly, or tokens
  holding ``GPU-`` matched as a substring of a survivor's UUID (case-sensitive, lower-case hex).
  An invalid entry ends the list, repeats are skipped.
- ``GPU_DEVICE_ORDINAL`` is read only by OpenCL in ROCclr, so it filters nothing here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from gpuscout.plugin import visibility_setting
from gpuscout.plugins.rocm.names import CUDA, HIP, ROCR

#: What ROCr reports as the UUID of a GPU without one (unique_id 0).
NO_UUID = "GPU-XX"

# strtol(token, &end, 0) consuming the whole token: sign, then hex, octal or decimal.
_STRTOL0 = re.compile(r"([+-]?)(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)", re.ASCII)
_LONG_MAX = 2**63 - 1
# More decimal digits than LONG_MAX has overflows (and int() refuses over 4300 digits).
_LONG_DIGITS = len(str(_LONG_MAX))


def rocr_uuid(unique_id: int) -> str:
    """ROCr's UUID for a KFD ``unique_id``: ``GPU-`` + 16 lower-case hex digits, '' for 0."""
    return f"GPU-{unique_id:016x}" if unique_id else ""


def _strtol0(token: str) -> int | None:
    match = _STRTOL0.fullmatch(token)
    if match is None:
        return None
    sign, digits = match.groups()
    if digits[:2] in ("0x", "0X"):
        value = int(digits, 16)
    elif digits[0] == "0":
        value = int(digits, 8)
    else:
        value = int(digits) if len(digits) <= _LONG_DIGITS else _LONG_MAX + 1
    # strtol clamps on overflow to LONG_MAX or LONG_MIN.
    return -min(value, _LONG_MAX + 1) if sign == "-" else min(value, _LONG_MAX)


def _rocr_uuid_index(token: str, uuids: Sequence[str]) -> int | None:
    if not 5 <= len(token) <= 20:
        return None
    found = [i for i, u in enumerate(uuids) if u and u.upper().startswith(token)]
    return found[0] if len(found) == 1 else None


def rocr_visible(value: str | None, uuids: Sequence[str]) -> list[int]:
    """Indices (into ``uuids``, KFD GPU-node order) that ROCr exposes, in ROCr's order.

    ``value`` is ROCR_VISIBLE_DEVICES or None when unset; ``uuids[i]`` is GPU i's UUID or ''.
    """
    if value is None:
        return list(range(len(uuids)))
    tokens = value.split(",")
    if tokens and tokens[-1] == "":
        tokens.pop()  # a trailing comma adds no token (getline semantics)
    chosen: list[int] = []
    for raw in tokens[: len(uuids)]:
        token = raw.strip().upper()
        if not token:
            break
        index = _rocr_uuid_index(token, uuids) if token[0] == "G" else _strtol0(token)
        if index is None or not 0 <= index < len(uuids) or index in chosen:
            break
        chosen.append(index)
    return chosen


def hip_visible(value: str, uuids: Sequence[str]) -> list[int] | None:
    """Positions (into ROCr's survivors ``uuids``) that HIP keeps, or None for "no filter".

    ``value`` is the effective HIP list (``hip_value``); ``uuids[i]`` is survivor i's UUID or ''.
    """
    if not value:
        return None
    chosen: list[int] = []
    for token in value.split(","):
        if "GPU-" in token:
            # HIP asks ROCr for each agent's UUID, which is "GPU-XX" when it has none.
            match = next((i for i, u in enumerate(uuids) if token in (u or NO_UUID)), None)
            if match is not None:
                token = str(match)
        index = _plain_index(token, len(uuids))
        if index is None:
            break
        if index not in chosen:
            chosen.append(index)
    return chosen


def _plain_index(token: str, count: int) -> int | None:
    """``token`` as HIP reads an index: ASCII decimal digits written plainly (no sign, space or
    leading zero), below ``count``; else None."""
    if not (token.isascii() and token.isdigit()) or (token[0] == "0" and token != "0"):
        return None
    # Longer than count's own digits cannot be below count (and int() refuses over 4300).
    if len(token) > len(str(count)) or int(token) >= count:
        return None
    return int(token)


def hip_value(env: Mapping[str, str]) -> str:
    """The list HIP applies: HIP_VISIBLE_DEVICES, else CUDA_VISIBLE_DEVICES when HIP's is empty."""
    return env.get(HIP, "") or env.get(CUDA, "")


def visible_order(env: Mapping[str, str], uuids: Sequence[str]) -> list[int]:
    """Indices into ``uuids`` (every KFD GPU node) that a HIP program sees, in its device order."""
    survivors = rocr_visible(env.get(ROCR), uuids)
    kept = hip_visible(hip_value(env), [uuids[i] for i in survivors])
    if kept is None:
        return survivors
    return [survivors[i] for i in kept]


def hidden_by(env: Mapping[str, str], uuids: Sequence[str]) -> dict[int, str]:
    """For each index into ``uuids`` (every KFD GPU node) that a HIP program does not see, in
    KFD order, the setting that hides it: ROCR_VISIBLE_DEVICES for a GPU ROCr leaves out, else
    the list HIP applies to ROCr's survivors (``HIP_VISIBLE_DEVICES``, or
    ``CUDA_VISIBLE_DEVICES`` when HIP's is empty or unset, which the setting then says)."""
    survivors = rocr_visible(env.get(ROCR), uuids)
    seen = set(visible_order(env, uuids))
    hip = env.get(HIP, "")
    if hip:
        by_hip = visibility_setting(HIP, hip)
    else:
        by_hip = f"{visibility_setting(CUDA, env.get(CUDA, ''))} (HIP reads it when {HIP} is empty or unset)"
    by_rocr = visibility_setting(ROCR, env.get(ROCR, ""))
    return {i: by_rocr if i not in survivors else by_hip for i in range(len(uuids)) if i not in seen}


__all__ = [
    "CUDA",
    "HIP",
    "NO_UUID",
    "ROCR",
    "hidden_by",
    "hip_value",
    "hip_visible",
    "rocr_uuid",
    "rocr_visible",
    "visible_order",
]
