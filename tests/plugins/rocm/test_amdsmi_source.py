"""The amdsmi source: its real absence here, and a stand-in fed an MI300X's recorded answers."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from types import SimpleNamespace
from typing import Any

import pytest

from gpuscout import DeviceInfo
from gpuscout._machine.context import Context
from gpuscout.plugins.rocm import enumeration as discover
from gpuscout.plugins.rocm import hsakmt, smi, sysfs
from gpuscout.sizes import GIB
from gpuscout.testing import ScoutFactory

AMDSMI_MISSING = importlib.util.find_spec("amdsmi") is None


class AmdsmiStandIn:
    """Not amdsmi: answers amdsmi's calls for one SPX MI300X the way amdsmi 7.0 shapes them."""

    AmdSmiInitFlags = SimpleNamespace(INIT_AMD_GPUS=2)
    AmdSmiMemoryType = SimpleNamespace(VRAM=0, VIS_VRAM=1, GTT=2)

    def __init__(self, fail_init: bool = False) -> None:
        self.fail_init = fail_init
        self.calls: list[str] = []

    def amdsmi_init(self, flags: int) -> None:
        self.calls.append("init")
        if self.fail_init:
            raise RuntimeError("stand-in: AMDSMI_STATUS_DRIVER_NOT_LOADED")

    def amdsmi_shut_down(self) -> None:
        self.calls.append("shut_down")

    def amdsmi_get_processor_handles(self) -> list[str]:
        return ["handle-0"]

    def amdsmi_get_gpu_asic_info(self, h: str) -> dict[str, Any]:
        return {
            "market_name": "AMD Instinct MI300X",
            "vendor_id": "0x1002",
            "device_id": "0x74a1",
            "target_graphics_version": "gfx942",
        }

    def amdsmi_get_gpu_kfd_info(self, h: str) -> dict[str, int]:
        return {"kfd_id": 47210, "node_id": 2}

    def amdsmi_get_gpu_enumeration_info(self, h: str) -> dict[str, Any]:
        return {"drm_render": 128, "hsa_id": 2, "hip_id": 0, "hip_uuid": "GPU-8d1e2c3a00001000"}

    def amdsmi_get_gpu_device_bdf(self, h: str) -> str:
        return "0000:05:00.0"

    def amdsmi_get_gpu_memory_total(self, h: str, kind: int) -> int:
        return {0: 192 * GIB, 2: 1008 * GIB}[kind]

    def amdsmi_get_gpu_memory_usage(self, h: str, kind: int) -> int:
        return {0: 2952790016, 2: 58720256}[kind]

    def amdsmi_get_gpu_vram_usage(self, h: str) -> dict[str, int]:
        raise AssertionError("not needed when memory_total answers")


def test_amdsmi_import_failure_is_a_reason_not_an_exception() -> None:
    """Importing amdsmi where it cannot load gives (None, a reason naming amdsmi)."""
    if not AMDSMI_MISSING:
        pytest.skip("amdsmi is installed here")
    module, why = smi.import_amdsmi()
    assert (module, why.startswith("amdsmi unavailable (")) == (None, True)


def test_live_root_without_amdsmi_falls_back_to_sysfs_and_names_amdsmi(gpuscout_scout: ScoutFactory) -> None:
    """On "/" with no amdsmi and no AMD GPU, the plugin finds nothing and its note names amdsmi."""
    if not AMDSMI_MISSING or os.path.isdir("/sys/class/kfd/kfd/topology/nodes"):
        pytest.skip("this machine has amdsmi or a KFD topology")
    result = gpuscout_scout("rocm", env={}).discover()
    report = result.report("rocm")
    assert (result.devices, report.status, "amdsmi unavailable" in report.note) == ([], "ok", True)


