"""Shared fixtures: in-process plugins that report injected devices."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Sequence
from typing import Any

import pytest
import structlog

from gpuscout import DeviceInfo, Scout, hookimpl
from gpuscout import log as gpuscout_log

GIB = 1024**3
MIB = 1024**2

# Keeps the real Vulkan loader from finding lavapipe where a test injects its own devices.
NO_VULKAN_ENV = {"VK_DRIVER_FILES": "/nonexistent/gpuscout-test-icd.json"}


class InjectedDevices:
    """An in-process backend that reports the devices a test hands it."""

    def __init__(self, devices: Sequence[DeviceInfo]) -> None:
        self.devices = list(devices)

    @hookimpl
    def gpuscout_enumerate(self, context: Any) -> list[DeviceInfo]:
        return list(self.devices)


@pytest.fixture(autouse=True)
def _fresh_structlog() -> Any:
    """Each test starts and ends with structlog unconfigured (the CLI configures it in-process)."""
    structlog.reset_defaults()
    yield
    structlog.reset_defaults()
    gpuscout_log._cli, gpuscout_log._cli_configured = None, False


@pytest.fixture
def scout_with() -> Callable[..., Scout]:
    """Build a Scout holding the built-in rule plugins plus injected devices."""

    def make(devices: Sequence[DeviceInfo] = (), *, builtins: Sequence[str] = (
            "cuda", "rocm", "metal", "vulkan"), env: dict[str, str] | None = None,
            platform: str = "linux", **kwargs: Any) -> Scout:
        return Scout(
            plugins=[*builtins, "injected"], extra=[("injected", InjectedDevices(devices))],
            entry_points=False, env={**NO_VULKAN_ENV, **(env or {})}, platform=platform,
            **kwargs,
        )

    return make


def needs(tool: str) -> None:
    """Skip when ``tool`` is missing, but fail under CI, where .ci/run must have installed it."""
    if shutil.which(tool) is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{tool} is not installed, but CI must provide it (.ci/run)")
        pytest.skip(f"{tool} is not installed")
