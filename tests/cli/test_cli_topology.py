"""Where each device sits, on the command line: `list` shows the NUMA node, the PCIe link and
each device's notes (table, plain lines, `--json`, `--explain` text and JSON)."""

from __future__ import annotations

import pytest

from gpuscout import DeviceInfo
from gpuscout._machine.topology import link_note
from gpuscout._records.device import SystemInfo
from gpuscout._records.fields import PcieLink, PeerLink
from gpuscout._records.results import Discovery
from gpuscout.cli._render.table import render_discovery
from gpuscout.sizes import GIB
from gpuscout.testing import CliRunner

NO_VULKAN_ENV = {"VK_DRIVER_FILES": "/nonexistent/gpuscout-test-icd.json"}
SLOW = PcieLink(speed=8.0, width=4, max_speed=16.0, max_width=16)
FAST = PcieLink(speed=32.0, width=16, max_speed=32.0, max_width=16)
DEGRADED = DeviceInfo(
    id="GPU-slot",
    library="CUDA",
    name="NVIDIA L4",
    pci_id="0000:41:00.0",
    total_memory=24 * GIB,
    free_memory=20 * GIB,
    numa_node=1,
    local_cpus="32-63",
    pcie_link=SLOW,
    notes=[link_note(SLOW)],
)
FULL = DeviceInfo(
    id="GPU-full",
    library="CUDA",
    name="NVIDIA H200",
    pci_id="0000:19:00.0",
    total_memory=140 * GIB,
    free_memory=140 * GIB,
    numa_node=0,
    local_cpus="0-31",
    pcie_link=FAST,
    peers=[PeerLink("GPU-slot", "CUDA", "nvlink")],
)
NOWHERE = DeviceInfo(id="0", library="Vulkan", name="somewhere", total_memory=GIB, free_memory=GIB)


def found(*devices: DeviceInfo) -> Discovery:
    """A discovery of ``devices`` and nothing else."""
    return Discovery(devices=list(devices), dropped=[], system=SystemInfo(), plugins=[])


def test_the_plain_listing_has_numa_and_link_columns_and_the_note(gpuscout_cli: CliRunner) -> None:
    """In a pipe each device line says its node, its link and its notes; unknown is "-"."""
    run = gpuscout_cli(["list"], [FULL, DEGRADED], env=NO_VULKAN_ENV)
    header, *rows = run.out.splitlines()[:3]
    columns = header.split("\t")
    by_id = {row.split("\t")[2]: dict(zip(columns, row.split("\t"), strict=True)) for row in rows}
    assert by_id["GPU-full"]["numa"] == "0" and by_id["GPU-full"]["link"] == "Gen5 x16"
    slot = by_id["GPU-slot"]
    assert slot["numa"] == "1" and slot["link"] == "Gen3 x4 of Gen4 x16"
    assert "running at PCIe Gen3 x4 of Gen4 x16" in slot["note"]


def test_the_table_shows_numa_and_link_and_a_line_per_note() -> None:
    """On a terminal the NUMA and link columns appear, and each note is a line under the table."""
    text = render_discovery(found(FULL, DEGRADED), width=200)
    head = next(line for line in text.splitlines() if "library" in line)
    assert "NUMA" in head and "link" in head
    assert "Gen3 x4 of Gen4 x16" in text
    assert "note: #1 cuda:1: running at PCIe Gen3 x4 of Gen4 x16" in text


def test_the_table_has_no_topology_columns_when_nothing_is_known() -> None:
    """A machine whose kernel says nothing of placement (macOS) gets no empty columns."""
    text = render_discovery(found(NOWHERE), width=200)
    head = next(line for line in text.splitlines() if "library" in line)
    assert "NUMA" not in head and "link" not in head


@pytest.mark.parametrize("width", [40, 60, 80])
def test_a_narrow_terminal_still_shows_every_note(width: int) -> None:
    """Whether the table drops columns or turns into blocks, no note is lost."""
    text = render_discovery(found(FULL, DEGRADED), width=width)
    assert "Gen3 x4 of Gen4" in " ".join(text.split())


def test_list_json_carries_the_topology_by_its_wire_keys(gpuscout_cli: CliRunner) -> None:
    """`list --json` holds numa_node, local_cpus, pcie_link, peers and notes."""
    run = gpuscout_cli(["list", "--json"], [FULL, DEGRADED], env=NO_VULKAN_ENV)
    devices = {d["id"]: d for d in run.json()["devices"]}
    full = devices["GPU-full"]
    assert (full["numa_node"], full["local_cpus"]) == (0, "0-31")
    assert full["pcie_link"] == {"speed": 32.0, "width": 16, "max_speed": 32.0, "max_width": 16}
    assert full["peers"] == [{"id": "GPU-slot", "backend": "CUDA", "link": "nvlink"}]
    assert "peers" not in devices["GPU-slot"]  # its peer's link is the plugin's to say
    assert "PCIe Gen3 x4 of Gen4 x16" in devices["GPU-slot"]["notes"][0]


def test_explain_says_where_each_device_sits_and_its_notes(gpuscout_cli: CliRunner) -> None:
    """`--explain` (text and JSON) names the NUMA node, the link and each note."""
    text = gpuscout_cli(["list", "--explain"], [FULL, DEGRADED], env=NO_VULKAN_ENV).out
    assert "[NUMA node 1, PCIe Gen3 x4 of Gen4 x16]" in text
    assert "note: running at PCIe Gen3 x4 of Gen4 x16" in text
    data = gpuscout_cli(["list", "--json", "--explain"], [FULL, DEGRADED], env=NO_VULKAN_ENV).json()
    ranking = {r["id"]: r for r in data["explain"]["ranking"]}
    assert ranking["GPU-slot"]["numa_node"] == 1 and ranking["GPU-slot"]["link"] == "Gen3 x4 of Gen4 x16"
    assert "PCIe Gen3 x4 of Gen4 x16" in ranking["GPU-slot"]["notes"][0]
    assert ranking["GPU-full"]["notes"] == []


def test_a_note_with_control_characters_is_printed_escaped() -> None:
    """A plugin's note is data: an escape sequence never reaches the terminal raw."""
    hostile = NOWHERE.evolve(notes=["\x1b[2J cleared \n newline"])
    text = render_discovery(found(hostile), width=200)
    assert "\x1b[2J" not in text and "cleared" in text
