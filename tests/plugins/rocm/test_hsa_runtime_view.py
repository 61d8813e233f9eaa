"""What libhsakmt lets the HSA runtime in a child see: /dev/kfd, render nodes, gfx overrides.

Each docstring names the ROCR-Runtime ``libhsakmt/src`` file and function the test follows.
The tree ``container_one_render_node`` is a container given ``/dev/kfd`` and only
``/dev/dri/renderD129`` on a host with an RX 7900 XTX (KFD node 1, renderD128) and an RX 7600
(KFD node 2, renderD129): sysfs is the host's, /dev is the container's.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from gpuscout import DeviceInfo, Discovery
from gpuscout.sizes import MIB
from gpuscout.testing import FIFO, RootFactory, ScoutFactory, Symlink

TREES = Path(__file__).parent / "trees"
CONTAINER = "container_one_render_node"
RX7600 = "GPU-2a9e4c7b10f3d685"


def rocm_note(result: Discovery) -> str:
    report = result.report("rocm")
    assert report.status == "ok"
    return report.note


@pytest.fixture
def copy_of(tmp_path: Path) -> Callable[[str], Path]:
    """``copy_of(tree)``: a writable copy of a recorded tree, for removing files from it."""
    return lambda tree: Path(shutil.copytree(TREES / tree, tmp_path / tree))


@pytest.fixture
def discover_at(gpuscout_scout: ScoutFactory) -> Callable[..., Discovery]:
    """``discover_at(root, env)``: one discovery by the ROCm plugin alone over ``root``."""
    return lambda root, env=None: gpuscout_scout("rocm", env=dict(env or {}), root=root).discover()


def test_node_without_its_render_node_is_left_out(
    devices: Callable[..., list[DeviceInfo]],
) -> None:
    """Only the GPU whose render node opens is reported, as GPU 0 (topology.c
    ``topology_sysfs_check_node_supported``: ENOENT from fmm.c ``hsakmt_open_drm_render_device``
    leaves the node out)."""
    assert devices(CONTAINER) == [
        DeviceInfo(
            id=RX7600,
            library="ROCm",
            name="ROCm0",
            description="AMD GPU gfx1102 [1002:7480]",
            filter_id=RX7600,
            integrated=False,
            pci_id="0000:03:00.0",
            total_memory=8573157376,
            free_memory=8573157376 - 500 * MIB,
            compute_major=0x11,
            compute_minor=0x02,
            driver_major=6,
            driver_minor=10,
            gfx_target="gfx1102",
            uuid=RX7600,
        )
    ]


def test_left_out_node_is_named_in_the_note(discover: Callable[..., Discovery]) -> None:
    """The report says which KFD node was left out and which file could not be opened
    (topology.c ``topology_sysfs_check_node_supported``)."""
    note = rocm_note(discover(CONTAINER))
    assert "KFD node 1 left out" in note and "renderD128" in note


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"ROCR_VISIBLE_DEVICES": "0"}, [RX7600]),
        ({"ROCR_VISIBLE_DEVICES": "1"}, []),
        ({"HIP_VISIBLE_DEVICES": "0"}, [RX7600]),
        ({"ROCR_VISIBLE_DEVICES": "0", "HIP_VISIBLE_DEVICES": "1"}, []),
    ],
)
def test_left_out_node_takes_no_gpu_index(
    devices: Callable[..., list[DeviceInfo]],
    env: dict[str, str],
    expected: list[str],
) -> None:
    """ROCR and HIP indices count only the nodes libhsakmt kept, so index 0 is the RX 7600
    (topology.c ``hsakmt_topology_sysfs_get_system_props`` maps only supported nodes)."""
    assert [d.id for d in devices(CONTAINER, env)] == expected


def test_per_node_override_uses_the_hsa_node_id_not_the_sysfs_one(
    devices: Callable[..., list[DeviceInfo]],
) -> None:
    """``HSA_OVERRIDE_GFX_VERSION_1`` reaches the RX 7600 at sysfs node 2: the index is the HSA
    (user) node id, which counts CPU nodes and skips left-out ones (topology.c
    ``topology_sysfs_get_node_props`` formats its ``node_id`` argument, a user node id)."""
    by_hsa_id = devices(CONTAINER, {"HSA_OVERRIDE_GFX_VERSION_1": "11.0.0"})
    by_sysfs_id = devices(CONTAINER, {"HSA_OVERRIDE_GFX_VERSION_2": "11.0.0"})
    assert ([d.gfx_target for d in by_hsa_id], [d.gfx_target for d in by_sysfs_id]) == (
        ["gfx1100"],
        ["gfx1102"],
    )


def test_per_node_override_wins_over_the_global_one(
    devices: Callable[..., list[DeviceInfo]],
) -> None:
    """On the mixed box the iGPU (HSA node 2) takes its own override, the RX 7600 the global one
    (topology.c ``topology_sysfs_get_node_props`` reads ``HSA_OVERRIDE_GFX_VERSION_%d`` first)."""
    env = {"HSA_OVERRIDE_GFX_VERSION": "11.0.0", "HSA_OVERRIDE_GFX_VERSION_2": "10.3.0"}
    assert [d.gfx_target for d in devices("mixed_apu_dgpu", env)] == ["gfx1100", "gfx1030"]


def test_malformed_per_node_override_leaves_no_device(
    discover: Callable[..., Discovery],
) -> None:
    """A bad per-node value fails topology init for every GPU, not only its own, and the note
    names it (topology.c ``topology_sysfs_get_node_props`` returns HSAKMT_STATUS_ERROR)."""
    result = discover("mixed_apu_dgpu", {"HSA_OVERRIDE_GFX_VERSION_1": "11.0"})
    assert (result.devices, "HSA_OVERRIDE_GFX_VERSION_1='11.0'" in rocm_note(result)) == ([], True)


def test_override_for_a_cpu_node_is_not_read(devices: Callable[..., list[DeviceInfo]]) -> None:
    """A bad value for HSA node 0, a CPU node, changes nothing (topology.c
    ``topology_sysfs_get_node_props`` stops at CPU nodes before reading overrides)."""
    found = devices("mixed_apu_dgpu", {"HSA_OVERRIDE_GFX_VERSION_0": "junk"})
    assert [d.gfx_target for d in found] == ["gfx1102", "gfx1036"]


def test_set_but_empty_override_leaves_no_device(discover: Callable[..., Discovery]) -> None:
    """An empty value is set (getenv answers "") and does not scan: no device (topology.c
    ``topology_sysfs_get_node_props``)."""
    result = discover("rx7900xtx", {"HSA_OVERRIDE_GFX_VERSION": ""})
    assert (result.devices, "HSA_OVERRIDE_GFX_VERSION=''" in rocm_note(result)) == ([], True)


def test_zero_override_keeps_the_real_target(devices: Callable[..., list[DeviceInfo]]) -> None:
    """0.0.0 parses but is no override: ROCr uses OverrideEngineId only when non-zero
    (topology.c ``topology_sysfs_get_node_props``; ROCr amd_gpu_agent.cpp ``GpuAgent``)."""
    found = devices("rx7900xtx", {"HSA_OVERRIDE_GFX_VERSION": "0.0.0"})
    assert [d.gfx_target for d in found] == ["gfx1100"]


def test_override_with_a_minor_above_15_keeps_the_device_without_a_target(
    devices: Callable[..., list[DeviceInfo]],
) -> None:
    """11.16.0 passes libhsakmt's check (minor <= 255) but names no gfx target, so the device
    stays with an unknown target (topology.c ``topology_sysfs_get_node_props``)."""
    found = devices("rx7900xtx", {"HSA_OVERRIDE_GFX_VERSION": "11.16.0"})
    assert [(d.gfx_target, d.compute_major) for d in found] == [("", -1)]


def test_no_dev_kfd_means_no_device_and_says_why(
    copy_of: Callable[[str], Path],
    discover_at: Callable[..., Discovery],
) -> None:
    """Without /dev/kfd the runtime stops before the topology (openclose.c ``hsaKmtOpenKFD``)."""
    root = copy_of("mixed_apu_dgpu")
    (root / "dev" / "kfd").unlink()
    result = discover_at(root)
    assert (result.devices, "dev/kfd cannot be opened read-write (ENOENT" in rocm_note(result)) == ([], True)


def test_render_node_failing_otherwise_than_missing_leaves_no_device(
    copy_of: Callable[[str], Path],
    discover_at: Callable[..., Discovery],
) -> None:
    """A render node that fails with another error than ENOENT/EPERM (here EISDIR) fails topology
    init as a whole (topology.c ``topology_sysfs_check_node_supported``)."""
    root = copy_of("mixed_apu_dgpu")
    render = root / "dev" / "dri" / "renderD129"
    render.unlink()
    render.mkdir()
    result = discover_at(root)
    assert (result.devices, "(EISDIR" in rocm_note(result)) == ([], True)


def test_gpu_node_without_a_render_minor_leaves_no_device(
    gpuscout_root: RootFactory,
    discover_at: Callable[..., Discovery],
) -> None:
    """A GPU node whose drm_render_minor is 0 fails topology init (topology.c
    ``topology_sysfs_check_node_supported``)."""
    node = TREES / "rx7900xtx/sys/class/kfd/kfd/topology/nodes/1/properties"
    props = node.read_text().replace("drm_render_minor 128", "drm_render_minor 0")
    root = gpuscout_root({"/sys/class/kfd/kfd/topology/nodes/1/properties": props}, copy=TREES / "rx7900xtx")
    result = discover_at(root)
    assert (result.devices, "drm_render_minor 0" in rocm_note(result)) == ([], True)


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
def test_device_file_in_a_recorded_tree_is_not_opened(
    gpuscout_root: RootFactory,
    discover_at: Callable[..., Discovery],
) -> None:
    """A tree's dev/kfd that is a FIFO is refused unopened: no device, a note."""
    root = gpuscout_root({"/dev/kfd": FIFO}, copy=TREES / "rx7900xtx")
    result = discover_at(root)
    assert (result.devices, "not a plain file" in rocm_note(result)) == ([], True)


