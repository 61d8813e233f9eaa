"""The ROCm plugin over recorded trees with hostile files: FIFOs, devices, huge and absurd values.

Each test copies a recorded tree (gpuscout_root), spoils one file, and runs the plugin alone.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from gpuscout import DeviceInfo, Discovery
from gpuscout.testing import FIFO, Content, RootFactory, ScoutFactory, Symlink, promptly

TREES = Path(__file__).parent / "trees"
NODE1 = "sys/class/kfd/kfd/topology/nodes/1"
DEVICE = "sys/class/drm/renderD128/device"
#: What str.isdigit() accepts and the kernel never writes: a superscript, Arabic-Indic digits.
SUPERSCRIPT_TWO, SUPERSCRIPT_ONE = "\u00b2", "\u00b9"


def arabic(number: str) -> str:
    """``number`` written in Arabic-Indic digits."""
    return number.translate({ord("0") + i: 0x0660 + i for i in range(10)})


needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")
needs_dev_zero = pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")


@pytest.fixture
def spoiled(gpuscout_root: RootFactory) -> Callable[..., Path]:
    """``spoiled(files, name="rx7900xtx")``: a writable copy of a recorded tree, ``files``
    (paths below the root) written over it."""

    def make(files: Mapping[str, Content] | None = None, name: str = "rx7900xtx") -> Path:
        return gpuscout_root({f"/{k}": v for k, v in (files or {}).items()}, copy=TREES / name)

    return make


@pytest.fixture
def discover_at(gpuscout_scout: ScoutFactory) -> Callable[[Path], Discovery]:
    """One discovery by the ROCm plugin alone over ``root``; fails instead of hanging."""
    return lambda root: promptly(gpuscout_scout("rocm", env={}, root=root).discover)


@pytest.fixture
def rocm_devices(discover_at: Callable[[Path], Discovery]) -> Callable[[Path], list[DeviceInfo]]:
    """The devices of one such discovery."""
    return lambda root: discover_at(root).devices


Spoiled = Callable[..., Path]
Discover = Callable[[Path], Discovery]
Devices = Callable[[Path], list[DeviceInfo]]


def rocm_note(result: Discovery) -> str:
    report = result.report("rocm")
    assert report.status == "ok"
    return report.note


def test_unspoiled_copy_reads_as_the_recorded_card(spoiled: Spoiled, rocm_devices: Devices) -> None:
    """The copied tree itself gives the 7900 XTX, so each spoiled file below is what changes."""
    assert [(d.gfx_target, d.total_memory) for d in rocm_devices(spoiled())] == [("gfx1100", 25753026560)]


@needs_fifo
def test_fifo_as_kfd_node_properties_skips_the_node_promptly(spoiled: Spoiled, discover_at: Discover) -> None:
    """A FIFO in place of a GPU node's properties yields no device and a note, without hanging."""
    result = discover_at(spoiled({f"{NODE1}/properties": FIFO}))
    assert result.devices == []
    assert f"/{NODE1}/properties: not a regular file" in rocm_note(result)


@needs_fifo
def test_fifo_as_memory_bank_properties_keeps_the_card(spoiled: Spoiled, rocm_devices: Devices) -> None:
    """A FIFO in place of a memory bank's properties leaves the card's VRAM counters standing."""
    root = spoiled({f"{NODE1}/mem_banks/0/properties": FIFO})
    assert [d.total_memory for d in rocm_devices(root)] == [25753026560]


@needs_fifo
def test_fifo_as_the_topology_folder_means_no_kfd(spoiled: Spoiled, discover_at: Discover) -> None:
    """A FIFO where the topology's nodes folder should be reads as no KFD topology."""
    root = spoiled()
    shutil.rmtree(root / "sys/class/kfd/kfd/topology/nodes")
    os.mkfifo(root / "sys/class/kfd/kfd/topology/nodes")
    assert "no KFD topology" in rocm_note(discover_at(root))


@needs_fifo
def test_fifo_at_proc_meminfo_leaves_the_igpu_reported(spoiled: Spoiled, rocm_devices: Devices) -> None:
    """An APU whose /proc/meminfo is a FIFO is still reported, its free GTT not capped."""
    root = spoiled({"proc/meminfo": FIFO}, "apu_780m")
    assert [d.integrated for d in rocm_devices(root)] == [True]


