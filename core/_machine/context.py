"""What a plugin may know about the world: environment, platform, filesystem root, deadline."""

from __future__ import annotations

import os
import re
import stat
import time
import types
from collections.abc import Mapping
from typing import Any, NamedTuple

import attrs

from gpuscout._machine import rootfs
from gpuscout.log import get_logger
from gpuscout.sizes import human_bytes


class EnvEntry(NamedTuple):
    """One visibility value: ``selection[position]`` appends ``value`` to variable ``name``."""

    position: int
    name: str
    value: str


class GgmlOrder(NamedTuple):
    """How a ggml build enumerates one library's devices (``gpuscout_ggml_devices``): the
    registry's position of the backend (lower first), each device as ``(position, name)``
    (``devices[position]``, ggml's name such as ``Vulkan0``; a position may repeat where ggml
    lists one device twice), and the variables that make a child enumerate exactly these."""

    rank: int
    devices: tuple[tuple[int, str], ...]
    env: Mapping[str, str]


#: The most bytes ``Context.read_text`` takes from one file: sysfs and procfs values are a few
#: bytes to a few pages, and a recorded tree must not make discovery read a disk image.
MAX_READ_BYTES = 1 << 20
#: The most notes one context keeps.
MAX_NOTES = 50
#: The most names ``Context.list_dir`` takes from one directory.
MAX_DIR_ENTRIES = 1 << 16
#: How every file of a machine is opened for reading (the Context, replay, fit's model reader):
#: never waiting (a FIFO without a writer) nor taking a terminal; Windows lacks some flags.
READ_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_NOCTTY", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_BINARY", 0)
)
#: How a device node is opened to see whether this process may use it (as drivers open it).
DEVICE_FLAGS = (
    os.O_RDWR | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
)
# What Context.path gives for a path that climbs out of the root: longer than any system's
# PATH_MAX, so opening, listing or stat-ing it fails with OSError, like a missing file.
_OUTSIDE_ROOT = "outside-the-root" * 640


#: Kernel counters are 64-bit: anything from 2**64 on is not one.
U64_LIMIT = 1 << 64
#: ASCII digits only: str.isdigit() and int() also take "²" and "١٢", which the kernel never writes.
_DIGITS = re.compile(r"[0-9]+")


def parse_u64(text: str) -> int | None:
    """``text`` as an unsigned decimal below 2**64 (ASCII digits only), else None."""
    if _DIGITS.fullmatch(text) is None:
        return None
    # Length first: int() of thousands of digits is slow and refused past 4300.
    digits = text.lstrip("0") or "0"
    if len(digits) > len(str(U64_LIMIT)):
        return None
    value = int(digits)
    return value if value < U64_LIMIT else None


#: Where plugins' events go (each bound with the plugin's name).
_PLUGIN_LOG = get_logger("gpuscout.plugins")


def _read_only(env: Mapping[str, str]) -> Mapping[str, str]:
    if getattr(env, "_gpuscout_read_only", False):
        return env  # a recording's environment, which notes the names read (read-only)
    return types.MappingProxyType(dict(env))