def test_device_link_in_a_recorded_tree_means_the_trees_own_node(
    gpuscout_root: RootFactory,
    discover_at: Callable[..., Discovery],
) -> None:
    """A tree's dev/kfd linking to /dev/zero names the tree's own /dev/zero (absent), never the
    host's device: no device, and the note says the node cannot be opened (ENOENT)."""
    root = gpuscout_root({"/dev/kfd": Symlink("/dev/zero")}, copy=TREES / "rx7900xtx")
    result = discover_at(root)
    assert (result.devices, "ENOENT" in rocm_note(result)) == ([], True)


@pytest.mark.parametrize(("minor", "kept"), [(128, True), (255, True), (127, False), (256, False)])
def test_render_minors_128_to_255_are_libhsakmts_range_both_ends_included(
    gpuscout_root: RootFactory,
    discover_at: Callable[..., Discovery],
    minor: int,
    kept: bool,
) -> None:
    """A GPU node whose render node opens is kept for drm_render_minor 128..255, the first and
    last render nodes included; just outside fails topology init (fmm.c DRM_FIRST_RENDER_NODE,
    DRM_LAST_RENDER_NODE; topology.c ``topology_sysfs_check_node_supported``)."""
    node = TREES / "rx7900xtx/sys/class/kfd/kfd/topology/nodes/1/properties"
    props = node.read_text().replace("drm_render_minor 128", f"drm_render_minor {minor}")
    root = gpuscout_root(
        {"/sys/class/kfd/kfd/topology/nodes/1/properties": props, f"/dev/dri/renderD{minor}": ""},
        copy=TREES / "rx7900xtx",
    )
    result = discover_at(root)
    assert (len(result.devices), f"drm_render_minor {minor}" in rocm_note(result)) == (
        (1, False) if kept else (0, True)
    )
