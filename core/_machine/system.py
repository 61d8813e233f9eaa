"""System memory, cgroup-aware: what a process here may really use.

/proc/meminfo reports the host's memory even inside a container; the cgroup memory limit (v1 or
v2) caps both total and free. Total is capped by the smallest limit on the path to the root; free
by the smallest headroom, ``limit - working set``, of any limited cgroup on that path.

The working set is the cgroup's usage (v2 ``memory.current``, v1 ``memory.usage_in_bytes``) less
the inactive file cache its ``memory.stat`` reports (v2 ``inactive_file``; v1
``total_inactive_file``, which counts the descendants as usage does, else ``inactive_file``),
never below 0. Usage counts page cache, so a container that has just read a model file would
otherwise look full (ollama#15474), though the kernel reclaims inactive cache before it would
kill anything for memory. The kubelet (through cAdvisor) computes the working set that its
evictions go by the same way. Without a readable ``memory.stat`` the usage itself counts, as
it did before.
"""

from __future__ import annotations

import os

from gpuscout._machine.context import U64_LIMIT, Context, parse_u64
from gpuscout._machine.osfacts import available_bytes, is_wsl2, sysctl_int, vm_statistics
from gpuscout._records.device import SystemInfo
from gpuscout.sizes import human_bytes

#: cgroup v1 writes this for "no limit" (LONG_MAX rounded down to a page).
_V1_UNLIMITED = 9223372036854771712
#: The meminfo keys read_system uses, the ones worth a note when unreadable.
_MEMINFO_KEYS = ("MemTotal", "MemAvailable", "MemFree", "SwapFree")
#: Linux's PATH_MAX: no cgroup path is longer, and a longer one would mean thousands of ancestors.
_PATH_MAX = 4096
#: ``memory.stat`` keys for the inactive file cache, the first one present wins. v1's
#: ``inactive_file`` is the cgroup's own; ``total_inactive_file`` adds its descendants', as
#: ``memory.usage_in_bytes`` does (v2's ``memory.stat`` is hierarchical throughout).
_V2_INACTIVE = ("inactive_file",)
_V1_INACTIVE = ("total_inactive_file", "inactive_file")


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


def _inactive_file(ctx: Context, path: str, keys: tuple[str, ...]) -> int | None:
    """The inactive file cache (bytes) in ``memory.stat`` file ``path``: the value of the first of
    ``keys`` present, or None.

    None without a note when the file is missing or unreadable (a recorded tree may lack it) or
    names none of ``keys``; ``Context.read_text`` notes a FIFO or an oversized file. A value
    that is not a number below 2**64 gets a note and counts as absent; as in /proc/meminfo, the
    last line for a key wins.
    """
    text = ctx.read_text(path)
    if text is None:
        return None
    values: dict[str, int] = {}
    bad: dict[str, str] = {}
    for line in text.splitlines():
        fields = line.split()
        if not fields or fields[0] not in keys:
            continue
        key = fields[0]
        value = parse_u64(fields[1]) if len(fields) == 2 else None
        if value is None:
            values.pop(key, None)
            bad[key] = " ".join(fields[1:])
        else:
            values[key] = value
            bad.pop(key, None)
    for key, raw in bad.items():
        ctx.note(f"{path}: {key} {raw[:40]!r} is not a number below 2**64; ignored")
    return next((values[key] for key in keys if key in values), None)


def _headroom(ctx: Context, base: str, limit: int, usage_file: str, keys: tuple[str, ...]) -> int | None:
    """``limit`` less the working set of the cgroup at ``base``, in 0..limit; None when its
    usage cannot be read.

    The working set is usage less the inactive file cache of ``base/memory.stat`` (see the
    module's docstring), never below 0; the usage itself without a readable figure.
    """
    usage = _read_limit(ctx, f"{base}/{usage_file}")
    if usage is None:
        return None
    inactive = _inactive_file(ctx, f"{base}/memory.stat", keys)
    working_set = usage if inactive is None else max(0, usage - inactive)
    return max(0, limit - working_set)


def cgroup_memory(ctx: Context) -> tuple[int | None, int | None, int | None]:
    """(limit, free, swap left) from the process's memory cgroups; None where there is none.

    ``limit`` is the smallest limit on the path to the root (v1 and v2 both). ``free`` the
    smallest ``limit - working set`` over every limited cgroup on that path whose usage can be
    read, each from its own usage and ``memory.stat``: a parent with a larger limit can still
    leave less room than its child, when its other children use it. ``swap left`` comes from the
    cgroup with the smallest limit.
    """
    v2, v1 = _cgroup_paths(ctx)
    limit = free = swap = None
    candidates: list[tuple[str, str, str, str | None, tuple[str, ...]]] = []
    if v1 is not None:
        for p in _ancestors(v1):
            base = os.path.join("/sys/fs/cgroup/memory", p.lstrip("/")).rstrip("/")
            candidates.append((base, "memory.limit_in_bytes", "memory.usage_in_bytes", None, _V1_INACTIVE))
    if v2 is not None:
        for p in _ancestors(v2):
            base = os.path.join("/sys/fs/cgroup", p.lstrip("/")).rstrip("/")
            candidates.append((base, "memory.max", "memory.current", "memory.swap.max", _V2_INACTIVE))
    for base, limit_file, usage_file, swap_file, inactive_keys in candidates:
        if ctx.time_left() == 0:
            # One note, not one per remaining ancestor; the tightest figures so far stand.
            ctx.note("cgroup memory limits: deadline passed; the rest not read")
            break
        found = _read_limit(ctx, f"{base}/{limit_file}")
        if found is None:
            continue
        room = _headroom(ctx, base, found, usage_file, inactive_keys)
        if room is not None and (free is None or room < free):
            free = room
        if limit is not None and found >= limit:
            continue
        limit = found
        if swap_file is not None:
            swap_max = _read_limit(ctx, f"{base}/{swap_file}")
            swap_used = _read_limit(ctx, f"{base}/memory.swap.current") or 0
            swap = None if swap_max is None else max(0, swap_max - swap_used)
    return limit, free, swap


