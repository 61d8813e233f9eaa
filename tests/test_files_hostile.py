"""Hostile recorded trees: what Context.read_text and read_system do with files that bite."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from gpuscout import SystemInfo
from gpuscout._machine.context import MAX_READ_BYTES, Context
from gpuscout._machine.system import read_system
from gpuscout.sizes import KIB, human_bytes
from gpuscout.testing import FIFO, Content, promptly, write_tree

#: What str.isdigit() accepts and the kernel never writes: a superscript, Arabic-Indic twelve.
SUPERSCRIPT_TWO, ARABIC_TWELVE = "\u00b2", "\u0661\u0662"

needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")
needs_dev_zero = pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")


def put(root: Path, path: str, content: Content) -> Path:
    """Write ``content`` at ``path`` under ``root`` (``write_tree``) and return that file."""
    write_tree(root, {path: content})
    return root / path.lstrip("/")


def context(root: Path, deadline: float | None = None) -> Context:
    return Context(env={}, platform="linux", root=str(root), deadline=deadline)


# -- Context.read_text ----------------------------------------------------------------------------


@needs_fifo
def test_fifo_at_proc_meminfo_does_not_hang_read_system(tmp_path: Path) -> None:
    """read_system over a writer-less FIFO at /proc/meminfo returns zeros at once."""
    put(tmp_path, "/proc/meminfo", FIFO)
    assert promptly(lambda: read_system(context(tmp_path))) == SystemInfo()


@needs_fifo
def test_fifo_is_refused_with_a_note_naming_it(tmp_path: Path) -> None:
    """read_text answers None for a FIFO and notes that it is not a regular file."""
    put(tmp_path, "/proc/meminfo", FIFO)
    ctx = context(tmp_path)
    assert promptly(lambda: ctx.read_text("/proc/meminfo")) is None
    assert ctx.notes == ["/proc/meminfo: not a regular file; not read"]


def test_gigabyte_sparse_meminfo_is_refused_quickly(tmp_path: Path) -> None:
    """A 1 GiB file is refused after reading at most the limit, with a note naming path and limit."""
    with open(put(tmp_path, "/proc/meminfo", b""), "wb") as f:
        f.truncate(1 << 30)  # sparse: no disk used
    ctx = context(tmp_path)
    start = time.monotonic()
    assert promptly(lambda: ctx.read_text("/proc/meminfo")) is None
    assert time.monotonic() - start < 2.0
    assert ctx.notes == [f"/proc/meminfo: larger than {human_bytes(MAX_READ_BYTES)}; not read"]


def test_file_of_exactly_the_limit_is_read_whole(tmp_path: Path) -> None:
    """A file of MAX_READ_BYTES bytes is still read, every byte of it."""
    put(tmp_path, "/big", b"7" * MAX_READ_BYTES)
    assert context(tmp_path).read_text("/big") == "7" * MAX_READ_BYTES


def test_file_one_byte_over_the_limit_is_refused(tmp_path: Path) -> None:
    """A file of MAX_READ_BYTES + 1 bytes is refused."""
    put(tmp_path, "/big", b"7" * (MAX_READ_BYTES + 1))
    assert context(tmp_path).read_text("/big") is None


def test_gigabyte_meminfo_leaves_read_system_at_zeros(tmp_path: Path) -> None:
    """read_system treats an oversized /proc/meminfo as missing."""
    with open(put(tmp_path, "/proc/meminfo", b""), "wb") as f:
        f.truncate(1 << 30)
    assert promptly(lambda: read_system(context(tmp_path))) == SystemInfo()


def test_directory_where_a_file_is_expected_is_refused(tmp_path: Path) -> None:
    """A directory at /proc/meminfo reads as None with a note, not IsADirectoryError."""
    (tmp_path / "proc" / "meminfo").mkdir(parents=True)
    ctx = context(tmp_path)
    assert (ctx.read_text("/proc/meminfo"), ctx.notes) == (
        None,
        ["/proc/meminfo: not a regular file; not read"],
    )


@needs_dev_zero
def test_symlink_to_dev_zero_means_the_trees_own_dev_zero(tmp_path: Path) -> None:
    """A link to /dev/zero in a tree names the tree's own /dev/zero, as in a chroot: here a
    FIFO, refused without blocking, and read_system gives zeros (the host's device is never
    opened)."""
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "meminfo").symlink_to("/dev/zero")
    put(tmp_path, "/dev/zero", FIFO)
    ctx = context(tmp_path)
    assert promptly(lambda: read_system(ctx)) == SystemInfo()
    assert "/proc/meminfo: not a regular file; not read" in ctx.notes


def test_missing_file_reads_as_none_without_a_note(tmp_path: Path) -> None:
    """A file that is not there is None, and nothing is noted (most files are optional)."""
    ctx = context(tmp_path)
    assert (ctx.read_text("/proc/meminfo"), ctx.notes) == (None, [])


def test_undecodable_bytes_are_replaced_not_raised(tmp_path: Path) -> None:
    """Bytes that are not UTF-8 come back as U+FFFD."""
    put(tmp_path, "/f", b"a\xff\xfeb")
    assert context(tmp_path).read_text("/f") == "a\ufffd\ufffdb"


def test_passed_deadline_reads_nothing_and_says_so(tmp_path: Path) -> None:
    """Once the deadline has passed read_text returns None with a 'deadline passed' note."""
    put(tmp_path, "/proc/meminfo", "MemTotal: 1 kB\n")
    ctx = context(tmp_path, deadline=time.monotonic() - 1)
    assert (ctx.read_text("/proc/meminfo"), ctx.notes) == (None, ["/proc/meminfo: deadline passed; not read"])


def test_read_system_after_the_deadline_returns_zeros_at_once(tmp_path: Path) -> None:
    """read_system under a passed deadline reads no file and answers zeros."""
    put(tmp_path, "/proc/meminfo", "MemTotal: 1 kB\n")
    put(tmp_path, "/proc/self/cgroup", "0::/a/b/c\n")
    assert promptly(lambda: read_system(context(tmp_path, time.monotonic() - 1))) == SystemInfo()


# -- Context.path and list_dir ------------------------------------------------------------------


def test_dot_dot_inside_the_root_resolves_by_name(tmp_path: Path) -> None:
    """``/sys/../proc/meminfo`` is ``<root>/proc/meminfo``."""
    assert context(tmp_path).path("/sys/../proc/./meminfo") == str(tmp_path / "proc" / "meminfo")


def test_path_that_climbs_out_of_the_root_cannot_be_opened(tmp_path: Path) -> None:
    """A path above the root is turned into one that no open() accepts."""
    root = tmp_path / "root"
    root.mkdir()
    put(tmp_path, "/secret", "x")
    where = context(root).path("/../secret")
    assert not os.path.exists(where)
    with pytest.raises(OSError):
        open(where).close()


def test_reading_above_the_root_is_refused_with_a_note(tmp_path: Path) -> None:
    """read_text of ``/../secret`` is None and names the root, though the file exists."""
    root = tmp_path / "root"
    root.mkdir()
    put(tmp_path, "/secret", "x")
    ctx = context(root)
    assert (ctx.read_text("/proc/../../secret"), ctx.notes) == (
        None,
        [f"/proc/../../secret: leads outside the root {str(root)!r}; not read"],
    )


def test_live_root_keeps_paths_absolute() -> None:
    """With root ``/`` a path stays itself, even written without its leading slash."""
    ctx = Context(env={}, platform="linux")
    assert (ctx.path("/proc/meminfo"), ctx.path("proc/meminfo")) == ("/proc/meminfo",) * 2


def test_list_dir_gives_sorted_names(tmp_path: Path) -> None:
    """list_dir answers the names of a directory in sorted order."""
    for name in ("b", "a", "c"):
        put(tmp_path, f"/d/{name}", "")
    assert context(tmp_path).list_dir("/d") == ["a", "b", "c"]


def test_list_dir_above_the_root_is_refused(tmp_path: Path) -> None:
    """list_dir of a path above the root is None with a note."""
    ctx = context(tmp_path / "root")
    assert (ctx.list_dir("/.."), len(ctx.notes)) == (None, 1)


@needs_fifo
def test_list_dir_of_a_fifo_is_none_without_blocking(tmp_path: Path) -> None:
    """A FIFO where a directory is expected lists as None."""
    put(tmp_path, "/d", FIFO)
    assert promptly(lambda: context(tmp_path).list_dir("/d")) is None


# -- read_system over absurd content --------------------------------------------------------------


def test_binary_garbage_meminfo_gives_zeros(tmp_path: Path) -> None:
    """Random bytes at /proc/meminfo read as no figures at all."""
    put(tmp_path, "/proc/meminfo", bytes(range(256)) * 64)
    assert read_system(context(tmp_path)) == SystemInfo()


@pytest.mark.parametrize(
    "value",
    [SUPERSCRIPT_TWO, ARABIC_TWELVE, "-5", "+5", "1e9", "9" * 5000, str(1 << 64), str((1 << 64) // 1024)],
)
def test_absurd_memtotal_is_unknown_and_noted(tmp_path: Path, value: str) -> None:
    """A MemTotal that is no number below 2**64 bytes counts as missing, with a note."""
    put(tmp_path, "/proc/meminfo", f"MemTotal: {value} kB\nMemAvailable: 4 kB\n")
    ctx = context(tmp_path)
    assert read_system(ctx) == SystemInfo(0, 4 * KIB, 0)
    assert any("MemTotal" in note for note in ctx.notes)


def test_largest_representable_meminfo_value_is_kept(tmp_path: Path) -> None:
    """A kB figure just under 2**64 bytes once scaled is still a number."""
    biggest = (1 << 64) // 1024 - 1
    put(tmp_path, "/proc/meminfo", f"MemTotal: {biggest} kB\n")
    assert read_system(context(tmp_path)).total_memory == biggest * KIB


def test_absurd_cgroup_limit_is_ignored_with_a_note(tmp_path: Path) -> None:
    """A memory.max holding Unicode digits is no limit; meminfo's figures stand."""
    put(tmp_path, "/proc/meminfo", "MemTotal: 8 kB\nMemAvailable: 4 kB\n")
    put(tmp_path, "/proc/self/cgroup", "0::/a\n")
    put(tmp_path, "/sys/fs/cgroup/a/memory.max", f"{ARABIC_TWELVE}\n")
    ctx = context(tmp_path)
    assert read_system(ctx) == SystemInfo(8 * KIB, 4 * KIB, 0)
    assert any("memory.max" in note for note in ctx.notes)


