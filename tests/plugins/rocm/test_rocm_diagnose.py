"""Why the ROCm plugin found no GPU: the sentences its note gets beside discover's own.

Trees are recorded sysfs in the kernel's formats (``vendor`` ``0x1002\\n``, ``class``
``0x030000\\n``, ``driver`` a link to ``../../../bus/pci/drivers/<name>``); device nodes are
plain files, whose text ``denied`` stands for a node this process may not open.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gpuscout import Discovery
from gpuscout.plugins.rocm import diagnosis as diagnose
from gpuscout.testing import FIFO, Content, RootFactory, ScoutFactory, Symlink, promptly

TREES = Path(__file__).parent / "trees"
DEVICES = "/sys/bus/pci/devices"
ADDRESS = "0000:03:00.0"
WHO = f"GPU {ADDRESS} (AMD, class 0x030000)"


def amd_card(driver: str | None = None) -> dict[str, Content]:
    """One AMD GPU at ADDRESS, bound to ``driver`` (None: to nothing)."""
    files: dict[str, Content] = {
        f"{DEVICES}/{ADDRESS}/vendor": "0x1002\n",
        f"{DEVICES}/{ADDRESS}/class": "0x030000\n",
        f"{DEVICES}/{ADDRESS}/device": "0x744c\n",
    }
    if driver is not None:
        files[f"{DEVICES}/{ADDRESS}/driver"] = Symlink(f"../../../bus/pci/drivers/{driver}")
    return files


@pytest.fixture
def rocm_note(gpuscout_scout: ScoutFactory) -> Callable[[Path], str]:
    """The ROCm plugin's note after one discovery over ``root`` that finds no GPU."""

    def note(root: Path) -> str:
        found: Discovery = promptly(gpuscout_scout("rocm", env={}, root=root).discover)
        report = found.report("rocm")
        assert (found.devices, report.status) == ([], "ok")
        return report.note

    return note


def test_unbound_amd_card_without_amdgpu_is_named(
    gpuscout_root: RootFactory, rocm_note: Callable[[Path], str]
) -> None:
    """No KFD topology and a card no driver is bound to: the card and the missing module."""
    note = rocm_note(gpuscout_root(amd_card()))
    assert (f"{WHO} has no driver bound and module amdgpu is not loaded (/sys/module/amdgpu missing)") in note


def test_unknown_topology_note_stays_first(
    gpuscout_root: RootFactory, rocm_note: Callable[[Path], str]
) -> None:
    """discover's own "no KFD topology" comes before the PCI reasons."""
    assert rocm_note(gpuscout_root(amd_card())).startswith("no AMD GPU: no KFD topology")


def test_amd_card_bound_to_vfio_pci_is_said_to_be_passed_through(
    gpuscout_root: RootFactory, rocm_note: Callable[[Path], str]
) -> None:
    """A card held by vfio-pci is named as passed through to a VM."""
    note = rocm_note(gpuscout_root(amd_card("vfio-pci")))
    assert f"{WHO} is bound to vfio-pci (passed through to a VM?), not to amdgpu" in note


def test_amd_card_bound_to_radeon_is_said_to_be_unusable_by_rocm(
    gpuscout_root: RootFactory, rocm_note: Callable[[Path], str]
) -> None:
    """A card held by the old radeon driver is named with the reason."""
    note = rocm_note(gpuscout_root(amd_card("radeon")))
    assert f"{WHO} is bound to radeon, which ROCm cannot use (it needs amdgpu)" in note


def test_card_bound_to_amdgpu_without_a_topology_points_at_the_kernel(
    gpuscout_root: RootFactory, rocm_note: Callable[[Path], str]
) -> None:
    """amdgpu bound but no KFD at all: a kernel without HSA support is suggested."""
    note = rocm_note(gpuscout_root(amd_card("amdgpu")))
    assert (
        f"{WHO} is bound to amdgpu, yet there is no KFD topology (a kernel built without CONFIG_HSA_AMD?)"
    ) in note