def read_system(ctx: Context) -> SystemInfo:
    """System memory under ``ctx.root``; zeros where the files are missing (never an error).

    Free is MemAvailable (MemFree without it), capped by the cgroup free memory (limit less the
    working set, page cache not counted; see ``cgroup_memory``) and by the total.
    """
    if ctx.platform == "darwin" and (ctx.replaying or ctx.root in ("", "/")):
        return darwin_system(ctx)
    info, bad = _parse_meminfo(ctx.read_text("/proc/meminfo") or "")
    unusable = [key for key in _MEMINFO_KEYS if key in bad]
    if unusable:
        ctx.note(f"/proc/meminfo: {', '.join(unusable)} not a number below 2**64 bytes; taken as unknown")
    total = info.get("MemTotal", 0)
    free = info.get("MemAvailable", info.get("MemFree", 0))
    swap = info.get("SwapFree", 0)
    limit, cgroup_free, swap_left = cgroup_memory(ctx)
    if limit is not None:
        total = min(total, limit) if total else limit
    if cgroup_free is not None:
        free = min(free, cgroup_free) if free else cgroup_free
    if swap_left is not None:
        swap = min(swap, swap_left)
    notes: tuple[str, ...] = ()
    if total and is_wsl2(ctx):
        vm_total = info.get("MemTotal", 0)
        clause = _wsl2_cgroup_clause(limit, vm_total) if limit is not None and 0 < limit < vm_total else ""
        notes = (WSL2_NOTE + clause,)
    return SystemInfo(
        total_memory=total, free_memory=min(free, total) if total else free, free_swap=swap, notes=notes
    )


#: Said of system memory under WSL2 (Microsoft, "Advanced settings configuration in WSL",
#: learn.microsoft.com/windows/wsl/wsl-config: ``memory`` defaults to 50% of Windows' memory).
WSL2_NOTE = (
    "WSL2: this is the memory of WSL's virtual machine, not the Windows host's: "
    ".wslconfig's memory= bounds it (by default half of the host's RAM)"
)


def _wsl2_cgroup_clause(limit: int, vm_total: int) -> str:
    """What WSL2's note adds when a cgroup limit inside the VM (a container's ``--memory``) is
    what bounds the figures: raising ``.wslconfig``'s ``memory=`` would not raise them."""
    return (
        f"; here a cgroup memory limit of {human_bytes(limit)}, below the VM's {human_bytes(vm_total)}, "
        "bounds them (a container's --memory, or a systemd or Slurm limit)"
    )


#: Said of a darwin recording that holds no system memory answers (docs/recordings.md).
DARWIN_UNRECORDED_NOTE = (
    "macOS: the recording holds no system memory figures (answers/core.json: sysctl hw.memsize "
    "and vm_statistics), so total and free are unknown"
)


def darwin_system(ctx: Context) -> SystemInfo:
    """macOS system memory: total ``hw.memsize``, free the host VM statistics' free and
    inactive pages (``gpuscout._machine.osfacts.available_bytes``, what ``vm_stat`` reads), through the
    context, so a recording replays it. Zeros for what is not known; swap is not read."""
    total = sysctl_int(ctx, "hw.memsize") or 0
    if not total and not ctx.replaying:
        total = _sysconf_total()  # sysctlbyname unusable: the page count still gives the total
    stats = vm_statistics(ctx)
    if stats is None:
        if total:
            ctx.note("macOS: the host VM statistics (host_statistics64) were not readable; free unknown")
        elif ctx.replaying:  # said on the system: a /proc/meminfo hint would be Linux's
            return SystemInfo(notes=(DARWIN_UNRECORDED_NOTE,))
        return SystemInfo(total_memory=total)
    free = available_bytes(stats)
    free = min(free, total) if total else free
    page = stats.get("page_size", 0)
    note = (
        f"macOS: free is the host VM statistics' free + inactive pages ({page}-byte pages, as "
        "vm_stat counts them); it includes file cache the kernel reclaims first"
    )
    return SystemInfo(total_memory=total, free_memory=free, notes=(note,))


def _sysconf_total() -> int:
    """Physical memory as ``sysconf`` counts it (pages times page size); 0 where unsupported."""
    try:
        return max(0, os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return 0
