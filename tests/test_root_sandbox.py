"""A root or a replay is a read sandbox: every path is resolved inside it at read time, as a
chroot resolves it, so no file outside can be read, listed or looked at, however its links are
made or changed (docs/containment.md, "Files"; ``gpuscout._machine.rootfs``)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuscout import Scout, SystemInfo
from gpuscout._machine import rootfs
from gpuscout._machine.context import Context
from gpuscout._machine.system import read_system
from gpuscout.testing import Symlink, write_tree

SECRET = "MemTotal: 77777 kB\nMemAvailable: 55555 kB\n"
OWN = "MemTotal: 16384 kB\nMemAvailable: 8192 kB\n"


@pytest.fixture(params=["openat2", "walk"])
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Each test runs with the kernel's openat2(RESOLVE_IN_ROOT) and with gpuscout's own walk."""
    if request.param == "openat2":
        if not rootfs._openat2_function():
            pytest.skip("this kernel has no openat2")
    else:
        monkeypatch.setattr(rootfs, "_syscall", False)
    yield str(request.param)


def _climbing_chain(root: Path, length: int) -> str:
    """Links l0 -> ., l1 -> l0/.., ... under ``root``: each passes a check by name, and the
    kernel resolves l<length> above ``root`` (up to ``/`` when long enough). Returns its name."""
    (root / "l0").symlink_to(".")
    for i in range(1, length + 1):
        (root / f"l{i}").symlink_to(f"l{i - 1}/..")
    return f"l{length}"


def _ctx(root: Path) -> Context:
    return Context(env={}, platform="linux", root=str(root))


def test_a_link_chain_that_climbs_by_name_reads_as_missing(tmp_path: Path, backend: str) -> None:
    """proc/meminfo -> ../l30/<outside>/secret, whose every step stays in the root by name, is
    resolved in the root: the host's file is never read and system memory reads as zeros."""
    (tmp_path / "secret").write_text(SECRET)
    root = tmp_path / "tree"
    root.mkdir()
    top = _climbing_chain(root, len(tmp_path.parts) + 2)
    write_tree(root, {"/proc/meminfo": Symlink(f"../{top}{tmp_path}/secret")})
    assert (root / "proc" / "meminfo").read_text() == SECRET  # what the kernel alone would read
    ctx = _ctx(root)
    assert (ctx.read_text("/proc/meminfo"), read_system(ctx)) == (None, SystemInfo())


def test_an_absolute_link_means_the_roots_own_path(tmp_path: Path, backend: str) -> None:
    """proc/meminfo -> /etc/meminfo in a tree reads the tree's own etc/meminfo, as in a chroot."""
    root = write_tree(tmp_path / "tree", {"/proc/meminfo": Symlink("/etc/meminfo"), "/etc/meminfo": OWN})
    assert _ctx(root).read_text("/proc/meminfo") == OWN


def test_a_link_to_the_hosts_proc_meminfo_reads_as_missing(tmp_path: Path, backend: str) -> None:
    """--root TREE with proc/meminfo -> /proc/meminfo: the link names itself, a loop, and reads
    as a missing file; the host's /proc/meminfo is never read."""
    root = write_tree(tmp_path / "tree", {"/proc/meminfo": Symlink("/proc/meminfo")})
    ctx = _ctx(root)
    assert (ctx.read_text("/proc/meminfo"), read_system(ctx)) == (None, SystemInfo())


def test_dotdot_above_the_root_stays_at_the_root(tmp_path: Path, backend: str) -> None:
    """A link ../../../../etc/meminfo climbs no higher than the root: it reads the root's file."""
    root = write_tree(
        tmp_path / "tree", {"/sys/a/meminfo": Symlink("../../../../../../etc/meminfo"), "/etc/meminfo": OWN}
    )
    assert _ctx(root).read_text("/sys/a/meminfo") == OWN


