"""``gpuscout list`` says when a device's memory is the system's: the integrated column and --explain."""

from __future__ import annotations

from gpuscout import DeviceInfo, Discovery, SystemInfo
from gpuscout.cli._render.explain import explain, explain_lines
from gpuscout.cli._render.table import render_discovery
from gpuscout.sizes import GIB

GB10 = DeviceInfo(
    id="GPU-3f8a2d6c-9e1b-4c7a-8d5e-0b4f7a2c9e61",
    library="CUDA",
    description="NVIDIA GB10",
    pci_id="000f:01:00.0",
    integrated=True,
    shared_memory=True,
    total_memory=119 * GIB,
    free_memory=113 * GIB,
)
CARVE_OUT_APU = DeviceInfo(
    id="0",
    library="ROCm",
    description="AMD Radeon 8060S Graphics",
    integrated=True,
    total_memory=96 * GIB,
    free_memory=95 * GIB,
)
FOUND = Discovery(
    devices=[GB10, CARVE_OUT_APU], dropped=[], system=SystemInfo(119 * GIB, 113 * GIB), plugins=[]
)


def test_the_terminal_table_marks_a_shared_device_in_the_integrated_column() -> None:
    """A shared device shows ``shared``; an integrated one that is not shared shows ``yes``."""
    lines = render_discovery(FOUND, width=200).splitlines()
    gb10 = next(line for line in lines if "GB10" in line)
    apu = next(line for line in lines if "8060S" in line)
    assert gb10.rstrip().endswith("shared") and apu.rstrip().endswith("yes")


def test_the_plain_form_says_shared_in_the_integrated_field() -> None:
    """In a pipe the integrated field (the tenth) is ``shared``, ``yes`` or ``no``."""
    rows = [line.split("\t") for line in render_discovery(FOUND, terminal=False).splitlines()[1:3]]
    assert [row[9] for row in rows] == ["shared", "yes"]


def test_a_narrow_terminal_s_device_blocks_say_shared() -> None:
    """Too narrow for a table, each device's block still says ``integrated: shared``."""
    out = render_discovery(FOUND, width=30)
    assert "integrated: shared" in out.replace("\n", " ").replace("  ", " ")


def test_explain_names_shared_memory_in_json_and_text() -> None:
    """--explain: ``shared_memory`` per ranked device, and the text kind says the memory is shared."""
    data = explain(FOUND)
    assert [e["shared_memory"] for e in data["ranking"]] == [True, False]
    first, second = explain_lines(data)[1:3]
    assert "integrated, memory shared with the system" in first
    assert "shared" not in second
