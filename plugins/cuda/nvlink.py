"""Which NVIDIA GPUs talk to each other over NVLink, from NVML's per-link state.

NVML answers per GPU and per link index (0 up to ``NVML_NVLINK_MAX_LINKS``: 18 on Hopper, 36
in current headers): ``nvmlDeviceGetNvLinkState`` (1 = active), and for an active link the
PCI address of what is at its other end (``nvmlDeviceGetNvLinkRemotePciInfo_v2``) and what
kind of device that is (``nvmlDeviceGetNvLinkRemoteDeviceType``: 0 a GPU, 1 an IBM NPU, i.e.
a POWER CPU, 2 an NVSwitch, 0xFF unknown). A GPU without NVLink answers NOT_SUPPORTED for
link 0, a link index past the GPU's last link INVALID_ARGUMENT: either ends the walk.

Peers: two GPUs are peers when a link of one ends at the other's PCI address, or when both
have an active link to an NVSwitch: the switches of one baseboard (an HGX) join every GPU on
them, all to all. A MIG instance has no NVLink peer access (NVIDIA MIG user guide, "CUDA
Device Enumeration": peer-to-peer is not supported between instances), so GPUs in MIG mode
are left out. The walk (``read_links``) touches NVML; deciding (``peer_map``) is a pure function.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from gpuscout.plugin import DeviceInfo, PeerLink
from gpuscout.plugins.cuda.names import LIBRARY
from gpuscout.plugins.cuda.readings import pci_location, text

#: Link indices walked at most (nvml.h's NVML_NVLINK_MAX_LINKS in current drivers).
MAX_LINKS = 36
#: nvmlIntNvLinkDeviceType_t values.
REMOTE_GPU = 0
REMOTE_NPU = 1
REMOTE_SWITCH = 2
REMOTE_UNKNOWN = 0xFF
#: NVML return codes that end a walk: no NVLink at all, past the last link, an old driver.
NO_MORE_LINKS = frozenset({2, 3, 13})  # INVALID_ARGUMENT, NOT_SUPPORTED, FUNCTION_NOT_FOUND
#: The link kind gpuscout writes in ``DeviceInfo.peers``.
KIND = "nvlink"


@attrs.frozen
class LinkReading:
    """One active NVLink: the PCI address at its other end ('' when NVML did not say) and
    the kind of device there (``REMOTE_*``; None when NVML did not say)."""

    remote: str = ""
    remote_type: int | None = None


def _code(exc: BaseException) -> int | None:
    value = getattr(exc, "value", None)
    return value if isinstance(value, int) else None


def read_links(nv: Any, handle: Any) -> tuple[LinkReading, ...]:
    """The active NVLinks of the GPU ``handle``; none when NVML has no NVLink for it. Any
    other NVML error on a link skips that link (a link that failed is no peer)."""
    state = getattr(nv, "nvmlDeviceGetNvLinkState", None)
    if state is None:
        return ()
    remote_pci = getattr(nv, "nvmlDeviceGetNvLinkRemotePciInfo", None) or getattr(
        nv, "nvmlDeviceGetNvLinkRemotePciInfo_v2", None
    )
    remote_type = getattr(nv, "nvmlDeviceGetNvLinkRemoteDeviceType", None)
    links: list[LinkReading] = []
    for link in range(MAX_LINKS):
        try:
            active = int(state(handle, link)) == 1
        except nv.NVMLError as exc:
            if _code(exc) in NO_MORE_LINKS:
                break
            continue
        if not active:
            continue
        address, kind = "", None
        try:
            pci = remote_pci(handle, link) if remote_pci is not None else None
            if pci is not None:
                address = pci_location(pci.domain, pci.bus, pci.device, text(pci.busId)).pci_id
        except (nv.NVMLError, AttributeError, TypeError, ValueError):
            address = ""
        try:
            kind = int(remote_type(handle, link)) if remote_type is not None else None
        except (nv.NVMLError, TypeError, ValueError):
            kind = None
        links.append(LinkReading(address, kind))
    return tuple(links)


def peer_map(gpus: Sequence[tuple[str, str, Sequence[LinkReading]]]) -> dict[str, tuple[str, ...]]:
    """Each GPU's NVLink peers by UUID, from ``(uuid, pci id, active links)`` of every GPU not
    in MIG mode; peers in the order of ``gpus``, never the GPU itself."""
    by_address = {pci.lower(): uuid for uuid, pci, _ in gpus if pci}
    direct: dict[str, set[str]] = {uuid: set() for uuid, _, _ in gpus}
    switched: set[str] = set()
    for uuid, _, links in gpus:
        for link in links:
            if link.remote_type == REMOTE_SWITCH:
                switched.add(uuid)
                continue
            peer = by_address.get(link.remote.lower())
            if peer is not None and peer != uuid and link.remote_type in (REMOTE_GPU, None):
                direct[uuid].add(peer)
                direct[peer].add(uuid)  # NVLink is bidirectional: one side's answer suffices
    order = [uuid for uuid, _, _ in gpus]
    out: dict[str, tuple[str, ...]] = {}
    for uuid in order:
        mine = direct[uuid] | (switched - {uuid} if uuid in switched else set())
        if mine:
            out[uuid] = tuple(u for u in order if u in mine)
    return out


def with_peers(devices: Sequence[DeviceInfo], peers: Mapping[str, tuple[str, ...]]) -> list[DeviceInfo]:
    """``devices`` with their NVLink peers (by id; devices hidden by CUDA_VISIBLE_DEVICES are
    named too: the core keeps only peers of the same discovery)."""
    out = []
    for device in devices:
        mine = peers.get(device.uuid or device.id, ())
        if mine:
            device = device.evolve(peers=[*device.peers, *(PeerLink(u, LIBRARY, KIND) for u in mine)])
        out.append(device)
    return out


__all__ = [
    "KIND",
    "MAX_LINKS",
    "REMOTE_GPU",
    "REMOTE_NPU",
    "REMOTE_SWITCH",
    "LinkReading",
    "peer_map",
    "read_links",
    "with_peers",
]
