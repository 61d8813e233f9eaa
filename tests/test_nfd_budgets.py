"""NFD labels under budgets: ``memory.usable-total-mib`` and ``memory.usable-smallest-mib``
(node-wide and per library) when a cap or reserve applies; the ``total-mib`` labels stay the
hardware's (docs/nfd.md, docs/budgets.md)."""

from __future__ import annotations

from pathlib import Path

from gpuscout._records.device import DeviceInfo
from gpuscout.cli import main
from gpuscout.cluster import nfd
from gpuscout.sizes import GIB, MIB

H200X8 = str(Path(__file__).parent / "machines" / "h200x8")


def card(n: int, library: str = "CUDA", usable: int | None = None) -> DeviceInfo:
    return DeviceInfo(
        id=f"GPU-{n}",
        library=library,
        name="Card",
        pci_id=f"0000:{n + 1:02x}:00.0",
        total_memory=80 * GIB,
        free_memory=80 * GIB,
        usable_memory=usable,
    )


def labels_of(devices: list[DeviceInfo]) -> dict[str, str]:
    return nfd.device_labels(devices, lambda d: True, ["cuda", "rocm", "metal", "vulkan"])


def test_without_a_budget_there_is_no_usable_label() -> None:
    """Plain hardware: only the total labels, as before budgets existed."""
    assert not any("usable" in key for key in labels_of([card(0), card(1)]))


def test_a_budget_adds_usable_figures_beside_the_totals() -> None:
    """One card capped at 20 GiB of two 80 GiB cards: usable 100 GiB in all, 20 GiB smallest;
    the totals stay 160 and 80 GiB."""
    got = labels_of([card(0, usable=20 * GIB), card(1)])
    assert got["memory.total-mib"] == str(160 * GIB // MIB)
    assert got["memory.smallest-mib"] == str(80 * GIB // MIB)
    assert got["memory.usable-total-mib"] == str(100 * GIB // MIB)
    assert got["memory.usable-smallest-mib"] == str(20 * GIB // MIB)
    assert got["cuda.memory.usable-total-mib"] == got["memory.usable-total-mib"]
    nfd.check_labels(got)


def test_each_library_gets_usable_labels_only_when_its_own_devices_have_a_budget() -> None:
    """A reserve on the ROCm card: rocm.* gains usable labels, cuda.* does not."""
    got = labels_of([card(0), card(1, "ROCm", usable=70 * GIB)])
    assert got["rocm.memory.usable-total-mib"] == str(70 * GIB // MIB)
    assert "cuda.memory.usable-total-mib" not in got
    assert got["memory.usable-total-mib"] == str(150 * GIB // MIB)


def test_a_reserve_that_takes_everything_is_zero_usable() -> None:
    """usable_memory 0 is a budget too: the label says 0, it is not left out."""
    got = labels_of([card(0, usable=0)])
    assert got["memory.usable-smallest-mib"] == got["memory.usable-total-mib"] == "0"


def test_nfd_with_cap_writes_the_usable_labels(tmp_path: Path) -> None:
    """`gpuscout nfd --cap cuda:0=20GiB` on the eight-H200 recording: usable smallest 20 GiB."""
    assert main(["--replay", H200X8, "nfd", "--cap", "cuda:0=20GiB", "--dir", str(tmp_path)]) == 0
    lines = (tmp_path / "gpuscout").read_text().splitlines()
    assert "gpuscout.io/memory.usable-smallest-mib=20480" in lines
    assert "gpuscout.io/cuda.memory.usable-smallest-mib=20480" in lines
