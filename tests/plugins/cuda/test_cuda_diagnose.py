"""Why the CUDA plugin found no GPU: the sentences its note gets from recorded trees.

Trees hold sysfs PCI functions in the kernel's formats (``vendor`` ``0x10de\\n``, ``class``
``0x030200\\n``, ``driver`` a link to ``../../../bus/pci/drivers/<name>``) and device nodes as
plain files (text ``denied``: present but not permitted). NVML is either really missing (this
machine has no driver) or the recorded stand-in of conftest (``fake_nvml``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gpuscout import Discovery, Scout
from gpuscout.plugin import Context
from gpuscout.plugins.cuda import diagnosis as diagnose
from gpuscout.plugins.cuda import enumeration as nvml
from gpuscout.testing import FIFO, Content, RootFactory, Symlink, promptly

DEVICES = "/sys/bus/pci/devices"
ADDRESS = "0000:01:00.0"
#: What the stand-in for a missing NVML library notes (the real sentence names the .so).
FAKE_MISSING = "fake: NVML library missing"


def nvidia_card(driver: str | None = None, pci_class: str = "0x030200") -> dict[str, Content]:
    """One NVIDIA GPU at ADDRESS, bound to ``driver`` (None: to nothing)."""
    files: dict[str, Content] = {
        f"{DEVICES}/{ADDRESS}/vendor": "0x10de\n",
        f"{DEVICES}/{ADDRESS}/class": f"{pci_class}\n",
        f"{DEVICES}/{ADDRESS}/device": "0x2684\n",
    }
    if driver is not None:
        files[f"{DEVICES}/{ADDRESS}/driver"] = Symlink(f"../../../bus/pci/drivers/{driver}")
    return files


def cuda_note(found: Discovery) -> str:
    report = found.report("cuda")
    assert (found.devices, report.status) == ([], "ok")
    return report.note


@pytest.fixture
def missing_library(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fake NVML seam that finds no library (as ``_load_nvml`` does without a driver)."""

    def fake_load_nvml(context: Context) -> Any:
        context.note(FAKE_MISSING)
        return None

    monkeypatch.setattr(nvml, "_load_nvml", fake_load_nvml)


@pytest.fixture
def init_fails(
    fake_nvml: Callable[..., Any],
    recording: Callable[[str], dict[str, Any]],
) -> Callable[[str], Any]:
    """``init_fails(error)``: the recorded H200 whose nvmlInit raises ``error``."""

    def install(error: str) -> Any:
        data = recording("h200")
        data["init"] = error
        return fake_nvml(data)

    return install


def discover_at(cuda_scout: Callable[..., Scout], root: Path, env: dict[str, str] | None = None) -> Discovery:
    return promptly(cuda_scout(env=env or {}, root=str(root)).discover)


@pytest.mark.needs_no_nvidia_driver
def test_unbound_nvidia_card_without_the_module_is_named_after_the_missing_library(
    cuda_scout: Callable[..., Scout], gpuscout_root: RootFactory
) -> None:
    """On this driverless machine the library's own note comes first, then the unbound card
    and the module that is not loaded."""
    note = cuda_note(discover_at(cuda_scout, gpuscout_root(nvidia_card())))
    assert (
        note.startswith("NVML library libnvidia-ml.so.1 cannot be loaded"),
        f"GPU {ADDRESS} (NVIDIA, class 0x030200) has no driver bound and module nvidia is "
        "not loaded (/sys/module/nvidia missing)" in note,
    ) == (True, True)


def test_card_bound_to_vfio_pci_is_said_to_be_passed_through(
    missing_library: None, cuda_scout: Callable[..., Scout], gpuscout_root: RootFactory
) -> None:
    """A card held by vfio-pci is named as passed through to a VM."""
    note = cuda_note(discover_at(cuda_scout, gpuscout_root(nvidia_card("vfio-pci"))))
    assert (
        f"GPU {ADDRESS} (NVIDIA, class 0x030200) is bound to vfio-pci (passed through to "
        "a VM?), not to nvidia"
    ) in note


def test_card_bound_to_nouveau_is_said_to_be_unusable_by_nvml(
    missing_library: None, cuda_scout: Callable[..., Scout], gpuscout_root: RootFactory
) -> None:
    """A card held by nouveau is named with the reason NVML cannot use it."""
    note = cuda_note(discover_at(cuda_scout, gpuscout_root(nvidia_card("nouveau"))))
    assert f"GPU {ADDRESS} (NVIDIA, class 0x030200) is bound to nouveau, which NVML cannot use" in note


def test_card_bound_to_nvidia_without_the_library_says_the_kernel_driver_is_loaded(
    missing_library: None, cuda_scout: Callable[..., Scout], gpuscout_root: RootFactory
) -> None:
    """With the kernel driver bound, only the user-space library is what is missing."""
    note = cuda_note(discover_at(cuda_scout, gpuscout_root(nvidia_card("nvidia"))))
    assert (
        f"GPU {ADDRESS} (NVIDIA, class 0x030200) is bound to nvidia, so the kernel driver is loaded"
    ) in note


