"""The runner's `/info` carries where each device sits, and the host reads it back."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from gpuscout._records.fields import PcieLink, PeerLink
from gpuscout.runner import discover_in_child

PLACED_PLUGIN = """
    from gpuscout.plugin import DeviceInfo, PcieLink, PeerLink, hookimpl

    @hookimpl
    def gpuscout_enumerate(context):
        link = PcieLink(speed=16.0, width=8, max_speed=16.0, max_width=16)
        return [
            DeviceInfo(id=f"ACME-{i}", library="Acme", description="card", total_memory=1024,
                       free_memory=512, numa_node=i, local_cpus=f"{8 * i}-{8 * i + 7}",
                       pcie_link=link, peers=[PeerLink(f"ACME-{1 - i}", "Acme", "acmelink")])
            for i in range(2)
        ]
"""


@pytest.fixture(scope="module")
def placed_site(site_factory: Callable[..., Path]) -> Path:
    """A site folder with a plugin that reports two linked cards with their placement."""
    return site_factory("gpuscout-placed", "1.0", {"placed": PLACED_PLUGIN}, {"placed": "placed"})


def test_info_carries_numa_cpus_link_peers_and_the_link_note(placed_site: Path) -> None:
    """The child's reply holds every topology key; the note of the x8 link comes along."""
    env = {**os.environ, "PYTHONPATH": str(placed_site), "VK_DRIVER_FILES": "/nonexistent.json"}
    env["GPUSCOUT_PLUGINS"] = "placed"
    devices = sorted(discover_in_child(env, timeout=30), key=lambda d: d.id)
    assert [(d.id, d.numa_node, d.local_cpus) for d in devices] == [
        ("ACME-0", 0, "0-7"),
        ("ACME-1", 1, "8-15"),
    ]
    assert devices[0].pcie_link == PcieLink(16.0, 8, 16.0, 16)
    assert devices[0].peers == (PeerLink("ACME-1", "Acme", "acmelink"),)
    assert any("PCIe Gen4 x8 of Gen4 x16" in n for n in devices[0].notes)
