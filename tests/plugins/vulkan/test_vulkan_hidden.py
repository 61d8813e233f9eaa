"""Vulkan devices GGML_VK_VISIBLE_DEVICES leaves out: reported marked ``hidden_by`` (ids after the
visible ones), dropped by the core. The loader answers are constructed (two discrete GPUs),
as in test_vulkan_default_set.py."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import pytest

from gpuscout import Scout
from gpuscout._machine.context import Context
from gpuscout.plugins.vulkan import enumeration as vk_discover
from gpuscout.plugins.vulkan.default_set import hidden_indices, reported_indices
from gpuscout.plugins.vulkan.loader import ProbeResult, RawDevice
from gpuscout.plugins.vulkan.visibility import select_indices
from gpuscout.sizes import GIB
from gpuscout.testing import ScoutFactory


def gpu(index: int, name: str, bus: int) -> RawDevice:
    return RawDevice(
        index=index,
        name=name,
        device_type=2,
        vendor_id=0x1002,
        device_id=0x7448,
        api_version=(1 << 22) | (3 << 12),
        driver_version=0,
        uuid=f"{bus:032x}",
        driver_id=3,
        driver_name="radv",
        storage_16bit=True,
        heaps=[[48 * GIB, 1]],
        pci=[0, bus, 0, 0],
    )


RAWS = [gpu(0, "AMD Radeon PRO W7900", 3), gpu(1, "AMD Radeon RX 7600", 4)]


@pytest.fixture
def vulkan(monkeypatch: pytest.MonkeyPatch, gpuscout_scout: ScoutFactory) -> Callable[..., Scout]:
    """``vulkan(value)``: the Vulkan plugin alone over RAWS with GGML_VK_VISIBLE_DEVICES=value."""

    def probe(context: Context) -> ProbeResult:
        return ProbeResult(devices=RAWS, library="fake")

    monkeypatch.setattr(vk_discover, "probe", probe)
    return lambda value: gpuscout_scout(
        "vulkan", env={"GGML_VK_VISIBLE_DEVICES": value}, platform=sys.platform
    )


def test_the_device_left_out_is_reported_hidden_after_the_chosen_one(vulkan: Callable[..., Scout]) -> None:
    """GGML_VK_VISIBLE_DEVICES=1: raw device 1 is id 0, raw device 0 follows as id 1, hidden."""
    found = [(d.id, d.filter_id, d.hidden_by) for _, d in vulkan("1").enumerate()]
    assert found == [("0", "1", ""), ("1", "0", "GGML_VK_VISIBLE_DEVICES=1")]


def test_discovery_drops_the_device_the_variable_hides(vulkan: Callable[..., Scout]) -> None:
    """The hidden device is dropped naming the variable; the chosen one is listed."""
    found = vulkan("1").discover()
    assert ([d.name for d in found.devices], [(d.device.name, d.reason) for d in found.dropped]) == (
        ["AMD Radeon RX 7600"],
        [("AMD Radeon PRO W7900", "hidden by GGML_VK_VISIBLE_DEVICES=1")],
    )


def test_an_index_past_the_end_hides_every_device(vulkan: Callable[..., Scout]) -> None:
    """-1 (or any index past the last) makes llama.cpp use no Vulkan device: both hidden."""
    found = vulkan("-1").discover()
    assert (found.devices, [d.reason for d in found.dropped]) == (
        [],
        ["hidden by GGML_VK_VISIBLE_DEVICES=-1"] * 2,
    )


@pytest.mark.parametrize("value", ["NoDevFiles", "x,0"])
def test_no_dev_files_hides_every_device(value: str) -> None:
    """ggml reads indices with an istream: a first token that is no number ends the reading,
    so NoDevFiles selects nothing and hides both devices."""
    indices, _ = select_indices(value, len(RAWS))
    assert (indices, list(hidden_indices(RAWS, value, indices).values())) == (
        [],
        [f"GGML_VK_VISIBLE_DEVICES={value}"] * 2,
    )


def test_an_empty_value_asks_no_loader_and_reports_nothing(
    monkeypatch: pytest.MonkeyPatch, gpuscout_scout: ScoutFactory
) -> None:
    """Set but empty turns Vulkan off: the loader is not asked, so nothing is reported at all."""

    def probe(context: Any) -> ProbeResult:
        raise AssertionError("the loader must not be asked")

    monkeypatch.setattr(vk_discover, "probe", probe)
    found = gpuscout_scout("vulkan", env={"GGML_VK_VISIBLE_DEVICES": ""}, platform=sys.platform).discover()
    assert (found.devices, found.dropped) == ([], [])


def test_unset_hides_nothing() -> None:
    """Without the variable every device is reported (outside the default set, with a reason
    of its own), none hidden."""
    order, _, _ = reported_indices(RAWS, None)
    assert hidden_indices(RAWS, None, order) == {}
