"""Topology from the kernel: each device's NUMA node, near CPUs and PCIe link, read from
recorded sysfs trees in the kernel's formats (drivers/pci/pci-sysfs.c), for any library."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from gpuscout import DeviceInfo, Scout
from gpuscout._machine.context import Context
from gpuscout._machine.topology import (
    link_note,
    parse_link_speed,
    parse_link_width,
    parse_local_cpus,
    parse_numa_node,
    read_placement,
)
from gpuscout._records.fields import PcieLink, PeerLink
from gpuscout.testing import FIFO, Content, injected, promptly, scout_of, write_tree

ADDRESS = "0000:19:00.0"
BASE = f"/sys/bus/pci/devices/{ADDRESS}"


def sysfs(address: str = ADDRESS, **files: Content) -> dict[str, Content]:
    """The six topology files of ``address`` as a real H200 in a Gen5 x16 slot writes them,
    with ``files`` (names without the directory) written over them."""
    values: dict[str, Content] = {
        "numa_node": "0\n",
        "local_cpulist": "0-47,96-143\n",
        "current_link_speed": "32.0 GT/s PCIe\n",
        "current_link_width": "16\n",
        "max_link_speed": "32.0 GT/s PCIe\n",
        "max_link_width": "16\n",
    }
    values.update(files)
    return {f"/sys/bus/pci/devices/{address}/{name}": value for name, value in values.items()}


def scout_on(root: Path, *devices: DeviceInfo, env: Mapping[str, str] | None = None) -> Scout:
    """A Scout that finds exactly ``devices`` on the tree ``root``."""
    return scout_of(injected(devices), root=root, env=env or {})


GPU = DeviceInfo(id="GPU-1", library="Acme", name="Acme 1", pci_id=ADDRESS, total_memory=1 << 30)


@pytest.mark.parametrize(
    ("text", "speed"),
    [
        ("2.5 GT/s PCIe\n", 2.5),
        ("5.0 GT/s PCIe\n", 5.0),
        ("8.0 GT/s PCIe\n", 8.0),
        ("16.0 GT/s PCIe\n", 16.0),
        ("32.0 GT/s PCIe\n", 32.0),
        ("64.0 GT/s PCIe\n", 64.0),
        # Linux before 5.2 (pci-sysfs.c's own switch, then PCIE_SPEED2STR without the suffix).
        ("2.5 GT/s\n", 2.5),
        ("5 GT/s\n", 5.0),
        ("8 GT/s\n", 8.0),
        ("16 GT/s\n", 16.0),
        ("32 GT/s\n", 32.0),
    ],
)
def test_every_link_speed_the_kernel_writes_reads_as_gt_s(text: str, speed: float) -> None:
    """Each speed string of pci_speed_string(), old and new, reads as its GT/s."""
    assert parse_link_speed(text) == speed


@pytest.mark.parametrize(
    "text",
    [
        "Unknown\n",
        "Unknown speed\n",
        "",
        "\n",
        "abc",
        "20 GT/s",
        "16.0 GT/s PCIe PCIe",
        "-8 GT/s",
        "1e3 GT/s",
        "16.0 gt/s pcie",
        "\ufffd\ufffd GT/s",
        "9999999999999999999999 GT/s",
        "16.0GT/s PCIe",
    ],
)
def test_a_speed_the_kernel_did_not_say_is_unknown(text: str) -> None:
    """ "Unknown", no PCIe generation's speed and garbage read as None."""
    assert parse_link_speed(text) is None


@pytest.mark.parametrize(("text", "width"), [("16\n", 16), ("4\n", 4), ("1", 1), ("8\n", 8), ("32\n", 32)])
def test_a_link_width_reads_as_its_lanes(text: str, width: int) -> None:
    """``%u`` lanes read as that number."""
    assert parse_link_width(text) == width


@pytest.mark.parametrize("text", ["0\n", "", "3", "-4", "abc", "9999999999999999999999", "16 lanes", "0x10"])
def test_a_width_of_no_link_is_unknown(text: str) -> None:
    """Width 0 (the link is down), a width no link has and garbage read as None."""
    assert parse_link_width(text) is None


