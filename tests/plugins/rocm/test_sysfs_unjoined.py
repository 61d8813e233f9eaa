"""A KFD GPU node that cannot be joined to its amdgpu device (a hand-written tree without the
render node's ``device`` link, a node without ``location_id``): no made-up PCI address, no two
GPUs taken for partitions of one card, and a note saying which directories were looked in."""

from __future__ import annotations

import shutil
from pathlib import Path

from gpuscout import Discovery
from gpuscout.testing import RootFactory, ScoutFactory, promptly

TREES = Path(__file__).parent / "trees"
NODES = "sys/class/kfd/kfd/topology/nodes"


def _without_location_id(root: Path, node: int) -> None:
    path = root / NODES / str(node) / "properties"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(line for line in lines if not line.startswith("location_id ")))


def _discover(gpuscout_scout: ScoutFactory, root: Path) -> Discovery:
    return promptly(gpuscout_scout("rocm", env={}, root=root).discover)


def test_a_node_joined_to_nothing_and_without_location_id_has_no_pci_id(
    gpuscout_root: RootFactory, gpuscout_scout: ScoutFactory
) -> None:
    """No render-node device nor location_id: pci_id is unknown (never 0000:00:00.0), a note says why."""
    root = gpuscout_root(copy=TREES / "rx7900xtx")
    shutil.rmtree(root / "sys/class/drm/renderD128/device")
    _without_location_id(root, 1)
    found = _discover(gpuscout_scout, root)
    (gpu,) = found.devices
    assert gpu.pci_id == "" and gpu.free_memory_unknown
    note = found.report("rocm").note
    assert "KFD node 1: no amdgpu device with mem_info_vram_total found under " in note
    assert "sys/class/drm/renderD128/device, so sysfs gives it no memory figures" in note
    assert "sys/bus/pci/devices" not in note


def test_a_node_joined_to_nothing_keeps_its_location_and_names_both_places(
    gpuscout_root: RootFactory, gpuscout_scout: ScoutFactory
) -> None:
    """With location_id but no device directory at either place, the PCI id stays KFD's and both are named."""
    root = gpuscout_root(copy=TREES / "rx7900xtx")
    shutil.rmtree(root / "sys/class/drm/renderD128/device")
    found = _discover(gpuscout_scout, root)
    (gpu,) = found.devices
    assert gpu.pci_id == "0000:0c:00.0"
    note = found.report("rocm").note
    assert "sys/class/drm/renderD128/device or " in note
    assert "sys/bus/pci/devices/0000:0c:00.0, so sysfs gives it no memory figures" in note


def test_two_gpus_without_location_id_are_not_partitions_of_one_card(
    gpuscout_root: RootFactory, gpuscout_scout: ScoutFactory
) -> None:
    """Render-node devices still join both GPUs: their figures are those of the intact tree, no note."""
    intact = _discover(gpuscout_scout, gpuscout_root(copy=TREES / "mixed_apu_dgpu"))
    root = gpuscout_root(copy=TREES / "mixed_apu_dgpu")
    for node in (1, 2):
        _without_location_id(root, node)
    spoiled = _discover(gpuscout_scout, root)
    key = [(d.pci_id, d.total_memory, d.free_memory, d.free_memory_unknown) for d in intact.devices]
    assert [(d.pci_id, d.total_memory, d.free_memory, d.free_memory_unknown) for d in spoiled.devices] == key
    assert all(not d.free_memory_unknown for d in spoiled.devices)
    assert "no amdgpu device" not in spoiled.report("rocm").note
