"""The ROCm plugin over recorded trees with hostile files: FIFOs, devices, huge and absurd values.

Each test copies a recorded tree into tmp_path, spoils one file, and runs the plugin alone.
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

from gpuscout import DeviceInfo, Discovery, Scout

TREES = Path(__file__).parent / "trees"
NODE1 = "sys/class/kfd/kfd/topology/nodes/1"
DEVICE = "sys/class/drm/renderD128/device"
T = TypeVar("T")
#: What str.isdigit() accepts and the kernel never writes: a superscript, Arabic-Indic digits.
SUPERSCRIPT_TWO, SUPERSCRIPT_ONE = "\u00b2", "\u00b9"


def arabic(number: str) -> str:
    """``number`` written in Arabic-Indic digits."""
    return number.translate({ord("0") + i: 0x0660 + i for i in range(10)})

needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")
needs_dev_zero = pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")


def copy_tree(tmp_path: Path, name: str = "rx7900xtx") -> Path:
    """A writable copy of the recorded tree ``name``."""
    return Path(shutil.copytree(TREES / name, tmp_path / name))


def replace_with_fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def promptly(call: Callable[[], T], seconds: float = 10.0) -> T:
    """``call()`` run in a thread; fails the test instead of hanging when it does not return."""
    box: dict[str, T] = {}
    thread = threading.Thread(target=lambda: box.setdefault("result", call()), daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still running after {seconds} s"
    return box["result"]


def discover(root: Path) -> Discovery:
    scout = Scout(plugins=["rocm"], entry_points=False, env={}, platform="linux", root=str(root))
    return promptly(scout.discover)


def rocm_devices(root: Path) -> list[DeviceInfo]:
    return discover(root).devices


def rocm_note(result: Discovery) -> str:
    report = next(r for r in result.plugins if r.name == "rocm")
    assert report.status == "ok"
    return report.note


def test_unspoiled_copy_reads_as_the_recorded_card(tmp_path: Path) -> None:
    """The copied tree itself gives the 7900 XTX, so each spoiled file below is what changes."""
    assert [(d.gfx_target, d.total_memory) for d in rocm_devices(copy_tree(tmp_path))] == [
        ("gfx1100", 25753026560)]


@needs_fifo
def test_fifo_as_kfd_node_properties_skips_the_node_promptly(tmp_path: Path) -> None:
    """A FIFO in place of a GPU node's properties yields no device and a note, without hanging."""
    root = copy_tree(tmp_path)
    replace_with_fifo(root / NODE1 / "properties")
    result = discover(root)
    assert result.devices == []
    assert f"/{NODE1}/properties: not a regular file" in rocm_note(result)


@needs_fifo
def test_fifo_as_memory_bank_properties_keeps_the_card(tmp_path: Path) -> None:
    """A FIFO in place of a memory bank's properties leaves the card's VRAM counters standing."""
    root = copy_tree(tmp_path)
    replace_with_fifo(root / NODE1 / "mem_banks/0/properties")
    assert [d.total_memory for d in rocm_devices(root)] == [25753026560]


@needs_fifo
def test_fifo_as_the_topology_folder_means_no_kfd(tmp_path: Path) -> None:
    """A FIFO where the topology's nodes folder should be reads as no KFD topology."""
    root = copy_tree(tmp_path)
    shutil.rmtree(root / "sys/class/kfd/kfd/topology/nodes")
    os.mkfifo(root / "sys/class/kfd/kfd/topology/nodes")
    assert "no KFD topology" in rocm_note(discover(root))


@needs_fifo
def test_fifo_at_proc_meminfo_leaves_the_igpu_reported(tmp_path: Path) -> None:
    """An APU whose /proc/meminfo is a FIFO is still reported, its free GTT not capped."""
    root = copy_tree(tmp_path, "apu_780m")
    replace_with_fifo(root / "proc/meminfo")
    assert [d.integrated for d in rocm_devices(root)] == [True]


@needs_dev_zero
def test_vram_counter_linked_to_dev_zero_is_refused(tmp_path: Path) -> None:
    """mem_info_vram_total as a link to /dev/zero reads as no counter: memory unknown."""
    root = copy_tree(tmp_path)
    (root / DEVICE / "mem_info_vram_total").unlink()
    (root / DEVICE / "mem_info_vram_total").symlink_to("/dev/zero")
    [device] = rocm_devices(root)
    assert (device.total_memory, device.free_memory_unknown) == (0, True)