@attrs.define
class Context:
    """Handed to plugin hooks; plugins read nothing from the process that is not in here.

    ``env`` is the environment the plugin must use (never ``os.environ``): a read-only copy, so
    nothing a plugin does reaches the host or another plugin. ``platform`` a
    ``sys.platform`` value, ``root`` the prefix of every file read (``/`` on a live machine, a
    recorded tree in tests), ``deadline`` a ``time.monotonic()`` value or None.
    """

    env: Mapping[str, str] = attrs.field(converter=_read_only)
    platform: str
    root: str = "/"
    deadline: float | None = None
    plugin: str = ""
    notes: list[str] = attrs.field(factory=list)
    log: Any = attrs.field(default=None)
    #: This plugin's recorded driver answers while replaying a recording (``{}`` when the
    #: recording holds none for it); None on a live machine. See ``replaying``.
    answers: Mapping[str, Any] | None = None
    #: Where ``record`` keeps answers while ``gpuscout record`` runs; None otherwise.
    recorder: Any = attrs.field(default=None, repr=False)

    def __attrs_post_init__(self) -> None:
        if self.log is None:
            self.log = _PLUGIN_LOG.bind(plugin=self.plugin) if self.plugin else _PLUGIN_LOG

    def path(self, path: str) -> str:
        """``path`` (absolute, e.g. ``/sys/class/drm``) under this context's root: a name for a
        library that must open the file itself.

        ``..`` is resolved by the name alone, as if the root were ``/``; a path that would climb
        above the root gets a name no system accepts, so using it fails as a missing file does.
        The name is not resolved in the root: the kernel follows a recorded tree's links out of
        it. Read through ``read_text``, ``list_dir``, ``read_link``, ``exists``, ``is_dir``
        and ``device_node``, which resolve every link inside the root (``gpuscout._machine.rootfs``).
        """
        inside = self._inside(path)
        return os.path.join(self.root or "/", _OUTSIDE_ROOT) if inside is None else inside

    def shown(self, path: str) -> str:
        """How a note names ``path``: the file under a recorded tree's root (``--root``), the
        name itself on the live machine and in a replay (whose root is the recording's, not the
        user's business)."""
        return path if self.replaying or self.root in ("", "/") else self.path(path)

    def _inside(self, path: str) -> str | None:
        """``path`` joined to the root with ``.`` and ``..`` resolved; None when it escapes."""
        parts = self._parts(path)
        return None if parts is None else os.path.join(self.root or "/", *parts)

    @staticmethod
    def _parts(path: str) -> list[str] | None:
        """The components of ``path`` with ``.`` and ``..`` resolved by name; None when it
        climbs above ``/``."""
        parts: list[str] = []
        for part in path.replace(os.sep, "/").split("/"):
            if part in ("", "."):
                continue
            if part == "..":
                if not parts:
                    return None
                parts.pop()
            elif os.path.splitdrive(part)[0]:
                return None  # a drive letter would replace the root on Windows
            else:
                parts.append(part)
        return parts

    @property
    def _pinned(self) -> bool:
        """Whether the root's own last component is not followed: a recording's ``root/``
        (a replay) is part of the recording, and a link there reads as an empty machine."""
        return self.replaying

    def _stat(self, path: str) -> os.stat_result:
        """``os.stat`` of ``path`` resolved inside the root (``gpuscout._machine.rootfs``); OSError,
        ValueError for a NUL in the name. On the live root, of ``self.path(path)``: the one
        mapping of names to files there, so a subclass can redirect it."""
        if rootfs.live(self.root):
            return os.stat(self.path(path))
        return rootfs.stat_path(self.root, self._parts(path) or [], self._pinned)

    def _open(self, path: str, flags: int) -> int:
        """``path`` opened with ``flags``, resolved inside the root; OSError, ValueError."""
        if rootfs.live(self.root):
            return os.open(self.path(path), flags)
        return rootfs.open_file(self.root, self._parts(path) or [], flags, self._pinned)

    def read_text(self, path: str) -> str | None:
        """The text of ``path`` under the root (UTF-8, bad bytes replaced), or None.

        None with a note for a relative path or one that leads outside the root, for anything
        but a regular file (a FIFO would block, a device never ends), for a file over
        ``MAX_READ_BYTES`` and once the deadline has passed; None without one for a missing or
        unreadable file. File sizes are never trusted (sysfs and procfs report 0 or 4096), only
        what a bounded read returns.
        """
        data = self._read_bytes(path)
        return None if data is None else data.decode("utf-8", errors="replace")

    def _may_use(self, path: str, done: str) -> bool:
        """Whether ``path`` is absolute and inside the root and the deadline has not passed;
        notes why not (a relative path would silently mean one under the root)."""
        if not path.startswith("/"):
            self.note(
                f"{path}: not an absolute path (paths are read under the root {self.root!r}); not {done}"
            )
            return False
        if self._inside(path) is None:
            self.note(f"{path}: leads outside the root {self.root!r}; not {done}")
            return False
        if self.time_left() == 0:
            self.note(f"{path}: deadline passed; not {done}")
            return False
        return True

    def _read_bytes(self, path: str) -> bytes | None:
        if not self._may_use(path, "read"):
            return None
        try:
            # Looked at before opening, since opening some devices acts (a watchdog starts).
            if not stat.S_ISREG(self._stat(path).st_mode):
                self.note(f"{path}: not a regular file; not read")
                return None
            fd = self._open(path, READ_FLAGS)
        except (OSError, ValueError):  # ValueError: a NUL in the name
            return None
        chunks: list[bytes] = []
        size = 0
        try:
            # Checked again on what was opened: the name may point elsewhere since the stat.
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                self.note(f"{path}: not a regular file; not read")
                return None
            while size <= MAX_READ_BYTES:
                chunk = os.read(fd, MAX_READ_BYTES + 1 - size)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
        except OSError:
            return None
        finally:
            os.close(fd)
        if size > MAX_READ_BYTES:
            self.note(f"{path}: larger than {human_bytes(MAX_READ_BYTES)}; not read")
            return None
        return b"".join(chunks)

    def read_u64(self, path: str, allow: tuple[str, ...] = ()) -> int | None:
        """The unsigned decimal (below 2**64) that file ``path`` holds, surrounding space
        ignored, or None. None with a note when the file holds something else (except the words
        in ``allow``, such as cgroup's ``max``); None without one when it cannot be read."""
        text = self.read_text(path)
        if text is None:
            return None
        text = text.strip()
        value = parse_u64(text)
        if value is None and text and text not in allow:
            self.note(f"{path}: {text[:40]!r} is not a number below 2**64; ignored")
        return value

    def list_dir(self, path: str) -> list[str] | None:
        """The sorted names in directory ``path`` under the root, or None; never raises.

        None with a note for a path that leads outside the root, a directory of more than
        ``MAX_DIR_ENTRIES`` names and once the deadline has passed; None without one for a
        missing or unreadable directory (or something that is not one).
        """
        if not self._may_use(path, "listed"):
            return None
        try:
            if rootfs.live(self.root):
                names = rootfs.scan(self.path(path), MAX_DIR_ENTRIES)
            else:
                names = rootfs.list_names(self.root, self._parts(path) or [], MAX_DIR_ENTRIES, self._pinned)
        except (OSError, ValueError):
            return None
        if names is None:
            self.note(f"{path}: more than {MAX_DIR_ENTRIES} entries; not listed")
            return None
        return sorted(names)

    def exists(self, path: str) -> bool:
        """Whether ``path`` exists under the root (links resolved inside it, as every read
        resolves them); False for one that leads outside or once the deadline has passed."""
        if not self._may_use(path, "looked at"):
            return False
        try:
            self._stat(path)
        except (OSError, ValueError):
            return False
        return True

    def is_file(self, path: str) -> bool:
        """Whether ``path`` is a regular file under the root (links resolved inside it)."""
        if not self._may_use(path, "looked at"):
            return False
        try:
            return stat.S_ISREG(self._stat(path).st_mode)
        except (OSError, ValueError):
            return False

    def is_dir(self, path: str) -> bool:
        """Whether ``path`` is a directory under the root (links resolved inside it)."""
        if not self._may_use(path, "looked at"):
            return False
        try:
            return stat.S_ISDIR(self._stat(path).st_mode)
        except (OSError, ValueError):
            return False

    @property
    def replaying(self) -> bool:
        """Whether discovery runs against a recording: then a plugin asks no driver and answers
        from ``recorded`` (files still come through ``read_text`` under the recorded root)."""
        return self.answers is not None

    @property
    def recording(self) -> bool:
        """Whether ``gpuscout record`` runs: a plugin then passes what its driver answered to
        ``record`` (as well as using it as usual)."""
        return self.recorder is not None

    def recorded(self, key: str, default: Any = None) -> Any:
        """The JSON value this plugin recorded under ``key`` (``default`` when there is none or
        when not replaying). Values are plain JSON: dicts, lists, str, int, float, bool, None."""
        if self.answers is None:
            return default
        return self.answers.get(key, default)

    def record(self, key: str, value: Any) -> None:
        """Keep ``value`` (plain JSON) as this plugin's driver answer ``key`` in the recording
        being made; nothing when not recording. A later value for the same key replaces it."""
        if self.recorder is not None:
            self.recorder.answer(self.plugin, key, value)

    def read_link(self, path: str) -> str | None:
        """The target text of symbolic link ``path`` under the root (e.g. the ``driver`` link of
        a PCI device in sysfs: ``../../../bus/pci/drivers/nvidia``), not followed; None when it
        is not a link, is missing, or the deadline has passed."""
        if not self._may_use(path, "read"):
            return None
        try:
            if rootfs.live(self.root):
                return os.readlink(self.path(path))[:4096]
            return rootfs.read_link(self.root, self._parts(path) or [], self._pinned)[:4096]
        except (OSError, ValueError):
            return None

    def device_node(self, path: str) -> str:
        """``"present"`` when device node ``path`` (e.g. ``/dev/nvidiactl``) under the root
        exists and this process may open it read-write, ``"denied"`` when it exists and may not
        be opened, ``"missing"`` otherwise.

        A character device is opened read-write without blocking and closed at once, as a
        driver library opens it (the ROCm runtime opens /dev/kfd so, NVML /dev/nvidiactl): only
        an open sees a device cgroup that refuses it (a container whose access was revoked by a
        ``systemctl daemon-reload``, nvidia-container-toolkit#48), which permission bits and
        ``os.access`` do not. Anything else is never opened.

        In a recorded tree (a root other than ``/``) a regular file stands for a node that is
        present and permitted, and one whose text is ``denied`` (EACCES) or ``denied EPERM``
        for a node that is present but not permitted.
        """
        if not self._may_use(path, "looked at"):
            return "missing"
        try:
            mode = self._stat(path).st_mode
        except (OSError, ValueError):
            return "missing"
        if stat.S_ISREG(mode) and self.root not in ("", "/"):
            text = self.read_text(path)
            return "denied" if (text or "").split()[:1] == ["denied"] else "present"
        if not stat.S_ISCHR(mode):
            return "missing"
        try:
            fd = self._open(path, DEVICE_FLAGS)
        except PermissionError as exc:
            if self.recorder is not None:
                self.recorder.node_errno(path, exc.errno)
            return "denied"
        except OSError:
            return "missing"  # ENXIO, ENODEV: a node without a device behind it
        os.close(fd)
        return "present"

    def note(self, message: str) -> None:
        """Record why this plugin found what it found (shown in its report's ``note``).

        At most MAX_NOTES are kept (a tree full of refused files must not grow a report without
        bound); the last kept one says that more were dropped.
        """
        if len(self.notes) < MAX_NOTES - 1:
            self.notes.append(str(message)[:1000])
        elif len(self.notes) == MAX_NOTES - 1:
            self.notes.append("(more notes dropped)")

    def time_left(self) -> float | None:
        """Seconds until the deadline (never negative), or None without one."""
        if self.deadline is None:
            return None
        return max(0.0, self.deadline - time.monotonic())
