"""AMD gfx targets: KFD's ``gfx_target_version``, its ``gfxNNNN`` name, the seed's compute pair.

KFD encodes a target as ``major*10000 + minor*100 + stepping`` in decimal (90010 is gfx90a). The
name is ``gfx`` + the major in decimal + the minor and stepping as one hex digit each. The seed
prints a ROCm device's compute as ``gfx%x%02x`` of (compute_major, compute_minor), so the major's
decimal digits are stored read as hex (11 -> 0x11) and the minor as ``minor*16 + stepping``.
"""

from __future__ import annotations

import re

_OVERRIDE = re.compile(r"(\d+)\.(\d+)\.(\d+)")


def split_version(version: int) -> tuple[int, int, int]:
    """(major, minor, stepping) of a KFD ``gfx_target_version`` (90402 -> (9, 4, 2))."""
    return version // 10000, (version // 100) % 100, version % 100


def target_name(version: int) -> str:
    """``gfx`` name of a KFD ``gfx_target_version``: 90010 -> gfx90a, 110501 -> gfx1151; 0 -> ''."""
    if version <= 0:
        return ""
    major, minor, stepping = split_version(version)
    return f"gfx{major}{minor:x}{stepping:x}"


def compute_pair(version: int) -> tuple[int, int]:
    """(compute_major, compute_minor) whose ``gfx%x%02x`` rendering is ``target_name(version)``."""
    major, minor, stepping = split_version(version)
    return int(str(major), 16), minor * 16 + stepping


def parse_target_name(name: str) -> int:
    """KFD version number of a ``gfx`` name (gfx942 -> 90402, gfx1151 -> 110501); 0 if not one."""
    match = re.fullmatch(r"gfx(\d+)([0-9a-f])([0-9a-f])", name.strip().lower())
    if match is None:
        return 0
    return int(match[1]) * 10000 + int(match[2], 16) * 100 + int(match[3], 16)


def parse_override(value: str) -> int | None:
    """KFD version number of an ``HSA_OVERRIDE_GFX_VERSION`` value (``11.0.0`` -> 110000).

    The variable is decimal ``major.minor.stepping``; None for anything else (ROCr ignores it then).
    """
    match = _OVERRIDE.fullmatch(value.strip())
    if match is None:
        return None
    major, minor, stepping = (int(g) for g in match.groups())
    if minor > 15 or stepping > 15 or major == 0:
        return None
    return major * 10000 + minor * 100 + stepping