def test_gigabyte_product_name_is_refused(tmp_path: Path) -> None:
    """A 1 GiB sparse product_name is not read; the description falls back to the gfx label."""
    root = copy_tree(tmp_path)
    with open(root / DEVICE / "product_name", "wb") as f:
        f.truncate(1 << 30)
    assert [d.description for d in rocm_devices(root)] == ["AMD GPU gfx1100 [1002:744c]"]


def test_binary_garbage_properties_skip_the_node(tmp_path: Path) -> None:
    """Random bytes as a node's properties make it no GPU node rather than an error."""
    root = copy_tree(tmp_path)
    (root / NODE1 / "properties").write_bytes(bytes(range(256)) * 16)
    assert rocm_devices(root) == []


@pytest.mark.parametrize("value", ["9" * 5000, str(1 << 64), "-1411842048",
                                   arabic("1411842048"), SUPERSCRIPT_TWO])
def test_absurd_vram_used_is_unknown(tmp_path: Path, value: str) -> None:
    """A vram_used that is no 64-bit decimal leaves free memory unknown, never an error."""
    root = copy_tree(tmp_path)
    (root / DEVICE / "mem_info_vram_used").write_text(f"{value}\n", encoding="utf-8")
    [device] = rocm_devices(root)
    assert (device.total_memory, device.free_memory_unknown) == (25753026560, True)


@pytest.mark.parametrize("value", ["9" * 5000, "-110000", arabic("110000"),
                                   f"1{SUPERSCRIPT_ONE}0000"])
def test_absurd_gfx_target_version_is_dropped_from_the_properties(tmp_path: Path, value: str) -> None:
    """A gfx_target_version that is no 64-bit decimal reads as unknown: no gfx target."""
    root = copy_tree(tmp_path)
    props = root / NODE1 / "properties"
    props.write_text(props.read_text().replace("gfx_target_version 110000",
                                               f"gfx_target_version {value}"))
    assert [d.gfx_target for d in rocm_devices(root)] == [""]


def test_unicode_digit_node_folder_is_ignored(tmp_path: Path) -> None:
    """A topology folder named ``²`` (which int() refuses) is skipped, not a crash."""
    root = copy_tree(tmp_path)
    shutil.copytree(root / NODE1, root / f"sys/class/kfd/kfd/topology/nodes/{SUPERSCRIPT_TWO}")
    assert len(rocm_devices(root)) == 1


def test_garbage_pci_slot_in_uevent_falls_back_to_kfd(tmp_path: Path) -> None:
    """A PCI_SLOT_NAME that is no PCI slot gives way to the slot KFD's location_id names."""
    root = copy_tree(tmp_path)
    (root / DEVICE / "uevent").write_text("PCI_SLOT_NAME=../../etc\nNO_EQUALS_SIGN\n")
    assert [d.pci_id for d in rocm_devices(root)] == ["0000:0c:00.0"]


@pytest.mark.parametrize("text", [arabic("6.10.5"), f"{1 << 64}.10.5", "-6.10", "6", "\x00\xff"])
def test_absurd_driver_version_reads_as_in_tree(tmp_path: Path, text: str) -> None:
    """A module version that is not two 64-bit decimals reads as (0, 0)."""
    root = copy_tree(tmp_path)
    (root / "sys/module/amdgpu/version").write_text(text, encoding="utf-8")
    assert [(d.driver_major, d.driver_minor) for d in rocm_devices(root)] == [(0, 0)]


def test_huge_memory_bank_sizes_are_capped_at_64_bits(tmp_path: Path) -> None:
    """Banks whose sizes add up past 2**64 count as 2**64 - 1, not a larger number."""
    root = copy_tree(tmp_path, "mi300x_cpx")
    node = root / NODE1
    for bank in (node / "mem_banks").iterdir():
        (bank / "properties").write_text(f"heap_type 1\nsize_in_bytes {(1 << 64) - 1}\n")
    shutil.copytree(node / "mem_banks" / "0", node / "mem_banks" / "99")
    found = rocm_devices(root)
    assert found and all(d.total_memory < 1 << 64 for d in found)
