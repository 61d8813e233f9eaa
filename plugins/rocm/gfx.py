"""AMD gfx targets: KFD's ``gfx_target_version``, its ``gfxNNNN`` name, the seed's compute pair.

KFD encodes a target as ``major*10000 + minor*100 + stepping`` in decimal (90010 is gfx90a). The
name is ``gfx`` + the major in decimal + the minor and stepping as one hex digit each. The seed
prints a ROCm device's compute as ``gfx%x%02x`` of (compute_major, compute_minor), so the major's
decimal digits are stored read as hex (11 -> 0x11) and the minor as ``minor*16 + stepping``.

The decimal number only holds minor and stepping up to 99 (libhsakmt splits it with ``/ 100 % 100``),
and a name or compute pair only up to 15 (one hex digit each). An HSA_OVERRIDE_GFX_VERSION may say
minor and stepping up to 255, so an override is kept as a (major, minor, stepping) triple, never
encoded; a triple with a minor or stepping above 15 has no target name (LLVM and ROCr's ISA table
have none), so it reads as an unknown target.
"""

from __future__ import annotations

import re

#: (major, minor, stepping).
Version = tuple[int, int, int]
#: Largest fields libhsakmt accepts in an override: its engine id has 6 bits of major, 8 of minor
#: and 8 of stepping (topology.c ``topology_sysfs_get_node_props``).
OVERRIDE_MAJOR_MAX, OVERRIDE_MINOR_MAX = 63, 255
#: What glibc's ``%u`` consumes: leading white space, a sign, ASCII decimal digits.
_SCANF_U = re.compile(r"[ \t\n\v\f\r]*([+-]?)([0-9]+)")
_ULONG_MAX = 2**64 - 1


def split_version(version: int) -> tuple[int, int, int]:
    """(major, minor, stepping) of a KFD ``gfx_target_version`` (90402 -> (9, 4, 2))."""
    return version // 10000, (version // 100) % 100, version % 100


def _nameable(version: Version) -> bool:
    return version != (0, 0, 0) and version[1] <= 15 and version[2] <= 15


def version_name(version: Version) -> str:
    """``gfx`` name of (major, minor, stepping): (9, 0, 10) -> gfx90a; '' for (0, 0, 0) and for
    a minor or stepping above 15 (no target is named so)."""
    if not _nameable(version):
        return ""
    major, minor, stepping = version
    return f"gfx{major}{minor:x}{stepping:x}"


def version_compute(version: Version) -> tuple[int, int]:
    """(compute_major, compute_minor) whose ``gfx%x%02x`` rendering is ``version_name(version)``;
    (-1, 0), unknown, where there is no name."""
    if not _nameable(version):
        return -1, 0
    major, minor, stepping = version
    return int(str(major), 16), minor * 16 + stepping


def target_name(version: int) -> str:
    """``gfx`` name of a KFD ``gfx_target_version``: 90010 -> gfx90a, 110501 -> gfx1151; 0 -> ''."""
    if version <= 0:
        return ""
    return version_name(split_version(version))


def compute_pair(version: int) -> tuple[int, int]:
    """(compute_major, compute_minor) whose ``gfx%x%02x`` rendering is ``target_name(version)``."""
    return version_compute(split_version(version))


def parse_target_name(name: str) -> int:
    """KFD version number of a ``gfx`` name (gfx942 -> 90402, gfx1151 -> 110501); 0 if not one."""
    match = re.fullmatch(r"gfx(\d+)([0-9a-f])([0-9a-f])", name.strip().lower())
    if match is None:
        return 0
    return int(match[1]) * 10000 + int(match[2], 16) * 100 + int(match[3], 16)


def _scanf_u(text: str, start: int) -> tuple[int, int] | None:
    """glibc ``sscanf`` ``%u`` at ``start``: (value, end) or None. The digits go through strtoul
    (a minus sign wraps modulo 2**64, overflow gives ULONG_MAX), then are cut to unsigned int."""
    match = _SCANF_U.match(text, start)
    if match is None:
        return None
    sign, digits = match.groups()
    # More digits than ULONG_MAX has overflow (and int() refuses over 4300 digits).
    value = int(digits) if len(digits) <= 20 else _ULONG_MAX + 1
    if value > _ULONG_MAX:
        value = _ULONG_MAX
    elif sign == "-":
        value = -value % 2**64
    return value & 0xFFFFFFFF, match.end()


def parse_override(value: str) -> Version | None:
    """(major, minor, stepping) of an ``HSA_OVERRIDE_GFX_VERSION`` value as libhsakmt reads it,
    or None where libhsakmt rejects it (and then fails topology init: no GPU at all).

    libhsakmt (topology.c ``topology_sysfs_get_node_props``) accepts exactly what
    ``sscanf(value, "%u.%u.%u%c")`` reads as three numbers and nothing after them, with
    major <= 63, minor and stepping <= 255: ``11.0.0``, `` 11.0.0``, ``+11.0.0``, ``11.16.0``;
    not ``11.0.0 `` (a trailing character), ``11.0``, ``gfx1100`` or the empty string.
    """
    fields: list[int] = []
    at = 0
    for position in range(3):
        if position and (at >= len(value) or value[at] != "."):
            return None
        read = _scanf_u(value, at + 1 if position else 0)
        if read is None:
            return None
        number, at = read
        fields.append(number)
    if at != len(value):
        return None
    major, minor, stepping = fields
    if major > OVERRIDE_MAJOR_MAX or minor > OVERRIDE_MINOR_MAX or stepping > OVERRIDE_MINOR_MAX:
        return None
    return major, minor, stepping
