"""System memory from /proc/meminfo, capped by cgroup v1 and v2 limits, read under a root."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from gpuscout import SystemInfo
from gpuscout._machine.context import Context
from gpuscout._machine.system import read_system
from gpuscout.sizes import GIB, KIB, MIB
from gpuscout.testing import FIFO, Content, RootFactory, ScoutFactory, write_tree

MEMINFO = """MemTotal:       65536000 kB
MemFree:        10000000 kB
MemAvailable:   50000000 kB
Buffers:          123456 kB
Cached:         30000000 kB
SwapCached:            0 kB
SwapTotal:       8388604 kB
SwapFree:        8000000 kB
HugePages_Total:       0
"""


def tree(root: Path, files: Mapping[str, Content]) -> str:
    return str(write_tree(root, files))


def system(root: str) -> SystemInfo:
    return read_system(Context(env={}, platform="linux", root=root))


def system_and_notes(root: str) -> tuple[SystemInfo, list[str]]:
    ctx = Context(env={}, platform="linux", root=root)
    return read_system(ctx), ctx.notes


def memory_stat(**figures: int) -> str:
    """A memory.stat as the kernel writes it: ``key value`` lines in bytes, among others."""
    lines = {"anon": 200 * MIB, "file": 7 * GIB, "kernel": 30 * MIB, "shmem": 0, **figures}
    return "".join(f"{key} {value}\n" for key, value in lines.items())


#: A v2 container of 8 GiB that has read a 6 GiB model file: nearly full by memory.current.
V2_CACHED = {
    "/proc/meminfo": MEMINFO,
    "/proc/self/cgroup": "0::/ctr\n",
    "/sys/fs/cgroup/ctr/memory.max": f"{8 * GIB}\n",
    "/sys/fs/cgroup/ctr/memory.current": f"{7 * GIB + 512 * MIB}\n",
}


def test_meminfo_alone_gives_total_available_and_swap(tmp_path: Path) -> None:
    """Without cgroups, MemTotal, MemAvailable and SwapFree in bytes."""
    root = tree(tmp_path, {"/proc/meminfo": MEMINFO, "/proc/self/cgroup": "0::/\n"})
    assert system(root) == SystemInfo(65536000 * KIB, 50000000 * KIB, 8000000 * KIB)


def test_cgroup_v2_limit_caps_total_and_free(tmp_path: Path) -> None:
    """A memory.max on the process's cgroup path caps total; free is limit minus usage."""
    root = tree(
        tmp_path,
        {
            "/proc/meminfo": MEMINFO,
            "/proc/self/cgroup": "0::/kubepods/pod1/ctr\n",
            "/sys/fs/cgroup/kubepods/pod1/ctr/memory.max": "max\n",
            "/sys/fs/cgroup/kubepods/pod1/memory.max": f"{8 * GIB}\n",
            "/sys/fs/cgroup/kubepods/pod1/memory.current": f"{3 * GIB}\n",
            "/sys/fs/cgroup/kubepods/pod1/memory.swap.max": "0\n",
        },
    )
    assert system(root) == SystemInfo(8 * GIB, 5 * GIB, 0)


def test_cgroup_v2_tightest_ancestor_wins(tmp_path: Path) -> None:
    """The smallest limit on the way to the root is the one that counts."""
    root = tree(
        tmp_path,
        {
            "/proc/meminfo": MEMINFO,
            "/proc/self/cgroup": "0::/a/b\n",
            "/sys/fs/cgroup/a/b/memory.max": f"{16 * GIB}\n",
            "/sys/fs/cgroup/a/b/memory.current": f"{1 * GIB}\n",
            "/sys/fs/cgroup/a/memory.max": f"{4 * GIB}\n",
            "/sys/fs/cgroup/a/memory.current": f"{2 * GIB}\n",
        },
    )
    assert system(root).total_memory == 4 * GIB and system(root).free_memory == 2 * GIB


