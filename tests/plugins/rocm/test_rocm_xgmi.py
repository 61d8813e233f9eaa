"""xGMI peers from the KFD topology's io_links (type 11, kfd_crat.h), read from recorded trees:
the eight-card MI300X hive of the machine zoo, spoiled one file at a time."""

from __future__ import annotations

import pathlib
import shutil
from collections.abc import Mapping

import pytest

from gpuscout import Scout
from gpuscout._records.fields import PeerLink
from gpuscout.testing import FIFO, Content, RootFactory, ScoutFactory, write_tree

HIVE = pathlib.Path(__file__).parents[2] / "machines" / "mi300x_x8_hive" / "root"
NODES = "/sys/class/kfd/kfd/topology/nodes"
IDS = [
    "GPU-5c3f1a9e04b27d81",
    "GPU-1d82e6b45f03a97c",
    "GPU-7a40c9d1e25b836f",
    "GPU-3e9b07f4a16c5d28",
    "GPU-64d21b8f907e3ac5",
    "GPU-0f57a3c2d8e4196b",
    "GPU-48c6e0b95a1f72d3",
    "GPU-2b8d5f61c7039ea4",
]


def link(node_from: int, node_to: int, kind: int = 11) -> str:
    """An io_links ``properties`` file as kfd_topology.c's iolink_show writes it."""
    return (
        f"type {kind}\nversion_major 0\nversion_minor 0\nnode_from {node_from}\nnode_to {node_to}\n"
        "weight 15\nmin_latency 0\nmax_latency 0\nmin_bandwidth 50000\nmax_bandwidth 50000\n"
        "recommended_transfer_size 0\nrecommended_sdma_engine_id_mask 0\nflags 1\n"
    )


def peers(scout: Scout) -> dict[str, list[str]]:
    """Each found device's peer ids (all links are xgmi, checked)."""
    out = {}
    for d in scout.discover().devices:
        assert all(p == PeerLink(p.id, "ROCm", "xgmi") for p in d.peers)
        out[d.id] = [p.id for p in d.peers]
    return out


def hive(
    gpuscout_root: RootFactory, files: Mapping[str, Content] | None = None, drop: bool = False
) -> pathlib.Path:
    """The hive's tree; ``drop`` removes every io_links folder first, then ``files`` are written."""
    root = gpuscout_root(copy=HIVE)
    if drop:
        for node in range(2, 10):
            shutil.rmtree(root / NODES.lstrip("/") / str(node) / "io_links")
    return write_tree(root, files or {})


def test_every_card_of_the_hive_names_the_seven_others(
    gpuscout_scout: ScoutFactory, gpuscout_root: RootFactory
) -> None:
    """All-to-all xGMI: seven peers each, in KFD node order, never itself."""
    found = peers(gpuscout_scout("rocm", env={}, root=hive(gpuscout_root)))
    assert found == {i: [o for o in IDS if o != i] for i in IDS}


def test_a_ring_names_only_neighbours_and_one_side_is_enough(
    gpuscout_scout: ScoutFactory, gpuscout_root: RootFactory
) -> None:
    """An MI100-like ring: each node lists only its next one, and both ends see the link."""
    ring = {f"{NODES}/{n}/io_links/0/properties": link(n, 2 + (n - 1) % 8) for n in range(2, 10)}
    found = peers(gpuscout_scout("rocm", env={}, root=hive(gpuscout_root, ring, drop=True)))
    assert found[IDS[0]] == [IDS[1], IDS[7]]
    assert found[IDS[3]] == [IDS[2], IDS[4]]


@pytest.mark.parametrize(
    "spoil",
    [
        link(2, 0, kind=2),  # PCIe to the CPU node: no peer
        link(2, 2),  # itself
        link(2, 99),  # a node that does not exist
        link(2, 1),  # a CPU node over xGMI: not a GPU of the discovery
        "type 11\nnode_to 3",  # no trailing newline: still read
        "type eleven\nnode_to 3\n",
        "type 11\nnode_to 3 4\n",
        "type 11\nnode_to -3\n",
        "type 11\nnode_to 99999999999999999999999\n",
        b"type 11\nnode_to \xff3\n",
        "",
        FIFO,
    ],
)
def test_a_link_that_is_no_xgmi_peer_names_none(
    gpuscout_scout: ScoutFactory, gpuscout_root: RootFactory, spoil: Content
) -> None:
    """Node 2's one link, spoiled: never a crash or a hang, and only a well-formed xGMI link
    to another GPU node counts."""
    root = hive(gpuscout_root, {f"{NODES}/2/io_links/0/properties": spoil}, drop=True)
    found = peers(gpuscout_scout("rocm", env={}, root=root))
    expected = [IDS[1]] if spoil == "type 11\nnode_to 3" else []
    assert found[IDS[0]] == expected


def test_no_io_links_means_no_peers(gpuscout_scout: ScoutFactory, gpuscout_root: RootFactory) -> None:
    """A kernel without io_links (or a card without xGMI) gives no peers at all."""
    found = peers(gpuscout_scout("rocm", env={}, root=hive(gpuscout_root, drop=True)))
    assert all(p == [] for p in found.values())


def test_a_card_hidden_by_rocr_visible_devices_is_no_peer(
    gpuscout_scout: ScoutFactory, gpuscout_root: RootFactory
) -> None:
    """Only devices of the same discovery are named: two cards visible, each the other's peer."""
    env = {"ROCR_VISIBLE_DEVICES": f"{IDS[0]},{IDS[5]}"}
    found = peers(gpuscout_scout("rocm", env=env, root=hive(gpuscout_root)))
    assert found == {IDS[0]: [IDS[5]], IDS[5]: [IDS[0]]}


def test_cards_that_share_a_uuid_name_their_peers_by_the_ordinal_they_are_known_by(
    gpuscout_scout: ScoutFactory, gpuscout_root: RootFactory
) -> None:
    """Two nodes reporting one unique_id (partitions on older kernels) are known by their KFD
    ordinals, and a peer link names the peer by that same id, so the link is still reported."""
    props = (HIVE / NODES.lstrip("/") / "3" / "properties").read_text()
    twin = props.replace("unique_id 2126515636434872700", "unique_id 6647060841008102785")
    root = hive(gpuscout_root, {f"{NODES}/3/properties": twin})
    found = peers(gpuscout_scout("rocm", env={}, root=root))
    assert found["0"][0] == "1" and found["1"][0] == "0"
    assert found[IDS[2]][:2] == ["0", "1"]
