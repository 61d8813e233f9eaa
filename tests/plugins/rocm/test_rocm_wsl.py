"""The ROCm plugin under WSL2 (/dev/dxg, no /dev/kfd): no device, and a note naming
HSA_ENABLE_DXG_DETECTION=1 in place of the bare-metal PCI and KFD diagnostics."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuscout import Scout
from gpuscout.plugin import Context
from gpuscout.plugins.rocm.diagnosis import explain_no_topology
from gpuscout.plugins.rocm.wsl import DXG_ENV, wsl_sentence
from gpuscout.testing import write_tree

MACHINE = Path(__file__).parents[2] / "machines" / "wsl2_radeon"
WSL2_VERSION = "Linux version 5.15.167.4-microsoft-standard-WSL2 (root@host) #1 SMP\n"


def _ctx(tmp_path: Path, env: dict[str, str], files: dict[str, str] | None = None) -> Context:
    tree = {"/proc/version": WSL2_VERSION, "/dev/dxg": "", **(files or {})}
    return Context(env=env, platform="linux", root=str(write_tree(tmp_path, tree)))


def test_unset_detection_is_named_with_the_value_rocr_needs(tmp_path: Path) -> None:
    """Without the variable the note says to set HSA_ENABLE_DXG_DETECTION=1 and that it is unset."""
    text = wsl_sentence(_ctx(tmp_path, {}))
    assert f"{DXG_ENV}=1" in text and "is unset" in text and "/dev/dxg" in text


def test_set_detection_says_what_gpuscout_cannot_read(tmp_path: Path) -> None:
    """With HSA_ENABLE_DXG_DETECTION=1 the note says a ROCm child finds the GPU, gpuscout cannot."""
    text = wsl_sentence(_ctx(tmp_path, {DXG_ENV: "1"}))
    assert "=1 is set" in text and "neither of which WSL2 provides" in text and "set HSA" not in text


@pytest.mark.parametrize("value", ["0", "", "$(reboot)", "1; rm -rf /", "x" * 500])
def test_any_other_value_is_quoted_short_and_the_fix_named(tmp_path: Path, value: str) -> None:
    """A value other than 1 is shown quoted (at most 20 characters) and =1 is asked for."""
    text = wsl_sentence(_ctx(tmp_path, {DXG_ENV: value}))
    assert f"set {DXG_ENV}=1" in text and repr(value.strip()[:20]) in text
    assert "x" * 21 not in text


def test_nothing_is_said_with_dev_kfd_or_without_dev_dxg_or_off_wsl2(tmp_path: Path) -> None:
    """Bare-metal KFD, a WSL without /dev/dxg and a plain kernel get no WSL sentence."""
    assert wsl_sentence(_ctx(tmp_path / "a", {}, {"/dev/kfd": ""})) == ""
    no_dxg = Context(
        env={}, platform="linux", root=str(write_tree(tmp_path / "b", {"/proc/version": WSL2_VERSION}))
    )
    assert wsl_sentence(no_dxg) == ""
    plain = _ctx(tmp_path / "c", {}, {"/proc/version": "Linux version 6.8.0-49-generic\n"})
    assert wsl_sentence(plain) == ""


def test_under_wsl2_the_pci_bus_is_not_blamed(tmp_path: Path) -> None:
    """explain_no_topology says the WSL sentence alone, never "no AMD GPU on the PCI bus"."""
    ctx = _ctx(tmp_path, {}, {"/sys/bus/pci/devices/0000:00:00.0/class": "0x060000\n"})
    explain_no_topology(ctx, topology=False)
    assert len(ctx.notes) == 1 and DXG_ENV in ctx.notes[0] and "PCI bus" not in ctx.notes[0]


@pytest.mark.parametrize(("env", "says"), [({}, "is unset"), ({DXG_ENV: "1"}, "=1 is set")])
def test_the_wsl2_radeon_recording_reports_no_device_with_the_variable(
    env: dict[str, str], says: str
) -> None:
    """Replaying wsl2_radeon: no ROCm device, the note names the variable as the env has it."""
    found = Scout(plugins=["rocm"], entry_points=False, replay=MACHINE, env=env).discover()
    assert found.devices == [] and found.report("rocm").status == "ok"
    assert says in found.report("rocm").note


def test_under_wsl2_the_note_does_not_guess_that_amdgpu_is_unloaded() -> None:
    """WSL2 never loads amdgpu: the note says "no KFD topology" without "(amdgpu not loaded?)"."""
    note = Scout(plugins=["rocm"], entry_points=False, replay=MACHINE).discover().report("rocm").note
    assert "no KFD topology under" in note and "amdgpu not loaded" not in note and DXG_ENV in note


def test_off_wsl2_the_missing_topology_still_suggests_amdgpu(tmp_path: Path) -> None:
    """A bare-metal tree without a KFD topology keeps the "(amdgpu not loaded?)" hint."""
    tree = write_tree(
        tmp_path, {"/proc/version": "Linux version 6.8.0-49-generic (buildd@lcy02) #49-Ubuntu SMP\n"}
    )
    scout = Scout(plugins=["rocm"], entry_points=False, env={}, platform="linux", root=str(tree))
    assert "no KFD topology (amdgpu not loaded?)" in scout.discover().report("rocm").note


def test_a_live_wsl2_root_without_amdsmi_does_not_guess_either(tmp_path: Path) -> None:
    """The short path of a root without KFD topology or amdsmi says no "(amdgpu not loaded?)" under WSL2."""
    tree = write_tree(tmp_path, {"/proc/version": WSL2_VERSION, "/dev/dxg": ""})
    scout = Scout(plugins=["rocm"], entry_points=False, env={}, platform="linux", root=str(tree))
    note = scout.discover().report("rocm").note
    assert "no KFD topology under" in note and "amdgpu not loaded" not in note and DXG_ENV in note
