"""Files under a root, resolved as a chroot resolves them: no read leaves the root.

A recorded tree (``--root``, a recording's ``root/``) is untrusted: its symbolic links are
resolved inside it at every read, as the kernel would resolve them if the root were ``/``. An
absolute link means the root's own path, ``..`` stops at the root, and a link swapped in after
the tree was checked is resolved the same way, so nothing outside the root can be opened,
listed or looked at, however the tree changes.

Two ways, the same answers:

- ``openat2(2)`` with ``RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS`` (Linux 5.6), called through
  ctypes, where the kernel has it: the kernel resolves the whole path in the root, races
  included.
- Elsewhere (older kernels, macOS, a seccomp filter that refuses the call) a walk of our own,
  one component at a time from a descriptor of the root: each component is looked at with
  ``lstat`` relative to the directory's descriptor and opened with ``O_NOFOLLOW``, a link's
  text is resolved by the walk itself (an absolute one from the root, ``..`` from the names the
  walk went through, never the kernel's ``..``), at most 40 links per path as Linux allows.
  A component swapped for a link between its look and its open fails the open (``ELOOP``):
  a missing file, never the link's target. The walk is iterative: any depth, no recursion.

The live root (``/`` or ``""``) is the machine itself: paths are used as they are.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
import threading
from collections.abc import Sequence
from typing import Any

#: The most links one path may go through (Linux's MAXSYMLINKS).
MAX_LINKS = 40
#: The longest link text followed (PATH_MAX).
MAX_LINK_TEXT = 4096

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
#: How a directory on the way is held: only as a place to look up names in.
_DIR_FLAGS = _DIRECTORY | _NOFOLLOW | _CLOEXEC | getattr(os, "O_PATH", os.O_RDONLY)
#: Whether this platform has what the walk needs (``*at`` calls with a directory descriptor).
WALKABLE = bool(_NOFOLLOW) and os.open in os.supports_dir_fd and os.stat in os.supports_dir_fd

# openat2(2): struct open_how, the RESOLVE_ flags, and the syscall number (the same on every
# Linux architecture but alpha, which gpuscout does not run on).
_SYS_OPENAT2 = 437
_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_IN_ROOT = 0x10


_lock = threading.Lock()
_syscall: Any = None  # None: not yet asked; False: not available; else libc's syscall
_how: Any = None  # struct open_how, made with ctypes when first needed (imported lazily)


def _open_how(flags: int) -> Any:
    """A ``struct open_how {u64 flags, mode, resolve}`` asking for in-root resolution."""
    global _how
    import ctypes

    if _how is None:

        class OpenHow(ctypes.Structure):
            _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]

        _how = OpenHow
    return _how(flags | _CLOEXEC, 0, _RESOLVE_IN_ROOT | _RESOLVE_NO_MAGICLINKS)


def _openat2_function() -> object:
    """libc's ``syscall`` when this kernel answers openat2 (asked once), else False."""
    global _syscall
    with _lock:
        if _syscall is not None:
            return _syscall
        _syscall = False
        if not sys.platform.startswith("linux"):
            return _syscall
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            function = libc.syscall
            function.restype = ctypes.c_long
            how = _open_how(os.O_RDONLY | _DIRECTORY)
            fd = function(
                ctypes.c_long(_SYS_OPENAT2),
                ctypes.c_int(-100),  # AT_FDCWD
                ctypes.c_char_p(b"/"),
                ctypes.byref(how),
                ctypes.c_size_t(ctypes.sizeof(how)),
            )
        except (OSError, AttributeError, TypeError):
            return _syscall
        if fd >= 0:
            os.close(fd)
            _syscall = function
        return _syscall


def _openat2(dirfd: int, path: str, flags: int) -> int:
    """``openat2(dirfd, path, flags, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS)``; OSError."""
    import ctypes

    function = _openat2_function()
    assert callable(function)
    how = _open_how(flags)
    encoded = os.fsencode(path or ".")
    for _ in range(8):  # EAGAIN: a rename or mount raced the lookup; the kernel asks to retry
        fd = function(
            ctypes.c_long(_SYS_OPENAT2),
            ctypes.c_int(dirfd),
            ctypes.c_char_p(encoded),
            ctypes.byref(how),
            ctypes.c_size_t(ctypes.sizeof(how)),
        )
        if fd >= 0:
            return int(fd)
        code = ctypes.get_errno()
        if code != errno.EAGAIN:
            raise OSError(code, os.strerror(code), path)
    raise OSError(errno.EAGAIN, os.strerror(errno.EAGAIN), path)


def live(root: str) -> bool:
    """Whether ``root`` is the machine itself, whose paths need no resolving of ours."""
    return root in ("", "/")


def open_root(root: str, pinned: bool) -> int:
    """A descriptor of directory ``root``; ``pinned``: its last component is not followed (a
    recording's ``root/`` that became a link reads as an empty machine)."""
    if not pinned:
        return os.open(root, _DIR_FLAGS & ~_NOFOLLOW)
    parent, name = os.path.split(os.path.normpath(root))
    parent_fd = os.open(parent or ".", _DIR_FLAGS & ~_NOFOLLOW)
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
    finally:
        os.close(parent_fd)


def _components(target: str) -> list[str]:
    """A link's text as the walk's components: empty ones and ``.`` dropped, but a text that
    ends in ``/`` or ``/.`` (or is ``.``) ends in ``.``, which asks for a directory there, as
    the kernel asks."""
    parts = [p for p in target.split("/") if p not in ("", ".")]
    if target.endswith(("/", "/.")) or target == ".":
        parts.append(".")
    return parts