@needs_dev_zero
def test_vram_counter_linked_to_dev_zero_is_refused(spoiled: Spoiled, rocm_devices: Devices) -> None:
    """mem_info_vram_total as a link to /dev/zero reads as no counter: memory unknown."""
    [device] = rocm_devices(spoiled({f"{DEVICE}/mem_info_vram_total": Symlink("/dev/zero")}))
    assert (device.total_memory, device.free_memory_unknown) == (0, True)


def test_gigabyte_product_name_is_refused(spoiled: Spoiled, rocm_devices: Devices) -> None:
    """A 1 GiB sparse product_name is not read; the description falls back to the gfx label."""
    root = spoiled()
    with open(root / DEVICE / "product_name", "wb") as f:
        f.truncate(1 << 30)
    assert [d.description for d in rocm_devices(root)] == ["AMD GPU gfx1100 [1002:744c]"]


def test_binary_garbage_properties_skip_the_node(spoiled: Spoiled, rocm_devices: Devices) -> None:
    """Random bytes as a node's properties make it no GPU node rather than an error."""
    root = spoiled({f"{NODE1}/properties": bytes(range(256)) * 16})
    assert rocm_devices(root) == []


@pytest.mark.parametrize(
    "value", ["9" * 5000, str(1 << 64), "-1411842048", arabic("1411842048"), SUPERSCRIPT_TWO]
)
def test_absurd_vram_used_is_unknown(spoiled: Spoiled, rocm_devices: Devices, value: str) -> None:
    """A vram_used that is no 64-bit decimal leaves free memory unknown, never an error."""
    [device] = rocm_devices(spoiled({f"{DEVICE}/mem_info_vram_used": f"{value}\n"}))
    assert (device.total_memory, device.free_memory_unknown) == (25753026560, True)


@pytest.mark.parametrize("value", ["9" * 5000, "-110000", arabic("110000"), f"1{SUPERSCRIPT_ONE}0000"])
def test_absurd_gfx_target_version_is_dropped_from_the_properties(
    spoiled: Spoiled, rocm_devices: Devices, value: str
) -> None:
    """A gfx_target_version that is no 64-bit decimal reads as unknown: no gfx target."""
    root = spoiled()
    props = root / NODE1 / "properties"
    props.write_text(props.read_text().replace("gfx_target_version 110000", f"gfx_target_version {value}"))
    assert [d.gfx_target for d in rocm_devices(root)] == [""]


def test_unicode_digit_node_folder_is_ignored(spoiled: Spoiled, rocm_devices: Devices) -> None:
    """A topology folder named ``²`` (which int() refuses) is skipped, not a crash."""
    root = spoiled()
    shutil.copytree(root / NODE1, root / f"sys/class/kfd/kfd/topology/nodes/{SUPERSCRIPT_TWO}")
    assert len(rocm_devices(root)) == 1


def test_garbage_pci_slot_in_uevent_falls_back_to_kfd(spoiled: Spoiled, rocm_devices: Devices) -> None:
    """A PCI_SLOT_NAME that is no PCI slot gives way to the slot KFD's location_id names."""
    root = spoiled({f"{DEVICE}/uevent": "PCI_SLOT_NAME=../../etc\nNO_EQUALS_SIGN\n"})
    assert [d.pci_id for d in rocm_devices(root)] == ["0000:0c:00.0"]


@pytest.mark.parametrize("text", [arabic("6.10.5"), f"{1 << 64}.10.5", "-6.10", "6", "\x00\xff"])
def test_absurd_driver_version_reads_as_in_tree(spoiled: Spoiled, rocm_devices: Devices, text: str) -> None:
    """A module version that is not two 64-bit decimals reads as (0, 0)."""
    root = spoiled({"sys/module/amdgpu/version": text})
    assert [(d.driver_major, d.driver_minor) for d in rocm_devices(root)] == [(0, 0)]


def test_huge_memory_bank_sizes_are_capped_at_64_bits(spoiled: Spoiled, rocm_devices: Devices) -> None:
    """Banks whose sizes add up past 2**64 count as 2**64 - 1, not a larger number."""
    root = spoiled(name="mi300x_cpx")
    node = root / NODE1
    for bank in (node / "mem_banks").iterdir():
        (bank / "properties").write_text(f"heap_type 1\nsize_in_bytes {(1 << 64) - 1}\n")
    shutil.copytree(node / "mem_banks" / "0", node / "mem_banks" / "99")
    found = rocm_devices(root)
    assert found and all(d.total_memory < 1 << 64 for d in found)
