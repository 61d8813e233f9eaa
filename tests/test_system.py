"""System memory from /proc/meminfo, capped by cgroup v1 and v2 limits, read under a root."""

from __future__ import annotations

from pathlib import Path

from gpuscout import SystemInfo
from gpuscout.context import Context
from gpuscout.system import read_system
from gpuscout.testing import RootFactory, ScoutFactory, write_tree

KIB = 1024
GIB = 1024**3

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


def tree(root: Path, files: dict[str, str]) -> str:
    return str(write_tree(root, files))


def system(root: str) -> SystemInfo:
    return read_system(Context(env={}, platform="linux", root=root))


def test_meminfo_alone_gives_total_available_and_swap(tmp_path: Path) -> None:
    """Without cgroups, MemTotal, MemAvailable and SwapFree in bytes."""
    root = tree(tmp_path, {"/proc/meminfo": MEMINFO, "/proc/self/cgroup": "0::/\n"})
    assert system(root) == SystemInfo(65536000 * KIB, 50000000 * KIB, 8000000 * KIB)


def test_cgroup_v2_limit_caps_total_and_free(tmp_path: Path) -> None:
    """A memory.max on the process's cgroup path caps total; free is limit minus usage."""
    root = tree(tmp_path, {
        "/proc/meminfo": MEMINFO,
        "/proc/self/cgroup": "0::/kubepods/pod1/ctr\n",
        "/sys/fs/cgroup/kubepods/pod1/ctr/memory.max": "max\n",
        "/sys/fs/cgroup/kubepods/pod1/memory.max": f"{8 * GIB}\n",
        "/sys/fs/cgroup/kubepods/pod1/memory.current": f"{3 * GIB}\n",
        "/sys/fs/cgroup/kubepods/pod1/memory.swap.max": "0\n",
    })
    assert system(root) == SystemInfo(8 * GIB, 5 * GIB, 0)


def test_cgroup_v2_tightest_ancestor_wins(tmp_path: Path) -> None:
    """The smallest limit on the way to the root is the one that counts."""
    root = tree(tmp_path, {
        "/proc/meminfo": MEMINFO,
        "/proc/self/cgroup": "0::/a/b\n",
        "/sys/fs/cgroup/a/b/memory.max": f"{16 * GIB}\n",
        "/sys/fs/cgroup/a/b/memory.current": f"{1 * GIB}\n",
        "/sys/fs/cgroup/a/memory.max": f"{4 * GIB}\n",
        "/sys/fs/cgroup/a/memory.current": f"{2 * GIB}\n",
    })
    assert system(root).total_memory == 4 * GIB and system(root).free_memory == 2 * GIB


def test_cgroup_v1_limit_caps_total_and_free(tmp_path: Path) -> None:
    """A v1 memory.limit_in_bytes caps total; the unlimited value is ignored."""
    root = tree(tmp_path, {
        "/proc/meminfo": MEMINFO,
        "/proc/self/cgroup": "12:pids:/x\n5:cpuset,memory:/docker/abc\n0::/\n",
        "/sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": f"{2 * GIB}\n",
        "/sys/fs/cgroup/memory/docker/abc/memory.usage_in_bytes": f"{GIB // 2}\n",
        "/sys/fs/cgroup/memory/docker/memory.limit_in_bytes": "9223372036854771712\n",
    })
    assert system(root) == SystemInfo(2 * GIB, GIB + GIB // 2, 8000000 * KIB)


def test_v1_unlimited_means_the_host_figures(tmp_path: Path) -> None:
    """An unlimited v1 cgroup leaves the meminfo figures alone."""
    root = tree(tmp_path, {
        "/proc/meminfo": MEMINFO,
        "/proc/self/cgroup": "4:memory:/process_api/1\n",
        "/sys/fs/cgroup/memory/process_api/1/memory.limit_in_bytes": "9223372036854771712\n",
    })
    assert system(root).total_memory == 65536000 * KIB


def test_missing_files_give_zeros_not_errors(tmp_path: Path) -> None:
    """An empty root reads as SystemInfo() without raising."""
    assert system(str(tmp_path)) == SystemInfo()


def test_scout_root_applies_to_system_memory(gpuscout_root: RootFactory,
                                             gpuscout_scout: ScoutFactory) -> None:
    """Scout(root=...) reads system memory from the recorded tree."""
    root = gpuscout_root({"/proc/meminfo": MEMINFO})
    found = gpuscout_scout(root=root, platform="linux").discover()
    assert found.system.total_memory == 65536000 * KIB


def test_this_machine_reports_real_memory() -> None:
    """On the live machine total and free are positive and free does not exceed total."""
    live = system("/")
    assert 0 < live.free_memory <= live.total_memory