def _walk(root_fd: int, parts: Sequence[str], follow_last: bool) -> tuple[int, str]:
    """Resolve ``parts`` under ``root_fd`` as a chroot would: ``(descriptor of the directory
    holding the target, the target's name in it)``, the name ``.`` when the target is that
    directory itself; the caller closes the descriptor. With ``follow_last`` the name is not
    a link (when looked at); without, a last component that is a link is returned as such.
    OSError for a missing component, a non-directory on the way or too many links."""
    pending = list(reversed(_components("/".join(parts))))  # the next component last
    names: list[str] = []  # the real directories from the root to ``current``
    current = os.dup(root_fd)
    links = 0
    try:
        while pending:
            name = pending.pop()
            if name == ".":
                continue  # only ever after a directory (the walk opened it as one)
            if name == "..":
                if names:
                    names.pop()
                    current = _reopen(root_fd, names, current)
                continue
            last = not pending
            if last and not follow_last:
                return current, name
            info = os.stat(name, dir_fd=current, follow_symlinks=False)
            if stat.S_ISLNK(info.st_mode):
                links += 1
                if links > MAX_LINKS:
                    raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), name)
                target = os.readlink(name, dir_fd=current)
                if not target or len(target) > MAX_LINK_TEXT:
                    raise OSError(errno.ENOENT, os.strerror(errno.ENOENT), name)
                if target.startswith("/"):
                    names.clear()
                    current = _reopen(root_fd, names, current)
                pending.extend(reversed(_components(target)))
                continue
            if last:
                return current, name
            if not stat.S_ISDIR(info.st_mode):
                raise OSError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), name)
            # O_NOFOLLOW: a link swapped in since the look fails here (ELOOP), never followed.
            opened = os.open(name, _DIR_FLAGS, dir_fd=current)
            os.close(current)
            current = opened
            names.append(name)
        return current, "."
    except BaseException:
        os.close(current)
        raise


def _reopen(root_fd: int, names: Sequence[str], current: int) -> int:
    """A descriptor of the directory ``names`` leads to from the root (each opened without
    following: they were directories when the walk went through them); ``current`` closed."""
    os.close(current)
    fd = os.dup(root_fd)
    try:
        for name in names:
            opened = os.open(name, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = opened
    except BaseException:
        os.close(fd)
        raise
    return fd


def _joined(root: str, parts: Sequence[str]) -> str:
    return os.path.join(root or "/", *parts)


def open_file(root: str, parts: Sequence[str], flags: int, pinned: bool = False) -> int:
    """``parts`` under ``root`` opened with ``flags``, resolved in the root; OSError."""
    if live(root) or not WALKABLE:
        return os.open(_joined(root, parts), flags)
    root_fd = open_root(root, pinned)
    try:
        if _openat2_function():
            return _openat2(root_fd, "/".join(parts), flags)
        where, name = _walk(root_fd, parts, follow_last=True)
        try:
            return os.open(name, flags | _NOFOLLOW, dir_fd=where)
        finally:
            os.close(where)
    finally:
        os.close(root_fd)


def stat_path(root: str, parts: Sequence[str], pinned: bool = False) -> os.stat_result:
    """``os.stat`` of ``parts`` under ``root``, links resolved in the root (nothing opened
    that acts when opened: a device is only looked at); OSError."""
    if live(root) or not WALKABLE:
        return os.stat(_joined(root, parts))
    root_fd = open_root(root, pinned)
    try:
        if _openat2_function() and hasattr(os, "O_PATH"):
            fd = _openat2(root_fd, "/".join(parts), os.O_PATH)
            try:
                return os.fstat(fd)
            finally:
                os.close(fd)
        where, name = _walk(root_fd, parts, follow_last=True)
        try:
            return os.stat(name, dir_fd=where, follow_symlinks=False)
        finally:
            os.close(where)
    finally:
        os.close(root_fd)


def read_link(root: str, parts: Sequence[str], pinned: bool = False) -> str:
    """The text of link ``parts`` under ``root`` (its folders resolved in the root, the link
    itself not followed); OSError."""
    if live(root) or not WALKABLE:
        return os.readlink(_joined(root, parts))
    if not parts:
        raise OSError(errno.EINVAL, os.strerror(errno.EINVAL), "/")
    root_fd = open_root(root, pinned)
    try:
        where, name = _walk(root_fd, parts, follow_last=False)
        try:
            return os.readlink(name, dir_fd=where)
        finally:
            os.close(where)
    finally:
        os.close(root_fd)


def scan(directory: str | int, limit: int) -> list[str] | None:
    """The names in ``directory`` (a path, or a descriptor, left open), None past ``limit``."""
    names: list[str] = []
    with os.scandir(directory) as entries:
        for entry in entries:
            if len(names) == limit:
                return None
            names.append(entry.name)
    return names


def list_names(root: str, parts: Sequence[str], limit: int, pinned: bool = False) -> list[str] | None:
    """The names in directory ``parts`` under ``root`` (unsorted), None past ``limit`` of
    them; OSError when it cannot be listed."""
    if live(root) or not WALKABLE:
        return scan(_joined(root, parts), limit)
    fd = open_file(root, parts, os.O_RDONLY | _DIRECTORY | _CLOEXEC, pinned)
    try:
        return scan(fd, limit)
    finally:
        os.close(fd)


__all__ = [
    "MAX_LINKS",
    "WALKABLE",
    "list_names",
    "live",
    "open_file",
    "open_root",
    "read_link",
    "scan",
    "stat_path",
]
