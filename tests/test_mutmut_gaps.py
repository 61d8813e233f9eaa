"""Rules found by mutmut's survivors (tests/MUTATION.md, "Automatic mutants (mutmut)").

Each test states a rule of a module that no other test stated; the mutant it kills is named in
its docstring's last line.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

from gpuscout import SystemInfo
from gpuscout._discovery.hidden import set_aside
from gpuscout._discovery.merge import compare, is_better, merge
from gpuscout._machine.context import Context
from gpuscout._machine.system import parse_meminfo, read_system
from gpuscout._records.device import DeviceComparison, DeviceInfo
from gpuscout._records.results import DUPLICATE_REASON, SOFTWARE_REASON, Dropped
from gpuscout.sizes import GIB
from gpuscout.testing import write_tree

# -- hidden.set_aside -----------------------------------------------------------------------------

HIDDEN = DeviceInfo(id="GPU-0", library="CUDA", pci_id="0000:2a:00.0", hidden_by="CUDA_VISIBLE_DEVICES=1")
VISIBLE = DeviceInfo(id="GPU-1", library="CUDA", pci_id="0000:3b:00.0")
VK_A = DeviceInfo(id="0", library="Vulkan", pci_id="0000:2a:00.0")
VK_B = DeviceInfo(id="1", library="Vulkan", pci_id="0000:2a:00.0")


def test_set_aside_ends_on_a_cycle_of_replaced_records() -> None:
    """The walk along replaced records stops at a record it has seen: two drops naming each other
    (a plugin reporting one id twice) end the walk instead of looping for ever, and both stay
    plain duplicates of records that are gone.
    Kills gpuscout._discovery.hidden.x__survivor_of__mutmut_7 (``seen.add(None)``)."""
    dropped = [
        Dropped(VK_A, DUPLICATE_REASON, VK_B.device_id),
        Dropped(VK_B, DUPLICATE_REASON, VK_A.device_id),
    ]
    result: list[tuple[list[DeviceInfo], list[Dropped]]] = []
    worker = threading.Thread(
        target=lambda: result.append(set_aside([HIDDEN, VISIBLE], dropped)), daemon=True
    )
    worker.start()
    worker.join(timeout=10)
    assert result, "set_aside did not return within 10 s on a cycle of duplicates"
    kept, out = result[0]
    assert kept == [VISIBLE]
    assert [(d.device.id, d.reason) for d in out] == [
        ("GPU-0", "hidden by CUDA_VISIBLE_DEVICES=1"),
        ("0", DUPLICATE_REASON),
        ("1", DUPLICATE_REASON),
    ]


def test_set_aside_passes_a_drop_that_is_not_a_duplicate_through() -> None:
    """Only a duplicate (reason ``duplicate``) follows the hidden device it names: a record dropped
    for another reason leaves set_aside as it came, even when it names the hidden device and
    even when it names none.
    Kills gpuscout._discovery.hidden.x_set_aside__mutmut_22 (``owner = ""``) and _23 (``and`` -> ``or``)."""
    other = Dropped(VK_A, SOFTWARE_REASON, HIDDEN.device_id)
    plain = Dropped(VK_B, SOFTWARE_REASON)
    kept, out = set_aside([HIDDEN, VISIBLE], [other, plain])
    assert kept == [VISIBLE]
    assert out[1:] == [other, plain]


# -- merge ------------------------------------------------------------------------------------------

Pairs = Sequence[tuple[DeviceInfo, DeviceInfo]]


class Asked:
    """An ``is_duplicate`` that answers ``answer`` for every pair and records each batch."""

    def __init__(self, answer: bool) -> None:
        self.answer = answer
        self.batches: list[list[tuple[DeviceInfo, DeviceInfo]]] = []

    def __call__(self, pairs: Pairs) -> list[bool]:
        self.batches.append(list(pairs))
        return [self.answer] * len(pairs)

    @property
    def pairs(self) -> list[tuple[DeviceInfo, DeviceInfo]]:
        return [p for batch in self.batches for p in batch]


def _cuda_first(a: DeviceInfo, b: DeviceInfo) -> bool:
    return a.library == "CUDA"


def _lib(name: str, variant: str) -> DeviceInfo:
    return DeviceInfo(id="0", library="CUDA", library_path=(f"/usr/lib/ollama/{variant}", variant))


def test_a_single_duplicate_key_is_one_key_not_its_characters() -> None:
    """A plugin's ``duplicate_keys`` answer that is not a frozenset is one key: "ab" and "bc"
    share no key (their characters are not keys), so the heuristics are never asked.
    Kills gpuscout._discovery.merge.x__as_keys__mutmut_3."""
    asked = Asked(True)
    a = DeviceInfo(id="0", library="Vulkan")
    b = DeviceInfo(id="1", library="OpenCL")
    keys = {"Vulkan": "ab", "OpenCL": "bc"}
    kept, _ = merge(
        [("vulkan", a), ("opencl", b)], asked, _cuda_first, lambda ds: [keys[d.library] for d in ds]
    )
    assert (kept, asked.pairs) == ([a, b], [])


def test_an_answer_list_of_the_wrong_length_is_an_error() -> None:
    """``duplicate_keys`` answers one entry per device and ``is_duplicate`` one bool per pair: a
    shorter answer is an error (ValueError), never read as fewer devices or as "no twin".
    Kills gpuscout._discovery.merge.x_merge__mutmut_20/23/24 and x__first_twin__mutmut_14/17/18."""
    a = DeviceInfo(id="0", library="Vulkan")
    b = DeviceInfo(id="1", library="OpenCL")
    with pytest.raises(ValueError):
        merge([("vulkan", a), ("opencl", b)], None, _cuda_first, lambda ds: [None])
    with pytest.raises(ValueError):
        merge([("vulkan", a), ("opencl", b)], lambda pairs: [], _cuda_first)


def test_the_heuristics_are_asked_in_small_then_growing_batches() -> None:
    """When the first candidate is the twin, one batch of at most 4 pairs is asked; 600 near
    misses cost a handful of batches (growing), not one per few pairs.
    Kills gpuscout._discovery.merge.x__first_twin__mutmut_6 (all at once), _3 (5 first),
    _19 (never growing)."""
    olds = [DeviceInfo(id=str(i), library="Vulkan") for i in range(600)]
    first = Asked(True)
    merge(
        [*(("vulkan", d) for d in olds), ("opencl", DeviceInfo(id="x", library="OpenCL"))], first, _cuda_first
    )
    assert len(first.batches) == 1
    assert len(first.batches[0]) <= 4
    none = Asked(False)
    merge(
        [*(("vulkan", d) for d in olds), ("opencl", DeviceInfo(id="x", library="OpenCL"))], none, _cuda_first
    )
    assert sum(len(b) for b in none.batches) == 600
    assert len(none.batches) <= 5


def test_compare_lets_pci_ids_decide_only_when_both_have_one() -> None:
    """The seed's Compare: a record with a PCI id and one without are left to the plugins'
    heuristics, which are asked about exactly that pair (a, b).
    Kills gpuscout._discovery.merge.x_compare__mutmut_1, _9 and _10."""
    a = DeviceInfo(id="0", library="CUDA", pci_id="0000:2a:00.0")
    b = DeviceInfo(id="0", library="Vulkan")
    seen: list[tuple[DeviceInfo, DeviceInfo]] = []

    def twins(x: DeviceInfo, y: DeviceInfo) -> bool:
        seen.append((x, y))
        return True

    assert compare(a, b, twins) is DeviceComparison.DUPLICATE
    assert seen == [(a, b)]


@pytest.mark.parametrize(
    ("old", "new", "better"),
    [
        ("cuda_v12_4", "cuda_v12_8", True),
        ("cuda_v12_8", "cuda_v12_4", False),
        ("cuda_v12", "cuda_v12_8", True),
        ("cuda", "cuda_v12", False),
        ("cuda_v12", "cuda", False),
        ("cuda_v12", "cuda_v012", False),
        ("cuda_12", "cuda_v11", True),
    ],
)
def test_the_library_variant_is_everything_after_the_first_underscore(
    old: str, new: str, better: bool
) -> None:
    """is_better compares the variants after the first ``_`` (``v12_8`` whole), digit runs as
    numbers that sort before text; no suffix on either side is "not better", and variants equal
    as numbers (``v12``, ``v012``) are a tie, where the earlier stays.
    Kills gpuscout._discovery.merge.x_is_better__mutmut_16/17/19/23/24/26 (splits), _28 (``and``), _43
    (``>=``), x__version_key__mutmut_4 (digits tagged as text: a TypeError)."""
    assert is_better(_lib(old, old), _lib(new, new)) is better


def test_of_two_hidden_views_of_one_card_the_newer_variant_stays() -> None:
    """Two hidden records of one card (same library, two plugins) are SAME_BACKEND: the newer
    library variant survives (and leaves first, as the hidden device), the older is its twin.
    Kills gpuscout._discovery.merge.x_merge__mutmut_87 (both hidden: the later always replacing)."""
    pci, mask = "0000:2a:00.0", "CUDA_VISIBLE_DEVICES=1"
    newer = DeviceInfo(id="GPU-0", library="CUDA", pci_id=pci, hidden_by=mask, library_path=("cuda_v13",))
    older = newer.evolve(library_path=("cuda_v12",))
    _, out = merge([("cuda", newer), ("cuda-old", older)], None, _cuda_first)
    assert [(d.device.library_path, d.reason) for d in out] == [
        (("cuda_v13",), f"hidden by {mask}"),
        (("cuda_v12",), f"hidden by {mask}"),
    ]


def test_the_heuristics_never_hear_a_pair_twice() -> None:
    """A survivor matching a new device through two duplicate keys is asked about once.
    Kills gpuscout._discovery.merge.xǁ_Indexǁ_heuristic__mutmut_25 (no de-duplication of positions)."""
    asked = Asked(False)
    a = DeviceInfo(id="0", library="Vulkan")
    b = DeviceInfo(id="1", library="OpenCL")
    merge([("vulkan", a), ("opencl", b)], asked, _cuda_first, lambda ds: [frozenset({"k", "m"})] * len(ds))
    assert asked.pairs == [(a, b)]


def test_the_heuristics_hear_only_pairs_of_two_libraries_whose_keys_match() -> None:
    """After a survivor is replaced, its old index entries never make it a candidate: the
    replacement of another library is not asked about a new device of its own library, and one
    whose keys changed is not asked about a key it no longer has.
    Kills gpuscout._discovery.merge.xǁ_Indexǁ_holds__mutmut_3 (library) and _10 (``and`` -> ``or``)."""
    keys = {"a": "k", "b": "k", "c": "k"}
    vk = DeviceInfo(id="a", library="Vulkan")
    cuda = DeviceInfo(id="b", library="CUDA")
    cuda2 = DeviceInfo(id="c", library="CUDA")
    asked = Asked(True)
    merge(
        [("vulkan", vk), ("cuda", cuda), ("cuda", cuda2)],
        asked,
        _cuda_first,
        lambda ds: [keys[d.id] for d in ds],
    )
    assert [(x.library, y.library) for x, y in asked.pairs] == [("Vulkan", "CUDA")]
    old = DeviceInfo(id="0", library="Vulkan", library_path=("vulkan_v1",))
    new = old.evolve(library_path=("vulkan_v2",))
    other = DeviceInfo(id="x", library="OpenCL")
    keyed = {"vulkan_v1": "k", "vulkan_v2": "m"}
    asked = Asked(True)
    kept, _ = merge(
        [("vulkan", old), ("vulkan", new), ("opencl", other)],
        asked,
        _cuda_first,
        lambda ds: [keyed[d.library_path[-1]] if d.library_path else "k" for d in ds],
    )
    assert (kept, asked.pairs) == ([new, other], [])


def test_the_heuristics_are_not_asked_past_the_first_decisive_survivor() -> None:
    """The first survivor that is not UNIQUE decides: once the PCI id finds the card at an
    earlier position, no later survivor is put to the heuristics.
    Kills gpuscout._discovery.merge.xǁ_Indexǁcandidates__mutmut_63."""
    pci = "0000:2a:00.0"
    card = DeviceInfo(id="GPU-0", library="CUDA", pci_id=pci)
    later = DeviceInfo(id="7", library="OpenCL")
    asked = Asked(False)
    merge(
        [("cuda", card), ("opencl", later), ("vulkan", DeviceInfo(id="0", library="Vulkan", pci_id=pci))],
        asked,
        _cuda_first,
    )
    assert [(x.library, y.library) for x, y in asked.pairs] == [("CUDA", "OpenCL")]


def test_a_replaced_survivor_without_pci_id_is_met_through_the_heuristics() -> None:
    """A stale DeviceID entry (its position now holds the other library's twin) never stands in
    for a survivor: a later record with the replaced record's id still meets the replacement
    through the heuristics and is dropped as its duplicate.
    Kills gpuscout._discovery.merge.xǁ_Indexǁcandidates__mutmut_48."""
    vk = DeviceInfo(id="0", library="Vulkan")
    cuda = DeviceInfo(id="0", library="CUDA")
    again = vk.evolve(name="second view")
    kept, out = merge([("vulkan", vk), ("cuda", cuda), ("vulkan-b", again)], Asked(True), _cuda_first)
    assert kept == [cuda]
    assert [(d.device, d.duplicate_of) for d in out] == [(vk, cuda.device_id), (again, cuda.device_id)]


# -- system -----------------------------------------------------------------------------------------

V1_UNLIMITED = 9223372036854771712


def _read(tmp_path: Path, files: dict[str, str]) -> tuple[SystemInfo, list[str]]:
    ctx = Context(env={}, platform="linux", root=str(write_tree(tmp_path, files)))
    return read_system(ctx), list(ctx.notes)


def test_meminfo_values_without_a_unit_are_bytes_and_odd_lines_are_skipped() -> None:
    """A /proc/meminfo value without ``kB`` is a plain count (HugePages_Total); a line without a
    colon or without a value is skipped, and so is an unreadable value, without ending the file.
    Kills gpuscout._machine.system.x__parse_meminfo__mutmut_8, _11, _15, _25 and _37."""
    text = "garbage line\nEmpty:\nMemFree: x kB\nHugePages_Total:       5\nMemTotal: 2 kB\n"
    assert parse_meminfo(text) == {"HugePages_Total": 5, "MemTotal": 2048}


def test_a_meminfo_value_of_2_to_the_64_bytes_is_unreadable() -> None:
    """The limit is "below 2**64 bytes" after the kB scale: 2**54 kB is exactly 2**64 bytes and
    leaves its key out. Kills gpuscout._machine.system.x__parse_meminfo__mutmut_31 (``/``) and _32 (``>``)."""
    assert parse_meminfo(f"MemTotal: {2**54} kB\nMemFree: {2**54 - 1} kB\n") == {
        "MemFree": (2**54 - 1) * 1024
    }


def test_the_last_meminfo_line_for_a_key_wins_readable_or_not(tmp_path: Path) -> None:
    """A later unreadable line for a key makes it unknown (with a note naming the keys, in
    _MEMINFO_KEYS order); a later readable one makes it known again (without a note).
    Kills gpuscout._machine.system.x__parse_meminfo__mutmut_33/36/40, x_read_system__mutmut_17/19/21."""
    assert parse_meminfo("MemTotal: 1 kB\nMemTotal: x kB\n") == {}
    info, notes = _read(
        tmp_path,
        {
            "/proc/meminfo": "SwapFree: x kB\nMemTotal: y kB\nMemFree: z kB\nMemFree: 4 kB\n",
            "/proc/self/cgroup": "",
        },
    )
    assert notes == ["/proc/meminfo: MemTotal, SwapFree not a number below 2**64 bytes; taken as unknown"]
    assert info.free_memory == 4 * 1024


def test_free_is_memfree_without_memavailable_and_capped_by_total(tmp_path: Path) -> None:
    """Without MemAvailable, free is MemFree; free never exceeds total, and without a total it
    stands as it is. Kills gpuscout._machine.system.x_read_system__mutmut_39/43/44/45, _115 and _116."""
    info, _ = _read(tmp_path / "a", {"/proc/meminfo": "MemTotal: 8 kB\nMemFree: 3 kB\n"})
    assert info.free_memory == 3 * 1024
    info, _ = _read(tmp_path / "b", {"/proc/meminfo": "MemTotal: 8 kB\nMemAvailable: 9 kB\n"})
    assert info.free_memory == 8 * 1024
    info, _ = _read(tmp_path / "c", {"/proc/meminfo": "MemAvailable: 9 kB\n"})
    assert (info.total_memory, info.free_memory) == (0, 9 * 1024)


def test_without_meminfo_the_cgroup_gives_total_and_free(tmp_path: Path) -> None:
    """With no /proc/meminfo, the cgroup's limit is the total and its headroom the free memory;
    with meminfo's free below the cgroup's headroom, meminfo's stands.
    Kills gpuscout._machine.system.x_read_system__mutmut_61, _68 and _69."""
    cg = {
        "/proc/self/cgroup": "0::/ctr\n",
        "/sys/fs/cgroup/ctr/memory.max": f"{8 * GIB}\n",
        "/sys/fs/cgroup/ctr/memory.current": f"{2 * GIB}\n",
    }
    info, _ = _read(tmp_path / "a", cg)
    assert (info.total_memory, info.free_memory) == (8 * GIB, 6 * GIB)
    info, _ = _read(
        tmp_path / "b", {**cg, "/proc/meminfo": f"MemTotal: {16 * GIB // 1024} kB\nMemAvailable: 4 kB\n"}
    )
    assert (info.total_memory, info.free_memory) == (8 * GIB, 4 * 1024)


def test_v1_unlimited_and_v2_max_are_no_limit(tmp_path: Path) -> None:
    """cgroup v1's "unlimited" value (exactly 9223372036854771712) and v2's ``max`` are no limit
    (without /proc/meminfo the total stays 0), the latter read without a note.
    Kills gpuscout._machine.system.x__read_limit__mutmut_5/6/7/8/12."""
    meminfo = f"MemTotal: {16 * GIB // 1024} kB\n"
    info, _ = _read(
        tmp_path / "a",
        {
            "/proc/self/cgroup": "4:memory:/ctr\n",
            "/sys/fs/cgroup/memory/ctr/memory.limit_in_bytes": f"{V1_UNLIMITED}\n",
        },
    )
    assert info.total_memory == 0
    info, notes = _read(
        tmp_path / "b",
        {
            "/proc/meminfo": meminfo,
            "/proc/self/cgroup": "0::/ctr\n",
            "/sys/fs/cgroup/ctr/memory.max": "max\n",
        },
    )
    assert (info.total_memory, notes) == (16 * GIB, [])


def test_proc_self_cgroup_paths_may_hold_colons_and_odd_lines_are_skipped(tmp_path: Path) -> None:
    """A line of /proc/self/cgroup splits at its first two colons (a path may hold more); a line
    without three fields is skipped, not the end of the file; a cgroup named with X at either end
    is read under its own name.
    Kills gpuscout._machine.system.x__cgroup_paths__mutmut_12/13/15/18,
    x_cgroup_memory__mutmut_18/19/38/39."""
    info, _ = _read(
        tmp_path / "a",
        {"/proc/self/cgroup": "garbage\n0::/pod:a\n", "/sys/fs/cgroup/pod:a/memory.max": f"{GIB}\n"},
    )
    assert info.total_memory == GIB
    info, _ = _read(
        tmp_path / "b",
        {
            "/proc/self/cgroup": "4:memory:/XboxX\n0::/XboxX\n",
            "/sys/fs/cgroup/memory/XboxX/memory.limit_in_bytes": f"{2 * GIB}\n",
            "/sys/fs/cgroup/XboxX/memory.max": f"{3 * GIB}\n",
            "/sys/fs/cgroup/memory/boxX/memory.limit_in_bytes": f"{GIB}\n",
            "/sys/fs/cgroup/Xbox/memory.max": f"{GIB}\n",
            "/sys/fs/cgroup/boxX/memory.max": f"{GIB}\n",
            "/sys/fs/cgroup/memory/Xbox/memory.limit_in_bytes": f"{GIB}\n",
        },
    )
    assert info.total_memory == 2 * GIB


def test_a_cgroup_path_of_path_max_is_read_and_one_leading_out_is_noted(tmp_path: Path) -> None:
    """A cgroup path of exactly PATH_MAX (4096) characters is a path; one with ``..`` is
    ignored with a note quoting its first 80 characters.
    Kills gpuscout._machine.system.x__cgroup_path__mutmut_13, _14 and _15."""
    long = "/" + "/".join(["c" * 63] * 64)
    long = long + "d" * (4096 - len(long))
    assert len(long) == 4096
    _, notes = _read(tmp_path / "a", {"/proc/self/cgroup": f"0::{long}\n"})
    assert not any("does not lead" in n for n in notes)
    out = "/../" + "e" * 100
    _, notes = _read(tmp_path / "b", {"/proc/self/cgroup": f"0::{out}\n"})
    assert notes == [f"/proc/self/cgroup: path {out[:80]!r} does not lead below the cgroup root; ignored"]


def test_memory_stat_lines_blank_odd_and_repeated(tmp_path: Path) -> None:
    """In memory.stat a blank line is skipped; a value of more than one field is unreadable,
    noted with its fields joined by a space (the first 40 characters); the last line for a key
    wins, readable or not, and a readable last line takes its note back.
    Kills gpuscout._machine.system.x__inactive_file__mutmut_7/16/22/27/30/34."""
    base = {
        "/proc/self/cgroup": "0::/ctr\n",
        "/sys/fs/cgroup/ctr/memory.max": f"{8 * GIB}\n",
        "/sys/fs/cgroup/ctr/memory.current": f"{4 * GIB}\n",
    }
    stat = "/sys/fs/cgroup/ctr/memory.stat"
    info, notes = _read(
        tmp_path / "a", {**base, stat: f"\nanon 1\ninactive_file x {GIB}\ninactive_file {GIB}\n"}
    )
    assert (info.free_memory, notes) == (5 * GIB, [])
    raw = "1 " + "2" * 50
    info, notes = _read(tmp_path / "b", {**base, stat: f"inactive_file {GIB}\ninactive_file {raw}\n"})
    assert info.free_memory == 4 * GIB
    assert notes == [f"{stat}: inactive_file {raw[:40]!r} is not a number below 2**64; ignored"]


def test_the_walk_up_reads_every_ancestor_and_takes_swap_from_the_tightest(tmp_path: Path) -> None:
    """Every ancestor's limit is read, past one with a larger limit; free is the smallest
    headroom among those whose usage is readable; swap left (swap.max less swap.current, 0
    without it) comes from the first cgroup with the smallest limit.
    Kills gpuscout._machine.system.x_cgroup_memory__mutmut_71, _79, _80, _94 and _104."""
    files = {
        "/proc/meminfo": f"MemTotal: {64 * GIB // 1024} kB\nSwapFree: {64 * GIB // 1024} kB\n",
        "/proc/self/cgroup": "0::/a/b/c\n",
        "/sys/fs/cgroup/a/b/c/memory.max": f"{8 * GIB}\n",
        "/sys/fs/cgroup/a/b/c/memory.current": f"{GIB}\n",
        "/sys/fs/cgroup/a/b/memory.max": f"{16 * GIB}\n",
        "/sys/fs/cgroup/a/memory.max": f"{4 * GIB}\n",
        "/sys/fs/cgroup/a/memory.swap.max": f"{2 * GIB}\n",
        "/sys/fs/cgroup/a/memory.swap.current": f"{GIB // 2}\n",
        "/sys/fs/cgroup/memory.max": f"{4 * GIB}\n",
        "/sys/fs/cgroup/memory.swap.max": f"{GIB}\n",
    }
    info, _ = _read(tmp_path / "a", files)
    assert (info.total_memory, info.free_memory, info.free_swap) == (4 * GIB, 4 * GIB, GIB + GIB // 2)
    del files["/sys/fs/cgroup/a/memory.swap.current"]
    info, _ = _read(tmp_path / "b", files)
    assert info.free_swap == 2 * GIB


def test_a_partition_of_the_own_group_never_cuts_off_the_heuristics() -> None:
    """A new MIG instance never meets its own (library, plugin) group's other partitions: its
    heuristic twin (a Vulkan view without PCI id, met after the first partition) still decides.
    Kills gpuscout._discovery.merge.xǁ_Indexǁcandidates__mutmut_4/12 and x_merge__mutmut_26 (the own group
    offered; the merge loop then skips the partition, but the heuristics were cut off at it)."""
    pci = "0000:2a:00.0"
    mig_a = DeviceInfo(id="MIG-a", library="CUDA", pci_id=pci)
    view = DeviceInfo(id="0", library="Vulkan")
    mig_b = mig_a.evolve(id="MIG-b")
    kept, out = merge(
        [("cuda", mig_a), ("vulkan", view), ("cuda", mig_b)],
        lambda pairs: [(x.id, y.id) == ("0", "MIG-b") for x, y in pairs],
        _cuda_first,
    )
    assert kept == [mig_a, mig_b]
    assert [(d.device, d.duplicate_of) for d in out] == [(view, mig_b.device_id)]


def test_a_replaced_survivor_with_pci_id_never_stands_in_for_its_old_card() -> None:
    """A stale (PCI id, library, plugin, id) entry, whose position now holds a card of another
    PCI id, never decides: the later record of the old card still meets its twin through the
    heuristics. Kills gpuscout._discovery.merge.xǁ_Indexǁcandidates__mutmut_31 (``and`` -> ``or``)."""
    rank = {"ROCm": 3, "CUDA": 2, "Vulkan": 1}
    twins = {("0", "b"), ("b", "c"), ("e", "0")}
    a = DeviceInfo(id="0", library="Vulkan", pci_id="0000:2a:00.0")
    b = DeviceInfo(id="b", library="CUDA")
    c = DeviceInfo(id="c", library="ROCm", pci_id="0000:3b:00.0")
    e = DeviceInfo(id="e", library="CUDA")
    again = a.evolve(name="second view")
    kept, out = merge(
        [("vulkan", a), ("cuda", b), ("rocm", c), ("cuda", e), ("vulkan", again)],
        lambda pairs: [(x.id, y.id) in twins for x, y in pairs],
        lambda x, y: rank[x.library] > rank[y.library],
    )
    assert kept == [c, e]
    assert (out[-1].device, out[-1].duplicate_of) == (again, e.device_id)
