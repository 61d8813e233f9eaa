"""The suite gives the same result on a machine with any GPU, driver or none: shared fixtures hide
the machine's devices, and a representative subset passes on a fake GPU machine."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from gpuscout import Scout
from gpuscout.testing import scout_of
from tests.conftest import find_lavapipe

ROOT = Path(__file__).parent.parent
#: Files that once failed on a machine with a GPU, and the no-driver files (skipped there).
SUBSET = [
    "tests/test_discover.py",
    "tests/test_select.py",
    "tests/cli/test_cli_env.py",
    "tests/cli/test_cli_explain.py",
    "tests/plugins/vulkan/test_vulkan_duplicates.py",
    "tests/plugins/cuda/test_cuda_no_driver.py",
    "tests/plugins/rocm/test_amdsmi_source.py",
    "tests/test_hermetic.py",
]
THIS = "tests/test_hermetic.py::test_a_subset_passes_on_a_fake_gpu_machine"


def test_shared_scouts_find_no_device_even_where_env_names_one(scout_with: Callable[..., Scout]) -> None:
    """A test's own CUDA_/ROCR_VISIBLE_DEVICES=0 unhides none of the machine's GPUs."""
    scout = scout_with(
        env={"CUDA_VISIBLE_DEVICES": "0", "ROCR_VISIBLE_DEVICES": "0", "HIP_VISIBLE_DEVICES": "0"}
    )
    found = scout.discover()
    assert found.devices == [] and found.dropped == []
    assert all(r.status == "ok" for r in found.plugins)


def test_core_tests_see_no_nvidia_gpu_through_a_bare_scout() -> None:
    """Outside tests/plugins/ even a Scout built by hand sees no NVIDIA GPU of the machine."""
    found = scout_of("cuda", "rocm", env={"CUDA_VISIBLE_DEVICES": "0"}).discover()
    assert found.devices == []


@pytest.mark.real_machine
def test_a_test_marked_real_machine_sees_the_fake_machine(request: pytest.FixtureRequest) -> None:
    """``real_machine`` lifts the hiding: under --fake-machine=h200 the H200 is found."""
    fake = str(request.config.getoption("--fake-machine") or "")
    found = scout_of("cuda", env={}).discover()
    if "h200" in fake.split(","):
        assert [d.description for d in found.devices] == ["NVIDIA H200"]
    else:  # the real machine: whatever it has, reported without failing
        assert found.report("cuda").status == "ok"


def test_a_subset_passes_on_a_fake_gpu_machine() -> None:
    """With an H200 and an RX 7900 XTX faked for the whole run the subset passes, and only the
    no-driver tests are skipped, saying why (and, on a machine without Mesa's lavapipe, those
    that need it; under CI=true these fail the subset)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_ADDOPTS", "GPUSCOUT_TEST_FAKE_MACHINE")}
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-rs",
            "-p",
            "no:randomly",
            "--fake-machine=h200,rx7900xtx",
            "--deselect",
            THIS,
            *SUBSET,
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    tail = out.stdout[-4000:] + out.stderr[-2000:]
    assert out.returncode == 0, tail
    # "SKIPPED [count] file:line: reason", one line per reason (-rs groups them).
    reasons = [line.split(": ", 1)[-1] for line in out.stdout.splitlines() if line.startswith("SKIPPED")]
    missing = find_lavapipe()[1]
    assert sorted(r.rsplit("; ", 1)[-1] for r in reasons) == sorted(
        [
            "the fake machine (h200) has one",
            "the fake machine (rx7900xtx) has one",
            *([f"{missing} is missing"] if missing else []),
        ]
    ), tail


def test_property_tests_are_never_timed_wherever_they_run() -> None:
    """The loaded profile (dev or CI) has no deadline and skips the too-slow health check."""
    assert settings().deadline is None and HealthCheck.too_slow in settings().suppress_health_check