@pytest.mark.parametrize("line", ["0::/../../..", "0::../../etc", "4:memory:/../x", "0::/a/../../../../b"])
def test_cgroup_path_leading_out_of_the_hierarchy_is_ignored(tmp_path: Path, line: str) -> None:
    """A cgroup path with ``..`` or without a leading slash reads no limit anywhere."""
    root = tmp_path / "root"
    put(root, "/proc/meminfo", "MemTotal: 8 kB\nMemAvailable: 4 kB\n")
    put(root, "/proc/self/cgroup", f"{line}\n")
    # Limits wherever such a path could lead, inside the root and out of it.
    for base in ("/sys/fs/cgroup", "/sys/fs/cgroup/memory", "/sys", "/", "/etc", "/x", "/b"):
        put(root, f"{base}/memory.max", "1024\n")
        put(root, f"{base}/memory.limit_in_bytes", "1024\n")
        put(tmp_path, f"{base}/memory.max", "1024\n")
    ctx = context(root)
    assert read_system(ctx) == SystemInfo(8 * KIB, 4 * KIB, 0)
    assert any("/proc/self/cgroup" in note for note in ctx.notes)


def test_overlong_cgroup_path_is_ignored(tmp_path: Path) -> None:
    """A cgroup path longer than PATH_MAX is not walked ancestor by ancestor."""
    put(tmp_path, "/proc/meminfo", "MemTotal: 8 kB\n")
    put(tmp_path, "/proc/self/cgroup", "0::" + "/a" * 100_000 + "\n")
    ctx = context(tmp_path)
    assert promptly(lambda: read_system(ctx)).total_memory == 8 * KIB
    assert len(ctx.notes) == 1
