"""Where each device sits: its NUMA node, the CPUs near it and its PCIe link, from the kernel.

For every device with a PCI address the core reads six files of
``/sys/bus/pci/devices/<addr>/`` through a Context (under the Scout's root, bounded, within the
deadline), whatever library found the device, and fills the fields its plugin left empty. The
formats are the kernel's own (drivers/pci/pci-sysfs.c):

- ``numa_node``: ``%d\\n``, ``-1`` when the firmware names no node (NUMA_NO_NODE);
- ``local_cpulist``: the CPUs of that node (all online CPUs for node -1) in the list form
  ``0-3,8-11\\n`` (``gpuscout._records.cpulist``); an empty mask is just ``\\n``;
- ``current_link_speed``, ``max_link_speed``: ``pci_speed_string()``, ``2.5 GT/s PCIe`` up to
  ``64.0 GT/s PCIe`` since Linux 5.2, ``2.5 GT/s``, ``5 GT/s``, ``8 GT/s``, ``16 GT/s``,
  ``32 GT/s`` before; ``Unknown`` (``Unknown speed`` before 5.2) when the link says nothing;
- ``current_link_width``, ``max_link_width``: ``%u\\n`` lanes, ``0`` while the link is down.

A value the kernel did not write (a missing file, ``Unknown``, width 0, anything else) leaves
that part unknown; a file that cannot be read safely (a FIFO, over 1 MiB) is a log line
(``discovery.topology_note``), never a hang. A link running below its maximum gets a note on the
device (``link_note``). docs/topology.md is the user's view of all this.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TypeVar

import attrs

from gpuscout._machine.context import Context, parse_u64
from gpuscout._records.cpulist import cpulist_ranges
from gpuscout._records.device import DeviceInfo
from gpuscout._records.fields import MAX_NUMA_NODE, PcieLink, PeerLink

PCI_DEVICES = "/sys/bus/pci/devices"
#: The files read per PCI address, in the order read.
FILES = (
    "numa_node",
    "local_cpulist",
    "current_link_speed",
    "current_link_width",
    "max_link_speed",
    "max_link_width",
)
#: PCIe generation by link speed in GT/s (the PCI Express base specifications; 7.0 is 128 GT/s).
GENERATIONS: dict[float, int] = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6, 128.0: 7}
#: The words the kernel writes for a speed it does not know.
UNKNOWN_SPEEDS = frozenset({"Unknown", "Unknown speed"})
_SPEED = re.compile(r"([0-9]{1,3}(?:\.[0-9]{1,2})?) GT/s(?: PCIe)?", re.ASCII)
_ADDRESS = re.compile(r"[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]", re.ASCII)
#: Widths a PCIe link can have (PCIe base specification: x1, x2, x4, x8, x12, x16, x32).
WIDTHS = frozenset({1, 2, 4, 8, 12, 16, 32})
#: What the note on a link that only runs slower than it could adds (width at its maximum).
IDLE_HINT = "a GPU may lower its link speed while idle to save power, and raise it again under load"
NARROW_HINT = "fewer lanes than the device has: a slot or riser with fewer lanes, or a bad contact"


def parse_numa_node(text: str | None) -> int | None:
    """The kernel's ``numa_node`` text as a node number (-1 = none); None for anything else."""
    if text is None:
        return None
    value = text.strip()
    if value == "-1":
        return -1
    number = parse_u64(value)
    return number if number is not None and number <= MAX_NUMA_NODE else None


def parse_local_cpus(text: str | None) -> str | None:
    """The kernel's ``local_cpulist`` text as that list without its newline (``""`` for an
    empty mask); None for anything the kernel does not print (see ``gpuscout._records.cpulist``)."""
    if text is None or cpulist_ranges(text) is None:
        return None
    return text.strip()


def parse_link_speed(text: str | None) -> float | None:
    """``16.0 GT/s PCIe`` (or the older ``16 GT/s``) as 16.0; None for ``Unknown`` and for a
    speed that is no PCIe generation's."""
    match = _SPEED.fullmatch((text or "").strip())
    if match is None:
        return None
    speed = float(match.group(1))
    return speed if speed in GENERATIONS else None


def parse_link_width(text: str | None) -> int | None:
    """``16`` as 16 lanes; None for ``0`` (the link is down) and for a width no link has."""
    width = parse_u64((text or "").strip())
    return width if width in WIDTHS else None


def generation(speed: float) -> int | None:
    """The PCIe generation of a link speed in GT/s (16.0 -> 4), None when it is none."""
    return GENERATIONS.get(speed)


def _side(speed: float, width: int) -> str:
    gen = generation(speed) if speed else None
    parts = ([f"Gen{gen}"] if gen else []) + ([f"x{width}"] if width else [])
    return " ".join(parts) or "unknown"


def describe(link: PcieLink) -> str:
    """``Gen5 x16``, or ``Gen3 x4 of Gen4 x16`` when the link runs below its maximum; the
    parts the kernel did not say are left out (``x4 of x16``); ``""`` when nothing is known."""
    if not link.known:
        return ""
    now = _side(link.speed, link.width)
    best = _side(link.max_speed, link.max_width)
    if below_maximum(link):
        return f"{now} of {best}"
    return now if now != "unknown" else f"max {best}"


