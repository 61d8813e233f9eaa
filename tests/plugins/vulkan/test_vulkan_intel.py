"""Intel GPUs through Vulkan: a memory budget above its heap is clamped (llama.cpp#29277), and
the VRAM size xe or i915 publish under the same PCI address (``gpuscout.plugin.drm_vram``,
tests/test_drm_vram.py) is the total, said in a note."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from gpuscout import DeviceInfo, Scout
from gpuscout.plugin import Context
from gpuscout.plugins.vulkan.devices import device_memory, over_budget, to_device_info
from gpuscout.plugins.vulkan.intel import with_sysfs_vram
from gpuscout.plugins.vulkan.loader import RawDevice
from gpuscout.sizes import GIB
from gpuscout.testing import write_tree

MACHINE = Path(__file__).parents[2] / "machines" / "intel_arc_a770_igpu"
PCI = "/sys/bus/pci/devices"
#: llama.cpp#29277: an Intel iGPU's heap, budget and usage as vulkaninfo printed them.
HEAP, BUDGET, USAGE = 38868971888, 50206003200, 4096


def raw(**kw: Any) -> RawDevice:
    base: dict[str, Any] = dict(
        index=0,
        name="Intel(R) Graphics",
        device_type=1,
        vendor_id=0x8086,
        device_id=0x7D55,
        api_version=(1 << 22) | (3 << 12),
        driver_version=0,
    )
    return RawDevice(**{**base, **kw})


def test_a_budget_above_its_heap_counts_as_the_heap() -> None:
    """46.8 GiB of budget on a 36.2 GiB heap: free is the heap less usage, never above total."""
    total, free, unknown = device_memory(raw(heaps=[[HEAP, 1]], heap_budget=[BUDGET], heap_usage=[USAGE]))
    assert (total, free, unknown) == (HEAP, HEAP - USAGE, False)


def test_the_clamp_is_said_in_the_device_note() -> None:
    """The record's notes name both sizes in GiB and the llama.cpp issue."""
    d = to_device_info(raw(heaps=[[HEAP, 1]], heap_budget=[BUDGET], heap_usage=[USAGE]), 0, "linux")
    assert d.free_memory <= d.total_memory
    (clamp,) = [n for n in d.notes if "budget" in n]
    assert "46.8 GiB" in clamp and "36.2 GiB" in clamp and "llama.cpp#29277" in clamp


def test_a_budget_within_its_heap_is_used_as_it_is_and_not_noted() -> None:
    """A spec-abiding budget gives budget - usage and no note."""
    r = raw(heaps=[[8 * GIB, 1]], heap_budget=[6 * GIB], heap_usage=[GIB])
    assert device_memory(r)[1] == 5 * GIB and over_budget(r) == []


def test_only_counted_heaps_are_clamped_and_noted() -> None:
    """A host heap of a discrete GPU with a budget above it is neither counted nor noted."""
    r = raw(
        device_type=2, heaps=[[8 * GIB, 1], [4 * GIB, 0]], heap_budget=[7 * GIB, 9 * GIB], heap_usage=[0, 0]
    )
    assert device_memory(r) == (8 * GIB, 7 * GIB, False) and over_budget(r) == []


def _ctx(tmp_path: Path, files: dict[str, Any]) -> Context:
    return Context(env={}, platform="linux", root=str(write_tree(tmp_path, files)))


def _device(**kw: Any) -> DeviceInfo:
    base: dict[str, Any] = dict(
        id="0",
        library="Vulkan",
        pci_id="0000:03:00.0",
        total_memory=15 * GIB,
        free_memory=14 * GIB,
        notes=("an earlier note",),
    )
    return DeviceInfo(**{**base, **kw})


def test_the_sysfs_total_replaces_the_heap_and_the_note_is_appended(tmp_path: Path) -> None:
    """Intel with xe's figure: total from sysfs, free kept (below it), the note after the others."""
    ctx = _ctx(tmp_path, {f"{PCI}/0000:03:00.0/tile0/physical_vram_size_bytes": f"{16 * GIB}\n"})
    d = with_sysfs_vram(ctx, _device(), 0x8086)
    assert (d.total_memory, d.free_memory) == (16 * GIB, 14 * GIB)
    assert d.notes[0] == "an earlier note" and "16.0 GiB" in d.notes[1] and "15.0 GiB" in d.notes[1]


def test_free_is_never_above_a_smaller_sysfs_total(tmp_path: Path) -> None:
    """A sysfs total below Vulkan's free caps the free figure."""
    ctx = _ctx(tmp_path, {f"{PCI}/0000:03:00.0/tile0/physical_vram_size_bytes": f"{8 * GIB}\n"})
    assert with_sysfs_vram(ctx, _device(), 0x8086).free_memory == 8 * GIB


def test_an_unknown_free_figure_stands_in_as_the_sysfs_total(tmp_path: Path) -> None:
    """Without VK_EXT_memory_budget free memory is unknown and its stand-in is the total
    (docs/vulkan.md); with xe's figure that is the sysfs total, not the heap's size."""
    ctx = _ctx(tmp_path, {f"{PCI}/0000:03:00.0/tile0/physical_vram_size_bytes": f"{16 * GIB}\n"})
    heap_only = _device(free_memory=15 * GIB, free_memory_unknown=True)
    d = with_sysfs_vram(ctx, heap_only, 0x8086)
    assert (d.total_memory, d.free_memory, d.free_memory_unknown) == (16 * GIB, 16 * GIB, True)


@pytest.mark.parametrize(
    ("vendor", "device"),
    [(0x1002, _device()), (0x8086, _device(pci_id="")), (0x8086, _device(software=True))],
    ids=["amd", "no-pci-address", "software"],
)
def test_other_vendors_and_devices_without_an_address_are_left_alone(
    tmp_path: Path, vendor: int, device: DeviceInfo
) -> None:
    """Only an Intel GPU with a PCI address is looked up."""
    ctx = _ctx(tmp_path, {f"{PCI}/0000:03:00.0/tile0/physical_vram_size_bytes": f"{16 * GIB}\n"})
    assert with_sysfs_vram(ctx, device, vendor) == device


def test_the_machine_without_its_xe_file_reports_the_vulkan_heap(tmp_path: Path) -> None:
    """Removing tile0/physical_vram_size_bytes from the recording gives the heap's 15.1 GiB back."""
    target = tmp_path / "rec"
    shutil.copytree(MACHINE, target, symlinks=True)
    (target / "root/sys/bus/pci/devices/0000:03:00.0/tile0/physical_vram_size_bytes").unlink()
    found = Scout(plugins=["vulkan"], entry_points=False, replay=target).discover()
    probe = json.loads((target / "answers/vulkan.json").read_text())["probe"]
    assert found.devices[0].total_memory == probe["devices"][0]["heaps"][0][0]
    assert found.devices[0].notes == ()


def test_sysfs_is_not_read_off_linux(tmp_path: Path) -> None:
    """An Intel GPU seen on darwin or win32 keeps the heap: there is no sysfs to read."""
    tree = write_tree(tmp_path, {f"{PCI}/0000:03:00.0/tile0/physical_vram_size_bytes": f"{16 * GIB}\n"})
    for platform in ("darwin", "win32"):
        ctx = Context(env={}, platform=platform, root=str(tree))
        assert with_sysfs_vram(ctx, _device(), 0x8086) == _device()