def test_listing_and_looking_through_a_climbing_link_see_nothing_outside(
    tmp_path: Path, backend: str
) -> None:
    """list_dir, exists, is_dir, is_file and read_link through a link chain resolve in the root:
    the outside folder is neither listed nor seen."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "host-only").write_text("x")
    root = tmp_path / "tree"
    root.mkdir()
    top = _climbing_chain(root, len(tmp_path.parts) + 2)
    write_tree(root, {"/sys/card": Symlink(f"../{top}{outside}")})
    ctx = _ctx(root)
    assert ctx.list_dir("/sys/card") is None
    seen = (ctx.exists("/sys/card/host-only"), ctx.is_dir("/sys/card"), ctx.is_file("/sys/card/host-only"))
    assert seen == (False, False, False)
    assert ctx.read_link("/sys/card/host-only") is None
    assert ctx.device_node("/sys/card/host-only") == "missing"


def test_a_link_swapped_in_after_the_scout_was_made_is_resolved_in_the_root(
    tmp_path: Path, backend: str
) -> None:
    """A recording's proc/meminfo replaced by a climbing link after Scout(replay=...) was made
    reads as missing in the next discovery: the tree is resolved at each read, not checked once."""
    (tmp_path / "secret").write_text(SECRET)
    rec = _recording(tmp_path / "rec")
    scout = Scout(replay=rec, plugins=[], entry_points=False)
    assert scout.discover().system.total_memory == 16384 << 10
    root = rec / "root"
    top = _climbing_chain(root, len(tmp_path.parts) + 3)
    (root / "proc" / "meminfo").unlink()
    (root / "proc" / "meminfo").symlink_to(f"../{top}{tmp_path}/secret")
    assert scout.discover().system == SystemInfo()


def test_a_recordings_root_swapped_for_a_link_reads_as_an_empty_machine(tmp_path: Path, backend: str) -> None:
    """A recording whose root/ becomes a link to another folder (the host's /, here a copy with
    other figures) after the Scout was made is not followed: zeros, not that folder's memory."""
    write_tree(tmp_path / "elsewhere", {"/proc/meminfo": SECRET})
    rec = _recording(tmp_path / "rec")
    scout = Scout(replay=rec, plugins=[], entry_points=False)
    shutil.rmtree(rec / "root")
    (rec / "root").symlink_to(tmp_path / "elsewhere")
    assert scout.discover().system == SystemInfo()


def test_a_replay_list_never_shows_a_host_file_as_a_cards_description(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], backend: str
) -> None:
    """--replay REC --plugins rocm list on a tree whose product_name climbs out through a link
    chain: the host file's text is not shown."""
    from gpuscout.cli import main

    trees = Path(__file__).parent / "plugins" / "rocm" / "trees" / "rx7900xtx"
    rec = tmp_path / "rec"
    shutil.copytree(trees, rec / "root", symlinks=True)
    (rec / "recording.json").write_text(json.dumps({"format": 1, "platform": "linux", "env": {}}))
    (tmp_path / "secret").write_text("HOST SECRET CARD NAME\n")
    device = rec / "root" / "sys/class/drm/renderD128/device/product_name"
    top = _climbing_chain(rec / "root", len(tmp_path.parts) + 3)
    levels = len(device.relative_to(rec / "root").parts) - 1
    device.symlink_to("../" * levels + f"{top}{tmp_path}/secret")
    assert device.read_text().startswith("HOST SECRET")  # what the kernel alone would read
    assert main(["--replay", str(rec), "--plugins", "rocm", "list", "--json"]) == 0
    assert "HOST SECRET" not in capsys.readouterr().out


def _recording(where: Path) -> Path:
    write_tree(where / "root", {"/proc/meminfo": OWN})
    (where / "recording.json").write_text(json.dumps({"format": 1, "platform": "linux", "env": {}}))
    return where


