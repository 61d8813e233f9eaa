"""Real failure paths of the loader: no driver, a driver without hardware, no loader at all."""

from __future__ import annotations

import os
import platform
import sys
from pathlib import Path

import pytest

from gpuscout import Scout
from gpuscout.plugins.vulkan.loader import probe
from gpuscout.testing import ScoutFactory

INTEL_ICD = "/usr/share/vulkan/icd.d/intel_icd.x86_64.json"


def report(s: Scout) -> tuple[str, int, str]:
    r = next(r for r in s.reports if r.name == "vulkan")
    return r.status, r.devices, r.note


def base_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("VK_", "GGML_VK_"))}


def test_nonexistent_driver_file_gives_no_device_and_names_the_error(
    gpuscout_scout: ScoutFactory, lavapipe_icd: str
) -> None:
    """VK_DRIVER_FILES naming no file: zero devices and a note naming INCOMPATIBLE_DRIVER."""
    s = gpuscout_scout("vulkan", env={**base_env(), "VK_DRIVER_FILES": "/nonexistent/gpuscout-no-icd.json"})
    assert s.discover(include_software=True).devices == []
    status, devices, note = report(s)
    assert (status, devices) == ("ok", 0)
    assert "VK_ERROR_INCOMPATIBLE_DRIVER" in note


def test_empty_driver_file_gives_no_device_and_names_the_error(
    gpuscout_scout: ScoutFactory, lavapipe_icd: str, tmp_path: Path
) -> None:
    """VK_DRIVER_FILES naming an empty manifest: zero devices and INCOMPATIBLE_DRIVER."""
    empty = tmp_path / "empty_icd.json"
    empty.write_text("")
    s = gpuscout_scout("vulkan", env={**base_env(), "VK_DRIVER_FILES": str(empty)})
    assert s.discover(include_software=True).devices == []
    assert "VK_ERROR_INCOMPATIBLE_DRIVER" in report(s)[2]


def test_driver_without_its_hardware_gives_no_device(gpuscout_scout: ScoutFactory, lavapipe_icd: str) -> None:
    """Only Intel's ICD on a machine without an Intel GPU: INITIALIZATION_FAILED, no device."""
    if platform.machine() != "x86_64" or not os.path.exists(INTEL_ICD):
        pytest.skip("Mesa's Intel ICD ships for x86_64 only")
    if os.path.exists("/dev/dri"):
        pytest.skip("a DRM device exists here; the Intel ICD might find hardware")
    s = gpuscout_scout("vulkan", env={**base_env(), "VK_DRIVER_FILES": INTEL_ICD})
    assert s.discover(include_software=True).devices == []
    assert "VK_ERROR_INITIALIZATION_FAILED" in report(s)[2]


def test_missing_loader_library_is_a_result_not_an_exception() -> None:
    """A loader that cannot be opened is reported as "Vulkan loader not found"."""
    result = probe(library_names=("libvulkan-gpuscout-missing.so.1",))
    assert result.devices == []
    assert result.error.startswith("Vulkan loader not found")


def test_other_platform_is_not_asked(gpuscout_scout: ScoutFactory, lavapipe_icd: str) -> None:
    """A simulated platform other than the running one finds no Vulkan device, with a note."""
    other = "darwin" if sys.platform != "darwin" else "linux"
    s = gpuscout_scout("vulkan", env={**base_env(), "VK_DRIVER_FILES": lavapipe_icd}, platform=other)
    assert s.discover(include_software=True).devices == []
    assert "not the running one" in report(s)[2]
