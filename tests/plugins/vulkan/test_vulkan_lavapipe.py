"""The Vulkan plugin against the real loader and Mesa's lavapipe (a real CPU-type device)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from structlog.testing import capture_logs

from gpuscout import Scout
from gpuscout._machine.context import Context
from gpuscout.plugins.vulkan import enumeration as vk_discover
from gpuscout.plugins.vulkan.loader import RawDevice
from gpuscout.plugins.vulkan.vkstructs import EXT_MEMORY_BUDGET
from gpuscout.sizes import GIB
from gpuscout.testing import ScoutFactory

#: lavapipe's VkPhysicalDeviceLimits.maxStorageBufferRange: 128 MiB.
LAVAPIPE_MAX_STORAGE_BUFFER_RANGE = 134217728
MESA_VENDOR_ID = 0x10005
LAVAPIPE = re.compile(r"^llvmpipe")


def raw_lavapipe(env: dict[str, str]) -> RawDevice:
    result = vk_discover.probe(Context(env=env, platform="linux"))
    assert result.error == ""
    assert len(result.devices) == 1
    return result.devices[0]


def vulkan_note(found: Scout) -> str:
    return next(r.note for r in found.reports if r.name == "vulkan")


def test_lavapipe_is_found_as_a_software_device(
    gpuscout_scout: ScoutFactory, lavapipe_env: dict[str, str]
) -> None:
    """The loader lists llvmpipe and the record marks it software, not integrated."""
    devices = gpuscout_scout("vulkan", env=lavapipe_env).discover(include_software=True).devices
    assert len(devices) == 1
    d = devices[0]
    assert LAVAPIPE.match(d.name) and d.description == d.name
    assert (d.library, d.id, d.filter_id) == ("Vulkan", "0", "0")
    assert d.software and not d.integrated


def test_lavapipe_reports_mesa_vendor_and_llvmpipe_driver(lavapipe_env: dict[str, str]) -> None:
    """The raw device carries Mesa's Khronos vendor id, CPU type and driver name llvmpipe."""
    raw = raw_lavapipe(lavapipe_env)
    assert raw.vendor_id == MESA_VENDOR_ID
    assert raw.device_type == 4
    assert raw.driver_name == "llvmpipe"
    assert raw.driver_info.startswith("Mesa ")


def test_lavapipe_driver_version_is_the_mesa_version(
    gpuscout_scout: ScoutFactory, lavapipe_env: dict[str, str]
) -> None:
    """driver_major.minor is the Mesa release that driverInfo names."""
    raw = raw_lavapipe(lavapipe_env)
    d = gpuscout_scout("vulkan", env=lavapipe_env).discover(include_software=True).devices[0]
    assert raw.driver_info.startswith(f"Mesa {d.driver_major}.{d.driver_minor}.")


def test_lavapipe_memory_is_its_device_local_heap(
    gpuscout_scout: ScoutFactory, lavapipe_env: dict[str, str]
) -> None:
    """Total memory is the sum of lavapipe's device-local heaps (one of 2 GiB on Mesa 22.3), as
    ggml-vulkan's ggml_backend_vk_get_device_memory counts a non-integrated device."""
    raw = raw_lavapipe(lavapipe_env)
    d = gpuscout_scout("vulkan", env=lavapipe_env).discover(include_software=True).devices[0]
    assert d.total_memory == sum(size for size, flags in raw.heaps if flags & 1)
    assert GIB // 4 <= d.total_memory <= 64 * GIB


def test_lavapipe_free_memory_is_unknown_without_memory_budget(
    gpuscout_scout: ScoutFactory, lavapipe_env: dict[str, str]
) -> None:
    """Without VK_EXT_memory_budget free is unknown and reads as the total; with it, known."""
    raw = raw_lavapipe(lavapipe_env)
    d = gpuscout_scout("vulkan", env=lavapipe_env).discover(include_software=True).devices[0]
    if EXT_MEMORY_BUDGET in raw.extensions:
        assert not d.free_memory_unknown and d.free_memory <= d.total_memory
    else:
        assert d.free_memory_unknown and d.free_memory == d.total_memory


