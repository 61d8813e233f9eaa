"""Operating-system facts through the Context: WSL2 from /proc/version, macOS sysctls and VM
statistics, recorded and replayed; the system memory they give and the notes that say so."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpuscout import Scout
from gpuscout._machine.osfacts import available_bytes, is_wsl2, sysctl_int, vm_statistics
from gpuscout._machine.system import DARWIN_UNRECORDED_NOTE, WSL2_NOTE, read_system
from gpuscout._recording.record import Recorder
from gpuscout.plugin import Context, RecordingError
from gpuscout.sizes import GIB
from gpuscout.testing import FIFO, write_tree

WSL2_VERSION = (
    "Linux version 5.15.167.4-microsoft-standard-WSL2 (root@f9c826d3017f) (gcc (GCC) 11.2.0) "
    "#1 SMP Tue Nov 5 00:21:55 UTC 2024\n"
)
MEMINFO = "MemTotal: 32827592 kB\nMemAvailable: 31457280 kB\nSwapFree: 0 kB\n"


def _ctx(root: Path, platform: str = "linux", answers: dict[str, Any] | None = None) -> Context:
    return Context(env={}, platform=platform, root=str(root), answers=answers)


@pytest.mark.parametrize(
    ("text", "wsl2"),
    [
        (WSL2_VERSION, True),
        ("Linux version 4.19.104-microsoft-standard (oe-user@oe-host) #1 SMP\n", True),
        ("Linux version 4.4.0-19041-Microsoft (Microsoft@Microsoft.com) (gcc version 5.4.0)\n", False),
        ("Linux version 6.8.0-49-generic (buildd@lcy02-amd64-103) #49-Ubuntu SMP\n", False),
        ("", False),
        ("microsoft $(rm -rf /) 'wsl2\"\n", True),
    ],
    ids=["wsl2-5.15", "wsl2-4.19", "wsl1", "ubuntu", "empty", "hostile-but-says-it"],
)
def test_wsl2_is_told_by_the_kernel_release_string(tmp_path: Path, text: str, wsl2: bool) -> None:
    """WSL2 kernels say microsoft-standard(-WSL2); WSL1 and other kernels do not."""
    write_tree(tmp_path, {"/proc/version": text})
    assert is_wsl2(_ctx(tmp_path)) is wsl2


@pytest.mark.parametrize("content", [b"\xff\xfe microsoft \x80", FIFO], ids=["non-utf8", "fifo"])
def test_an_unreadable_proc_version_is_not_wsl2_and_never_hangs(tmp_path: Path, content: Any) -> None:
    """Garbage or a FIFO at /proc/version answers False at once (the FIFO with a note)."""
    write_tree(tmp_path, {"/proc/version": content})
    assert is_wsl2(_ctx(tmp_path)) is False


def test_a_missing_proc_version_is_not_wsl2(tmp_path: Path) -> None:
    """No /proc/version (a tree without it) is not WSL2."""
    assert is_wsl2(_ctx(tmp_path)) is False


def test_wsl2_system_memory_carries_the_vm_note(tmp_path: Path) -> None:
    """Under WSL2 the meminfo figures stand, and a note says they are the VM's."""
    write_tree(tmp_path, {"/proc/version": WSL2_VERSION, "/proc/meminfo": MEMINFO})
    system = read_system(_ctx(tmp_path))
    assert system.total_memory == 32827592 * 1024 and system.free_memory == 31457280 * 1024
    assert system.notes == (WSL2_NOTE,)
    assert "memory=" in WSL2_NOTE and "half of the host's RAM" in WSL2_NOTE


@pytest.mark.parametrize("limit", [4 * GIB, 64 * GIB, "max"], ids=["below-the-vm", "above-the-vm", "max"])
def test_wsl2_says_when_a_cgroup_limit_and_not_wslconfig_bounds_memory(
    tmp_path: Path, limit: int | str
) -> None:
    """A cgroup limit inside WSL2's VM below its MemTotal (a container's --memory) is named in
    the note, since .wslconfig's memory= would not raise the figures; a looser one is not."""
    write_tree(
        tmp_path,
        {
            "/proc/version": WSL2_VERSION,
            "/proc/meminfo": MEMINFO,
            "/proc/self/cgroup": "0::/\n",
            "/sys/fs/cgroup/memory.max": f"{limit}\n",
            "/sys/fs/cgroup/memory.current": "0\n",
        },
    )
    system = read_system(_ctx(tmp_path))
    (note,) = system.notes
    assert note.startswith(WSL2_NOTE)
    if limit == 4 * GIB:
        assert system.total_memory == 4 * GIB
        assert "a cgroup memory limit of 4.0 GiB, below the VM's 31.3 GiB, bounds them" in note
    else:
        assert note == WSL2_NOTE


