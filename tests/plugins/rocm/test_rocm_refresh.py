"""ROCm refresh over copies of the recorded sysfs trees: mem_info_vram_used read again."""

from __future__ import annotations

import shutil
from pathlib import Path

from gpuscout import Scout
from gpuscout.sizes import GIB
from gpuscout.testing import RootFactory, ScoutFactory

TREES = Path(__file__).parent / "trees"
RX7900XTX_VRAM = 25753026560
DEVICE = "sys/class/drm/renderD128/device"


def rocm_over(gpuscout_scout: ScoutFactory, root: Path) -> Scout:
    return gpuscout_scout("rocm", env={}, root=root)


def copied(gpuscout_root: RootFactory, tree: str) -> Path:
    return gpuscout_root(copy=TREES / tree)


def test_refresh_reads_mem_info_vram_used_again(
    gpuscout_scout: ScoutFactory, gpuscout_root: RootFactory
) -> None:
    """More VRAM in use after discovery: the refresh reports total - used, not stale."""
    root = copied(gpuscout_root, "rx7900xtx")
    scout = rocm_over(gpuscout_scout, root)
    (before,) = scout.discover().devices
    (root / DEVICE / "mem_info_vram_used").write_text(f"{8 * GIB}\n")
    (after,) = scout.refresh([before])
    assert after == before.evolve(free_memory=RX7900XTX_VRAM - 8 * GIB)
    assert after.free_memory_stale is False


def test_an_unreadable_counter_leaves_the_device_stale_not_zero(
    gpuscout_scout: ScoutFactory, gpuscout_root: RootFactory
) -> None:
    """mem_info_vram_used gone: the previous free memory stays, marked stale."""
    root = copied(gpuscout_root, "rx7900xtx")
    scout = rocm_over(gpuscout_scout, root)
    (before,) = scout.discover().devices
    (root / DEVICE / "mem_info_vram_used").unlink()
    assert scout.refresh([before]) == [before.evolve(free_memory_stale=True)]


def test_a_card_that_is_gone_is_stale(gpuscout_scout: ScoutFactory, gpuscout_root: RootFactory) -> None:
    """No KFD topology any more (driver unloaded): the device keeps its value, stale."""
    root = copied(gpuscout_root, "rx7900xtx")
    scout = rocm_over(gpuscout_scout, root)
    (before,) = scout.discover().devices
    shutil.rmtree(root / "sys" / "class" / "kfd")
    assert scout.refresh([before]) == [before.evolve(free_memory_stale=True)]


def test_a_device_now_at_another_pci_address_is_not_refreshed(
    gpuscout_scout: ScoutFactory, gpuscout_root: RootFactory
) -> None:
    """The same id at another PCI address is not the same card: stale."""
    root = copied(gpuscout_root, "rx7900xtx")
    scout = rocm_over(gpuscout_scout, root)
    (before,) = scout.discover().devices
    moved = before.evolve(pci_id="0000:77:00.0")
    assert scout.refresh([moved]) == [moved.evolve(free_memory_stale=True)]


def test_partitions_are_refreshed_from_the_card_counter(
    gpuscout_scout: ScoutFactory, gpuscout_root: RootFactory
) -> None:
    """Each MI300X CPX partition's free memory follows the card-wide counter (still a guess)."""
    root = copied(gpuscout_root, "mi300x_cpx")
    scout = rocm_over(gpuscout_scout, root)
    devices = scout.discover().devices
    for path in root.glob("sys/**/mem_info_vram_used"):
        path.write_text(f"{80 * GIB}\n")
    fresh = scout.refresh(devices)
    assert [d.id for d in fresh] == [d.id for d in devices]
    assert all(not d.free_memory_stale and d.free_memory_unknown for d in fresh)
    assert all(a.free_memory < b.free_memory for a, b in zip(fresh, devices, strict=True))


def test_refresh_answers_only_rocm_devices(gpuscout_scout: ScoutFactory, gpuscout_root: RootFactory) -> None:
    """A device of another library passed along is left to its own plugin (here: stale)."""
    root = copied(gpuscout_root, "rx7900xtx")
    scout = rocm_over(gpuscout_scout, root)
    (rocm,) = scout.discover().devices
    other = rocm.evolve(library="Vulkan", id="0")
    fresh = scout.refresh([rocm, other])
    assert [d.free_memory_stale for d in fresh] == [False, True]