def test_lavapipe_max_allocation_is_its_max_storage_buffer_range(
    gpuscout_scout: ScoutFactory, lavapipe_env: dict[str, str]
) -> None:
    """max_allocation is lavapipe's maxStorageBufferRange, 128 MiB: what ggml-vulkan checks a
    tensor's size against before keeping it on the device."""
    assert raw_lavapipe(lavapipe_env).max_storage_buffer_range == LAVAPIPE_MAX_STORAGE_BUFFER_RANGE
    d = gpuscout_scout("vulkan", env=lavapipe_env).discover(include_software=True).devices[0]
    assert LAVAPIPE.match(d.name)
    assert d.max_allocation == LAVAPIPE_MAX_STORAGE_BUFFER_RANGE


def test_lavapipe_uuid_is_formatted_8_4_4_4_12(
    gpuscout_scout: ScoutFactory, lavapipe_env: dict[str, str]
) -> None:
    """deviceUUID is kept as lower-case 8-4-4-4-12 hex."""
    raw = raw_lavapipe(lavapipe_env)
    d = gpuscout_scout("vulkan", env=lavapipe_env).discover(include_software=True).devices[0]
    assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", d.uuid)
    assert d.uuid.replace("-", "") == raw.uuid


def test_lavapipe_has_no_pci_address_unless_the_driver_gives_one(
    gpuscout_scout: ScoutFactory, lavapipe_env: dict[str, str]
) -> None:
    """pci_id is empty unless the device lists VK_EXT_pci_bus_info."""
    raw = raw_lavapipe(lavapipe_env)
    d = gpuscout_scout("vulkan", env=lavapipe_env).discover(include_software=True).devices[0]
    assert (d.pci_id != "") == ("VK_EXT_pci_bus_info" in raw.extensions)


def test_core_drops_lavapipe_as_a_software_device(
    gpuscout_scout: ScoutFactory, lavapipe_env: dict[str, str]
) -> None:
    """discover() leaves llvmpipe out of the ranked list with reason "software device"."""
    found = gpuscout_scout("vulkan", env=lavapipe_env).discover()
    assert found.devices == []
    assert [(LAVAPIPE.match(x.device.name) is not None, x.reason) for x in found.dropped] == [
        (True, "software device")
    ]


