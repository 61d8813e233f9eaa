"""The seed's GetDevicesEnv through Scout.visible_env, as a table of selections and environments."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from structlog.testing import capture_logs

from gpuscout import DeviceInfo, Scout


def cuda(id: str, filter_id: str = "", **kw: object) -> DeviceInfo:
    return DeviceInfo(id=id, library="CUDA", filter_id=filter_id, **kw)  # type: ignore[arg-type]


def rocm(id: str, filter_id: str = "", **kw: object) -> DeviceInfo:
    return DeviceInfo(id=id, library="ROCm", filter_id=filter_id, **kw)  # type: ignore[arg-type]


def vk(id: str, filter_id: str = "") -> DeviceInfo:
    return DeviceInfo(id=id, library="Vulkan", filter_id=filter_id)


CASES = [
    ("empty selection", [], {}, "linux", {}),
    (
        "one CUDA device uses its filter id",
        [cuda("GPU-a", "GPU-a")],
        {},
        "linux",
        {"CUDA_VISIBLE_DEVICES": "GPU-a"},
    ),
    ("filter id empty falls back to id", [cuda("3")], {}, "linux", {"CUDA_VISIBLE_DEVICES": "3"}),
    (
        "all CUDA are joined in selection order",
        [cuda("GPU-b", "GPU-b"), cuda("GPU-a", "GPU-a")],
        {},
        "linux",
        {"CUDA_VISIBLE_DEVICES": "GPU-b,GPU-a"},
    ),
    (
        "mixed selection leaves CUDA unfiltered",
        [cuda("GPU-a"), rocm("GPU-r", "GPU-r")],
        {},
        "linux",
        {"ROCR_VISIBLE_DEVICES": "GPU-r"},
    ),
    ("one Vulkan device is filtered", [vk("0", "2")], {}, "linux", {"GGML_VK_VISIBLE_DEVICES": "2"}),
    ("several Vulkan devices are not", [vk("0", "0"), vk("1", "1")], {}, "linux", {}),
    ("CUDA with Vulkan filters neither", [cuda("GPU-a"), vk("0", "1")], {}, "linux", {}),
    (
        "ROCm is always filtered",
        [rocm("GPU-r", "GPU-r"), rocm("GPU-s", "GPU-s")],
        {},
        "linux",
        {"ROCR_VISIBLE_DEVICES": "GPU-r,GPU-s"},
    ),
    (
        "Linux: numeric HIP list gets the child's ordinals",
        [rocm("GPU-r", "GPU-r"), rocm("GPU-s", "GPU-s")],
        {"HIP_VISIBLE_DEVICES": "1,0"},
        "linux",
        {"ROCR_VISIBLE_DEVICES": "GPU-r,GPU-s", "HIP_VISIBLE_DEVICES": "0,1"},
    ),
    # The seed writes no ordinal under a user ROCR list; gpuscout still rewrites the inherited
    # HIP list, which would index into the child's new ROCr list (rules.inherited_ordinal_variables).
    (
        "Linux: user ROCR disables the seed's ordinal, the inherited HIP list gets ordinals",
        [rocm("GPU-r", "GPU-r")],
        {"ROCR_VISIBLE_DEVICES": "0", "HIP_VISIBLE_DEVICES": "0"},
        "linux",
        {"ROCR_VISIBLE_DEVICES": "GPU-r", "HIP_VISIBLE_DEVICES": "0"},
    ),
    (
        "Linux: non-numeric HIP is skipped for GPU_DEVICE_ORDINAL, then rewritten too",
        [rocm("GPU-r", "GPU-r")],
        {"HIP_VISIBLE_DEVICES": "GPU-x", "GPU_DEVICE_ORDINAL": "2"},
        "linux",
        {"ROCR_VISIBLE_DEVICES": "GPU-r", "GPU_DEVICE_ORDINAL": "0", "HIP_VISIBLE_DEVICES": "0"},
    ),
    (
        "Linux: negative entries are not numeric lists",
        [rocm("GPU-r", "GPU-r")],
        {"HIP_VISIBLE_DEVICES": "-1", "CUDA_VISIBLE_DEVICES": " 3 , "},
        "linux",
        {"ROCR_VISIBLE_DEVICES": "GPU-r", "HIP_VISIBLE_DEVICES": "0"},
    ),
    (
        # The seed writes the HIP ordinal into CUDA_VISIBLE_DEVICES, where the CUDA runtime
        # reads it too; HIP reads HIP_VISIBLE_DEVICES first (issue 32).
        "Linux: mixed box with numeric CUDA list",
        [cuda("GPU-a"), rocm("GPU-r", "GPU-r")],
        {"CUDA_VISIBLE_DEVICES": "0"},
        "linux",
        {"ROCR_VISIBLE_DEVICES": "GPU-r", "HIP_VISIBLE_DEVICES": "0"},
    ),
    (
        "Linux: ordinals skip non-ROCm devices",
        [rocm("GPU-r", "GPU-r"), cuda("GPU-a"), rocm("GPU-s", "GPU-s")],
        {"HIP_VISIBLE_DEVICES": "0"},
        "linux",
        {"ROCR_VISIBLE_DEVICES": "GPU-r,GPU-s", "HIP_VISIBLE_DEVICES": "0,1"},
    ),
    (
        "Windows: HIP_VISIBLE_DEVICES by default",
        [rocm("0"), rocm("1")],
        {},
        "win32",
        {"HIP_VISIBLE_DEVICES": "0,1"},
    ),
    (
        "Windows: an existing numeric GPU_DEVICE_ORDINAL wins",
        [rocm("1")],
        {"GPU_DEVICE_ORDINAL": "0,1"},
        "win32",
        {"GPU_DEVICE_ORDINAL": "1"},
    ),
    (
        "Windows: a numeric CUDA list sends the ROCm device to HIP_VISIBLE_DEVICES",
        [rocm("1"), cuda("GPU-a", "GPU-a")],
        {"CUDA_VISIBLE_DEVICES": "0"},
        "win32",
        {"HIP_VISIBLE_DEVICES": "1"},
    ),
    (
        "Windows: one CUDA and one ROCm device share the variable in order",
        [cuda("GPU-a", "GPU-a")],
        {"CUDA_VISIBLE_DEVICES": "0"},
        "win32",
        {"CUDA_VISIBLE_DEVICES": "GPU-a"},
    ),
    ("Metal and cpu need nothing", [DeviceInfo(id="0", library="Metal")], {}, "darwin", {}),
]


@pytest.mark.parametrize(
    ("devices", "env", "platform", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_visible_env_follows_the_seed(
    scout_with: Callable[..., Scout],
    devices: list[DeviceInfo],
    env: dict[str, str],
    platform: str,
    expected: dict[str, str],
) -> None:
    """visible_env gives exactly the seed's variables for each selection and environment."""
    assert scout_with(env=env, platform=platform).visible_env(devices) == expected


