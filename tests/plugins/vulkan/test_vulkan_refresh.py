"""Vulkan refresh: free memory read again through VK_EXT_memory_budget, on lavapipe and on
constructed loader answers."""

from __future__ import annotations

import copy
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest
from structlog.testing import capture_logs

from gpuscout import DeviceInfo, Scout
from gpuscout._machine.context import Context
from gpuscout.plugins.vulkan import enumeration as vk_discover
from gpuscout.plugins.vulkan import refresh as vk_refresh
from gpuscout.plugins.vulkan.loader import ProbeResult, RawDevice
from gpuscout.plugins.vulkan.vkstructs import EXT_MEMORY_BUDGET
from gpuscout.sizes import GIB, MIB
from gpuscout.testing import ScoutFactory


def lavapipe_raw(env: dict[str, str]) -> RawDevice:
    result = vk_discover.probe(Context(env=env, platform="linux"))
    assert result.error == "" and len(result.devices) == 1
    return result.devices[0]


def check_lavapipe_refresh(
    before: DeviceInfo, after: DeviceInfo, raw: RawDevice, logs: Sequence[Mapping[str, Any]]
) -> None:
    """Fresh with a plausible figure when lavapipe offers the budget; otherwise stale, unchanged,
    with the reason logged (Mesa 22.3's lavapipe has no VK_EXT_memory_budget)."""
    if EXT_MEMORY_BUDGET in raw.extensions:
        assert not after.free_memory_stale and not after.free_memory_unknown
        assert 0 < after.free_memory <= after.total_memory
    else:
        assert after == before.evolve(free_memory_stale=True)
        skipped = [e for e in logs if e["event"] == "vulkan.refresh_skipped"]
        assert [e["reason"] for e in skipped] == ["the driver does not offer VK_EXT_memory_budget"]


def test_lavapipe_refresh_through_a_child(gpuscout_scout: ScoutFactory, lavapipe_env: dict[str, str]) -> None:
    """Refreshing lavapipe (env differs from the process's: a child probe) answers it fresh
    with the budget, else stale with its previous values and a logged reason."""
    scout = gpuscout_scout("vulkan", env=lavapipe_env)
    (before,) = scout.discover(include_software=True).devices
    with capture_logs() as logs:
        (after,) = scout.refresh([before])
    assert [e["mode"] for e in logs if e["event"] == "vulkan.probe"] == ["child"]
    check_lavapipe_refresh(before, after, lavapipe_raw(lavapipe_env), logs)


