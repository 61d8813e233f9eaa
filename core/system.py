"""System memory, cgroup-aware: what a process here may really use.

/proc/meminfo reports the host's memory even inside a container; the cgroup memory limit (v1 or
v2, the tightest one on the path to the root) caps both total and free.
"""

from __future__ import annotations

import os

from gpuscout.context import U64_LIMIT, Context, parse_u64
from gpuscout.records import SystemInfo

#: cgroup v1 writes this for "no limit" (LONG_MAX rounded down to a page).
_V1_UNLIMITED = 9223372036854771712
#: The meminfo keys read_system uses, the ones worth a note when unreadable.
_MEMINFO_KEYS = ("MemTotal", "MemAvailable", "MemFree", "SwapFree")
#: Linux's PATH_MAX: no cgroup path is longer, and a longer one would mean thousands of ancestors.
_PATH_MAX = 4096


def _parse_meminfo(text: str) -> tuple[dict[str, int], set[str]]:
    """(bytes per key, keys whose value is not a number below 2**64 bytes)."""
    values: dict[str, int] = {}
    bad: set[str] = set()
    for line in text.splitlines():
        key, colon, rest = line.partition(":")
        fields = rest.split()
        if not colon or not fields:
            continue
        key = key.strip()
        scale = 1024 if len(fields) > 1 and fields[1].lower() == "kb" else 1
        value = parse_u64(fields[0])
        if value is None or value * scale >= U64_LIMIT:
            # The last line for a key wins, as before; an unreadable one leaves it unknown.
            values.pop(key, None)
            bad.add(key)
            continue
        values[key] = value * scale
        bad.discard(key)
    return values, bad


def parse_meminfo(text: str) -> dict[str, int]:
    """``/proc/meminfo`` as bytes per key (the file counts kB, meaning KiB).

    A value that is not ASCII digits, or is 2**64 bytes or more, leaves its key out.
    """
    return _parse_meminfo(text)[0]


def _read_limit(ctx: Context, path: str) -> int | None:
    """A cgroup memory figure; None for "max" (v2) and v1's "unlimited" value as well."""
    value = ctx.read_u64(path, allow=("max",))
    return None if value is None or value >= _V1_UNLIMITED else value


def _ancestors(path: str) -> list[str]:
    """``/a/b`` -> ``['/a/b', '/a', '/']``."""
    parts = [p for p in path.split("/") if p]
    return ["/" + "/".join(parts[:i]) for i in range(len(parts), -1, -1)]


def _cgroup_path(ctx: Context, path: str) -> str | None:
    """``path`` when it names a cgroup below the hierarchy's root, else None with a note.

    A process outside its cgroup namespace sees ``/../..``; such a path, a relative one or an
    overlong one names nothing under /sys/fs/cgroup.
    """
    parts = path.split("/")
    if path.startswith("/") and ".." not in parts and "\0" not in path and len(path) <= _PATH_MAX:
        return path
    ctx.note(f"/proc/self/cgroup: path {path[:80]!r} does not lead below the cgroup root; ignored")
    return None


def _cgroup_paths(ctx: Context) -> tuple[str | None, str | None]:
    """(v2 path, v1 memory path) of this process from /proc/self/cgroup.

    A path that would lead outside the cgroup hierarchy (``..``, relative) counts as none.
    """
    text = ctx.read_text("/proc/self/cgroup") or ""
    v2 = v1 = None
    for line in text.splitlines():
        fields = line.split(":", 2)
        if len(fields) != 3:
            continue
        hid, controllers, path = fields
        if hid == "0" and controllers == "":
            v2 = _cgroup_path(ctx, path)
        elif "memory" in controllers.split(","):
            v1 = _cgroup_path(ctx, path)
    return v2, v1


def cgroup_memory(ctx: Context) -> tuple[int | None, int | None, int | None]:
    """(limit, usage, swap left) from the process's memory cgroup; None where there is none."""
    v2, v1 = _cgroup_paths(ctx)
    limit = usage = swap = None
    candidates: list[tuple[str, str, str, str | None]] = []
    if v1 is not None:
        for p in _ancestors(v1):
            base = os.path.join("/sys/fs/cgroup/memory", p.lstrip("/")).rstrip("/")
            candidates.append((base, "memory.limit_in_bytes", "memory.usage_in_bytes", None))
    if v2 is not None:
        for p in _ancestors(v2):
            base = os.path.join("/sys/fs/cgroup", p.lstrip("/")).rstrip("/")
            candidates.append((base, "memory.max", "memory.current", "memory.swap.max"))
    for base, limit_file, usage_file, swap_file in candidates:
        if ctx.time_left() == 0:
            # One note, not one per remaining ancestor; the tightest limit so far stands.
            ctx.note("cgroup memory limits: deadline passed; the rest not read")
            break
        found = _read_limit(ctx, f"{base}/{limit_file}")
        if found is None or (limit is not None and found >= limit):
            continue
        limit = found
        usage = _read_limit(ctx, f"{base}/{usage_file}")
        if swap_file is not None:
            swap_max = _read_limit(ctx, f"{base}/{swap_file}")
            swap_used = _read_limit(ctx, f"{base}/memory.swap.current") or 0
            swap = None if swap_max is None else max(0, swap_max - swap_used)
    return limit, usage, swap


def read_system(ctx: Context) -> SystemInfo:
    """System memory under ``ctx.root``; zeros where the files are missing (never an error)."""
    if ctx.platform == "darwin" and ctx.root in ("", "/"):
        return _darwin_system()
    info, bad = _parse_meminfo(ctx.read_text("/proc/meminfo") or "")
    unusable = [key for key in _MEMINFO_KEYS if key in bad]
    if unusable:
        ctx.note(f"/proc/meminfo: {', '.join(unusable)} not a number below 2**64 bytes; "
                 "taken as unknown")
    total = info.get("MemTotal", 0)
    free = info.get("MemAvailable", info.get("MemFree", 0))
    swap = info.get("SwapFree", 0)
    limit, usage, swap_left = cgroup_memory(ctx)
    if limit is not None:
        total = min(total, limit) if total else limit
        if usage is not None:
            free = min(free, max(0, limit - usage)) if free else max(0, limit - usage)
    if swap_left is not None:
        swap = min(swap, swap_left)
    return SystemInfo(total_memory=total, free_memory=min(free, total) if total else free,
                      free_swap=swap)


def _darwin_system() -> SystemInfo:  # pragma: no cover - macOS only
    try:
        pages = os.sysconf("SC_PHYS_PAGES")
        size = os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return SystemInfo()
    return SystemInfo(total_memory=pages * size)