def test_card_bound_to_amdgpu_missing_from_the_topology_is_said_unsupported(
    gpuscout_root: RootFactory, rocm_note: Callable[[Path], str]
) -> None:
    """A KFD topology with only a CPU node and an amdgpu card: KFD does not list the card."""
    root = gpuscout_root(amd_card("amdgpu"), copy=TREES / "cpu_only_kfd")
    assert (
        f"{WHO} is bound to amdgpu but KFD lists no GPU node for it (a GPU that KFD does not support?)"
    ) in rocm_note(root)


def test_bus_without_an_amd_gpu_says_so(gpuscout_root: RootFactory, rocm_note: Callable[[Path], str]) -> None:
    """A bus with only an NVIDIA card says there is no AMD GPU on it."""
    root = gpuscout_root(
        {f"{DEVICES}/0000:01:00.0/vendor": "0x10de\n", f"{DEVICES}/0000:01:00.0/class": "0x030000\n"}
    )
    assert "no AMD GPU on the PCI bus (/sys/bus/pci/devices lists none)" in rocm_note(root)


def test_denied_dev_kfd_is_named_with_the_missing_access(
    gpuscout_root: RootFactory, rocm_note: Callable[[Path], str]
) -> None:
    """/dev/kfd present but not permitted: the sentence names it and the missing access."""
    root = gpuscout_root({"/dev/kfd": "denied"}, copy=TREES / "rx7900xtx")
    assert (
        "/dev/kfd is present but this process lacks access to it (not in the render or "
        "video group, or a container started without the device?)"
    ) in rocm_note(root)


def test_missing_dev_kfd_suggests_a_container_without_the_device(
    gpuscout_root: RootFactory, rocm_note: Callable[[Path], str]
) -> None:
    """A topology but no /dev/kfd: the module or a container without the device is suggested."""
    root = gpuscout_root(copy=TREES / "rx7900xtx")
    (root / "dev" / "kfd").unlink()
    assert (
        "/dev/kfd is missing (amdgpu not loaded, or a container started without --device /dev/kfd?)"
    ) in rocm_note(root)


def test_missing_render_node_is_named(gpuscout_root: RootFactory, rocm_note: Callable[[Path], str]) -> None:
    """The card's render node gone: no render node is present."""
    root = gpuscout_root(copy=TREES / "rx7900xtx")
    (root / "dev" / "dri" / "renderD128").unlink()
    assert (
        "no /dev/dri/renderD* node is present (a container started without --device /dev/dri?)"
    ) in rocm_note(root)


def test_denied_render_node_is_named_with_the_missing_access(
    gpuscout_root: RootFactory, rocm_note: Callable[[Path], str]
) -> None:
    """The card's render node present but not permitted: the sentence names it."""
    root = gpuscout_root({"/dev/dri/renderD128": "denied"}, copy=TREES / "rx7900xtx")
    assert "/dev/dri/renderD128 is present but this process lacks access to it" in rocm_note(root)


def test_healthy_tree_does_not_look_for_reasons(
    gpuscout_scout: ScoutFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A discovery that finds the card scans neither the PCI bus nor the device nodes."""

    def boom(*args: Any) -> Any:
        raise AssertionError("a diagnosis ran on a discovery that found devices")

    for name in ("pci_gpus", "kfd_problem", "render_problem"):
        monkeypatch.setattr(diagnose, name, boom)
    found = gpuscout_scout("rocm", env={}, root=TREES / "rx7900xtx").discover()
    assert [d.gfx_target for d in found.devices] == ["gfx1100"]


def test_hostile_pci_tree_gives_reasons_without_hanging_or_raising(
    gpuscout_root: RootFactory, rocm_note: Callable[[Path], str]
) -> None:
    """A FIFO class file and a looping driver link end in notes, promptly."""
    other = f"{DEVICES}/0000:04:00.0"
    root = gpuscout_root(
        {
            **amd_card(),
            f"{DEVICES}/{ADDRESS}/class": FIFO,
            f"{other}/vendor": "0x1002\n",
            f"{other}/class": "0x038000\n",
            f"{other}/driver": Symlink("driver"),
        }
    )
    note = rocm_note(root)
    assert (
        f"{DEVICES}/{ADDRESS}/class: not a regular file" in note,
        "GPU 0000:04:00.0 (AMD, class 0x038000) has no driver bound" in note,
    ) == (True, True)
