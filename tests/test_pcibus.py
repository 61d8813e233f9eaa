"""gpuscout._machine.pcibus: GPUs on the PCI bus and their bound drivers, read from recorded sysfs trees.

Trees are written in the kernel's formats (Documentation/ABI/testing/sysfs-bus-pci): ``vendor``
and ``class`` as ``0x....\\n``, ``driver`` as a link to ``../../../bus/pci/drivers/<name>``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path

import pytest

from gpuscout._machine import pcibus
from gpuscout._machine.context import MAX_DIR_ENTRIES, Context
from gpuscout._machine.pcibus import PciGpu, binding_problem, bound_driver, module_loaded, pci_gpus
from gpuscout.testing import FIFO, Content, Symlink, promptly, write_tree

DEVICES = "/sys/bus/pci/devices"
ACME = 0x1234
OTHER = 0x4321


def card(
    address: str, vendor: int = ACME, pci_class: int = 0x030000, driver: str | None = None
) -> dict[str, Content]:
    """The sysfs files of one PCI function (``driver``: the bound driver's name, None: none)."""
    base = f"{DEVICES}/{address}"
    files: dict[str, Content] = {
        f"{base}/vendor": f"0x{vendor:04x}\n",
        f"{base}/class": f"0x{pci_class:06x}\n",
    }
    if driver is not None:
        files[f"{base}/driver"] = Symlink(f"../../../bus/pci/drivers/{driver}")
    return files


def context_at(root: Path, deadline: float | None = None) -> Context:
    return Context(env={}, platform="linux", root=str(root), deadline=deadline)


def gpus_in(tmp_path: Path, files: Mapping[str, Content], vendor: int = ACME) -> list[PciGpu] | None:
    return pci_gpus(context_at(write_tree(tmp_path, files)), vendor)


def test_gpu_without_a_driver_link_is_found_unbound(tmp_path: Path) -> None:
    """A display function of the vendor with no ``driver`` link reads as bound to nothing."""
    assert gpus_in(tmp_path, card("0000:01:00.0", pci_class=0x030200)) == [
        PciGpu("0000:01:00.0", ACME, 0x030200, "")
    ]


def test_bound_driver_is_the_last_component_of_the_driver_link(tmp_path: Path) -> None:
    """The driver is the name after ``drivers/`` in the link's target."""
    found = gpus_in(tmp_path, card("0000:01:00.0", driver="acmefb"))
    assert [g.driver for g in found or []] == ["acmefb"]


def test_driver_comes_from_uevent_when_the_link_was_recorded_as_a_folder(tmp_path: Path) -> None:
    """A tree that recorded ``driver`` as a folder still names the driver, from ``DRIVER=``."""
    root = write_tree(
        tmp_path,
        {
            **card("0000:01:00.0"),
            f"{DEVICES}/0000:01:00.0/driver/bind": "",
            f"{DEVICES}/0000:01:00.0/uevent": "DRIVER=acmefb\nPCI_CLASS=30000\n",
        },
    )
    assert bound_driver(context_at(root), "0000:01:00.0") == "acmefb"


def test_accelerator_class_counts_as_a_gpu(tmp_path: Path) -> None:
    """A processing accelerator (base class 0x12) is looked at like a display controller."""
    found = gpus_in(tmp_path, card("0000:01:00.0", pci_class=0x120000))
    assert [g.class_text for g in found or []] == ["0x120000"]


def test_other_vendors_and_other_classes_are_left_out(tmp_path: Path) -> None:
    """Another vendor's GPU and the vendor's own bridge are not GPUs of this vendor."""
    files = {
        **card("0000:00:00.0", pci_class=0x060000),
        **card("0000:02:00.0", vendor=OTHER),
        **card("0000:03:00.0"),
    }
    assert [g.address for g in gpus_in(tmp_path, files) or []] == ["0000:03:00.0"]


def test_names_that_are_not_pci_addresses_are_skipped(tmp_path: Path) -> None:
    """An entry not named ``dddd:bb:dd.f`` is not read."""
    files = {f"{DEVICES}/junk/vendor": f"0x{ACME:04x}\n", f"{DEVICES}/junk/class": "0x030000\n"}
    assert gpus_in(tmp_path, files) == []


def test_missing_bus_reads_as_none(tmp_path: Path) -> None:
    """Without /sys/bus/pci/devices the answer is None (not looked at), not "no GPU"."""
    assert pci_gpus(context_at(tmp_path), ACME) is None


def test_malformed_class_text_is_skipped_without_raising(tmp_path: Path) -> None:
    """A class file holding something other than hex is not a GPU class."""
    files = {**card("0000:01:00.0"), f"{DEVICES}/0000:01:00.0/class": "display\n"}
    assert gpus_in(tmp_path, files) == []


def test_unbound_gpu_without_its_module_names_the_module_folder(tmp_path: Path) -> None:
    """No driver bound and no /sys/module/<module>: the sentence names both."""
    gpu = PciGpu("0000:01:00.0", ACME, 0x030200)
    assert binding_problem(context_at(tmp_path), gpu, "Acme", ("acmefb",)) == (
        "GPU 0000:01:00.0 (Acme, class 0x030200) has no driver bound and module acmefb is not "
        "loaded (/sys/module/acmefb missing)"
    )


def test_unbound_gpu_with_its_module_loaded_points_at_the_kernel_log(tmp_path: Path) -> None:
    """No driver bound although the module is loaded: the sentence says the driver may have
    refused the card."""
    root = write_tree(tmp_path, {"/sys/module/acmefb/refcnt": "0\n"})
    gpu = PciGpu("0000:01:00.0", ACME, 0x030000)
    assert "although module acmefb is loaded" in binding_problem(context_at(root), gpu, "Acme", ("acmefb",))


def test_gpu_bound_to_vfio_pci_reads_as_passed_through(tmp_path: Path) -> None:
    """vfio-pci is named as a passthrough to a VM."""
    gpu = PciGpu("0000:01:00.0", ACME, 0x030000, "vfio-pci")
    assert binding_problem(context_at(tmp_path), gpu, "Acme", ("acmefb",)) == (
        "GPU 0000:01:00.0 (Acme, class 0x030000) is bound to vfio-pci (passed through to a "
        "VM?), not to acmefb"
    )


def test_gpu_bound_to_another_driver_gets_the_callers_words(tmp_path: Path) -> None:
    """A driver the caller names gets the caller's words for it."""
    gpu = PciGpu("0000:01:00.0", ACME, 0x030000, "oldfb")
    assert binding_problem(
        context_at(tmp_path), gpu, "Acme", ("acmefb",), {"oldfb": "which AcmeML cannot use"}
    ).endswith("is bound to oldfb, which AcmeML cannot use")


def test_gpu_bound_to_a_wanted_module_has_no_problem(tmp_path: Path) -> None:
    """Bound to one of the modules asked for: no sentence."""
    gpu = PciGpu("0000:01:00.0", ACME, 0x030000, "acmexe")
    assert binding_problem(context_at(tmp_path), gpu, "Acme", ("acmefb", "acmexe")) == ""


def test_module_name_with_a_slash_is_never_looked_up(tmp_path: Path) -> None:
    """A module name that would climb out of /sys/module reads as not loaded."""
    root = write_tree(tmp_path, {"/sys/x/file": ""})
    assert module_loaded(context_at(root), "../x") is False


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")
def test_fifo_as_class_file_is_skipped_promptly(tmp_path: Path) -> None:
    """A FIFO where ``class`` should be is not opened: the scan ends at once, without it."""
    files = {**card("0000:01:00.0"), f"{DEVICES}/0000:01:00.0/class": FIFO, **card("0000:02:00.0")}
    found = promptly(lambda: gpus_in(tmp_path, files), seconds=5.0)
    assert [g.address for g in found or []] == ["0000:02:00.0"]


def test_driver_link_loop_reads_as_unbound_without_hanging(tmp_path: Path) -> None:
    """A ``driver`` link to itself is read, never followed: no driver, no hang."""
    files = {**card("0000:01:00.0"), f"{DEVICES}/0000:01:00.0/driver": Symlink("driver")}
    found = promptly(lambda: gpus_in(tmp_path, files), seconds=5.0)
    assert [g.driver for g in found or []] == [""]


def test_a_hundred_thousand_entries_are_refused_quickly(tmp_path: Path) -> None:
    """A bus of 100,000 entries (past the listing limit) gives None in well under seconds."""
    devices = tmp_path / DEVICES.lstrip("/")
    devices.mkdir(parents=True)
    bases = [tmp_path / "a", tmp_path / "b"]  # hard links are the cheapest entries to make;
    for base in bases:  # two files, as ext4 allows 65000 links to one
        base.touch()
    for i in range(100_000):
        name = f"{i >> 16:04x}:{(i >> 8) & 0xFF:02x}:{(i >> 3) & 0x1F:02x}.{i & 7}"
        os.link(bases[i & 1], devices / name)
    assert 100_000 > MAX_DIR_ENTRIES
    context = context_at(tmp_path)
    started = time.monotonic()
    assert promptly(lambda: pci_gpus(context, ACME), seconds=10.0) is None
    assert time.monotonic() - started < 2.0


def test_entries_past_the_cap_are_not_read_and_a_note_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past MAX_PCI_ENTRIES functions the rest are left, with a note naming the count."""
    monkeypatch.setattr(pcibus, "MAX_PCI_ENTRIES", 2)
    files = {**card("0000:01:00.0"), **card("0000:02:00.0"), **card("0000:03:00.0")}
    context = context_at(write_tree(tmp_path, files))
    assert ([g.address for g in pci_gpus(context, ACME) or []], context.notes) == (
        ["0000:01:00.0", "0000:02:00.0"],
        [f"{DEVICES}: 3 PCI functions; only the first 2 looked at for GPUs"],
    )


def test_deadline_passing_during_the_scan_stops_it_without_a_note_per_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once the deadline passes (here right after the listing) no entry is read and no note is
    written for each one left."""
    files = {k: v for i in range(20) for k, v in card(f"0000:{i:02x}:00.0").items()}
    context = context_at(write_tree(tmp_path, files))
    asked: list[int] = []

    def time_left(self: Context) -> float:
        asked.append(1)
        return 1.0 if len(asked) == 1 else 0.0  # the listing's check, then passed

    monkeypatch.setattr(Context, "time_left", time_left)
    assert (pci_gpus(context, ACME), context.notes) == ([], [])
