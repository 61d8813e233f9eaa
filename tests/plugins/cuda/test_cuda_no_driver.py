"""The real paths on a machine without the NVIDIA driver (this one), and import cost."""

from __future__ import annotations

import subprocess
import sys

from gpuscout import Discovery, PluginReport
from gpuscout.testing import ScoutFactory

# The whole contract of this file assumes no NVIDIA driver; fail loudly if one appears.
NO_DRIVER_NOTE = "NVML library libnvidia-ml.so.1 cannot be loaded"


def _cuda_report(found: Discovery) -> PluginReport:
    return found.report("cuda")


def test_missing_driver_gives_no_devices_and_an_ok_report(gpuscout_scout: ScoutFactory) -> None:
    """Without libnvidia-ml the plugin finds nothing, is ok, and names NVML in its error."""
    found = gpuscout_scout("cuda").discover()
    report = _cuda_report(found)
    assert (found.devices, report.status, report.devices) == ([], "ok", 0)
    assert report.note.startswith(NO_DRIVER_NOTE)


def test_missing_driver_path_does_not_import_pynvml() -> None:
    """The library check comes first, so pynvml is never imported without a driver."""
    code = (
        "import sys\n"
        "from gpuscout import Scout\n"
        "Scout(plugins=['cuda'], entry_points=False, platform='linux').discover()\n"
        "print('pynvml' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "False"


def test_importing_the_plugin_does_not_import_pynvml() -> None:
    """Importing gpuscout.plugins.cuda loads neither pynvml nor ctypes' NVML."""
    code = "import sys, gpuscout.plugins.cuda\nprint('pynvml' in sys.modules)\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "False"


def test_pynvml_itself_reports_library_not_found_here() -> None:
    """Past the fast path, nvmlInit on this machine raises LibraryNotFound (value 12)."""
    import pynvml  # type: ignore[import-untyped]

    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        assert exc.value == pynvml.NVML_ERROR_LIBRARY_NOT_FOUND
    else:  # pragma: no cover - only on a machine with the driver
        pynvml.nvmlShutdown()
        raise AssertionError("nvmlInit succeeded: this machine has an NVIDIA driver")


def test_macos_reports_that_nvml_does_not_exist(gpuscout_scout: ScoutFactory) -> None:
    """On darwin the plugin does not look for NVML and says why."""
    found = gpuscout_scout("cuda", platform="darwin").discover()
    assert _cuda_report(found).note == "NVML does not exist on macOS (no NVIDIA driver)"


def test_enumeration_without_a_driver_is_fast(gpuscout_scout: ScoutFactory) -> None:
    """The missing-driver path neither retries nor waits: far under a second even on a loaded
    machine (its real cost, a few milliseconds, is bench/plugin_cost.py's figure)."""
    scout = gpuscout_scout("cuda")
    found = scout.discover()
    assert _cuda_report(found).elapsed < 1.0