def run_cli(env: dict[str, str], *args: str) -> dict[str, object]:
    proc = subprocess.run(
        [sys.executable, "-m", "gpuscout", "list", "--json", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    document: dict[str, object] = json.loads(proc.stdout)
    return document


def test_cli_list_json_shows_lavapipe_under_dropped(lavapipe_env: dict[str, str]) -> None:
    """`gpuscout list --json` names llvmpipe under "dropped" with reason software device."""
    document = run_cli(lavapipe_env)
    dropped = document["dropped"]
    assert isinstance(dropped, list)
    lavapipe = [x for x in dropped if x["device"]["backend"] == "Vulkan"]
    assert len(lavapipe) == 1
    assert LAVAPIPE.match(lavapipe[0]["device"]["name"])
    assert lavapipe[0]["reason"] == "software device"


def test_cli_include_software_keeps_lavapipe_ranked(lavapipe_env: dict[str, str]) -> None:
    """`--include-software` lists llvmpipe among the devices and drops nothing for it."""
    document = run_cli(lavapipe_env, "--include-software")
    devices = document["devices"]
    assert isinstance(devices, list)
    assert [LAVAPIPE.match(d["name"]) is not None for d in devices if d["backend"] == "Vulkan"] == [True]
    assert document["dropped"] == []


def test_cli_list_json_shows_lavapipes_max_allocation(lavapipe_env: dict[str, str]) -> None:
    """`gpuscout list --json --include-software` writes llvmpipe's "max_allocation": 134217728."""
    devices = run_cli(lavapipe_env, "--include-software")["devices"]
    assert isinstance(devices, list)
    assert [d.get("max_allocation") for d in devices if d["backend"] == "Vulkan"] == [
        LAVAPIPE_MAX_STORAGE_BUFFER_RANGE
    ]


def test_include_software_keeps_lavapipe_ranked(
    gpuscout_scout: ScoutFactory, lavapipe_env: dict[str, str]
) -> None:
    """discover(include_software=True) ranks llvmpipe and drops nothing."""
    found = gpuscout_scout("vulkan", env=lavapipe_env).discover(include_software=True)
    assert [LAVAPIPE.match(d.name) is not None for d in found.devices] == [True]
    assert found.dropped == []


def test_loader_runs_in_process_when_env_is_the_process_env(
    gpuscout_scout: ScoutFactory, lavapipe_icd: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With env equal to os.environ the loader is asked in this process (the fast path)."""
    monkeypatch.setenv("VK_DRIVER_FILES", lavapipe_icd)
    monkeypatch.delenv("GGML_VK_VISIBLE_DEVICES", raising=False)
    with capture_logs() as logs:
        devices = gpuscout_scout("vulkan", env=os.environ).discover(include_software=True).devices
    assert [e["mode"] for e in logs if e["event"] == "vulkan.probe"] == ["in_process"]
    assert len(devices) == 1 and LAVAPIPE.match(devices[0].name)


def test_loader_runs_in_a_child_when_env_differs(
    gpuscout_scout: ScoutFactory, lavapipe_env: dict[str, str]
) -> None:
    """With an env that differs from os.environ the probe runs in a child with that env."""
    assert os.environ.get("VK_DRIVER_FILES") != lavapipe_env["VK_DRIVER_FILES"]
    with capture_logs() as logs:
        devices = gpuscout_scout("vulkan", env=lavapipe_env).discover(include_software=True).devices
    assert [e["mode"] for e in logs if e["event"] == "vulkan.probe"] == ["child"]
    assert len(devices) == 1


@pytest.mark.parametrize("value", ["0", " 0 ", "0,"])
def test_visible_devices_zero_keeps_lavapipe(
    gpuscout_scout: ScoutFactory, lavapipe_env: dict[str, str], value: str
) -> None:
    """GGML_VK_VISIBLE_DEVICES=0 reports raw device 0 as Vulkan id 0."""
    env = {**lavapipe_env, "GGML_VK_VISIBLE_DEVICES": value}
    found = gpuscout_scout("vulkan", env=env).discover(include_software=True)
    assert [(d.id, d.filter_id) for d in found.devices] == [("0", "0")]


def test_visible_devices_empty_hides_every_device(
    gpuscout_scout: ScoutFactory, lavapipe_env: dict[str, str]
) -> None:
    """GGML_VK_VISIBLE_DEVICES set but empty reports no device, with a note."""
    s = gpuscout_scout("vulkan", env={**lavapipe_env, "GGML_VK_VISIBLE_DEVICES": ""})
    assert s.discover(include_software=True).devices == []
    assert "set but empty" in vulkan_note(s)


@pytest.mark.parametrize("value", ["5", "-1", "0,5"])
def test_visible_devices_out_of_range_hides_every_device(
    gpuscout_scout: ScoutFactory, lavapipe_env: dict[str, str], value: str
) -> None:
    """An index past the device count (or -1) reports no Vulkan device at all, with a note."""
    s = gpuscout_scout("vulkan", env={**lavapipe_env, "GGML_VK_VISIBLE_DEVICES": value})
    assert s.discover(include_software=True).devices == []
    bad = value.split(",")[-1]
    assert f"names device {bad}," in vulkan_note(s)


def test_lavapipe_is_outside_ggmls_default_set_but_reported_with_a_note(
    gpuscout_scout: ScoutFactory, lavapipe_env: dict[str, str]
) -> None:
    """ggml-vulkan.cpp ggml_vk_instance_init (ggml d99724f2, line 7474) takes only discrete and
    integrated GPUs, so lavapipe (16-bit storage and all) is named in the note."""
    assert raw_lavapipe(lavapipe_env).storage_16bit is True
    found = gpuscout_scout("vulkan", env=lavapipe_env).discover(include_software=True)
    assert [d.filter_id for d in found.devices] == ["0"]
    note = next(r.note for r in found.plugins if r.name == "vulkan")
    assert "not in ggml-vulkan's default device set" in note and "a CPU device" in note
