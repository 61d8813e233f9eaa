"""Shared fixtures: Scouts over injected devices (through the gpuscout.testing kit), installed
distributions with entry points, lavapipe."""

from __future__ import annotations

import ctypes
import glob
import os
import platform
import textwrap
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import structlog

from gpuscout import DeviceInfo, Scout
from gpuscout import log as gpuscout_log
from gpuscout.testing import ScoutFactory, injected, plugin_test_env

GIB = 1024**3
MIB = 1024**2

# Keeps the real Vulkan loader from finding lavapipe where a test injects its own devices.
NO_VULKAN_ENV = plugin_test_env("vulkan")


@pytest.fixture(autouse=True)
def _fresh_structlog() -> Any:
    """Each test starts and ends with structlog unconfigured and no CLI logging wish."""
    structlog.reset_defaults()
    yield
    structlog.reset_defaults()
    gpuscout_log.reset_for_tests()


@pytest.fixture
def scout_with(gpuscout_scout: ScoutFactory) -> Callable[..., Scout]:
    """Build a Scout holding the built-in rule plugins plus injected devices."""

    def make(devices: Sequence[DeviceInfo] = (), *, builtins: Sequence[str] = (
            "cuda", "rocm", "metal", "vulkan"), env: dict[str, str] | None = None,
            platform: str = "linux", **kwargs: Any) -> Scout:
        return gpuscout_scout(*builtins, injected(devices), env={**NO_VULKAN_ENV, **(env or {})},
                              platform=platform, **kwargs)

    return make


def write_site(root: Path, distribution: str, version: str, modules: dict[str, str],
               entry_points: dict[str, str]) -> Path:
    """A folder that is a real install of ``distribution``: dist-info with gpuscout entry points
    (name -> module) and the modules' sources. Put it on PYTHONPATH or sys.path."""
    dist = root / f"{distribution.replace('-', '_')}-{version}.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {distribution}\nVersion: {version}\n")
    (dist / "entry_points.txt").write_text(
        "[gpuscout]\n" + "".join(f"{n} = {m}\n" for n, m in entry_points.items()))
    for module, source in modules.items():
        (root / f"{module}.py").write_text(textwrap.dedent(source))
    return root


@pytest.fixture(scope="session")
def site_factory(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Path]:
    """Build installed-distribution folders with ``write_site``."""
    def make(distribution: str, version: str, modules: dict[str, str],
             entry_points: dict[str, str]) -> Path:
        return write_site(tmp_path_factory.mktemp("site"), distribution, version, modules,
                          entry_points)
    return make


@pytest.fixture
def machine(scout_with: Callable[..., Scout]) -> Callable[..., Callable[[Any], Scout]]:
    """``machine(devices, env)``: a Scout factory for ``gpuscout.cli.main(argv, scout_factory=...)``
    whose Scout reports ``devices`` under ``env`` (the command line's scout options are ignored)."""

    def factory(devices: Sequence[DeviceInfo],
                env: dict[str, str] | None = None) -> Callable[[Any], Scout]:
        return lambda args: scout_with(devices, env=env)

    return factory


#: Where Debian installs Vulkan driver manifests (lavapipe: mesa-vulkan-drivers).
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


#: The variable whose fresh value marks every process a test starts (see ``env``).
MARKER = "GPUSCOUT_TEST_CHILD"


@pytest.fixture
def env() -> Iterator[dict[str, str]]:
    """This process's environment plus a fresh ``GPUSCOUT_TEST_CHILD`` value for children: the
    test fails when any process carrying it is still running a few seconds after it ends."""
    from gpuscout.testing import eventually, processes_with_env

    marker = uuid.uuid4().hex
    yield {**os.environ, MARKER: marker}
    assert eventually(lambda: not processes_with_env(MARKER, marker)), \
        f"processes left running: {processes_with_env(MARKER, marker)}"
