"""scripts/device_check.py: what runs without a driver, and its pure parts fed recorded answers."""

from __future__ import annotations

import ctypes
import importlib.util
import json
import pathlib
import subprocess
import sys
from types import ModuleType
from typing import Any

import pytest

from gpuscout import Scout
from gpuscout.plugins.cuda import enumeration as nvml

ROOT = pathlib.Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "device_check.py"
PROBES = ROOT / "scripts" / "device_probes.py"
CUDA_TESTS = ROOT / "tests" / "plugins" / "cuda"
UUID = "GPU-0e9f4a6b-3c21-4d7e-a5f8-9b2d6e1c4a37"


def _load(name: str, path: pathlib.Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while building classes
    spec.loader.exec_module(module)
    return module


dc = _load("device_check_under_test", SCRIPT)


def _driver_present() -> bool:
    try:
        ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return False
    return True


no_driver_only = pytest.mark.skipif(_driver_present(), reason="an NVIDIA driver is installed here")


def raw_nvml(**gpu_changes: Any) -> dict[str, Any]:
    """An NVML dump as device_probes.py prints it, with the recorded H200's figures."""
    gpu = {
        "index": 0,
        "name": "NVIDIA H200",
        "uuid": UUID,
        "memory_v2": {"total": 150754820096, "reserved": 613416960, "free": 150140354560, "used": 614465536},
        "memory_v1": {"total": 150754820096, "free": 150140354560, "used": 614465536},
        "pci": {
            "busId": "00000000:19:00.0",
            "domain": 0,
            "bus": 25,
            "device": 0,
            "busIdLegacy": "0000:19:00.0",
            "pciDeviceId": 0x233510DE,
        },
        "compute": [9, 0],
        "mig_mode": [0, 0],
        "persistence_mode": 0,
    }
    gpu.update(gpu_changes)
    return {
        "library": "libnvidia-ml.so.1",
        "nvml_version": "12.570.124.06",
        "driver": {"kernel": "570.124.06", "cuda": 12080, "cuda_v2": 12080},
        "count": 1,
        "gpus": [gpu],
        "shutdown": None,
    }


def raw_cuda(*uuids: str, **device_changes: Any) -> dict[str, Any]:
    """A CUDA child's dump showing ``uuids`` (the H200's PCI figures for each)."""
    devices = [
        {
            "ordinal": i,
            "uuid": u,
            "uuid_call": "cuDeviceGetUuid_v2",
            "name": "NVIDIA H200",
            "pci_bus_id": "0000:19:00.0",
            "pci_bus": 25,
            "pci_device": 0,
            "pci_domain": 0,
            "integrated": 0,
            "compute_major": 9,
            "compute_minor": 0,
            "total_mem": 150141403136,
            **device_changes,
        }
        for i, u in enumerate(uuids)
    ]
    dump: dict[str, Any] = {"driver_version": 12080, "count": len(devices), "devices": devices}
    if not devices:
        dump["init"] = {"error": "CUDA_ERROR_NO_DEVICE", "code": 100}
    return dump


def listing(*uuids: str) -> dict[str, Any]:
    """``gpuscout list --json`` output holding CUDA devices with these UUIDs."""
    return {
        "devices": [
            {
                "id": u,
                "uuid": u,
                "backend": "CUDA",
                "pci_id": "0000:19:00.0",
                "total_memory": 150141403136,
                "ComputeMajor": 9,
                "ComputeMinor": 0,
            }
            for u in uuids
        ]
    }


@no_driver_only
def test_check_without_driver_stops_at_once_with_exit_2() -> None:
    """Without libnvidia-ml the check says so on stderr and exits 2, no traceback."""
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--gpuscout", "false"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 2
    assert "no NVIDIA driver (libnvidia-ml.so.1 cannot be loaded" in done.stderr
    assert "Traceback" not in done.stderr + done.stdout


@no_driver_only
def test_nvml_probe_without_driver_prints_the_load_error_as_json() -> None:
    """The NVML probe child reports a missing library as data and exits 0."""
    done = subprocess.run(
        [sys.executable, str(PROBES), "nvml"], capture_output=True, text=True, timeout=30, check=False
    )
    assert done.returncode == 0
    assert "libnvidia-ml.so.1" in json.loads(done.stdout)["load_error"]


def test_matrix_for_one_gpu_tries_every_spelling_of_it() -> None:
    """One GPU gives the unset, empty, index, UUID and malformed cases in a fixed order."""
    values = [c.value for c in dc.matrix_cases([UUID])]
    assert values == [
        None,
        "",
        "-1",
        "0,0",
        "0",
        "1",
        UUID,
        UUID[:12],
        UUID.upper(),
        UUID.removeprefix("GPU-"),
        " 0",
        "0gpu",
    ]


def test_matrix_indexes_every_gpu_and_one_past_the_end() -> None:
    """Two GPUs give indices 0 and 1 and the invalid index 2."""
    values = [c.value for c in dc.matrix_cases([UUID, "GPU-1"])]
    assert ["0", "1", "2"] == [v for v in values if v in ("0", "1", "2")]


def test_case_env_unset_removes_the_variable_and_empty_keeps_it() -> None:
    """An unset case drops CUDA_VISIBLE_DEVICES; an empty case sets it to ''."""
    base = {"CUDA_VISIBLE_DEVICES": "0", "PATH": "/bin"}
    assert dc.case_env(base, dc.Case("unset", None)) == {"PATH": "/bin"}
    assert dc.case_env(base, dc.Case("empty", ""))["CUDA_VISIBLE_DEVICES"] == ""


def test_matrix_row_agrees_when_both_see_the_same_uuid_in_any_case() -> None:
    """The same device seen by CUDA and gpuscout (case ignored) is an agreement."""
    row = dc.matrix_row(dc.Case("full UUID", UUID), raw_cuda(UUID), listing(UUID.upper()))
    assert row.status == dc.AGREE


def test_matrix_row_disagrees_when_gpuscout_shows_a_hidden_gpu() -> None:
    """CUDA seeing nothing while gpuscout lists the GPU is a disagreement, with CUDA's reason."""
    row = dc.matrix_row(dc.Case("empty", ""), raw_cuda(), listing(UUID))
    assert (row.status, row.cuda) == (dc.DIFFER, "- [CUDA_ERROR_NO_DEVICE]")


def test_matrix_row_fails_when_a_side_gave_no_answer() -> None:
    """A child that timed out makes the row FAILED, naming why."""
    row = dc.matrix_row(dc.Case("unset", None), raw_cuda(UUID), "timed out after 60 s")
    assert (row.status, row.gpuscout) == (dc.FAILED, "timed out after 60 s")


def test_nvml_and_cuda_views_of_one_h200_agree() -> None:
    """Matching UUID, PCI address, compute capability and CUDA version leave no failing row."""
    rows = dc.nvml_rows(raw_nvml(), raw_cuda(UUID))
    assert [r.check for r in rows if r.status in dc.BAD] == []
    assert any(r.status == dc.AGREE and "PCI" in r.check for r in rows)


def test_a_different_pci_bus_in_cuda_is_a_disagreement() -> None:
    """CUDA naming another bus than NVML for one UUID fails the PCI row."""
    rows = dc.nvml_rows(raw_nvml(), raw_cuda(UUID, pci_bus=26))
    assert [r.status for r in rows if "PCI" in r.check] == [dc.DIFFER]


def test_gpuscout_records_are_checked_against_nvml() -> None:
    """gpuscout's pci_id, CUDA total, integrated flag and compute capability all agree."""
    rows = dc.record_rows(raw_nvml(), raw_cuda(UUID), listing(UUID))
    assert [r.status for r in rows] == [dc.AGREE] * 4


def test_gpuscout_total_other_than_cuda_total_is_a_disagreement() -> None:
    """A gpuscout total that is NVML's v2 total, not cuDeviceTotalMem_v2, is flagged."""
    rows = dc.record_rows(raw_nvml(), raw_cuda(UUID, total_mem=150141403136 - 2**20), listing(UUID))
    assert [r.status for r in rows if "total_memory" in r.check] == [dc.DIFFER]


def test_table_and_exit_status_follow_the_rows() -> None:
    """The table has a header and one line per row; a DISAGREE row makes the exit status 1."""
    rows = [dc.Row("a", "1", "1", dc.AGREE), dc.Row("long check", "x", "y", dc.DIFFER)]
    lines = dc.render(rows).splitlines()
    assert len(lines) == 3 and lines[2].endswith("DISAGREE")
    assert lines[1].index("1") == lines[2].index("x")
    assert dc.exit_status(rows, installed=True) == 1
    assert dc.exit_status(rows[:1], installed=True) == 0
    assert dc.exit_status(rows[:1], installed=False) == 3


def test_one_gpu_without_mig_names_the_recorded_cases_that_cover_the_rest() -> None:
    """MIG and multi-GPU order are reported as covered, by files that exist."""
    rows = dc.covered_rows(gpu_count=1, mig_seen=False)
    text = " ".join(r.gpuscout for r in rows)
    assert {r.status for r in rows} == {dc.COVERED}
    assert "a100_mig.json" in text and "h100_sxm_x2.json" in text and "MISSING" not in text


def test_written_fixture_replays_through_the_recorded_nvml_fake(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The captured card, as written to disk, discovers the same H200 through FakeNvmlRecorded."""
    conftest = _load("cuda_conftest_for_device_check", CUDA_TESTS / "conftest.py")
    raw = raw_nvml(memory_v1={"error": "NotSupported", "code": 3})
    card = dc.recorded_card(raw, {"by": "test"})
    path = tmp_path / dc.fixture_name(card)
    path.write_text(json.dumps(card))
    assert path.name == "captured_h200.json"
    fake = conftest.FakeNvmlRecorded(json.loads(path.read_text()))
    monkeypatch.setattr(nvml, "_load_nvml", lambda context: fake)
    (device,) = Scout(plugins=["cuda"], entry_points=False, env={}, platform="linux").discover().devices
    # gpuscout sizes a device as CUDA does: NVML's v2 total less what the driver reserves.
    assert (device.uuid, device.pci_id, device.total_memory) == (UUID, "0000:19:00.0", 150141403136)
    assert (device.driver_major, device.driver_minor, fake.open_sessions) == (12, 8, 0)
