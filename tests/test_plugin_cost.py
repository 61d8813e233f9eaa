"""Without a driver the CUDA and ROCm plugins cost nothing (issue 19, ``bench/plugin_cost.py``):
their enumerate answers "no driver" from the package itself (with ``diagnose``'s reasons), and
the modules that read a driver (with the rule, visibility and order modules they import) are
never loaded. That short path must give the same report as the full one.

Each check runs a fresh interpreter, so that ``sys.modules`` holds only what discovery loaded;
the children see this machine as it is (hence ``real_machine``), with CUDA_VISIBLE_DEVICES and
the AMD visibility variables unset.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

import pytest

#: Loaded only once a driver may be there (``enumeration`` imports readings, order, unified
#: and visibility).
CUDA_DRIVER_MODULES = {
    f"gpuscout.plugins.cuda.{m}"
    for m in ("enumeration", "readings", "order", "unified", "visibility", "rules")
} | {"pynvml"}
#: Loaded only once an AMD GPU may be there (``enumeration`` imports the rest).
ROCM_DRIVER_MODULES = {
    f"gpuscout.plugins.rocm.{m}"
    for m in ("enumeration", "devices", "gfx", "hsakmt", "smi", "sysfs", "visibility", "rules")
} | {"amdsmi"}
UNSET = (
    "CUDA_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES",
    "GPU_DEVICE_ORDINAL",
    "GPUSCOUT_PLUGINS",
    "GPUSCOUT_DISABLE_PLUGINS",
)

#: One discovery with ``PLUGINS`` in a fresh interpreter; with ``FULL`` the modules of the full
#: path are imported first (so the package's short path stands aside). Prints the plugins'
#: reports and the gpuscout modules loaded, as JSON.
DISCOVER = """
import json, sys
plugins, full = json.loads(sys.argv[1]), json.loads(sys.argv[2])
for module in full:
    __import__(module)
from gpuscout import Scout
found = Scout(plugins=plugins, entry_points=False, platform="linux").discover()
print(json.dumps({
    "reports": {r.name: [r.status, r.devices, r.note] for r in found.plugins if r.name in plugins},
    "modules": sorted(m for m in sys.modules if m.startswith("gpuscout") or m in ("pynvml", "amdsmi")),
}))
"""

# ``python -m gpuscout ARGS``, then every module loaded on the last stderr line (as in
# tests/cli/test_cli_imports.py).
CLI = """
import json, os, runpy, sys
sys.argv[0] = "gpuscout"
try:
    runpy.run_module("gpuscout", run_name="__main__", alter_sys=True)
finally:
    os.write(2, ("\\nMODULES " + json.dumps(sorted(sys.modules)) + "\\n").encode())
"""


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in UNSET}
    env["VK_DRIVER_FILES"] = "/nonexistent/gpuscout-test.json"  # no Vulkan driver to load
    return env


def discover(plugins: list[str], full: Sequence[str] = ()) -> dict[str, Any]:
    """The reports and loaded modules of one discovery with ``plugins`` (see ``DISCOVER``)."""
    out = subprocess.run(
        [sys.executable, "-c", DISCOVER, json.dumps(plugins), json.dumps(list(full))],
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(),
    )
    assert out.returncode == 0, out.stderr
    found: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return found


@pytest.mark.real_machine
@pytest.mark.needs_no_nvidia_driver
def test_cuda_without_a_driver_loads_no_driver_rule_visibility_or_order_module() -> None:
    """Without a driver, CUDA says so and loads none of its driver, rule, visibility or order modules."""
    found = discover(["cuda"])
    assert found["reports"]["cuda"][:2] == ["ok", 0]
    assert found["reports"]["cuda"][2].startswith("NVML library libnvidia-ml.so.1 cannot be loaded")
    assert set(found["modules"]) & CUDA_DRIVER_MODULES == set()


@pytest.mark.real_machine
@pytest.mark.needs_no_amd_gpu
def test_rocm_without_a_gpu_loads_no_sysfs_amdsmi_rule_or_visibility_module() -> None:
    """Without an AMD GPU, ROCm says so and loads none of its sysfs, amdsmi, rule or visibility modules."""
    found = discover(["rocm"])
    assert found["reports"]["rocm"][:2] == ["ok", 0]
    assert found["reports"]["rocm"][2].startswith("no AMD GPU: no KFD topology")
    assert set(found["modules"]) & ROCM_DRIVER_MODULES == set()


@pytest.mark.real_machine
@pytest.mark.needs_no_nvidia_driver
def test_cuda_short_path_reports_what_the_full_path_reports() -> None:
    """The package's "no driver" answer is nvml.enumerate_devices' own, note for note: a change
    to nvml's no-driver path (another note, a recorded answer) must be made in
    ``gpuscout.plugins.cuda._surely_no_driver`` too."""
    short = discover(["cuda"])["reports"]
    full = discover(["cuda"], ["gpuscout.plugins.cuda.enumeration"])["reports"]
    assert short == full, "plugins/cuda/__init__.py _surely_no_driver no longer matches enumeration.py"


@pytest.mark.real_machine
@pytest.mark.needs_no_amd_gpu
def test_rocm_short_path_reports_what_the_full_path_reports() -> None:
    """The package's "no AMD GPU" answer is discover.enumerate_devices' own, note for note: a
    change to discover's no-topology path must be made in
    ``gpuscout.plugins.rocm._surely_no_gpu`` too."""
    short = discover(["rocm"])["reports"]
    full = discover(["rocm"], ["gpuscout.plugins.rocm.enumeration"])["reports"]
    assert short == full, "plugins/rocm/__init__.py _surely_no_gpu no longer matches discover.py"


@pytest.mark.real_machine
@pytest.mark.needs_no_nvidia_driver
@pytest.mark.needs_no_amd_gpu
def test_list_json_loads_only_the_names_modules_of_cuda_and_rocm() -> None:
    """`gpuscout list --json` (every plugin) loads of the CUDA and ROCm plugins their package,
    its ``names`` module and ``diagnose`` (which says why there is no GPU), nothing else."""
    out = subprocess.run(
        [sys.executable, "-c", CLI, "list", "--json"], capture_output=True, text=True, timeout=120, env=_env()
    )
    assert out.returncode == 0, out.stderr
    assert "devices" in json.loads(out.stdout)
    last = out.stderr.rstrip("\n").rsplit("\n", 1)[-1]
    assert last.startswith("MODULES "), out.stderr
    loaded = set(json.loads(last.removeprefix("MODULES ")))
    assert sorted(m for m in loaded if m.startswith(("gpuscout.plugins.cuda", "gpuscout.plugins.rocm"))) == [
        "gpuscout.plugins.cuda",
        "gpuscout.plugins.cuda.diagnosis",
        "gpuscout.plugins.cuda.names",
        "gpuscout.plugins.rocm",
        "gpuscout.plugins.rocm.diagnosis",
        "gpuscout.plugins.rocm.names",
    ]
    assert loaded & {"pynvml", "amdsmi"} == set()