def test_bus_without_an_nvidia_gpu_says_so(
    missing_library: None, cuda_scout: Callable[..., Scout], gpuscout_root: RootFactory
) -> None:
    """A bus holding only another vendor's devices says there is no NVIDIA GPU on it."""
    root = gpuscout_root(
        {f"{DEVICES}/0000:00:00.0/vendor": "0x8086\n", f"{DEVICES}/0000:00:00.0/class": "0x060000\n"}
    )
    assert "no NVIDIA GPU on the PCI bus (/sys/bus/pci/devices lists none)" in cuda_note(
        discover_at(cuda_scout, root)
    )


def test_capabilities_without_utility_say_nvml_is_not_mounted(
    missing_library: None, cuda_scout: Callable[..., Scout], gpuscout_root: RootFactory
) -> None:
    """NVIDIA_DRIVER_CAPABILITIES=compute is named: NVML comes only with utility."""
    found = discover_at(cuda_scout, gpuscout_root(), {"NVIDIA_DRIVER_CAPABILITIES": "compute"})
    assert (
        "NVIDIA_DRIVER_CAPABILITIES=compute lacks utility (or all): the NVIDIA container "
        "runtime mounts NVML (libnvidia-ml.so.1) into a container only with the utility "
        "capability"
    ) in cuda_note(found)


@pytest.mark.parametrize("value", ["all", "compute,utility", " utility ", ""])
def test_capabilities_with_utility_all_or_the_default_say_nothing(value: str) -> None:
    """utility or all in the list, or the empty default, is no reason."""
    assert diagnose.lacks_utility({"NVIDIA_DRIVER_CAPABILITIES": value}) == ""


@pytest.mark.parametrize(
    ("value", "shown"), [("void", "=void"), ("none", "=none"), ("", " is set but empty")]
)
def test_visible_devices_void_none_or_empty_say_no_gpu_was_exposed(
    value: str,
    shown: str,
    missing_library: None,
    cuda_scout: Callable[..., Scout],
    gpuscout_root: RootFactory,
) -> None:
    """NVIDIA_VISIBLE_DEVICES that exposes nothing is named."""
    found = discover_at(cuda_scout, gpuscout_root(), {"NVIDIA_VISIBLE_DEVICES": value})
    assert (
        f"NVIDIA_VISIBLE_DEVICES{shown}: the NVIDIA container runtime exposes no GPU to a "
        "container started with this value"
    ) in cuda_note(found)


def test_visible_devices_naming_a_gpu_is_no_reason() -> None:
    """NVIDIA_VISIBLE_DEVICES=all says nothing."""
    assert diagnose.exposed_no_gpu({"NVIDIA_VISIBLE_DEVICES": "all"}) == ""


def test_denied_control_node_is_named_with_the_missing_access(
    init_fails: Callable[[str], Any], cuda_scout: Callable[..., Scout], gpuscout_root: RootFactory
) -> None:
    """/dev/nvidiactl present but not permitted: the sentence names it and the missing access."""
    init_fails("NoPermission")
    root = gpuscout_root({"/dev/nvidiactl": "denied", "/dev/nvidia0": "", **nvidia_card("nvidia")})
    assert (
        "/dev/nvidiactl is present but this process lacks access to it (not in the video "
        "group, or a container started without the device?)"
    ) in cuda_note(discover_at(cuda_scout, root))


def test_missing_device_nodes_are_named_when_the_library_is_there(
    init_fails: Callable[[str], Any], cuda_scout: Callable[..., Scout], gpuscout_root: RootFactory
) -> None:
    """A library but neither /dev/nvidiactl nor /dev/nvidia<N>: the sentence says so."""
    init_fails("DriverNotLoaded")
    assert (
        "neither /dev/nvidiactl nor any /dev/nvidia<N> exists: the NVIDIA driver library "
        "is here but its device nodes are not"
    ) in cuda_note(discover_at(cuda_scout, gpuscout_root(nvidia_card("nvidia"))))


def test_gpu_node_missing_beside_the_control_node_is_named(
    init_fails: Callable[[str], Any], cuda_scout: Callable[..., Scout], gpuscout_root: RootFactory
) -> None:
    """/dev/nvidiactl without any /dev/nvidia<N>: no GPU is exposed to this process."""
    init_fails("DriverNotLoaded")
    root = gpuscout_root({"/dev/nvidiactl": ""})
    assert "/dev/nvidiactl exists but no /dev/nvidia<N> GPU node does" in cuda_note(
        discover_at(cuda_scout, root)
    )


def _unknown_error(fake: Any) -> None:
    """Makes the fake's nvmlInit raise NVML_ERROR_UNKNOWN (999), which conftest has no name for."""

    def init() -> None:
        error = fake.NVMLError("NotFound")
        error.value = diagnose.UNKNOWN_ERROR
        error.args = ("Unknown Error",)
        raise error

    fake.nvmlInit = init