def test_overrides_follow_each_device_and_the_last_one_wins(scout_with: Callable[..., Scout]) -> None:
    """runner_env_overrides apply after the device's own entry; a conflict warns, last wins."""
    devices = [
        rocm("GPU-r", "GPU-r", runner_env_overrides={"HSA_OVERRIDE_GFX_VERSION": "10.3.0"}),
        rocm("GPU-s", "GPU-s", runner_env_overrides={"HSA_OVERRIDE_GFX_VERSION": "11.0.0"}),
    ]
    with capture_logs() as logs:
        env = scout_with().visible_env(devices)
    assert env == {"ROCR_VISIBLE_DEVICES": "GPU-r,GPU-s", "HSA_OVERRIDE_GFX_VERSION": "11.0.0"}
    assert [e["event"] for e in logs] == ["env.override_conflict"]


def test_overrides_of_devices_without_a_variable_still_apply(scout_with: Callable[..., Scout]) -> None:
    """Two Metal devices (no visibility variable) with conflicting overrides: the last wins."""
    devices = [
        DeviceInfo(id="0", library="Metal", runner_env_overrides={"TEST_OVERRIDE": "one"}),
        DeviceInfo(id="1", library="Metal", runner_env_overrides={"TEST_OVERRIDE": "two"}),
    ]
    with capture_logs() as logs:
        assert scout_with(platform="darwin").visible_env(devices) == {"TEST_OVERRIDE": "two"}
    assert [e["event"] for e in logs] == ["env.override_conflict"]


def test_an_override_of_the_visibility_variable_is_appended_to(scout_with: Callable[..., Scout]) -> None:
    """As in the seed, a later device appends to a variable an earlier override set."""
    devices = [
        cuda("GPU-a", "GPU-a", runner_env_overrides={"CUDA_VISIBLE_DEVICES": "X"}),
        cuda("GPU-b", "GPU-b"),
    ]
    assert scout_with().visible_env(devices) == {"CUDA_VISIBLE_DEVICES": "X,GPU-b"}


def test_values_are_plain_strings_in_a_plain_dict(scout_with: Callable[..., Scout]) -> None:
    """The result is a real dict of str."""
    env = scout_with().visible_env([cuda("GPU-a")])
    assert type(env) is dict and all(type(v) is str for v in env.values())


ISOLATE_CASES = [
    (
        "nothing selected hides every vendor",
        [],
        {},
        [
            ("cuda", {"CUDA_VISIBLE_DEVICES": ""}),
            ("rocm", {"ROCR_VISIBLE_DEVICES": "", "HIP_VISIBLE_DEVICES": "-1"}),
            ("vulkan", {"GGML_VK_VISIBLE_DEVICES": ""}),
        ],
    ),
    (
        "a CUDA UUID selection hides the others",
        [cuda("GPU-a", "GPU-a")],
        {"CUDA_VISIBLE_DEVICES": "GPU-a"},
        [
            ("rocm", {"ROCR_VISIBLE_DEVICES": "", "HIP_VISIBLE_DEVICES": "-1"}),
            ("vulkan", {"GGML_VK_VISIBLE_DEVICES": ""}),
        ],
    ),
    (
        "CUDA indices pin the PCI bus order",
        [cuda("1")],
        {"CUDA_VISIBLE_DEVICES": "1"},
        [
            ("cuda", {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}),
            ("rocm", {"ROCR_VISIBLE_DEVICES": "", "HIP_VISIBLE_DEVICES": "-1"}),
            ("vulkan", {"GGML_VK_VISIBLE_DEVICES": ""}),
        ],
    ),
    (
        "ROCm and Vulkan selected leave only CUDA to hide",
        [rocm("GPU-r", "GPU-r"), vk("0", "0")],
        {"ROCR_VISIBLE_DEVICES": "GPU-r"},
        [("cuda", {"CUDA_VISIBLE_DEVICES": ""})],
    ),
]


@pytest.mark.parametrize(
    ("devices", "env", "expected"), [c[1:] for c in ISOLATE_CASES], ids=[c[0] for c in ISOLATE_CASES]
)
def test_each_vendor_says_how_to_hide_its_devices(
    scout_with: Callable[..., Scout],
    devices: list[DeviceInfo],
    env: dict[str, str],
    expected: list[tuple[str, dict[str, str]]],
) -> None:
    """isolate_env collects each plugin's hide-all values, in plugin order."""
    assert scout_with().isolate_env(devices, env) == expected