@pytest.mark.parametrize(
    ("text", "node"), [("0\n", 0), ("1\n", 1), ("-1\n", -1), (" 7 \n", 7), ("1023", 1023)]
)
def test_a_numa_node_reads_as_its_number(text: str, node: int) -> None:
    """``%d`` reads as the node; -1 is the kernel's "no node"."""
    assert parse_numa_node(text) == node


@pytest.mark.parametrize(
    "text", ["", "abc", "-2", "1.5", "9999999999999999999999", "0x1", "+1", "--1", "65536", "4294967295"]
)
def test_a_numa_node_the_kernel_did_not_write_is_unknown(text: str) -> None:
    """Anything but a node number or -1 reads as None."""
    assert parse_numa_node(text) is None


@pytest.mark.parametrize(
    ("text", "cpus"),
    [
        ("0-3,8-11\n", "0-3,8-11"),
        ("\n", ""),
        ("5\n", "5"),
        ("0-47,96-143\n", "0-47,96-143"),
        ("0,2,4,6\n", "0,2,4,6"),
        ("0-255\n", "0-255"),
    ],
)
def test_every_cpu_list_form_the_kernel_prints_is_kept(text: str, cpus: str) -> None:
    """Ranges, single CPUs and the empty mask are kept as the kernel printed them."""
    assert parse_local_cpus(text) == cpus


@pytest.mark.parametrize(
    "text",
    ["0-63:2/4", "3-1", "0-3,2-5", "0-3,4-7", "8,0", "a", "0,,1", "-1", "0-", "1 2", "99999999", "0-3\n0-3"],
)
def test_a_cpu_list_the_kernel_never_prints_is_refused(text: str) -> None:
    """The region form (input only), backwards, overlapping, touching or unordered ranges and
    garbage read as None."""
    assert parse_local_cpus(text) is None


def test_a_narrower_link_is_a_note_naming_both_widths() -> None:
    """A card in a slot with fewer lanes: "PCIe Gen3 x4 of Gen4 x16", called a fault."""
    note = link_note(PcieLink(speed=8.0, width=4, max_speed=16.0, max_width=16))
    assert "running at PCIe Gen3 x4 of Gen4 x16" in note
    assert "fewer lanes" in note and "idle" not in note


def test_a_link_only_slower_than_its_maximum_says_gpus_slow_down_when_idle() -> None:
    """Full width at a lower speed is power management, and the note says so."""
    note = link_note(PcieLink(speed=2.5, width=16, max_speed=32.0, max_width=16))
    assert "running at PCIe Gen1 x16 of Gen5 x16" in note
    assert "idle" in note and "fewer lanes" not in note


@pytest.mark.parametrize(
    "link",
    [
        PcieLink(speed=32.0, width=16, max_speed=32.0, max_width=16),
        PcieLink(speed=8.0, width=4),
        PcieLink(max_speed=16.0, max_width=16),
        PcieLink(speed=16.0, width=0, max_speed=16.0, max_width=16),
        None,
    ],
)
def test_a_link_at_its_maximum_or_half_known_is_no_note(link: PcieLink | None) -> None:
    """No note without both sides of a comparison, or when nothing is below its maximum."""
    assert link_note(link) == ""


def test_a_device_gets_its_numa_node_cpus_and_link_from_sysfs(tmp_path: Path) -> None:
    """Every part of the device's placement comes from its PCI address's files."""
    root = write_tree(tmp_path, sysfs(numa_node="1\n", local_cpulist="48-95,144-191\n"))
    (device,) = scout_on(root, GPU).discover().devices
    assert (device.numa_node, device.local_cpus) == (1, "48-95,144-191")
    assert device.pcie_link == PcieLink(speed=32.0, width=16, max_speed=32.0, max_width=16)
    assert device.notes == ()