def test_a_root_1500_folders_deep_is_walked_without_recursion(tmp_path: Path, backend: str) -> None:
    """A file 1500 folders deep is read, and a recording that deep is checked and replayed
    (no RecursionError: every walk is iterative)."""
    from gpuscout._recording.replay import load

    rec = _recording(tmp_path / "rec")
    deep = rec / "root"
    parts = ["d"] * 1500
    fd = os.open(deep, os.O_RDONLY)
    try:
        for name in parts:  # made relative to a descriptor: the path is longer than PATH_MAX
            os.mkdir(name, dir_fd=fd)
            nxt = os.open(name, os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = nxt
        with open(os.open("f", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd), "w") as f:
            f.write("deep\n")
    finally:
        os.close(fd)
    try:
        load(rec)
        assert rootfs.stat_path(str(deep), [*parts, "f"]).st_size == 5
        deep_ctx = Context(env={}, platform="linux", root=str(deep))
        assert deep_ctx.read_text("/d" * 1500 + "/f") == "deep\n"
    finally:
        _remove_chain(deep)


def _remove_chain(top: Path) -> None:
    """Remove the chain of d/ folders under ``top`` one level at a time (shutil.rmtree and
    pytest's clean-up recurse, and fail 1500 folders deep)."""
    while (top / "d" / "d").is_dir():
        os.rename(top / "d" / "d", top / "up")
        for name in os.listdir(top / "d"):
            os.unlink(top / "d" / name)
        os.rmdir(top / "d")
        os.rename(top / "up", top / "d")
    shutil.rmtree(top / "d", ignore_errors=True)


# -- the property: random trees of links inside a root ---------------------------------------

NAMES = ("a", "b", "c")
COMPONENT = st.sampled_from([*NAMES, "..", ".", ""])
TARGET = st.builds(
    lambda absolute, parts: ("/" if absolute else "") + "/".join(parts),
    st.booleans(),
    st.lists(COMPONENT, min_size=0, max_size=5),
)
ENTRY = st.tuples(
    st.lists(st.sampled_from(NAMES), min_size=1, max_size=3),
    st.one_of(st.just("dir"), st.just("file"), TARGET),
)


def _build(root: Path, entries: list[tuple[list[str], str]]) -> None:
    for parts, kind in entries:
        where = root.joinpath(*parts)
        try:
            where.parent.mkdir(parents=True, exist_ok=True)
            if os.path.lexists(where):
                continue
            if kind == "dir":
                where.mkdir()
            elif kind == "file":
                where.write_text("inside")
            else:
                where.symlink_to(kind)
        except OSError:
            continue  # a parent that is a file or a link: that entry is not made


def _inside(root: Path) -> set[tuple[int, int]]:
    found = set()
    for folder, dirs, files in os.walk(root):
        for name in [".", *dirs, *files]:
            info = os.lstat(os.path.join(folder, name))
            found.add((info.st_dev, info.st_ino))
    return found


def _opened(root: Path, parts: list[str]) -> tuple[int, int] | None:
    try:
        fd = rootfs.open_file(str(root), parts, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        return (info.st_dev, info.st_ino)
    finally:
        os.close(fd)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    entries=st.lists(ENTRY, max_size=14),
    queries=st.lists(st.lists(st.sampled_from([*NAMES, "..", "."]), min_size=1, max_size=6), max_size=8),
)
def test_no_read_leaves_a_root_of_random_links(
    entries: list[tuple[list[str], str]], queries: list[list[str]]
) -> None:
    """In any tree of folders, files and links (relative, absolute, climbing) under a root that
    sits below folders holding files of the same names, every path opens something inside the
    root or nothing, and openat2 and the walk open the same thing."""
    with tempfile.TemporaryDirectory() as top:
        outer = Path(top)
        root = outer / "a" / "b" / "root"
        root.mkdir(parents=True)
        for level in (outer, outer / "a", outer / "a" / "b"):
            for name in NAMES:
                if not (level / name).exists():
                    (level / name).write_text("OUTSIDE")
        _build(root, entries)
        inside = _inside(root)
        for parts in [*queries, *[p for p, _ in entries]]:
            walked = _walk_only(root, parts)
            assert walked is None or walked in inside, (parts, entries)
            if rootfs._openat2_function():
                assert _opened(root, parts) == walked, (parts, entries)
            ctx = Context(env={}, platform="linux", root=str(root))
            assert ctx.read_text("/" + "/".join(parts)) in (None, "inside")


def _walk_only(root: Path, parts: list[str]) -> tuple[int, int] | None:
    saved = rootfs._syscall
    rootfs._syscall = False
    try:
        return _opened(root, parts)
    finally:
        rootfs._syscall = saved