def test_unknown_error_with_the_nodes_present_gives_the_daemon_reload_hint(
    init_fails: Callable[[str], Any], cuda_scout: Callable[..., Scout], gpuscout_root: RootFactory
) -> None:
    """Unknown Error from nvmlInit while the nodes exist names nvidia-container-toolkit#48."""
    _unknown_error(init_fails("NotFound"))
    root = gpuscout_root({"/dev/nvidiactl": "", "/dev/nvidia0": ""})
    note = cuda_note(discover_at(cuda_scout, root))
    assert (
        "NVML answered Unknown Error (999) although /dev/nvidiactl and /dev/nvidia0 are "
        "present (and /proc/driver/nvidia is not visible, as when a container masks it): in "
        "a container this is what a `systemctl daemon-reload` on the host does"
    ) in note


def test_unknown_error_with_refused_nodes_still_gives_the_daemon_reload_hint(
    init_fails: Callable[[str], Any], cuda_scout: Callable[..., Scout], gpuscout_root: RootFactory
) -> None:
    """A device cgroup revoked by a daemon-reload refuses the open (EPERM) of nodes that exist:
    the hint is given beside the refusal."""
    _unknown_error(init_fails("NotFound"))
    root = gpuscout_root({"/dev/nvidiactl": "denied EPERM", "/dev/nvidia0": "denied EPERM"})
    note = cuda_note(discover_at(cuda_scout, root))
    assert (
        "/dev/nvidiactl and /dev/nvidia0 are present but this process lacks access to them" in note,
        "NVIDIA/nvidia-container-toolkit#48" in note,
    ) == (True, True)


def test_unknown_error_without_the_nodes_gives_no_daemon_reload_hint(
    init_fails: Callable[[str], Any], cuda_scout: Callable[..., Scout], gpuscout_root: RootFactory
) -> None:
    """Without the nodes the missing nodes are the reason, not a revoked access."""
    _unknown_error(init_fails("NotFound"))
    assert "daemon-reload" not in cuda_note(discover_at(cuda_scout, gpuscout_root()))


def test_nvml_listing_no_gpu_names_the_missing_nodes(
    fake_nvml: Callable[..., Any],
    recording: Callable[[str], dict[str, Any]],
    cuda_scout: Callable[..., Scout],
    gpuscout_root: RootFactory,
) -> None:
    """A started NVML that counts no GPU gets the same device-node reasons."""
    data = recording("h200")
    data["gpus"] = []
    fake_nvml(data)
    assert "neither /dev/nvidiactl nor any /dev/nvidia<N> exists" in cuda_note(
        discover_at(cuda_scout, gpuscout_root())
    )


def test_healthy_discovery_does_not_look_for_reasons(
    fake_nvml: Callable[..., Any],
    no_probe: None,
    cuda_scout: Callable[..., Scout],
    monkeypatch: pytest.MonkeyPatch,
    gpuscout_root: RootFactory,
) -> None:
    """A discovery that finds GPUs scans neither the PCI bus nor the device nodes."""

    def boom(*args: Any) -> Any:
        raise AssertionError("a diagnosis ran on a discovery that found devices")

    monkeypatch.setattr(diagnose, "pci_gpus", boom)
    monkeypatch.setattr(diagnose, "device_node_problems", boom)
    fake_nvml("h200")
    found = cuda_scout(env={"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}, root=str(gpuscout_root())).discover()
    assert [r.status for r in found.plugins if r.name == "cuda"] == ["ok"] and found.devices


def test_other_platforms_get_no_linux_reasons(missing_library: None) -> None:
    """On Windows nothing of sysfs or the container runtime is said."""
    context = Context(env={"NVIDIA_VISIBLE_DEVICES": "void"}, platform="win32")
    nvml.enumerate_devices(context)
    assert context.notes == [FAKE_MISSING]


def test_hostile_tree_gives_reasons_without_hanging_or_raising(
    missing_library: None, cuda_scout: Callable[..., Scout], gpuscout_root: RootFactory
) -> None:
    """A FIFO class file and a looping driver link end in notes, promptly."""
    unbound: dict[str, Content] = {"vendor": "0x10de\n", "class": "0x030000\n", "driver": Symlink("driver")}
    files = {
        **nvidia_card(),
        f"{DEVICES}/{ADDRESS}/class": FIFO,
        **{f"{DEVICES}/0000:02:00.0/{k}": v for k, v in unbound.items()},
    }
    note = cuda_note(discover_at(cuda_scout, gpuscout_root(files)))
    assert (
        f"{DEVICES}/{ADDRESS}/class: not a regular file" in note,
        "GPU 0000:02:00.0 (NVIDIA, class 0x030000) has no driver bound" in note,
    ) == (True, True)
