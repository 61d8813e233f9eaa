"""Lavapipe, Mesa's software Vulkan device, pinned for the tests that use the real loader."""

from __future__ import annotations

import ctypes
import glob
import os
import platform

import pytest

ICD_FOLDER = "/usr/share/vulkan/icd.d"


def require(what: str) -> None:
    """Skip without ``what``, but fail under CI, where .ci/run must have installed it."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{what} is missing, but CI must provide it "
                    "(.ci/run installs mesa-vulkan-drivers libvulkan1)")
    pytest.skip(f"{what} is missing")


@pytest.fixture(scope="session")
def lavapipe_icd() -> str:
    """The lavapipe ICD manifest of this machine's architecture; the loader must load too."""
    found = sorted(glob.glob(os.path.join(ICD_FOLDER, "lvp_icd.*.json")))
    mine = [p for p in found if platform.machine() in os.path.basename(p)]
    if not (mine or found):
        require(f"lavapipe ({ICD_FOLDER}/lvp_icd.*.json)")
    try:
        ctypes.CDLL("libvulkan.so.1")
    except OSError:
        require("the Vulkan loader (libvulkan.so.1)")
    return (mine or found)[0]


@pytest.fixture
def lavapipe_env(lavapipe_icd: str) -> dict[str, str]:
    """This process's environment with the loader pinned to lavapipe alone."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("GGML_VK_VISIBLE_DEVICES", "VK_ICD_FILENAMES", "VK_ADD_DRIVER_FILES")}
    env["VK_DRIVER_FILES"] = lavapipe_icd
    return env