def test_bare_metal_system_memory_has_no_note(tmp_path: Path) -> None:
    """Off WSL2 system memory carries no note."""
    write_tree(tmp_path, {"/proc/version": "Linux version 6.8.0-49-generic\n", "/proc/meminfo": MEMINFO})
    assert read_system(_ctx(tmp_path)).notes == ()


def test_wsl2_without_meminfo_gives_zeros_and_no_note(tmp_path: Path) -> None:
    """Nothing known means nothing to explain: zeros, no note."""
    write_tree(tmp_path, {"/proc/version": WSL2_VERSION})
    system = read_system(_ctx(tmp_path))
    assert (system.total_memory, system.notes) == (0, ())


STATS = {"page_size": 16384, "free_count": 1000, "inactive_count": 500, "speculative_count": 100}


def test_available_memory_is_free_plus_inactive_pages() -> None:
    """free_count (speculative pages included) + inactive_count, times the page size."""
    assert available_bytes(STATS) == 1500 * 16384
    assert available_bytes({}) == 0


def test_replayed_darwin_system_memory_comes_from_sysctl_and_vm_statistics(tmp_path: Path) -> None:
    """Total is hw.memsize, free the VM statistics' free + inactive, with a note naming vm_stat."""
    ctx = _ctx(tmp_path, "darwin", {"sysctl": {"hw.memsize": 16 << 30}, "vm_statistics": STATS})
    system = read_system(ctx)
    assert (system.total_memory, system.free_memory) == (16 << 30, 1500 * 16384)
    assert len(system.notes) == 1 and "vm_stat" in system.notes[0] and "16384" in system.notes[0]


def test_free_above_total_is_capped_at_the_total(tmp_path: Path) -> None:
    """VM statistics that promise more than hw.memsize are capped by it."""
    ctx = _ctx(tmp_path, "darwin", {"sysctl": {"hw.memsize": 1 << 20}, "vm_statistics": STATS})
    assert read_system(ctx).free_memory == 1 << 20


def test_darwin_without_vm_statistics_reports_the_total_and_says_free_is_unknown(tmp_path: Path) -> None:
    """hw.memsize alone: the total, free 0, and a note saying why."""
    ctx = _ctx(tmp_path, "darwin", {"sysctl": {"hw.memsize": 16 << 30}})
    system = read_system(ctx)
    assert (system.total_memory, system.free_memory) == (16 << 30, 0)
    assert any("host_statistics64" in n for n in ctx.notes)


def test_darwin_recording_without_answers_gives_zeros_and_says_so(tmp_path: Path) -> None:
    """A darwin recording whose reader was never asked knows nothing: zeros, and a note naming core.json."""
    system = read_system(_ctx(tmp_path, "darwin", {}))
    assert (system.total_memory, system.free_memory, system.notes) == (0, 0, (DARWIN_UNRECORDED_NOTE,))
    assert "answers/core.json" in DARWIN_UNRECORDED_NOTE