def test_recorded_tree_root_never_imports_amdsmi() -> None:
    """Enumerating a recorded tree leaves amdsmi unimported (it cannot read a tree)."""
    code = (
        "import sys; from gpuscout import Scout; "
        f"Scout(plugins=['rocm'], entry_points=False, env={{}}, platform='linux', "
        f"root={str(os.path.join(os.path.dirname(__file__), 'trees', 'rx7900xtx'))!r}).discover(); "
        "print('amdsmi' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines()[-1] == "False"


def test_importing_the_plugin_imports_no_amdsmi() -> None:
    """``import gpuscout.plugins.rocm`` costs nothing: amdsmi is not imported."""
    code = "import sys, gpuscout.plugins.rocm; print('amdsmi' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines()[-1] == "False"


def test_stand_in_answers_read_into_one_gpu_and_shut_down() -> None:
    """read_all initialises, reads every handle and shuts amdsmi down."""
    stand_in = AmdsmiStandIn()
    gpus = smi.read_all(stand_in)
    assert (gpus, stand_in.calls) == (
        [
            smi.SmiGpu(
                bdf="0000:05:00.0",
                kfd_node=2,
                market_name="AMD Instinct MI300X",
                gfx_version=90402,
                device_id=0x74A1,
                unique_id=0x8D1E2C3A00001000,
                vram_total=192 * GIB,
                vram_used=2952790016,
                gtt_total=1008 * GIB,
                gtt_used=58720256,
            )
        ],
        ["init", "shut_down"],
    )


def test_amdsmi_alone_builds_the_record_when_kfd_is_unreadable(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Any,
) -> None:
    """With amdsmi working on a live root but no KFD topology, amdsmi's answers make the record."""
    monkeypatch.setattr(smi, "import_amdsmi", lambda: (AmdsmiStandIn(), ""))
    monkeypatch.setattr(sysfs, "read_kfd_gpu_nodes", lambda ctx: None)
    monkeypatch.setattr(hsakmt, "kfd_failure", lambda ctx: "")
    found = discover.enumerate_devices(Context(env={}, platform="linux", root="/"))
    assert found == [
        DeviceInfo(
            id="GPU-8d1e2c3a00001000",
            library="ROCm",
            name="ROCm0",
            description="AMD Instinct MI300X",
            filter_id="GPU-8d1e2c3a00001000",
            pci_id="0000:05:00.0",
            total_memory=192 * GIB,
            free_memory=192 * GIB - 2952790016,
            compute_major=0x9,
            compute_minor=0x42,
            gfx_target="gfx942",
            uuid="GPU-8d1e2c3a00001000",
        )
    ]


def test_amdsmi_gpus_without_dev_kfd_give_no_device_and_say_why(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Any,
) -> None:
    """amdsmi reads the driver directly, but the HSA runtime opens /dev/kfd first (libhsakmt
    openclose.c ``hsaKmtOpenKFD``): without it there is no device, and the note names /dev/kfd."""
    monkeypatch.setattr(smi, "import_amdsmi", lambda: (AmdsmiStandIn(), ""))
    monkeypatch.setattr(sysfs, "read_kfd_gpu_nodes", lambda ctx: None)
    ctx = Context(env={}, platform="linux", root="/")
    monkeypatch.setattr(Context, "path", lambda self, p: os.path.join(tmp_path, p.lstrip("/")))
    assert (discover.enumerate_devices(ctx), "/dev/kfd cannot be opened" in ctx.notes[-1]) == ([], True)


def test_amdsmi_failure_falls_back_to_sysfs(monkeypatch: pytest.MonkeyPatch) -> None:
    """An amdsmi that fails to initialise leaves the KFD topology to answer."""
    tree = os.path.join(os.path.dirname(__file__), "trees", "rx7900xtx")
    monkeypatch.setattr(smi, "import_amdsmi", lambda: (AmdsmiStandIn(fail_init=True), ""))
    ctx = Context(env={}, platform="linux", root="/")
    monkeypatch.setattr(Context, "path", lambda self, p: os.path.join(tree, p.lstrip("/")))
    found = discover.enumerate_devices(ctx)
    assert [(d.id, d.total_memory) for d in found] == [("GPU-6f3c9a1e2b4d5870", 25753026560)]


def test_amdsmi_name_and_memory_overlay_the_kfd_node_it_names() -> None:
    """amdsmi's market name joins KFD node 2 of the CPX tree by node id; partition memory stays."""
    tree = os.path.join(os.path.dirname(__file__), "trees", "mi300x_cpx")
    ctx = Context(env={}, platform="linux", root=tree)
    nodes = sysfs.read_kfd_gpu_nodes(ctx) or []
    facts = discover.facts_from_sysfs(ctx, nodes)
    gpu = smi.SmiGpu(kfd_node=2, market_name="MI300X (from amdsmi)", vram_total=1)
    merged = discover.overlay_smi(facts, [gpu], nodes)
    assert [(f.market_name, f.vram_total) for f in merged[:2]] == [
        ("MI300X (from amdsmi)", 192 * GIB),
        ("AMD Instinct MI300X", 192 * GIB),
    ]


def test_non_linux_without_amdsmi_reports_nothing_with_a_note() -> None:
    """Off Linux with no amdsmi there is no sysfs to read: zero devices and a note."""
    if not AMDSMI_MISSING:
        pytest.skip("amdsmi is installed here")
    ctx = Context(env={}, platform="win32", root="/")
    assert (discover.enumerate_devices(ctx), "win32" in ctx.notes[0]) == ([], True)