def test_a_degraded_link_is_a_note_after_the_plugins_own(tmp_path: Path) -> None:
    """The link note is appended: the plugin's notes stay first and unchanged."""
    root = write_tree(
        tmp_path,
        sysfs(
            current_link_speed="8.0 GT/s PCIe\n", current_link_width="4\n", max_link_speed="16.0 GT/s PCIe\n"
        ),
    )
    noted = GPU.evolve(notes=["read through the Acme shim"])
    (device,) = scout_on(root, noted).discover().devices
    assert device.notes[0] == "read through the Acme shim"
    assert len(device.notes) == 2 and "PCIe Gen3 x4 of Gen4 x16" in device.notes[1]


def test_what_the_plugin_said_is_kept_over_sysfs(tmp_path: Path) -> None:
    """A plugin's own numa_node, local_cpus and pcie_link are never replaced."""
    root = write_tree(tmp_path, sysfs())
    own = GPU.evolve(numa_node=3, local_cpus="8-15", pcie_link=PcieLink(speed=16.0, width=16))
    (device,) = scout_on(root, own).discover().devices
    assert (device.numa_node, device.local_cpus, device.pcie_link) == (3, "8-15", PcieLink(16.0, 16))


def test_a_device_without_a_pci_address_or_files_stays_unknown(tmp_path: Path) -> None:
    """No address, or an address without files: every topology field at its default."""
    other = DeviceInfo(id="0", library="Acme", name="no bus", total_memory=1 << 30)
    missing = GPU.evolve(id="GPU-2", pci_id="0000:42:00.0")
    found = scout_on(write_tree(tmp_path, sysfs()), other, missing).discover().devices
    for device in found:
        assert (device.numa_node, device.local_cpus, device.pcie_link, device.peers) == (-1, "", None, ())


def test_unknown_parts_of_a_link_stay_unknown(tmp_path: Path) -> None:
    """ "Unknown" and width 0 leave those parts 0; the rest is kept."""
    root = write_tree(tmp_path, sysfs(current_link_speed="Unknown\n", current_link_width="0\n"))
    (device,) = scout_on(root, GPU).discover().devices
    assert device.pcie_link == PcieLink(speed=0.0, width=0, max_speed=32.0, max_width=16)
    assert device.notes == ()


@pytest.mark.parametrize(
    "spoil",
    [
        {"numa_node": FIFO},
        {"numa_node": b"\xff\xfe0\n"},
        {"numa_node": "9999999999999999999999\n", "local_cpulist": "$(reboot)\n"},
        {"numa_node": "abc\n", "current_link_width": "-16\n"},
        {"numa_node": "65536\n"},  # above the largest node a record holds
        {"current_link_speed": b"\x00\x00\x00", "max_link_width": "'; DROP TABLE\n"},
        {"local_cpulist": FIFO, "current_link_speed": FIFO},
        {"max_link_speed": "9" * 5000},
    ],
)
def test_hostile_topology_files_leave_their_part_unknown(tmp_path: Path, spoil: dict[str, Content]) -> None:
    """A FIFO, bytes that are not UTF-8, huge numbers or shell text: never a hang or a crash,
    the spoiled part unknown, the rest read."""
    root = write_tree(tmp_path, {**sysfs(), **{f"{BASE}/{name}": value for name, value in spoil.items()}})
    with capture_logs() as logs:
        (device,) = promptly(lambda: scout_on(root, GPU).discover()).devices
    link = device.pcie_link or PcieLink()
    values = {
        "numa_node": device.numa_node == -1,
        "local_cpulist": device.local_cpus == "",
        "current_link_speed": link.speed == 0,
        "current_link_width": link.width == 0,
        "max_link_speed": link.max_speed == 0,
        "max_link_width": link.max_width == 0,
    }
    assert all(values[name] for name in spoil), values
    assert not any(values[name] for name in values if name not in spoil), values
    assert any(e["event"] == "discovery.topology_note" for e in logs)


def test_a_1_gib_cpu_list_is_refused_without_reading_it_all(tmp_path: Path) -> None:
    """A file over the read limit (sparse, 1 GiB) is a note; the CPUs stay unknown."""
    root = write_tree(tmp_path, sysfs())
    with open(root / BASE.lstrip("/") / "local_cpulist", "r+b") as f:
        f.truncate(1 << 30)
    with capture_logs() as logs:
        (device,) = promptly(lambda: scout_on(root, GPU).discover()).devices
    assert device.local_cpus == "" and device.numa_node == 0
    assert any("larger than" in str(e.get("note")) for e in logs)


