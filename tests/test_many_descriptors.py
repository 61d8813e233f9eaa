"""Every child pipe is waited on with poll, not select: a host (or an isolation child) with more
than 1024 descriptors open still runs isolated discovery and the import probe, and a probe
that cannot run is a reported failure, never a silent skip (docs/containment.md)."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gpuscout import Scout

GOOD = """
    from gpuscout.plugin import DeviceInfo, hookimpl

    @hookimpl
    def gpuscout_enumerate(context):
        return [DeviceInfo(id="good0", library="Good", name="Good card", total_memory=8 << 30)]
"""
#: Raises its own descriptor limit and holds 1100 files open from its import on.
HOARDER = """
    import os, resource
    from gpuscout.plugin import DeviceInfo, hookimpl

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 8192), hard))
    HELD = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]

    @hookimpl
    def gpuscout_enumerate(context):
        more = [os.open(os.devnull, os.O_RDONLY) for _ in range(100)]
        return [DeviceInfo(id="h0", library="Hoard", name=f"held {len(HELD) + len(more)}")]
"""
SEGV_IMPORT = """
    import ctypes
    ctypes.string_at(0)
"""
#: Counted on the host: more than select's FD_SETSIZE.
MANY = 1100


@pytest.fixture(scope="module")
def site(site_factory: Callable[..., Path]) -> Path:
    """An installed distribution holding the good, hoarding and import-crashing plugins."""
    return site_factory(
        "gpuscout-many-descriptors",
        "1.0",
        {"fd_good": GOOD, "fd_hoarder": HOARDER, "fd_segv_import": SEGV_IMPORT},
        {"good": "fd_good", "hoarder": "fd_hoarder", "segvimport": "fd_segv_import"},
    )


@pytest.fixture
def many_open() -> Iterator[None]:
    """This process holds more than 1024 descriptors open (its soft limit raised if needed)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < MANY + 200:
        pytest.skip(f"the hard descriptor limit {hard} is below {MANY + 200}")
    wanted = MANY + 500 if hard == resource.RLIM_INFINITY else min(hard, MANY + 500)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, wanted), hard))
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(MANY)]
    try:
        yield
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_isolated_discovery_runs_with_over_1024_descriptors_open(
    site: Path, many_open: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """discover(isolated=True) in a host holding 1100 descriptors finds the good plugin's device
    (select() raised ValueError for descriptors past 1023)."""
    monkeypatch.syspath_prepend(str(site))
    found = Scout(plugins=["good"], env=dict(os.environ), enumerate_timeout=10).discover(isolated=True)
    statuses = {r.name: r.status for r in found.plugins if r.status != "disabled"}
    assert ([d.id for d in found.devices], statuses) == (["good0"], {"good": "ok"})


def test_a_plugin_that_opens_1100_files_costs_nothing_in_the_isolation_child(
    site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plugin that raises its descriptor limit and holds 1100 files from its import on does
    not break the isolation child: both plugins answer."""
    monkeypatch.syspath_prepend(str(site))
    found = Scout(plugins=["good", "hoarder"], env=dict(os.environ), enumerate_timeout=10).discover(
        isolated=True
    )
    reports = {r.name: (r.status, r.error) for r in found.plugins if r.status != "disabled"}
    assert reports == {"good": ("ok", ""), "hoarder": ("ok", "")}
    assert sorted(d.id for d in found.devices) == ["good0", "h0"]


#: Run in a fresh interpreter, so that a plugin whose import crashes cannot take pytest down.
PROBE_CHILD = """
import json, os, resource, sys
sys.path.insert(0, sys.argv[1])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
from gpuscout import Scout
scout = Scout(plugins=["good", "segvimport"], isolate_imports=True, enumerate_timeout=10)
print(json.dumps({r.name: [r.status, r.error] for r in scout.reports}))
"""


def test_import_probe_runs_with_over_1024_descriptors_open(site: Path) -> None:
    """Scout(isolate_imports=True) in a host holding 1100 descriptors still probes: a plugin whose
    import segfaults is reported failed and never imported in the host (which lives)."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE_CHILD, str(site)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    reports = json.loads(done.stdout.strip().splitlines()[-1])
    assert reports["good"][0] == "ok"
    assert reports["segvimport"][0] == "failed"
    assert "SIGSEGV" in reports["segvimport"][1]


def test_an_import_probe_that_cannot_run_is_a_reported_failure(
    site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A probe child that answers garbage fails the plugins it was to probe, which are then not
    imported in the host: never a silent skip."""
    from gpuscout._host.isolation import probe

    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(probe, "_BOOT", "print('not an event'); import sys; sys.stdout.flush()")
    scout = Scout(plugins=["good"], isolate_imports=True, enumerate_timeout=5)
    report = next(r for r in scout.reports if r.name == "good")
    assert report.status == "failed"
    assert "import probe" in report.error
