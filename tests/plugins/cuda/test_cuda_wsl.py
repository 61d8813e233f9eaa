"""The CUDA plugin under WSL2: devices without PCI sysfs or /dev/nvidia* are listed and noted
WSL2, NVML is loaded from /usr/lib/wsl/lib, and the bare-metal diagnostics stay quiet."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from gpuscout import Scout
from gpuscout.plugin import Context
from gpuscout.plugins.cuda import wsl
from gpuscout.plugins.cuda.diagnosis import explain_init_failure, explain_missing_library, explain_no_gpu
from gpuscout.testing import write_tree

MACHINE = Path(__file__).parents[2] / "machines" / "wsl2_rtx4090"
WSL2_VERSION = "Linux version 5.15.167.4-microsoft-standard-WSL2 (root@host) #1 SMP\n"


def _copy(tmp_path: Path, version: str | None) -> Path:
    target = tmp_path / "rec"
    shutil.copytree(MACHINE, target, symlinks=True)
    if version is None:
        (target / "root/proc/version").unlink()
    else:
        (target / "root/proc/version").write_text(version)
    return target


def _found(recording: Path) -> tuple[list[str], str, list[tuple[str, ...]]]:
    found = Scout(plugins=["cuda"], entry_points=False, replay=recording).discover()
    return [d.name for d in found.devices], found.report("cuda").note, [d.notes for d in found.devices]


def test_a_wsl2_gpu_without_pci_sysfs_is_listed_and_noted(tmp_path: Path) -> None:
    """No /sys/bus/pci, no /dev/nvidia*: the RTX 4090 is listed, its notes and the plugin's say WSL2."""
    names, note, notes = _found(_copy(tmp_path, WSL2_VERSION))
    assert names == ["NVIDIA GeForce RTX 4090"]
    assert notes == [(wsl.DEVICE_NOTE,)]
    assert "WSL2" in note and wsl.WSL_LIBRARY in note
    assert "PCI bus" not in note and "/dev/nvidiactl" not in note


def test_the_same_answers_off_wsl2_carry_no_wsl2_note(tmp_path: Path) -> None:
    """The WSL2 sentences follow /proc/version, not the NVML answers."""
    names, note, notes = _found(_copy(tmp_path, None))
    assert names == ["NVIDIA GeForce RTX 4090"]
    assert notes == [()] and "WSL2" not in note


def test_the_wsl2_note_is_appended_to_a_devices_own_notes() -> None:
    """mark appends after notes a device already has, never replacing them."""
    from gpuscout import DeviceInfo

    ctx = Context(env={}, platform="linux", root=str(MACHINE / "root"))
    device = DeviceInfo(id="GPU-1", library="CUDA", notes=("PCIe Gen3 x4 of Gen4 x16",))
    (marked,) = wsl.mark(ctx, [device])
    assert marked.notes == ("PCIe Gen3 x4 of Gen4 x16", wsl.DEVICE_NOTE)


def _wsl_root(tmp_path: Path, dxg: str | None) -> Context:
    files = {"/proc/version": WSL2_VERSION}
    if dxg is not None:
        files["/dev/dxg"] = dxg
    return Context(env={}, platform="linux", root=str(write_tree(tmp_path, files)))


@pytest.mark.parametrize(
    ("dxg", "says"),
    [("", "/dev/dxg is present"), ("denied", "may not open it"), (None, "/dev/dxg is missing")],
    ids=["present", "denied", "missing"],
)
@pytest.mark.parametrize("explain", [explain_missing_library, explain_no_gpu], ids=["no-library", "no-gpu"])
def test_wsl2_diagnostics_look_at_dev_dxg_not_at_the_pci_bus(
    tmp_path: Path, dxg: str | None, says: str, explain: object
) -> None:
    """Under WSL2 the one diagnostic sentence is about /dev/dxg; no PCI, node or module talk."""
    ctx = _wsl_root(tmp_path, dxg)
    explain(ctx)  # type: ignore[operator]
    text = "; ".join(ctx.notes)
    assert says in text
    assert "PCI" not in text and "/dev/nvidiactl" not in text and "nvidia module" not in text


def test_an_init_failure_under_wsl2_is_explained_by_dev_dxg(tmp_path: Path) -> None:
    """nvmlInit failing in WSL2 names /dev/dxg, not missing /dev/nvidia* nodes."""
    ctx = _wsl_root(tmp_path, None)
    explain_init_failure(ctx, 999)
    assert ctx.notes and all("/dev/nvidia" not in n or "WSL2" in n for n in ctx.notes)
    assert "/dev/dxg is missing" in ctx.notes[0]


def test_bare_metal_diagnostics_are_unchanged_off_wsl2(tmp_path: Path) -> None:
    """Without WSL2's kernel the device-node sentences still come."""
    ctx = Context(env={}, platform="linux", root=str(write_tree(tmp_path, {"/proc/version": "Linux 6.8\n"})))
    explain_no_gpu(ctx)
    assert any("/dev/nvidiactl" in n for n in ctx.notes)


def test_wsl_nvml_is_never_loaded_while_replaying_or_on_a_tree(tmp_path: Path) -> None:
    """preload loads nothing from a recording or a recorded root, even one that says WSL2."""
    tree = str(write_tree(tmp_path, {"/proc/version": WSL2_VERSION}))
    assert wsl.preload(Context(env={}, platform="linux", root=tree)) == ""
    assert wsl.preload(Context(env={}, platform="linux", root=tree, answers={})) == ""
    assert wsl._loaded == []


def test_the_wsl2_machine_replays_through_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """list --json on the recording carries the device note and the system note."""
    from gpuscout.cli import main

    assert main(["--replay", str(_copy(tmp_path, WSL2_VERSION)), "list", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["devices"][0]["notes"] == [wsl.DEVICE_NOTE]
    assert "WSL2" in document["system"]["notes"][0]