def test_a_darwin_recording_without_core_json_never_blames_proc_meminfo(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`list` on a Mac recording without answers/core.json prints no Linux hint, and the note instead."""
    import shutil

    from gpuscout.cli import main

    target = tmp_path / "mac"
    shutil.copytree(Path(__file__).parent / "machines" / "m3_max_macbook", target)
    (target / "answers" / "core.json").unlink()
    assert main(["--replay", str(target), "list", "--format", "tsv"]) == 0
    out = capsys.readouterr().out
    assert "/proc/meminfo" not in out
    assert out.splitlines()[-2:] == [
        "System memory: unknown",
        f"System memory note: {DARWIN_UNRECORDED_NOTE}",
    ]


@pytest.mark.parametrize(
    "answers",
    [
        {"sysctl": ["hw.memsize"]},
        {"sysctl": {"hw.memsize": -1}},
        {"sysctl": {"hw.memsize": True}},
        {"sysctl": {"hw.memsize": 1 << 64}},
        {"sysctl": {"hw.memsize": "$(reboot)"}},
        {"sysctl": {"hw.memsize": 1}, "vm_statistics": {"free_count": 1}},
        {"sysctl": {"hw.memsize": 1}, "vm_statistics": {"page_size": 16384, "free_count": -5}},
        {"sysctl": {"hw.memsize": 1}, "vm_statistics": [16384]},
    ],
    ids=["list", "negative", "bool", "huge", "text", "no-page-size", "negative-pages", "vm-list"],
)
def test_a_malformed_recorded_answer_is_a_recording_error(tmp_path: Path, answers: dict[str, Any]) -> None:
    """Replayed sysctls and VM statistics are whole numbers below 2**64, or the recording is refused."""
    with pytest.raises(RecordingError, match=r"answers/core\.json: (sysctl|vm_statistics)"):
        read_system(_ctx(tmp_path, "darwin", answers))


def test_sysctl_refuses_names_that_are_not_sysctl_names(tmp_path: Path) -> None:
    """Names with spaces, shell syntax or NULs are never asked or looked up."""
    ctx = _ctx(tmp_path, "darwin", {"sysctl": {"a b": 1, "x;y": 2}})
    assert sysctl_int(ctx, "a b") is None and sysctl_int(ctx, "x;y") is None
    assert sysctl_int(ctx, "") is None and sysctl_int(ctx, "hw.\x00memsize") is None


def test_nothing_macos_is_asked_off_macos(tmp_path: Path) -> None:
    """On linux (or a tree root) sysctl_int and vm_statistics answer None without asking."""
    assert sysctl_int(Context(env={}, platform="linux"), "hw.memsize") is None
    assert vm_statistics(Context(env={}, platform="linux")) is None
    assert sysctl_int(Context(env={}, platform="darwin", root=str(tmp_path)), "hw.memsize") is None


def test_recorder_merges_items_of_one_answer() -> None:
    """Two sysctls asked one after the other both end up in the answer ``sysctl``."""
    recorder = Recorder()
    recorder.answer_item("metal", "sysctl", "hw.memsize", 1)
    recorder.answer_item("metal", "sysctl", "iogpu.wired_limit_mb", 0)
    recorder.answer_item("", "sysctl", "hw.memsize", 2)
    assert recorder.answers["metal"]["sysctl"] == {"hw.memsize": 1, "iogpu.wired_limit_mb": 0}
    assert recorder.answers["core"]["sysctl"] == {"hw.memsize": 2}


def test_a_recorded_mac_replays_its_system_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`gpuscout record` on macOS keeps hw.memsize and the VM statistics in answers/core.json,
    and the replay finds the same system memory."""
    import gpuscout._machine.osfacts as osfacts

    monkeypatch.setattr(osfacts, "_live_sysctl", lambda name: {"hw.memsize": 32 << 30}.get(name))
    monkeypatch.setattr(osfacts, "_live_vm_statistics", lambda: dict(STATS))
    recorder = Recorder()
    scout = Scout(plugins=[], entry_points=False, env={}, platform="darwin", recorder=recorder)
    found = scout.discover()
    target = tmp_path / "rec"
    recorder.write(str(target), platform="darwin", env={})
    core = json.loads((target / "answers" / "core.json").read_text())
    assert core["sysctl"] == {"hw.memsize": 32 << 30}
    assert core["vm_statistics"]["page_size"] == 16384
    again = Scout(plugins=[], entry_points=False, replay=target).discover()
    assert again.system == found.system
    assert (again.system.total_memory, again.system.free_memory) == (32 << 30, 1500 * 16384)


def test_the_plain_listing_prints_the_system_notes_after_the_system_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`list --format tsv` on a WSL2 recording ends with the system line and its note."""
    from gpuscout.cli import main

    machine = Path(__file__).parent / "machines" / "wsl2_rtx4090"
    assert main(["--replay", str(machine), "list", "--format", "tsv"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-2].startswith("System memory: ") and lines[-1] == f"System memory note: {WSL2_NOTE}"


def test_a_live_mac_without_sysctl_still_has_its_total(monkeypatch: pytest.MonkeyPatch) -> None:
    """When sysctlbyname answers nothing on a live Mac, sysconf's page count gives the total."""
    import gpuscout._machine.osfacts as osfacts
    import gpuscout._machine.system as system

    monkeypatch.setattr(osfacts, "_live_sysctl", lambda name: None)
    monkeypatch.setattr(osfacts, "_live_vm_statistics", lambda: None)
    monkeypatch.setattr(system, "_sysconf_total", lambda: 8 << 30)
    info = read_system(Context(env={}, platform="darwin"))
    assert (info.total_memory, info.free_memory) == (8 << 30, 0)
