"""The APU rule and HIP's pool over recorded trees (the zoo's Strix Halo and 780M + 7900 XTX),
with the files the rule reads spoiled."""

from __future__ import annotations

import pathlib
import shutil
from collections.abc import Callable

import pytest

from gpuscout import DeviceInfo, Scout
from gpuscout.sizes import GIB
from gpuscout.testing import ScoutFactory

MACHINES = pathlib.Path(__file__).parents[2] / "machines"
IGPU = "sys/class/drm/renderD128/device"


@pytest.fixture
def tree(tmp_path: pathlib.Path) -> Callable[[str], pathlib.Path]:
    """A private copy of a zoo machine's ``root/``, to spoil."""

    def copy(machine: str) -> pathlib.Path:
        return pathlib.Path(shutil.copytree(MACHINES / machine / "root", tmp_path / machine))

    return copy


def _rocm(gpuscout_scout: ScoutFactory, root: pathlib.Path) -> list[DeviceInfo]:
    scout: Scout = gpuscout_scout("rocm", env={}, root=root)
    return [d for _, d in scout.enumerate() if not d.hidden_by]


def test_a_board_info_file_makes_the_strix_halo_discrete(
    gpuscout_scout: ScoutFactory, tree: Callable[[str], pathlib.Path]
) -> None:
    """The same gfx1151 with ``board_info`` (a kernel that shows it only off APUs) is discrete."""
    root = tree("strix_halo_96g")
    (root / IGPU / "board_info").write_text("type : cem\n")
    (device,) = _rocm(gpuscout_scout, root)
    assert (device.integrated, device.shared_memory, device.total_memory) == (False, False, 96 * GIB)


@pytest.mark.parametrize("value", ["", "$(rm -rf /)\n", "-1\n", "99999999999999999999999\n", "\xff\xfe\n"])
def test_a_spoiled_pages_limit_only_leaves_the_note_without_it(
    gpuscout_scout: ScoutFactory, tree: Callable[[str], pathlib.Path], value: str
) -> None:
    """A pages_limit that is empty, shell text, negative, too big or not UTF-8 changes no figure."""
    root = tree("ryzen_780m_plus_radeon")
    (root / "sys/module/ttm/parameters/pages_limit").write_bytes(value.encode("latin-1"))
    igpu = next(d for d in _rocm(gpuscout_scout, root) if d.integrated)
    assert (igpu.shared_memory, igpu.total_memory) == (True, 8145474 * 4096)
    assert not any("pages_limit" in n for n in igpu.notes)


def test_the_780m_names_the_ttm_page_limit_in_its_note(
    gpuscout_scout: ScoutFactory, tree: Callable[[str], pathlib.Path]
) -> None:
    """pages_limit x 4 KiB equal to the GTT ceiling is named in the iGPU's note."""
    igpu = next(d for d in _rocm(gpuscout_scout, tree("ryzen_780m_plus_radeon")) if d.integrated)
    assert any("ttm.pages_limit 8145474 x 4 KiB" in n for n in igpu.notes)


def test_a_gtt_pool_s_free_memory_never_exceeds_the_system_s(
    gpuscout_scout: ScoutFactory, tree: Callable[[str], pathlib.Path]
) -> None:
    """With MemAvailable down to 1 GiB the GTT-backed iGPU's free memory is at most 1 GiB."""
    root = tree("ryzen_780m_plus_radeon")
    meminfo = root / "proc/meminfo"
    meminfo.write_text(
        meminfo.read_text().replace("MemAvailable:   52428800 kB", "MemAvailable:    1048576 kB")
    )
    igpu = next(d for d in _rocm(gpuscout_scout, root) if d.integrated)
    assert igpu.free_memory == GIB


def test_without_kfd_banks_the_pools_are_the_ones_the_kernel_picks(
    gpuscout_scout: ScoutFactory, tree: Callable[[str], pathlib.Path]
) -> None:
    """mem_banks left out of a recording: the 780M's pool is still GTT (carve-out below it) and
    the Strix Halo's still its 96 GiB carve-out (not below the 96 GiB GTT ceiling)."""
    root = tree("ryzen_780m_plus_radeon")
    shutil.rmtree(root / "sys/class/kfd/kfd/topology/nodes/1/mem_banks")
    igpu = next(d for d in _rocm(gpuscout_scout, root) if d.integrated)
    assert (igpu.shared_memory, igpu.total_memory) == (True, 8145474 * 4096)
    strix = tree("strix_halo_96g")
    shutil.rmtree(strix / "sys/class/kfd/kfd/topology/nodes/1/mem_banks")
    (apu,) = _rocm(gpuscout_scout, strix)
    assert (apu.integrated, apu.shared_memory, apu.total_memory) == (True, False, 96 * GIB)