def test_a_directory_where_a_file_should_be_is_unknown(tmp_path: Path) -> None:
    """A folder named numa_node is not a node."""
    root = write_tree(tmp_path, sysfs())
    path = root / BASE.lstrip("/") / "numa_node"
    path.unlink()
    path.mkdir()
    (device,) = scout_on(root, GPU).discover().devices
    assert device.numa_node == -1 and device.local_cpus == "0-47,96-143"


def test_a_pci_device_link_in_sysfs_is_followed_to_its_files(tmp_path: Path) -> None:
    """/sys/bus/pci/devices/<addr> is a link into /sys/devices, as on a real machine."""
    real = f"/sys/devices/pci0000:17/0000:17:01.0/{ADDRESS}"
    files = {name.replace(BASE, real): value for name, value in sysfs(numa_node="1\n").items()}
    root = write_tree(tmp_path, files)
    os.makedirs(root / "sys/bus/pci/devices")
    os.symlink(f"../../../devices/pci0000:17/0000:17:01.0/{ADDRESS}", root / BASE.lstrip("/"))
    (device,) = scout_on(root, GPU).discover().devices
    assert device.numa_node == 1


def test_a_pci_address_in_upper_case_reads_the_kernels_lower_case_folder(tmp_path: Path) -> None:
    """The kernel names the folder in lower case; the record's case does not matter."""
    root = write_tree(tmp_path, sysfs(address="0000:c4:00.0", numa_node="1\n"))
    (device,) = scout_on(root, GPU.evolve(pci_id="0000:C4:00.0")).discover().devices
    assert device.numa_node == 1


def test_reading_a_placement_refuses_an_address_that_climbs_out(tmp_path: Path) -> None:
    """An address that is not a PCI address reads nothing."""
    write_tree(tmp_path, {"/etc/numa_node": "0\n"})
    context = Context(env={}, platform="linux", root=str(tmp_path))
    assert read_placement(context, "../../../etc") == read_placement(context, "0000:99:00.0")


def test_peers_name_only_devices_of_the_same_discovery(tmp_path: Path) -> None:
    """A link to a device that was not found (hidden, dropped) is left out, and so is a link to
    itself or a second one to the same peer."""
    a = GPU.evolve(
        peers=[
            PeerLink("GPU-2", "Acme", "nvlink"),
            PeerLink("GPU-2", "Acme", "nvlink"),
            PeerLink("GPU-9", "Acme", "nvlink"),
            PeerLink("GPU-1", "Acme", "nvlink"),
        ]
    )
    b = GPU.evolve(id="GPU-2", pci_id="0000:1a:00.0", peers=[PeerLink("GPU-1", "Acme", "nvlink")])
    found = {d.id: d for d in scout_on(write_tree(tmp_path, sysfs()), a, b).discover().devices}
    assert found["GPU-1"].peers == (PeerLink("GPU-2", "Acme", "nvlink"),)
    assert found["GPU-2"].peers == (PeerLink("GPU-1", "Acme", "nvlink"),)


def test_two_records_of_one_card_share_its_placement(tmp_path: Path) -> None:
    """Partitions of one card (one PCI address) each get the card's placement."""
    root = write_tree(tmp_path, sysfs(numa_node="1\n"))
    parts = [GPU.evolve(id=f"MIG-{i}") for i in range(3)]
    assert [d.numa_node for d in scout_on(root, *parts).discover().devices] == [1, 1, 1]


def test_a_plugins_own_slow_link_gets_the_note_without_a_pci_address(tmp_path: Path) -> None:
    """The note rule holds for a link the plugin reported itself, bus or no bus."""
    own = DeviceInfo(id="0", library="Acme", name="x", pcie_link=PcieLink(5.0, 1, 8.0, 1))
    (device,) = scout_on(write_tree(tmp_path, {}), own).discover().devices
    assert device.notes == (link_note(PcieLink(5.0, 1, 8.0, 1)),)
    assert "PCIe Gen2 x1 of Gen3 x1" in device.notes[0] and "idle" in device.notes[0]
