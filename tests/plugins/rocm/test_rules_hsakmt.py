"""libhsakmt's render-node rule (ROCR-Runtime ``libhsakmt/src/topology.c``
``topology_sysfs_check_node_supported``): ENOENT and EPERM leave one node out, EACCES (like any
other error) fails topology init, so the HSA runtime sees no GPU at all."""

from __future__ import annotations

import shutil
from pathlib import Path

from gpuscout import Discovery
from gpuscout.testing import ScoutFactory

TREES = Path(__file__).parent / "trees"


def discover_with_render(tmp_path: Path, gpuscout_scout: ScoutFactory, text: str) -> Discovery:
    """Discovery over ``mixed_apu_dgpu`` whose renderD129 records ``text`` (``denied`` ...)."""
    root = Path(shutil.copytree(TREES / "mixed_apu_dgpu", tmp_path / "tree"))
    (root / "dev" / "dri" / "renderD129").write_text(text)
    return gpuscout_scout("rocm", env={}, root=root).discover()


def note(result: Discovery) -> str:
    return result.report("rocm").note


def test_a_render_node_refused_with_eacces_leaves_no_gpu_at_all(
    tmp_path: Path, gpuscout_scout: ScoutFactory
) -> None:
    """EACCES on one GPU's render node fails topology init: no ROCm device, the note says EACCES."""
    result = discover_with_render(tmp_path, gpuscout_scout, "denied\n")
    assert result.devices == []
    assert "(EACCES" in note(result) and "topology init fails" in note(result)


def test_a_render_node_refused_with_eperm_leaves_only_that_node_out(
    tmp_path: Path, gpuscout_scout: ScoutFactory
) -> None:
    """EPERM (a device cgroup) leaves that one node out; the other GPU is still reported."""
    whole = discover_with_render(tmp_path / "a", gpuscout_scout, "")
    result = discover_with_render(tmp_path / "b", gpuscout_scout, "denied EPERM\n")
    assert 0 < len(result.devices) < len(whole.devices)
    assert "left out" in note(result) and "(EPERM)" in note(result)
