"""Which AMD GPUs talk to each other over xGMI (Infinity Fabric), from the KFD topology.

Each KFD node lists its links under ``/sys/class/kfd/kfd/topology/nodes/<n>/io_links/<m>/
properties``, one ``name value`` line each (kfd_topology.c ``iolink_show``: ``type``,
``version_major``, ``version_minor``, ``node_from``, ``node_to``, ``weight``, ``min_latency``,
``max_latency``, ``min_bandwidth``, ``max_bandwidth``, ``recommended_transfer_size``, on newer
kernels ``recommended_sdma_engine_id_mask``, ``flags``). ``type`` is the CRAT I/O interface type
(kfd_crat.h ``CRAT_IOLINK_TYPE_*``): 2 is PCI Express (a GPU's link to its CPU node), 11 is
xGMI. Two GPU nodes are peers when either lists an xGMI link to the other: every GPU of an
MI300X platform links to the seven others; an MI100 hive is a ring, so only neighbours are. The
links are the kernel's, read the same from a recording (``gpuscout record`` copies them).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from gpuscout.plugin import Context, DeviceInfo, PeerLink, parse_u64
from gpuscout.plugins.rocm.devices import GpuFacts
from gpuscout.plugins.rocm.names import LIBRARY
from gpuscout.plugins.rocm.sysfs import TOPOLOGY, KfdNode, parse_properties
from gpuscout.plugins.rocm.visibility import rocr_uuid

#: CRAT_IOLINK_TYPE_XGMI (kfd_crat.h).
XGMI = 11
#: The link kind gpuscout writes in ``DeviceInfo.peers``.
KIND = "xgmi"
#: The most links read per node (an 8-GPU platform has 8 per GPU node; a big box a few dozen).
MAX_LINKS = 256


def read_xgmi(context: Context, nodes: Sequence[KfdNode]) -> dict[int, set[int]]:
    """For each GPU node of ``nodes`` (KFD node numbers), the other nodes of ``nodes`` it has
    an xGMI link with, both ways. A missing, unreadable or odd ``properties`` is no link."""
    numbers = {n.node for n in nodes}
    linked: dict[int, set[int]] = {n: set() for n in numbers}
    for node in sorted(numbers):
        base = f"{TOPOLOGY}/{node}/io_links"
        names = [n for n in context.list_dir(base) or [] if parse_u64(n) is not None][:MAX_LINKS]
        for name in names:
            props = parse_properties(context.read_text(f"{base}/{name}/properties") or "")
            to = props.get("node_to")
            if props.get("type") == XGMI and to in numbers and to != node:
                linked[node].add(to)
                linked[to].add(node)
    return linked


def device_ids(facts: Sequence[GpuFacts]) -> list[str]:
    """The ``id`` each GPU's record gets (``devices.build``: its UUID when no other node shares
    it, else its KFD ordinal)."""
    uuids = [rocr_uuid(f.unique_id) for f in facts]
    repeated = Counter(u for u in uuids if u)
    return [u if u and repeated[u] <= 1 else str(f.ordinal) for u, f in zip(uuids, facts, strict=True)]


def with_peers(
    devices: Sequence[DeviceInfo],
    nodes: Sequence[KfdNode],
    facts: Sequence[GpuFacts],
    linked: Mapping[int, set[int]],
) -> list[DeviceInfo]:
    """``devices`` with their xGMI peers: ``nodes[i]`` is the node of ``facts[i]``; peers are
    named by id, in KFD node order (hidden ones too: the core keeps only peers it found)."""
    ids = device_ids(facts)
    by_node = {node.node: ident for node, ident in zip(nodes, ids, strict=True)}
    peers: dict[str, tuple[str, ...]] = {}
    for node in nodes:
        mine = tuple(by_node[n] for n in sorted(linked.get(node.node, ())) if n in by_node)
        if mine:
            peers[by_node[node.node]] = mine
    out = []
    for device in devices:
        mine = peers.get(device.id, ())
        if mine:
            device = device.evolve(peers=[*device.peers, *(PeerLink(i, LIBRARY, KIND) for i in mine)])
        out.append(device)
    return out


__all__ = ["KIND", "XGMI", "device_ids", "read_xgmi", "with_peers"]
