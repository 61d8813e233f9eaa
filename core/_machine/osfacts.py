"""Facts about the operating system a plugin may ask, each answered through the Context (so a
recorded tree or a replayed recording answers as the live machine does):

- ``is_wsl2(ctx)``: whether this Linux runs in WSL2, from ``/proc/version`` under the root;
- ``sysctl_int(ctx, name)``: a macOS ``sysctlbyname`` integer (``hw.memsize``,
  ``iogpu.wired_limit_mb``), recorded and replayed as the calling reader's answer ``sysctl``;
- ``vm_statistics(ctx)``: the macOS host VM statistics (``host_statistics64(HOST_VM_INFO64)``,
  what ``vm_stat`` prints) with the page size, recorded and replayed as answer
  ``vm_statistics``.

Answers are kept per reader: a plugin's go to ``answers/<plugin>.json``, the system-memory
reader's (a context without a plugin name) to ``answers/core.json``. Nothing here imports or
calls anything macOS-only off macOS, and the live calls run only on an unprefixed root.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpuscout._machine.context import U64_LIMIT, Context
from gpuscout.errors import RecordingError

#: Where WSL2's kernel says what it is (``5.15.153.1-microsoft-standard-WSL2``).
PROC_VERSION = "/proc/version"
#: The device node WSL2's dxgkrnl driver gives a distribution in place of a GPU's own nodes.
DXG_NODE = "/dev/dxg"
#: The answers ``sysctl_int`` and ``vm_statistics`` record under.
SYSCTL_KEY = "sysctl"
VM_STATISTICS_KEY = "vm_statistics"
#: The counters of ``vm_statistics64`` that are recorded (pages; the page size in bytes).
VM_FIELDS = (
    "page_size",
    "free_count",
    "active_count",
    "inactive_count",
    "speculative_count",
    "wire_count",
    "purgeable_count",
    "compressor_page_count",
    "external_page_count",
    "internal_page_count",
)
#: Values sysctl names may take: ``hw.memsize``, ``iogpu.wired_limit_mb`` (letters, digits, ``._``).
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._")


def is_wsl2(ctx: Context) -> bool:
    """Whether the kernel is WSL2's, by ``/proc/version`` under the context's root.

    Microsoft's WSL2 kernels name themselves ``...-microsoft-standard-WSL2`` (5.10 on) or
    ``...-microsoft-standard`` (the first 4.19 ones); WSL1 has no Linux kernel and shows
    ``...-Microsoft`` without ``standard``, and has no GPU path at all.
    """
    text = (ctx.read_text(PROC_VERSION) or "").lower()
    return "microsoft" in text and ("wsl2" in text or "microsoft-standard" in text)


def _checked_int(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < U64_LIMIT:
        raise RecordingError(f"{where}: expected a whole number in 0..2**64-1, got {value!r:.40}")
    return value


def _remember(ctx: Context, key: str, item: str | None, value: Any) -> None:
    """Keep ``value`` under answer ``key`` (under ``key[item]`` when ``item`` is given)."""
    recorder = ctx.recorder
    if recorder is None:
        return
    if item is None:
        ctx.record(key, value)
        return
    merge = getattr(recorder, "answer_item", None)
    if merge is not None:
        merge(ctx.plugin, key, item, value)


def sysctl_int(ctx: Context, name: str) -> int | None:
    """The integer sysctl ``name`` (``hw.memsize``), or None when there is none (not macOS,
    an unknown name, a value that is not an integer of 4 or 8 bytes).

    Replaying, the recorded ``sysctl`` object answers (a name it lacks is None); a malformed
    one raises RecordingError. While recording, the live answer (None too) is kept.
    """
    if not name or not set(name) <= _NAME_CHARS or len(name) > 128:
        return None
    if ctx.replaying:
        recorded = ctx.recorded(SYSCTL_KEY)
        if recorded is None:
            return None
        if not isinstance(recorded, Mapping):
            raise RecordingError(f"answers/{ctx.plugin or 'core'}.json: {SYSCTL_KEY}: expected an object")
        value = recorded.get(name)
        where = f"answers/{ctx.plugin or 'core'}.json: {SYSCTL_KEY}.{name}"
        return None if value is None else _checked_int(value, where)
    if ctx.platform != "darwin" or ctx.root not in ("", "/"):
        return None
    value = _live_sysctl(name)
    _remember(ctx, SYSCTL_KEY, name, value)
    return value


def vm_statistics(ctx: Context) -> dict[str, int] | None:
    """The host's VM statistics (``VM_FIELDS``: page counts and ``page_size``), or None.

    Replaying, the recorded ``vm_statistics`` object answers; one without ``page_size`` or with
    a value that is not a whole number raises RecordingError.
    """
    if ctx.replaying:
        recorded = ctx.recorded(VM_STATISTICS_KEY)
        if recorded is None:
            return None
        where = f"answers/{ctx.plugin or 'core'}.json: {VM_STATISTICS_KEY}"
        if not isinstance(recorded, Mapping) or "page_size" not in recorded:
            raise RecordingError(f"{where}: expected an object with page_size and page counts")
        return {k: _checked_int(recorded[k], f"{where}.{k}") for k in VM_FIELDS if k in recorded}
    if ctx.platform != "darwin" or ctx.root not in ("", "/"):
        return None
    stats = _live_vm_statistics()
    _remember(ctx, VM_STATISTICS_KEY, None, stats)
    return stats


def available_bytes(stats: Mapping[str, int]) -> int:
    """Memory a new allocation can get without swapping, from ``vm_statistics``: free plus
    inactive pages, times the page size.

    ``free_count`` counts the speculative pages too (``vm_stat`` prints "Pages free" as
    ``free_count - speculative_count`` and "Pages speculative" apart: Apple's system_cmds
    ``vm_stat.c``); speculative and inactive pages are clean file cache the kernel hands out
    before it compresses or swaps anything, so they count as available, as psutil counts them
    (``avail = inactive + free``, psutil ``_psosx.virtual_memory``). Purgeable and compressed
    pages are not counted.
    """
    pages = stats.get("free_count", 0) + stats.get("inactive_count", 0)
    return pages * stats.get("page_size", 0)


# -- macOS only: the live calls (ctypes over libc and the Mach host port) ------------------------


def _live_sysctl(name: str) -> int | None:  # pragma: no cover - macOS only
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.dylib", use_errno=True)
        buf = ctypes.create_string_buffer(8)
        size = ctypes.c_size_t(8)
        if libc.sysctlbyname(name.encode(), buf, ctypes.byref(size), None, ctypes.c_size_t(0)) != 0:
            return None
    except (OSError, AttributeError):
        return None
    if size.value not in (4, 8):
        return None
    return int.from_bytes(buf.raw[: size.value], "little")


def _live_vm_statistics() -> dict[str, int] | None:  # pragma: no cover - macOS only
    import ctypes
    import ctypes.util

    natural, u64 = ctypes.c_uint32, ctypes.c_uint64

    class VmStatistics64(ctypes.Structure):
        # <mach/vm_statistics.h> struct vm_statistics64 (HOST_VM_INFO64_COUNT = 38 words).
        _fields_ = [
            ("free_count", natural),
            ("active_count", natural),
            ("inactive_count", natural),
            ("wire_count", natural),
            ("zero_fill_count", u64),
            ("reactivations", u64),
            ("pageins", u64),
            ("pageouts", u64),
            ("faults", u64),
            ("cow_faults", u64),
            ("lookups", u64),
            ("hits", u64),
            ("purges", u64),
            ("purgeable_count", natural),
            ("speculative_count", natural),
            ("decompressions", u64),
            ("compressions", u64),
            ("swapins", u64),
            ("swapouts", u64),
            ("compressor_page_count", natural),
            ("throttled_count", natural),
            ("external_page_count", natural),
            ("internal_page_count", natural),
            ("total_uncompressed_pages_in_compressor", u64),
        ]

    host_vm_info64 = 4
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.dylib")
        libc.mach_host_self.restype = ctypes.c_uint32
        host = libc.mach_host_self()
        page = ctypes.c_size_t(0)
        if libc.host_page_size(host, ctypes.byref(page)) != 0:
            return None
        stats = VmStatistics64()
        count = ctypes.c_uint32(ctypes.sizeof(stats) // 4)
        if libc.host_statistics64(host, host_vm_info64, ctypes.byref(stats), ctypes.byref(count)) != 0:
            return None
    except (OSError, AttributeError):
        return None
    found = {"page_size": int(page.value)}
    found.update({k: int(getattr(stats, k)) for k in VM_FIELDS if k != "page_size"})
    return found


__all__ = [
    "DXG_NODE",
    "PROC_VERSION",
    "SYSCTL_KEY",
    "VM_FIELDS",
    "VM_STATISTICS_KEY",
    "available_bytes",
    "is_wsl2",
    "sysctl_int",
    "vm_statistics",
]
