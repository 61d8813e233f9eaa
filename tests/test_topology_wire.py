"""The topology fields on the wire and at the plugin border: gpuscout's own keys, written only
when known, read strictly, checked on every record a plugin returns."""

from __future__ import annotations

import json
import re
from typing import Any

import attrs
import pytest

from gpuscout import DeviceInfo, GpuscoutError, from_json, to_json
from gpuscout._records.device import check_device
from gpuscout._records.fields import PcieLink, PeerLink, RecordError

PLACED = DeviceInfo(
    id="GPU-1",
    library="CUDA",
    numa_node=0,
    local_cpus="0-47,96-143",
    pcie_link=PcieLink(speed=16.0, width=4, max_speed=32.0, max_width=16),
    peers=[PeerLink("GPU-2", "CUDA", "nvlink")],
)


def test_topology_keys_are_written_when_known() -> None:
    """NUMA node 0 is a node: written; the link and peers by their own keys."""
    wire = json.loads(to_json(PLACED))
    assert wire["numa_node"] == 0 and wire["local_cpus"] == "0-47,96-143"
    assert wire["pcie_link"] == {"speed": 16.0, "width": 4, "max_speed": 32.0, "max_width": 16}
    assert wire["peers"] == [{"id": "GPU-2", "backend": "CUDA", "link": "nvlink"}]


def test_unknown_topology_is_left_off_the_wire() -> None:
    """-1, "", None and no peers write no key; an unknown part of a link writes none either."""
    wire = json.loads(to_json(DeviceInfo(id="0", library="CUDA")))
    assert not {"numa_node", "local_cpus", "pcie_link", "peers"} & set(wire)
    half = json.loads(to_json(DeviceInfo(id="0", pcie_link=PcieLink(max_speed=8.0, max_width=16))))
    assert half["pcie_link"] == {"max_speed": 8.0, "max_width": 16}


def test_a_runner_reply_without_topology_reads_as_unknown() -> None:
    """An Ollama runner's /info (no topology keys, or nulls) reads as unknown placement."""
    devices: list[DeviceInfo] = from_json(
        '[{"id": "0", "numa_node": null, "pcie_link": null, "peers": null}]', list[DeviceInfo]
    )
    (device,) = devices
    assert (device.numa_node, device.local_cpus, device.pcie_link, device.peers) == (-1, "", None, ())


@pytest.mark.parametrize(
    ("body", "path"),
    [
        ('"numa_node": "0"', "numa_node"),
        ('"numa_node": -2', "numa_node"),
        ('"numa_node": 1e3', "numa_node"),
        ('"local_cpus": "0-3:1/2"', "local_cpus"),
        ('"local_cpus": 5', "local_cpus"),
        ('"pcie_link": {"speed": "16.0 GT/s PCIe"}', "pcie_link.speed"),
        ('"pcie_link": {"speed": -1}', "pcie_link.speed"),
        ('"pcie_link": {"width": 1.5}', "pcie_link.width"),
        ('"pcie_link": {"max_width": 65}', "pcie_link.max_width"),
        ('"pcie_link": [16, 16]', "pcie_link"),
        ('"peers": [{"id": "a", "backend": "CUDA", "link": "nvlink"}, {"id": 2}]', "peers[1].id"),
        ('"peers": [{"id": "a", "link": "$(reboot)"}]', "peers[0].link"),
        ('"peers": {"id": "a"}', "peers"),
    ],
)
def test_bad_topology_on_the_wire_names_its_path(body: str, path: str) -> None:
    """A wrong type or a value the kernel never writes is a GpuscoutError naming the key."""
    with pytest.raises(GpuscoutError, match="^" + re.escape(path)):
        from_json(f'{{"id": "0", {body}}}', DeviceInfo)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"numa_node": 70000}, "numa_node"),
        ({"local_cpus": "0-3 "}, "local_cpus"),
        ({"pcie_link": (16.0, 16)}, "pcie_link"),
        ({"peers": ("GPU-2",)}, "peers"),
        ({"peers": [PeerLink("GPU-2", "CUDA", "nvlink")] * 1025}, "peers"),
    ],
)
def test_a_plugins_bad_topology_fails_it_at_the_border(change: dict[str, Any], field: str) -> None:
    """check_device refuses what the record's own checks were bypassed for, naming the field."""
    record = DeviceInfo(id="0", library="Acme")
    for name, value in change.items():
        object.__setattr__(record, name, value)  # as a plugin's subclass or evolve bypass would
    with pytest.raises(RecordError, match=rf"\[0\]\.{field}"):
        check_device(record, "[0]")


def test_a_link_that_knows_nothing_is_no_link_after_the_border() -> None:
    """An all-zero PcieLink from a plugin becomes None, so the wire has no empty object."""
    checked = check_device(DeviceInfo(id="0", pcie_link=PcieLink()), "[0]")
    assert checked.pcie_link is None


def test_records_refuse_topology_values_no_kernel_writes() -> None:
    """Building a record with a bad CPU list, speed or link kind is a RecordError."""
    for build in (
        lambda: DeviceInfo(local_cpus="3-1"),
        lambda: PcieLink(speed=float("nan")),
        lambda: PcieLink(width=True),
        lambda: PeerLink("a", "CUDA", "NVLink"),
        lambda: DeviceInfo(peers=[{"id": "a"}]),
    ):
        with pytest.raises(RecordError):
            build()


def test_the_border_copies_a_peer_subclass_into_plain_values() -> None:
    """A str subclass in a peer is copied into a plain str, so nothing can change later."""

    class Sneaky(str):
        pass

    record = DeviceInfo(id="0", peers=[PeerLink(Sneaky("GPU-2"), "CUDA", "nvlink")])
    (peer,) = check_device(record, "[0]").peers
    assert type(peer.id) is str and attrs.asdict(peer) == {"id": "GPU-2", "library": "CUDA", "link": "nvlink"}


def test_an_isolated_plugins_topology_crosses_the_child_boundary_unchanged() -> None:
    """The isolation child's encoding (every field as JSON) brings the link and peers back."""
    from gpuscout._host.isolation import decode_device, encode_device

    text = json.dumps(encode_device(PLACED))
    assert decode_device(json.loads(text), "[0]") == PLACED
