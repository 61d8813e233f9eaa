"""How the devices of one discovery connect: the devices by NUMA node, and for each pair the
kind of path between them, as ``nvidia-smi topo -m`` shows it (``gpuscout topology``).

Everything comes from the records (``numa_node``, ``local_cpus``, ``pci_id``, ``peers``), never
from a vendor's name; the kinds of a pair, first that holds:

- ``X``: the device itself (the diagonal);
- a direct link one side names in ``peers``: its kind in capitals (``NVLINK``, ``XGMI``, a
  third-party plugin's own), several kinds joined by ``+``;
- ``CARD``: two records of one PCI function (MIG instances, a partitioned card);
- ``NODE``: no direct link, both on the same known NUMA node: through PCIe and the host
  bridge of that node (nvidia-smi tells PIX, PXB and PHB apart by reading the PCIe switches,
  which gpuscout does not read: ``NODE`` is the farthest of them, never better than the truth);
- ``SYS``: no direct link, on two different NUMA nodes: through the link between the sockets;
- ``PCIe``: no direct link, both on PCI but a NUMA node not known (a single-socket desktop
  whose firmware names none): through the host;
- ``-``: a device without a PCI address (a Mac's GPU, a software device): not known.

Devices are named by their rank position, the selector ``N`` (``gpuscout exec --device 3``).
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from gpuscout._records.device import DeviceInfo

SELF = "X"
SAME_CARD = "CARD"
SAME_NODE = "NODE"
OTHER_NODE = "SYS"
HOST = "PCIe"
UNKNOWN = "-"
#: What each kind that is not a direct link means, for the legend.
MEANINGS = {
    SELF: "the device itself",
    SAME_CARD: "the same PCI device (instances or partitions of one card)",
    SAME_NODE: "no direct link: PCIe through the host, within one NUMA node",
    OTHER_NODE: "no direct link: PCIe and the link between NUMA nodes (sockets)",
    HOST: "no direct link: PCIe through the host, NUMA node not known",
    UNKNOWN: "not known (a device without a PCI address)",
}


@attrs.frozen
class NumaNode:
    """The devices on one NUMA node (``node`` -1: not known), by rank position, and the CPUs
    local to it as the kernel lists them (``""`` when not known)."""

    node: int
    cpus: str
    devices: tuple[int, ...]


@attrs.frozen
class Topology:
    """The devices (in rank order), their NUMA nodes in node order (unknown last), the matrix
    of path kinds (``matrix[i][j]`` between rank positions ``i`` and ``j``, symmetric) and the
    legend: each kind the matrix holds with what it means, in the order of first use."""

    devices: tuple[DeviceInfo, ...]
    nodes: tuple[NumaNode, ...]
    matrix: tuple[tuple[str, ...], ...]
    legend: tuple[tuple[str, str], ...]

    @property
    def linked(self) -> bool:
        """Whether any pair has a direct link (a peer)."""
        return any(kind not in MEANINGS for row in self.matrix for kind in row)


def topology(devices: Sequence[DeviceInfo]) -> Topology:
    """The topology of ``devices``, ranked as a discovery ranks them."""
    kept = tuple(devices)
    matrix = tuple(tuple(path(kept, i, j) for j in range(len(kept))) for i in range(len(kept)))
    seen = dict.fromkeys(kind for row in matrix for kind in row)
    legend = tuple((kind, MEANINGS.get(kind) or _direct(kind)) for kind in seen)
    return Topology(kept, _nodes(kept), matrix, legend)


def path(devices: Sequence[DeviceInfo], i: int, j: int) -> str:
    """The kind of path between the devices at rank positions ``i`` and ``j`` (see the module)."""
    if i == j:
        return SELF
    a, b = devices[i], devices[j]
    kinds = sorted(
        {p.link for p in a.peers if _names(p.id, p.library, b)}
        | {p.link for p in b.peers if _names(p.id, p.library, a)}
    )
    if kinds:
        return "+".join(kind.upper() for kind in kinds)
    if not (a.pci_id and b.pci_id):
        return UNKNOWN
    if a.pci_id.lower() == b.pci_id.lower():
        return SAME_CARD
    if a.numa_node >= 0 and b.numa_node >= 0:
        return SAME_NODE if a.numa_node == b.numa_node else OTHER_NODE
    return HOST


def _names(peer_id: str, library: str, device: DeviceInfo) -> bool:
    return peer_id == device.id and library.lower() == device.library.lower()


def _direct(kind: str) -> str:
    return f"a direct link ({', '.join(kind.lower().split('+'))})"


def _nodes(devices: Sequence[DeviceInfo]) -> tuple[NumaNode, ...]:
    by_node: dict[int, list[int]] = {}
    for position, d in enumerate(devices):
        by_node.setdefault(d.numa_node if d.numa_node >= 0 else -1, []).append(position)
    order = sorted(by_node, key=lambda node: (node < 0, node))
    return tuple(
        NumaNode(
            node,
            next((devices[i].local_cpus for i in by_node[node] if devices[i].local_cpus), ""),
            tuple(by_node[node]),
        )
        if node >= 0
        else NumaNode(node, "", tuple(by_node[node]))
        for node in order
    )


__all__ = ["MEANINGS", "NumaNode", "Topology", "path", "topology"]
