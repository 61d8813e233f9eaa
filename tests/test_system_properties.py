"""Properties of the /proc/meminfo and cgroup parsers over arbitrary text: no exception, no number
outside 0..2**64-1, and well-formed input read back exactly."""

from __future__ import annotations

import tempfile

from hypothesis import given, settings
from hypothesis import strategies as st

from gpuscout._machine.context import Context, parse_u64
from gpuscout._machine.system import _cgroup_paths, cgroup_memory, parse_meminfo, read_system
from gpuscout.sizes import KIB
from gpuscout.testing import in_u64, write_tree

U64 = 1 << 64
#: Digits of other scripts, which str.isdigit() and int() accept and the kernel never writes.
FOREIGN_DIGITS = "\u00b2\u00b3\u00b9\u0660\u0661\u0662\u0663\u0669\u0966\u0967"
MEMINFO_KEYS = ("MemTotal", "MemFree", "MemAvailable", "SwapFree")

# Text that looks enough like the files to reach the number parsing: keys, colons, digits of
# every script, signs, units and line breaks, mixed with anything at all.
numberish = st.one_of(
    st.integers(min_value=-(U64 * 2), max_value=U64 * 2).map(str),
    st.text(alphabet="0123456789-+.eE" + FOREIGN_DIGITS, min_size=1, max_size=30),
    st.just("9" * 5000),
)
meminfo_line = st.builds(
    lambda key, value, unit: f"{key}: {value}{unit}",
    st.sampled_from((*MEMINFO_KEYS, "SwapTotal", "HugePages_Total", "")),
    numberish,
    st.sampled_from(("", " kB", " KB", " mB", " kB extra")),
)
meminfo_text = st.one_of(
    st.lists(meminfo_line, max_size=8).map("\n".join),
    st.text(max_size=300),
)
cgroup_path = st.lists(
    st.sampled_from(("a", "b", "..", ".", "", FOREIGN_DIGITS[4], "memory")), max_size=6
).map("/".join)
cgroup_line = st.builds(
    lambda hid, controllers, lead, path: f"{hid}:{controllers}:{lead}{path}",
    st.sampled_from(("0", "4", "12", "x")),
    st.sampled_from(("", "memory", "cpu,memory", "pids")),
    st.sampled_from(("/", "", "/../")),
    cgroup_path,
)
cgroup_text = st.one_of(st.lists(cgroup_line, max_size=4).map("\n".join), st.text(max_size=100))
limit_text = st.one_of(numberish, st.just("max"), st.text(max_size=20))
stat_line = st.builds(
    lambda key, value: f"{key} {value}",
    st.sampled_from(("inactive_file", "total_inactive_file", "active_file", "anon", "")),
    numberish,
)
stat_text = st.one_of(st.lists(stat_line, max_size=6).map("\n".join), st.text(max_size=100))


@settings(max_examples=500)
@given(st.text())
def test_parse_u64_never_raises_and_answers_only_u64(text: str) -> None:
    """Any text is either a number in 0..2**64-1 or None."""
    assert in_u64(parse_u64(text))


@settings(max_examples=300)
@given(st.integers(min_value=0, max_value=U64 - 1), st.integers(min_value=0, max_value=30))
def test_parse_u64_reads_back_every_u64(value: int, zeros: int) -> None:
    """Every 64-bit value written in decimal, leading zeros or not, reads back."""
    assert parse_u64("0" * zeros + str(value)) == value


@settings(max_examples=500)
@given(meminfo_text)
def test_parse_meminfo_never_raises_and_stays_in_u64(text: str) -> None:
    """Whatever the text, every value parse_meminfo gives is in 0..2**64-1."""
    assert all(0 <= v < U64 for v in parse_meminfo(text).values())


