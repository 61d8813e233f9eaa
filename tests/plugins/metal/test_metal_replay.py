"""The Metal plugin end to end on recordings: replayed Metal answers and sysctls through the
real code path, the working set explained by iogpu.wired_limit_mb, and `gpuscout record` on
macOS keeping what a replay needs."""

from __future__ import annotations

import json
import shutil
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from gpuscout import Scout
from gpuscout._recording.record import Recorder
from gpuscout.plugin import RecordingError
from gpuscout.plugins.metal.enumeration import working_set_note
from gpuscout.sizes import GIB, MIB

MACHINES = Path(__file__).parents[2] / "machines"


def test_a_raised_wired_limit_is_named_with_its_value() -> None:
    """iogpu.wired_limit_mb=12288 on 16 GiB: the note says the working set follows it."""
    note = working_set_note(12288 * MIB, 12288, 16 * GIB)
    assert "12.0 GiB follows iogpu.wired_limit_mb=12288" in note and "RAM 16.0 GiB" in note
    assert "did not take" not in note


def test_the_default_wired_limit_is_called_macos_default_share() -> None:
    """iogpu.wired_limit_mb=0: the working set is macOS's default share, with how to raise it."""
    note = working_set_note(48 * GIB, 0, 64 * GIB)
    assert "default share of 64.0 GiB RAM" in note and "sudo sysctl iogpu.wired_limit_mb" in note


def test_a_working_set_that_does_not_follow_the_limit_says_both() -> None:
    """A limit Metal did not take (above RAM, say) shows the limit and Metal's figure."""
    note = working_set_note(12 * GIB, 65536, None)
    assert "12.0 GiB although iogpu.wired_limit_mb=65536 (64.0 GiB)" in note
    assert "follows" not in note and "; RAM" not in note


def test_without_the_sysctl_nothing_is_said() -> None:
    """An unknown wired limit (not recorded) gives no note."""
    assert working_set_note(12 * GIB, None, 16 * GIB) == ""


def _copy(tmp_path: Path, name: str) -> Path:
    target = tmp_path / name
    shutil.copytree(MACHINES / name, target)
    return target


def _edit_metal(recording: Path, change: Any) -> None:
    path = recording / "answers/metal.json"
    answers = json.loads(path.read_text())
    change(answers)
    path.write_text(json.dumps(answers))


def test_the_m1_recording_runs_the_plugin_on_linux() -> None:
    """A darwin recording replays the Metal plugin anywhere: one device, 12 GiB, noted."""
    found = Scout(plugins=["metal"], entry_points=False, replay=MACHINES / "m1_wired_limit").discover()
    (device,) = found.devices
    assert (device.library, device.name, device.total_memory) == ("Metal", "Apple M1", 12 * GIB)
    assert device.integrated and "iogpu.wired_limit_mb=12288" in device.notes[0]


def test_a_recording_without_sysctls_lists_the_device_without_a_note(tmp_path: Path) -> None:
    """Metal's answers alone (an older recording) still list the device, with no note."""
    target = _copy(tmp_path, "m3_max_macbook")
    _edit_metal(target, lambda a: a.pop("sysctl"))
    (device,) = Scout(plugins=["metal"], entry_points=False, replay=target).discover().devices
    assert device.total_memory == 48 * GIB and device.notes == ()


@pytest.mark.parametrize("value", [-1, "12288", True, [12288]], ids=["negative", "text", "bool", "list"])
def test_a_malformed_recorded_wired_limit_is_refused(tmp_path: Path, value: Any) -> None:
    """iogpu.wired_limit_mb must be a whole number: otherwise the replay raises RecordingError."""
    target = _copy(tmp_path, "m1_wired_limit")
    _edit_metal(target, lambda a: a["sysctl"].__setitem__("iogpu.wired_limit_mb", value))
    with pytest.raises(RecordingError, match=r"answers/metal\.json: sysctl\.iogpu\.wired_limit_mb"):
        Scout(plugins=["metal"], entry_points=False, replay=target).discover()


class FakeMetalDevice:
    """An MTLDevice stand-in with an M1's answers under a raised wired limit."""

    def name(self) -> str:
        return "Apple M1"

    def registryID(self) -> int:
        return 0x100000526

    def hasUnifiedMemory(self) -> bool:
        return True

    def recommendedMaxWorkingSetSize(self) -> int:
        return 12288 * MIB

    def currentAllocatedSize(self) -> int:
        return 0


class FakeMetalFramework(types.ModuleType):
    """pyobjc's ``Metal`` module stand-in: one device, also the default one."""

    def __init__(self) -> None:
        super().__init__("Metal")
        self.device = FakeMetalDevice()

    def MTLCopyAllDevices(self) -> list[FakeMetalDevice]:
        return [self.device]

    def MTLCreateSystemDefaultDevice(self) -> FakeMetalDevice:
        return self.device


def test_recording_a_mac_keeps_metal_sysctls_and_vm_statistics(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`gpuscout record` on macOS writes metal.json (Metal and its sysctls) and core.json (the
    system's), and the replay finds the same device, note and system memory."""
    import gpuscout._machine.osfacts as osfacts

    sysctls = {"hw.memsize": 16 * GIB, "iogpu.wired_limit_mb": 12288}
    stats = {"page_size": 16384, "free_count": 131072, "inactive_count": 196608}
    monkeypatch.setattr(osfacts, "_live_sysctl", sysctls.get)
    monkeypatch.setattr(osfacts, "_live_vm_statistics", lambda: dict(stats))
    monkeypatch.setitem(sys.modules, "Metal", FakeMetalFramework())
    recorder = Recorder()
    scout = Scout(plugins=["metal"], entry_points=False, env={}, platform="darwin", recorder=recorder)
    found = scout.discover()
    target = tmp_path / "rec"
    recorder.write(str(target), platform="darwin", env={})
    metal = json.loads((target / "answers/metal.json").read_text())
    assert metal["sysctl"] == sysctls and metal["metal"]["devices"][0]["name"] == "Apple M1"
    assert "vm_statistics" in json.loads((target / "answers/core.json").read_text())
    monkeypatch.setitem(sys.modules, "Metal", None)  # the replay must not need pyobjc
    again = Scout(plugins=["metal"], entry_points=False, replay=target).discover()
    assert again.devices == found.devices and again.system == found.system
    assert again.system.free_memory == (131072 + 196608) * 16384
