"""Fixtures for the ROCm plugin's tests: a Scout with only the ROCm plugin over a recorded tree.

The trees under ``trees/`` are sysfs (and /proc) in the kernel's own file format: KFD
``properties`` as decimal ``key value`` lines with the keys a 6.x kernel writes, amdgpu
``mem_info_*`` counters with their trailing newline, and ``uevent`` files. Symlinks are recorded
as plain directories, which the plugin must (and does) accept.
"""

from __future__ import annotations

import pathlib
from collections.abc import Callable, Mapping

import pytest

from gpuscout import DeviceInfo, Discovery, Scout
from gpuscout.testing import ScoutFactory

TREES = pathlib.Path(__file__).parent / "trees"


@pytest.fixture
def rocm_scout(gpuscout_scout: ScoutFactory) -> Callable[..., Scout]:
    """``rocm_scout(tree, env)``: a Scout that loads only the ROCm plugin, rooted at ``tree``."""

    def make(tree: str, env: Mapping[str, str] | None = None) -> Scout:
        return gpuscout_scout("rocm", env=dict(env or {}), root=TREES / tree)

    return make


@pytest.fixture
def discover(rocm_scout: Callable[..., Scout]) -> Callable[..., Discovery]:
    """``discover(tree, env)``: one discovery by the ROCm plugin alone over ``tree``."""
    return lambda tree, env=None: rocm_scout(tree, env).discover()


@pytest.fixture
def devices(rocm_scout: Callable[..., Scout]) -> Callable[..., list[DeviceInfo]]:
    """``devices(tree, env)``: the ROCm plugin's raw answer over ``tree``, in its own order,
    without the GPUs it reports hidden (``hidden_by``)."""
    return lambda tree, env=None: [d for _, d in rocm_scout(tree, env).enumerate() if not d.hidden_by]
