"""NFD labels of where each device sits: one ``numa.<pci address>`` label per card whose NUMA
node the kernel said, and ``numa.nodes``; nothing when no node is known."""

from __future__ import annotations

from gpuscout._records.device import DeviceInfo
from gpuscout.cluster import nfd
from gpuscout.sizes import GIB


def gpu(address: str, node: int, uuid: str = "") -> DeviceInfo:
    """An H200 at ``address`` on NUMA node ``node``."""
    return DeviceInfo(
        id=uuid or f"GPU-{address}",
        library="CUDA",
        name="NVIDIA H200",
        pci_id=address,
        total_memory=140 * GIB,
        numa_node=node,
    )


def labels_of(devices: list[DeviceInfo]) -> dict[str, str]:
    """The labels of a node with ``devices`` (flash attention everywhere)."""
    return nfd.device_labels(devices, lambda d: True, ["cuda", "rocm", "metal", "vulkan"])


def test_each_card_gets_its_numa_node_by_its_pci_address() -> None:
    """Eight GPUs over two sockets: a label per card and the number of nodes."""
    devices = [gpu(f"0000:{bus:02x}:00.0", 0 if i < 4 else 1) for i, bus in enumerate(range(0x19, 0x21))]
    got = labels_of(devices)
    assert got["numa.0000-19-00-0"] == "0" and got["numa.0000-20-00-0"] == "1"
    assert got["numa.nodes"] == "2"
    assert sum(k.startswith("numa.0000-") for k in got) == 8
    nfd.check_labels(got)


def test_unknown_nodes_give_no_numa_label() -> None:
    """A node of -1 (unknown, or none in the firmware) and a device without an address: no label."""
    got = labels_of([gpu("0000:19:00.0", -1), gpu("", 0)])
    assert not any(k.startswith("numa.") for k in got)


def test_partitions_of_one_card_share_one_label() -> None:
    """MIG instances or CPX partitions at one address give one label, the same in any order."""
    parts = [gpu("0000:C4:00.0", 1, f"MIG-{i}") for i in range(3)]
    assert labels_of(parts)["numa.0000-c4-00-0"] == "1"
    odd = [gpu("0000:c4:00.0", 2, "MIG-9"), *parts]
    assert labels_of(odd) == labels_of(list(reversed(odd)))


def test_a_library_named_numa_keeps_its_own_count() -> None:
    """``numa`` is a node-wide word: a library of that name is keyed by its hashed slug."""
    odd = DeviceInfo(id="0", library="numa", name="x", total_memory=GIB)
    got = labels_of([odd, gpu("0000:19:00.0", 0)])
    assert "numa.count" not in got and got["numa.nodes"] == "1"
    assert any(k.startswith("numa-") and k.endswith(".count") for k in got)
