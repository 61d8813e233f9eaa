"""Record and replay carry the topology: `gpuscout record` copies the six sysfs files the core
read for each device, and a replay of the recording finds the same placement."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from gpuscout import DeviceInfo, Scout
from gpuscout._recording.record import Recorder
from gpuscout._records.fields import PcieLink
from gpuscout.cli import main
from gpuscout.testing import injected, write_tree

ADDRESS = "0000:41:00.0"
REAL = f"/sys/devices/pci0000:40/0000:40:01.1/{ADDRESS}"
FILES = {
    f"{REAL}/numa_node": "1\n",
    f"{REAL}/local_cpulist": "16-31,48-63\n",
    f"{REAL}/current_link_speed": "8.0 GT/s PCIe\n",
    f"{REAL}/current_link_width": "4\n",
    f"{REAL}/max_link_speed": "16.0 GT/s PCIe\n",
    f"{REAL}/max_link_width": "16\n",
    f"{REAL}/unrelated": "not read\n",
    "/proc/meminfo": "MemTotal: 16384 kB\nMemAvailable: 8192 kB\n",
}
GPU = DeviceInfo(id="GPU-1", library="Acme", name="Acme One", pci_id=ADDRESS, total_memory=1 << 30)


def _tree(tmp_path: Path) -> Path:
    root = write_tree(tmp_path / "live", FILES)
    os.makedirs(root / "sys/bus/pci/devices")
    os.symlink(f"../../../devices/pci0000:40/0000:40:01.1/{ADDRESS}", root / f"sys/bus/pci/devices/{ADDRESS}")
    return root


def _record(tmp_path: Path) -> tuple[Path, DeviceInfo]:
    recorder = Recorder()
    scout = Scout(
        plugins=["acme"],
        extra=[injected([GPU], "acme")],
        entry_points=False,
        env={},
        platform="linux",
        root=_tree(tmp_path),
        recorder=recorder,
    )
    (found,) = scout.discover().devices
    target = tmp_path / "rec"
    recorder.write(str(target), platform="linux", env={})
    return target, found


def test_a_recording_holds_the_topology_files_the_core_read(tmp_path: Path) -> None:
    """The six files are copied under the device's PCI address, nothing beside them."""
    target, found = _record(tmp_path)
    assert found.numa_node == 1 and found.pcie_link == PcieLink(8.0, 4, 16.0, 16)
    base = target / "root/sys/bus/pci/devices" / ADDRESS
    assert (base / "numa_node").read_text() == "1\n"
    assert (base / "local_cpulist").read_text() == "16-31,48-63\n"
    assert (base / "max_link_speed").read_text() == "16.0 GT/s PCIe\n"
    assert not (base / "unrelated").exists()


def test_a_replay_finds_the_placement_that_was_recorded(tmp_path: Path) -> None:
    """Scout(replay=...) reads the recorded files: the same fields and the same note."""
    target, found = _record(tmp_path)
    (again,) = (
        Scout(plugins=["acme"], extra=[injected([GPU], "acme")], entry_points=False, replay=target)
        .discover()
        .devices
    )
    assert again == found
    assert "PCIe Gen3 x4 of Gen4 x16" in again.notes[0]


def test_replay_list_json_on_the_command_line_carries_the_topology(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`gpuscout --replay DIR list --json` on a zoo machine writes every topology key."""
    machine = Path(__file__).parent / "machines" / "h200x8"
    assert main(["--replay", str(machine), "list", "--json"]) == 0
    out = capsys.readouterr().out
    first = json.loads(out)["devices"][0]
    assert first["numa_node"] == 0 and first["local_cpus"] == "0-55,112-167"
    assert first["pcie_link"] == {"speed": 32.0, "width": 16, "max_speed": 32.0, "max_width": 16}
    assert len(first["peers"]) == 7 and {p["link"] for p in first["peers"]} == {"nvlink"}