def below_maximum(link: PcieLink) -> bool:
    """Whether the link runs slower or narrower than its maximum (both sides known)."""
    slower = bool(link.speed and link.max_speed and link.speed < link.max_speed)
    return slower or narrower(link)


def narrower(link: PcieLink) -> bool:
    """Whether the link has fewer lanes than its maximum (both widths known)."""
    return bool(link.width and link.max_width and link.width < link.max_width)


def link_note(link: PcieLink | None) -> str:
    """The device's note for a link below its maximum, "" otherwise.

    A narrower link is a fault to fix (the card in a slot with fewer lanes): said plainly. A
    link only slower than it could be (all its lanes) is usually power management: NVIDIA and
    AMD GPUs drop to a lower speed while idle, so the note says so instead of alarming.
    """
    if link is None or not below_maximum(link):
        return ""
    text = f"running at PCIe {describe(link)}"
    return f"{text} ({NARROW_HINT})" if narrower(link) else f"{text} ({IDLE_HINT})"


@attrs.frozen
class Placement:
    """What the kernel says about one PCI address (each part None when it did not say)."""

    numa_node: int | None = None
    local_cpus: str | None = None
    link: PcieLink | None = None


T = TypeVar("T")


def _read(context: Context, path: str, parse: Callable[[str], T | None], what: str) -> T | None:
    text = context.read_text(path)
    if text is None:
        return None
    value = parse(text)
    if value is None and text.strip() not in UNKNOWN_SPEEDS and text.strip() not in ("", "0"):
        context.note(f"{path}: {text.strip()[:40]!r} is not {what}; ignored")
    return value


def read_placement(context: Context, address: str) -> Placement:
    """The six files of PCI function ``address`` (``0000:19:00.0``) under the context's root."""
    address = address.lower()
    if _ADDRESS.fullmatch(address) is None:
        return Placement()
    base = f"{PCI_DEVICES}/{address}"
    numa = _read(context, f"{base}/numa_node", parse_numa_node, "a NUMA node")
    cpus = _read(context, f"{base}/local_cpulist", parse_local_cpus, "a CPU list")
    speeds = [
        _read(context, f"{base}/{name}", parse_link_speed, "a PCIe link speed")
        for name in ("current_link_speed", "max_link_speed")
    ]
    widths = [
        _read(context, f"{base}/{name}", parse_link_width, "a PCIe link width")
        for name in ("current_link_width", "max_link_width")
    ]
    link = PcieLink(
        speed=speeds[0] or 0.0, width=widths[0] or 0, max_speed=speeds[1] or 0.0, max_width=widths[1] or 0
    )
    return Placement(numa_node=numa, local_cpus=cpus, link=link if link.known else None)


def place(device: DeviceInfo, found: Placement) -> DeviceInfo:
    """``device`` with what ``found`` says in the fields its plugin left empty, and the note on
    a link below its maximum (added once, after the plugin's notes)."""
    changes: dict[str, object] = {}
    if device.numa_node == -1 and found.numa_node is not None:
        changes["numa_node"] = found.numa_node
    if not device.local_cpus and found.local_cpus:
        changes["local_cpus"] = found.local_cpus
    link = device.pcie_link
    if link is None and found.link is not None:
        link = changes["pcie_link"] = found.link
    note = link_note(link)
    if note and note not in device.notes and len(device.notes) < 32:
        changes["notes"] = (*device.notes, note)
    return device.evolve(**changes) if changes else device


def add_topology(devices: Sequence[DeviceInfo], context: Context) -> list[DeviceInfo]:
    """``devices`` with their placement read from sysfs (each address read once), and the note
    on every link below its maximum, the plugin's own links included."""
    seen: dict[str, Placement] = {}
    out: list[DeviceInfo] = []
    for device in devices:
        address = device.pci_id.lower()
        if not address:
            out.append(place(device, Placement()))  # a plugin's own link still gets its note
            continue
        if address not in seen:
            seen[address] = read_placement(context, address)
        out.append(place(device, seen[address]))
    return out


def keep_known_peers(devices: Sequence[DeviceInfo]) -> list[DeviceInfo]:
    """``devices`` whose peers name only other devices of the same list, each peer once: a
    plugin may report links to devices that were hidden, dropped or never found."""
    known = {(d.id, d.library) for d in devices}
    out: list[DeviceInfo] = []
    for device in devices:
        if not device.peers:
            out.append(device)
            continue
        kept: dict[tuple[str, str], PeerLink] = {}
        for peer in device.peers:
            key = (peer.id, peer.library)
            if key in known and key != (device.id, device.library) and key not in kept:
                kept[key] = peer
        peers = tuple(kept.values())
        out.append(device if peers == device.peers else device.evolve(peers=peers))
    return out


__all__ = [
    "FILES",
    "GENERATIONS",
    "PCI_DEVICES",
    "Placement",
    "add_topology",
    "below_maximum",
    "describe",
    "generation",
    "keep_known_peers",
    "link_note",
    "parse_link_speed",
    "parse_link_width",
    "parse_local_cpus",
    "parse_numa_node",
    "place",
    "read_placement",
]