@settings(max_examples=300)
@given(
    st.dictionaries(
        st.sampled_from((*MEMINFO_KEYS, "Cached", "HugePages_Total")),
        st.integers(min_value=0, max_value=U64 // KIB - 1),
    )
)
def test_parse_meminfo_reads_back_well_formed_files(figures: dict[str, int]) -> None:
    """A meminfo written as the kernel does (``Key:   N kB``) reads back as N KiB per key."""
    text = "".join(f"{key}:{value:>16} kB\n" for key, value in figures.items())
    assert parse_meminfo(text) == {key: value * KIB for key, value in figures.items()}


@settings(max_examples=200, deadline=None)
@given(meminfo_text)
def test_read_system_never_raises_over_any_meminfo(text: str) -> None:
    """read_system over any /proc/meminfo answers a SystemInfo with figures below 2**64."""
    with tempfile.TemporaryDirectory() as root:
        write_tree(root, {"/proc/meminfo": text})
        info = read_system(Context(env={}, platform="linux", root=root))
    assert all(0 <= v < U64 for v in (info.total_memory, info.free_memory, info.free_swap))


@settings(max_examples=200, deadline=None)
@given(cgroup_text)
def test_cgroup_paths_never_lead_above_the_hierarchy(text: str) -> None:
    """Each path _cgroup_paths accepts is absolute and has no ``..`` segment."""
    with tempfile.TemporaryDirectory() as root:
        write_tree(root, {"/proc/self/cgroup": text})
        found = _cgroup_paths(Context(env={}, platform="linux", root=root))
    for path in found:
        assert path is None or (path.startswith("/") and ".." not in path.split("/"))


@settings(max_examples=100, deadline=None)
@given(cgroup_text, limit_text, limit_text, limit_text, stat_text)
def test_cgroup_memory_never_raises_and_stays_in_u64(
    cgroup: str,
    limit: str,
    usage: str,
    swap: str,
    stat: str,
) -> None:
    """Over any cgroup file and any limit and memory.stat files, limit, free and swap are None
    or below 2**64."""
    files = {"/proc/self/cgroup": cgroup}
    for base in ("/sys/fs/cgroup", "/sys/fs/cgroup/a", "/sys/fs/cgroup/memory/a"):
        files.update(
            {
                f"{base}/memory.max": limit,
                f"{base}/memory.current": usage,
                f"{base}/memory.swap.max": swap,
                f"{base}/memory.limit_in_bytes": limit,
                f"{base}/memory.usage_in_bytes": usage,
                f"{base}/memory.stat": stat,
            }
        )
    with tempfile.TemporaryDirectory() as root:
        write_tree(root, files)
        found = cgroup_memory(Context(env={}, platform="linux", root=root))
    assert all(in_u64(v) for v in found)


@settings(max_examples=100, deadline=None)
@given(
    st.integers(min_value=1, max_value=U64 // KIB - 1),
    st.integers(min_value=0, max_value=(1 << 62) - 1),
    st.integers(min_value=0, max_value=(1 << 62) - 1),
    st.none() | st.integers(min_value=0, max_value=U64 - 1),
)
def test_well_formed_v2_limit_caps_total_and_free(
    total_kib: int,
    limit: int,
    used: int,
    inactive: int | None,
) -> None:
    """A v2 limit caps total at the limit and free at the limit less the working set (usage
    less inactive_file; both at least 0; all usage without memory.stat), so free never passes it."""
    files = {
        "/proc/meminfo": f"MemTotal: {total_kib} kB\nMemAvailable: {total_kib} kB\n",
        "/proc/self/cgroup": "0::/pod\n",
        "/sys/fs/cgroup/pod/memory.max": f"{limit}\n",
        "/sys/fs/cgroup/pod/memory.current": f"{used}\n",
    }
    if inactive is not None:
        files["/sys/fs/cgroup/pod/memory.stat"] = f"anon 4096\ninactive_file {inactive}\n"
    with tempfile.TemporaryDirectory() as root:
        write_tree(root, files)
        info = read_system(Context(env={}, platform="linux", root=root))
    total = min(total_kib * KIB, limit)
    free = min(total_kib * KIB, max(0, limit - max(0, used - (inactive or 0))))
    assert (info.total_memory, info.free_memory) == (total, min(free, total) if total else free)
    assert info.free_memory <= limit