def test_cgroup_v1_limit_caps_total_and_free(tmp_path: Path) -> None:
    """A v1 memory.limit_in_bytes caps total; the unlimited value is ignored."""
    root = tree(
        tmp_path,
        {
            "/proc/meminfo": MEMINFO,
            "/proc/self/cgroup": "12:pids:/x\n5:cpuset,memory:/docker/abc\n0::/\n",
            "/sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": f"{2 * GIB}\n",
            "/sys/fs/cgroup/memory/docker/abc/memory.usage_in_bytes": f"{GIB // 2}\n",
            "/sys/fs/cgroup/memory/docker/memory.limit_in_bytes": "9223372036854771712\n",
        },
    )
    assert system(root) == SystemInfo(2 * GIB, GIB + GIB // 2, 8000000 * KIB)


def test_v2_page_cache_does_not_count_as_used(tmp_path: Path) -> None:
    """A v2 cgroup's inactive file cache is free: free is the limit less the working set."""
    root = tree(
        tmp_path,
        {**V2_CACHED, "/sys/fs/cgroup/ctr/memory.stat": memory_stat(active_file=GIB, inactive_file=6 * GIB)},
    )
    assert system(root) == SystemInfo(8 * GIB, 6 * GIB + 512 * MIB, 8000000 * KIB)


def test_v1_total_inactive_file_does_not_count_as_used(tmp_path: Path) -> None:
    """v1 takes total_inactive_file (descendants included) over the cgroup's own inactive_file."""
    root = tree(
        tmp_path,
        {
            "/proc/meminfo": MEMINFO,
            "/proc/self/cgroup": "5:memory:/docker/abc\n",
            "/sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": f"{4 * GIB}\n",
            "/sys/fs/cgroup/memory/docker/abc/memory.usage_in_bytes": f"{3 * GIB}\n",
            "/sys/fs/cgroup/memory/docker/abc/memory.stat": memory_stat(
                inactive_file=GIB, total_inactive_file=2 * GIB
            ),
        },
    )
    assert system(root).free_memory == 3 * GIB


def test_v1_without_total_inactive_file_takes_inactive_file(tmp_path: Path) -> None:
    """A v1 memory.stat without total_inactive_file has its inactive_file taken instead."""
    root = tree(
        tmp_path,
        {
            "/proc/meminfo": MEMINFO,
            "/proc/self/cgroup": "5:memory:/docker/abc\n",
            "/sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": f"{4 * GIB}\n",
            "/sys/fs/cgroup/memory/docker/abc/memory.usage_in_bytes": f"{3 * GIB}\n",
            "/sys/fs/cgroup/memory/docker/abc/memory.stat": memory_stat(inactive_file=GIB),
        },
    )
    assert system(root).free_memory == 2 * GIB


def test_inactive_file_above_usage_leaves_the_whole_limit_free(tmp_path: Path) -> None:
    """An inactive_file larger than usage makes the working set 0, so free is the limit."""
    root = tree(
        tmp_path, {**V2_CACHED, "/sys/fs/cgroup/ctr/memory.stat": memory_stat(inactive_file=20 * GIB)}
    )
    assert system(root).free_memory == 8 * GIB


def test_missing_memory_stat_counts_all_usage_without_a_note(tmp_path: Path) -> None:
    """Without memory.stat free is limit minus usage, as before, and nothing is noted."""
    info, notes = system_and_notes(tree(tmp_path, V2_CACHED))
    assert (info.free_memory, notes) == (512 * MIB, [])


def test_malformed_inactive_file_is_noted_and_ignored(tmp_path: Path) -> None:
    """An inactive_file that is not a u64 gets a note and the whole usage counts."""
    root = tree(
        tmp_path, {**V2_CACHED, "/sys/fs/cgroup/ctr/memory.stat": "anon 1048576\ninactive_file -4096\n"}
    )
    info, notes = system_and_notes(root)
    assert info.free_memory == 512 * MIB
    assert len(notes) == 1 and "inactive_file" in notes[0] and "'-4096'" in notes[0]


def test_ancestor_with_least_room_after_cache_sets_free(tmp_path: Path) -> None:
    """A parent whose limit less working set is smaller than the child's decides free."""
    root = tree(
        tmp_path,
        {
            "/proc/meminfo": MEMINFO,
            "/proc/self/cgroup": "0::/pod/ctr\n",
            "/sys/fs/cgroup/pod/memory.max": f"{10 * GIB}\n",
            "/sys/fs/cgroup/pod/memory.current": f"{9 * GIB}\n",
            "/sys/fs/cgroup/pod/memory.stat": memory_stat(inactive_file=GIB),
            "/sys/fs/cgroup/pod/ctr/memory.max": f"{6 * GIB}\n",
            "/sys/fs/cgroup/pod/ctr/memory.current": f"{5 * GIB}\n",
            "/sys/fs/cgroup/pod/ctr/memory.stat": memory_stat(inactive_file=4 * GIB),
        },
    )
    assert system(root) == SystemInfo(6 * GIB, 2 * GIB, 8000000 * KIB)


@pytest.mark.parametrize(
    "hostile",
    [FIFO, "inactive_file 1\n" * (2 * MIB // 16), f"inactive_file {10**400}\n"],
    ids=["fifo", "2MiB", "10**400"],
)
def test_hostile_memory_stat_never_hangs_or_raises(tmp_path: Path, hostile: Content) -> None:
    """A FIFO, a 2 MiB file or a 10**400 value as memory.stat gets a note; all usage counts."""
    stat = "/sys/fs/cgroup/ctr/memory.stat"
    info, notes = system_and_notes(tree(tmp_path, {**V2_CACHED, stat: hostile}))
    assert info.free_memory == 512 * MIB and len(notes) == 1 and stat in notes[0]


def test_v1_unlimited_means_the_host_figures(tmp_path: Path) -> None:
    """An unlimited v1 cgroup leaves the meminfo figures alone."""
    root = tree(
        tmp_path,
        {
            "/proc/meminfo": MEMINFO,
            "/proc/self/cgroup": "4:memory:/process_api/1\n",
            "/sys/fs/cgroup/memory/process_api/1/memory.limit_in_bytes": "9223372036854771712\n",
        },
    )
    assert system(root).total_memory == 65536000 * KIB


def test_missing_files_give_zeros_not_errors(tmp_path: Path) -> None:
    """An empty root reads as SystemInfo() without raising."""
    assert system(str(tmp_path)) == SystemInfo()


def test_scout_root_applies_to_system_memory(
    gpuscout_root: RootFactory, gpuscout_scout: ScoutFactory
) -> None:
    """Scout(root=...) reads system memory from the recorded tree."""
    root = gpuscout_root({"/proc/meminfo": MEMINFO})
    found = gpuscout_scout(root=root, platform="linux").discover()
    assert found.system.total_memory == 65536000 * KIB


def test_this_machine_reports_real_memory() -> None:
    """On the live machine total and free are positive and free does not exceed total."""
    live = system("/")
    assert 0 < live.free_memory <= live.total_memory
