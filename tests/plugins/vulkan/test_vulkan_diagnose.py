"""Why the Vulkan loader lists no device, for Intel GPUs: sentences from recorded PCI trees.

Trees hold sysfs PCI functions in the kernel's formats (``vendor`` ``0x8086\\n``, ``class``
``0x030000\\n``, ``driver`` a link to ``../../../bus/pci/drivers/<name>``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from gpuscout.plugin import Context
from gpuscout.plugins.vulkan.diagnosis import intel_problems
from gpuscout.testing import Content, RootFactory, ScoutFactory, Symlink, promptly

DEVICES = "/sys/bus/pci/devices"
ADDRESS = "0000:00:02.0"
WHO = f"GPU {ADDRESS} (Intel, class 0x030000)"


def intel_card(driver: str | None = None) -> dict[str, Content]:
    """Intel's integrated GPU at ADDRESS (and its host bridge), bound to ``driver``."""
    files: dict[str, Content] = {
        f"{DEVICES}/0000:00:00.0/vendor": "0x8086\n",
        f"{DEVICES}/0000:00:00.0/class": "0x060000\n",
        f"{DEVICES}/{ADDRESS}/vendor": "0x8086\n",
        f"{DEVICES}/{ADDRESS}/class": "0x030000\n",
    }
    if driver is not None:
        files[f"{DEVICES}/{ADDRESS}/driver"] = Symlink(f"../../../bus/pci/drivers/{driver}")
    return files


def problems_at(root: Path) -> list[str]:
    return intel_problems(Context(env={}, platform="linux", root=str(root)))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the loader runs on Linux here")
def test_loader_error_is_followed_by_the_unbound_intel_gpu(
    gpuscout_scout: ScoutFactory, gpuscout_root: RootFactory
) -> None:
    """The loader finding no driver (the test manifest) notes its error, then the Intel GPU
    with no driver bound."""
    found = promptly(gpuscout_scout("vulkan", root=gpuscout_root(intel_card())).discover)
    note = next(r.note for r in found.plugins if r.name == "vulkan")
    assert (note.startswith("Vulkan: "), f"{WHO} has no driver bound" in note) == (True, True)


def test_unbound_intel_gpu_names_both_kernel_modules(gpuscout_root: RootFactory) -> None:
    """No driver bound and neither i915 nor xe loaded: both module folders are named."""
    assert problems_at(gpuscout_root(intel_card())) == [
        f"{WHO} has no driver bound and module i915 or xe is not loaded (/sys/module/i915, "
        "/sys/module/xe missing)"
    ]


def test_intel_gpu_bound_to_vfio_pci_is_said_to_be_passed_through(gpuscout_root: RootFactory) -> None:
    """A GPU held by vfio-pci is named as passed through to a VM."""
    assert problems_at(gpuscout_root(intel_card("vfio-pci"))) == [
        f"{WHO} is bound to vfio-pci (passed through to a VM?), not to i915 or xe"
    ]


def test_intel_gpu_bound_to_xe_points_at_the_vulkan_driver(gpuscout_root: RootFactory) -> None:
    """With xe bound the kernel side is fine: Mesa's Vulkan driver is what to look for."""
    assert problems_at(gpuscout_root(intel_card("xe"))) == [
        f"{WHO} is bound to xe, so the kernel driver is loaded (is Mesa's Intel Vulkan driver installed?)"
    ]


def test_bus_without_an_intel_gpu_says_nothing(gpuscout_root: RootFactory) -> None:
    """Only an Intel bridge on the bus: no sentence (the loader's error says the rest)."""
    root = gpuscout_root({k: v for k, v in intel_card().items() if ADDRESS not in k})
    assert problems_at(root) == []


def test_other_platforms_get_no_sysfs_reasons(gpuscout_root: RootFactory) -> None:
    """Off Linux, sysfs is not looked at."""
    root = gpuscout_root(intel_card())
    assert intel_problems(Context(env={}, platform="win32", root=str(root))) == []
