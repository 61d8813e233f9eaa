"""How the devices of one discovery connect (gpuscout._discovery.links): each pair's kind of
path, the devices by NUMA node, and the legend of the kinds used."""

from __future__ import annotations

from gpuscout import DeviceInfo
from gpuscout._discovery.links import MEANINGS, path, topology
from gpuscout._records.fields import PeerLink
from gpuscout.sizes import GIB


def card(
    n: int, numa: int = -1, pci: str | None = None, peers: tuple[PeerLink, ...] = (), cpus: str = ""
) -> DeviceInfo:
    return DeviceInfo(
        id=f"GPU-{n}",
        library="CUDA",
        pci_id=pci if pci is not None else f"0000:{n + 1:02x}:00.0",
        total_memory=24 * GIB,
        free_memory=20 * GIB,
        numa_node=numa,
        local_cpus=cpus,
        peers=peers,
    )


def test_one_side_naming_a_peer_makes_the_pair_direct_both_ways() -> None:
    """A link only the first device lists is the pair's kind in both cells, in capitals."""
    devices = [card(0, peers=(PeerLink("GPU-1", "CUDA", "nvlink"),)), card(1)]
    assert (path(devices, 0, 1), path(devices, 1, 0)) == ("NVLINK", "NVLINK")


def test_a_peer_of_another_library_with_the_same_id_is_no_link() -> None:
    """A peer names a device by library and id together."""
    devices = [card(0, peers=(PeerLink("GPU-1", "ROCm", "xgmi"),)), card(1)]
    assert path(devices, 0, 1) == "PCIe"


def test_without_a_link_the_numa_nodes_decide_node_or_sys() -> None:
    """Same known node: NODE; two known nodes: SYS; a node not known: PCIe."""
    devices = [card(0, numa=0), card(1, numa=0), card(2, numa=1), card(3)]
    assert [path(devices, 0, j) for j in range(4)] == ["X", "NODE", "SYS", "PCIe"]


def test_two_records_of_one_pci_function_are_the_same_card() -> None:
    """Partitions or MIG instances sharing a PCI address are CARD, not a path through the host."""
    devices = [card(0, numa=0, pci="0000:05:00.0"), card(1, numa=0, pci="0000:05:00.0")]
    assert path(devices, 0, 1) == "CARD"


def test_a_device_without_a_pci_address_has_an_unknown_path() -> None:
    """No PCI address on one side (a Mac's GPU, a software device): `-`."""
    devices = [card(0, pci=""), card(1)]
    assert path(devices, 0, 1) == "-"


def test_devices_are_grouped_by_node_with_its_cpus_and_unknown_last() -> None:
    """Nodes in order, the node's CPUs from its devices, devices by rank position."""
    devices = [
        card(0),
        card(1, numa=1, cpus="8-15"),
        card(2, numa=0, cpus="0-7"),
        card(3, numa=1, cpus="8-15"),
    ]
    nodes = topology(devices).nodes
    assert [(n.node, n.cpus, n.devices) for n in nodes] == [
        (0, "0-7", (2,)),
        (1, "8-15", (1, 3)),
        (-1, "", (0,)),
    ]


def test_the_legend_holds_only_the_kinds_the_matrix_uses() -> None:
    """Each kind once, in first use, a direct one described by its own name."""
    devices = [card(0, numa=0, peers=(PeerLink("GPU-1", "CUDA", "xgmi"),)), card(1, numa=0), card(2, numa=1)]
    legend = dict(topology(devices).legend)
    assert list(legend) == ["X", "XGMI", "SYS"]
    assert legend["X"] == MEANINGS["X"] and "xgmi" in legend["XGMI"]


def test_the_matrix_is_symmetric_with_x_on_the_diagonal() -> None:
    """matrix[i][j] is matrix[j][i], and X only where i is j."""
    devices = [
        card(0, numa=0, peers=(PeerLink("GPU-2", "CUDA", "nvlink"),)),
        card(1, numa=1),
        card(2, numa=0),
    ]
    m = topology(devices).matrix
    assert all(m[i][j] == m[j][i] for i in range(3) for j in range(3))
    assert [m[i][i] for i in range(3)] == ["X"] * 3 and "X" not in {m[0][1], m[0][2], m[1][2]}