def test_lavapipe_refresh_in_process(
    gpuscout_scout: ScoutFactory, lavapipe_icd: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With env equal to os.environ the refresh asks the loader in this process."""
    monkeypatch.setenv("VK_DRIVER_FILES", lavapipe_icd)
    monkeypatch.delenv("GGML_VK_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("VK_ICD_FILENAMES", raising=False)
    scout = gpuscout_scout("vulkan", env=os.environ)
    (before,) = scout.discover(include_software=True).devices
    with capture_logs() as logs:
        (after,) = scout.refresh([before])
    assert [e["mode"] for e in logs if e["event"] == "vulkan.probe"] == ["in_process"]
    check_lavapipe_refresh(before, after, lavapipe_raw(dict(os.environ)), logs)


# -- constructed loader answers (plausible values, not a recording) -------------------------------


def discrete(index: int, uuid: str, budget: int, usage: int, **kw: Any) -> RawDevice:
    """A discrete GPU with VK_EXT_memory_budget: 24 GiB VRAM plus NVIDIA's 256 MiB BAR heap,
    whose budget is all in use (so free memory is the VRAM heap's budget - usage)."""
    base: dict[str, Any] = dict(
        index=index,
        name="NVIDIA GeForce RTX 4090",
        device_type=2,
        vendor_id=0x10DE,
        device_id=0x2684,
        api_version=(1 << 22) | (3 << 12),
        driver_version=0,
        extensions=[EXT_MEMORY_BUDGET],
        uuid=uuid,
        heaps=[[24 * GIB, 1], [64 * GIB, 0], [256 * MIB, 1]],
        heap_budget=[budget, 60 * GIB, 200 * MIB],
        heap_usage=[usage, 0, 200 * MIB],
    )
    return RawDevice(**{**base, **kw})


UUID_A = "0a" * 16
UUID_B = "0b" * 16


class FakeLoader:
    """Stands in for ``enumeration.probe``: answers ``result`` (tests change it between calls)."""

    def __init__(self, result: ProbeResult) -> None:
        self.result = result
        self.calls = 0

    def __call__(self, context: Context) -> ProbeResult:
        self.calls += 1
        return copy.deepcopy(self.result)


@pytest.fixture
def fake_loader(monkeypatch: pytest.MonkeyPatch) -> Callable[[ProbeResult], FakeLoader]:
    """Installs a FakeLoader for enumerate and refresh alike."""

    def install(result: ProbeResult) -> FakeLoader:
        fake = FakeLoader(result)
        monkeypatch.setattr(vk_discover, "probe", fake)
        monkeypatch.setattr(vk_refresh, "probe", fake)
        return fake

    return install


@pytest.fixture
def vulkan(gpuscout_scout: ScoutFactory) -> Scout:
    """A Scout with the Vulkan plugin alone, on this platform."""
    return gpuscout_scout("vulkan", platform=sys.platform)


def test_refresh_reads_budget_minus_usage_again(
    fake_loader: Callable[[ProbeResult], FakeLoader], vulkan: Scout
) -> None:
    """After usage grows, a refresh reports budget - usage summed over the device-local heaps."""
    fake = fake_loader(ProbeResult(devices=[discrete(0, UUID_A, 23 * GIB, 1 * GIB)]))
    (before,) = vulkan.discover().devices
    assert before.free_memory == 22 * GIB
    fake.result.devices[0].heap_usage = [8 * GIB, 0, 200 * MIB]
    (after,) = vulkan.refresh([before])
    assert (after.free_memory, after.free_memory_stale, after.free_memory_unknown) == (15 * GIB, False, False)
    assert after == before.evolve(free_memory=15 * GIB)


def test_refresh_finds_devices_the_loader_now_lists_in_another_order(
    fake_loader: Callable[[ProbeResult], FakeLoader], vulkan: Scout
) -> None:
    """When the loader's order changed, each device is found again by its UUID."""
    fake = fake_loader(
        ProbeResult(devices=[discrete(0, UUID_A, 20 * GIB, 0), discrete(1, UUID_B, 20 * GIB, 0)])
    )
    devices = vulkan.discover().devices
    fake.result.devices = [discrete(0, UUID_B, 20 * GIB, 5 * GIB), discrete(1, UUID_A, 20 * GIB, 2 * GIB)]
    fresh = {d.uuid: d.free_memory for d in vulkan.refresh(devices)}
    assert fresh == {
        "0a0a0a0a-0a0a-0a0a-0a0a-0a0a0a0a0a0a": 18 * GIB,
        "0b0b0b0b-0b0b-0b0b-0b0b-0b0b0b0b0b0b": 15 * GIB,
    }


def test_a_device_the_loader_no_longer_lists_is_stale(
    fake_loader: Callable[[ProbeResult], FakeLoader], vulkan: Scout
) -> None:
    """A device gone from the loader keeps its value, stale; the other is refreshed."""
    fake = fake_loader(
        ProbeResult(devices=[discrete(0, UUID_A, 20 * GIB, 0), discrete(1, UUID_B, 20 * GIB, 0)])
    )
    devices = vulkan.discover().devices
    fake.result.devices = [discrete(0, UUID_B, 20 * GIB, 4 * GIB)]
    fresh = {d.uuid[:2]: (d.free_memory, d.free_memory_stale) for d in vulkan.refresh(devices)}
    assert fresh == {"0a": (20 * GIB, True), "0b": (16 * GIB, False)}


def test_a_loader_error_leaves_every_vulkan_device_stale(
    fake_loader: Callable[[ProbeResult], FakeLoader], vulkan: Scout
) -> None:
    """A probe that fails (no usable driver now) leaves the devices as they were, stale."""
    fake = fake_loader(ProbeResult(devices=[discrete(0, UUID_A, 20 * GIB, 0)]))
    (before,) = vulkan.discover().devices
    fake.result = ProbeResult(error="vkCreateInstance failed: VK_ERROR_INCOMPATIBLE_DRIVER")
    with capture_logs() as logs:
        assert vulkan.refresh([before]) == [before.evolve(free_memory_stale=True)]
    assert any("VK_ERROR_INCOMPATIBLE_DRIVER" in e.get("reason", "") for e in logs)


def test_a_budget_of_zero_is_not_a_reading(
    fake_loader: Callable[[ProbeResult], FakeLoader], vulkan: Scout
) -> None:
    """A driver that lists the extension but fills in no budget leaves the device stale, not 0."""
    fake = fake_loader(ProbeResult(devices=[discrete(0, UUID_A, 20 * GIB, 0)]))
    (before,) = vulkan.discover().devices
    fake.result.devices[0].heap_budget = [0, 0, 0]
    assert vulkan.refresh([before]) == [before.evolve(free_memory_stale=True)]


def test_refresh_on_another_platform_asks_no_loader(
    fake_loader: Callable[[ProbeResult], FakeLoader], gpuscout_scout: ScoutFactory
) -> None:
    """A simulated platform's loader cannot be asked: the device stays stale, nothing probed."""
    fake = fake_loader(ProbeResult(devices=[discrete(0, UUID_A, 20 * GIB, 0)]))
    device = DeviceInfo(id="0", library="Vulkan", filter_id="0", total_memory=GIB, free_memory=GIB)
    scout = gpuscout_scout("vulkan", platform="darwin" if sys.platform != "darwin" else "linux")
    assert scout.refresh([device]) == [device.evolve(free_memory_stale=True)]
    assert fake.calls == 0


def test_refresh_ignores_other_libraries(
    fake_loader: Callable[[ProbeResult], FakeLoader], vulkan: Scout
) -> None:
    """Without a Vulkan device among those passed the loader is not asked."""
    fake = fake_loader(ProbeResult(devices=[discrete(0, UUID_A, 20 * GIB, 0)]))
    cuda = DeviceInfo(id="GPU-1", library="CUDA", total_memory=GIB, free_memory=GIB)
    assert vulkan.refresh([cuda]) == [cuda.evolve(free_memory_stale=True)]
    assert fake.calls == 0


# -- matching (pure) ------------------------------------------------------------------------------


def test_a_record_without_filter_id_is_found_through_ggml_vk_visible_devices() -> None:
    """Without filter_id the id (ordinal among reported devices) maps through the variable."""
    raws = [discrete(0, UUID_A, GIB, 0), discrete(1, UUID_B, GIB, 0)]
    device = DeviceInfo(id="0", library="Vulkan", description="NVIDIA GeForce RTX 4090")
    assert vk_refresh.find_raw(device, raws, "1") is raws[1]
    assert vk_refresh.find_raw(device, raws, None) is raws[0]


def test_two_devices_that_fit_equally_are_not_guessed_between() -> None:
    """With the index pointing nowhere and two identical candidates, no device is chosen."""
    raws = [discrete(0, "", GIB, 0), discrete(1, "", GIB, 0)]
    device = DeviceInfo(id="0", library="Vulkan", filter_id="5", description="NVIDIA GeForce RTX 4090")
    assert vk_refresh.find_raw(device, raws, None) is None


def test_a_pci_id_that_differs_does_not_fit() -> None:
    """A record with a PCI id only fits the raw device at that address."""
    raw = discrete(0, UUID_A, GIB, 0, pci=[0, 1, 0, 0])
    device = DeviceInfo(
        id="0",
        library="Vulkan",
        filter_id="0",
        pci_id="0000:02:00.0",
        uuid="0a0a0a0a-0a0a-0a0a-0a0a-0a0a0a0a0a0a",
        description="NVIDIA GeForce RTX 4090",
    )
    assert not vk_refresh.fits(device, raw)
    assert vk_refresh.fits(device.evolve(pci_id="0000:01:00.0"), raw)
