"""Isolated discovery stays bounded (issue 20): a plugin printing hundreds of megabytes costs
the host nothing, and no process started for a call outlives it, not even one that left the
process group with ``setsid()`` (the isolation child and the runner are child subreapers)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gpuscout.runner import discover_in_child
from gpuscout.testing import eventually, processes_with_env

GOOD = """
    from gpuscout.plugin import DeviceInfo, hookimpl

    @hookimpl
    def gpuscout_enumerate(context):
        return [DeviceInfo(id="good0", library="Good", total_memory=8 << 30)]
"""
# 200 MB at import: in the isolation child, that is the host's pipe.
LOUD_IMPORT = """
    import sys
    from gpuscout.plugin import DeviceInfo, hookimpl

    _chunk = "i" * (1 << 20)
    for _ in range(200):
        sys.stderr.write(_chunk)
    sys.stderr.write("\\nloud_import: done\\n")
    sys.stderr.flush()

    @hookimpl
    def gpuscout_enumerate(context):
        return [DeviceInfo(id="loud_import0", library="LoudImport", total_memory=1 << 30)]
"""
LOUD_ENUMERATE = """
    import sys
    from gpuscout.plugin import DeviceInfo, hookimpl

    @hookimpl
    def gpuscout_enumerate(context):
        chunk = "e" * (1 << 20)
        for _ in range(200):
            sys.stderr.write(chunk)
        sys.stderr.flush()
        return [DeviceInfo(id="loud_enum0", library="LoudEnum", total_memory=1 << 30)]
"""
# A helper that leaves the process group (setsid) and sleeps; enumerate returns once it has.
# With DAEMON it forks once more and its first process exits (a daemon's double fork).
ESCAPER = """
    import os, subprocess, sys
    from gpuscout.plugin import DeviceInfo, hookimpl

    HELPER = ("import os, sys, time\\n"
              "os.setsid()\\n"
              "if {daemon} and os.fork():\\n"
              "    os._exit(0)\\n"
              "os.write(int(sys.argv[1]), b'x')\\n"
              "time.sleep(300)\\n")

    @hookimpl
    def gpuscout_enumerate(context):
        r, w = os.pipe()
        subprocess.Popen([sys.executable, "-c", HELPER, str(w), "gpuscout-escaper"],
                         pass_fds=(w,), stdin=subprocess.DEVNULL)
        os.close(w)
        os.read(r, 1)  # the helper has left the group
        return [DeviceInfo(id="{name}0", library="Escaper", total_memory=1 << 30)]
"""
PLUGINS = {
    "good": GOOD,
    "loud_import": LOUD_IMPORT,
    "loud_enum": LOUD_ENUMERATE,
    "setsid": ESCAPER.replace("{daemon}", "False").replace("{name}", "setsid"),
    "daemon": ESCAPER.replace("{daemon}", "True").replace("{name}", "daemon"),
}

#: What the host's peak RSS may grow by during the discovery (the plugins print 400 MB).
RSS_GROWTH = 50 << 20

# Run in a fresh interpreter, so that the peak RSS is this discovery's alone.
MEASURE = """
import json, resource, sys
from gpuscout import Scout
s = Scout(plugins=sys.argv[1].split(","), env=json.loads(sys.argv[2]), enumerate_timeout=20)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
found = s.discover(isolated=True)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"growth": (after - before) * 1024, "devices": [d.id for d in found.devices],
                  "plugins": {p.name: p.status for p in found.plugins}}))
"""


@pytest.fixture(scope="module")
def site(site_factory: Callable[..., Path]) -> Path:
    return site_factory(
        "gpuscout-bounds",
        "1.0",
        {f"bounds_{name}": source for name, source in PLUGINS.items()},
        {name: f"bounds_{name}" for name in PLUGINS},
    )


@pytest.fixture
def marker() -> Iterator[str]:
    if not os.path.isdir("/proc") or not sys.platform.startswith("linux"):
        pytest.skip("needs Linux /proc (and the subreaper) to see processes")
    value = uuid.uuid4().hex
    yield value
    left = processes_with_env("GPUSCOUT_TEST_MARK", value)
    for pid in left:  # a failing test must not leave its sleepers behind
        try:
            os.kill(pid, 9)
        except OSError:
            pass


def _env(site: Path, marker: str) -> dict[str, str]:
    return {
        "GPUSCOUT_TEST_MARK": marker,
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": str(site),
    }


@pytest.mark.parametrize("loud", ["loud_import", "loud_enum"])
def test_a_plugin_printing_200_mb_costs_the_host_no_memory(site: Path, marker: str, loud: str) -> None:
    """A plugin printing 200 MB to stderr, at import or in enumerate, leaves the host's peak RSS flat."""
    env = _env(site, marker)
    out = subprocess.run(
        [sys.executable, "-c", MEASURE, f"good,{loud}", json.dumps(env)],
        env={**os.environ, "PYTHONPATH": str(site)},
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        timeout=60,
    )
    assert out.returncode == 0
    result = json.loads(out.stdout)
    assert sorted(result["devices"]) == sorted(["good0", f"{loud}0"])
    assert result["growth"] < RSS_GROWTH, f"peak RSS grew by {result['growth'] >> 20} MiB"


@pytest.mark.parametrize("escaper", ["setsid", "daemon"])
def test_a_helper_that_leaves_the_group_does_not_outlive_the_call(
    site: Path, marker: str, escaper: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plugin's helper that left the process group does not outlive the isolated discovery."""
    from gpuscout import Scout

    monkeypatch.syspath_prepend(str(site))
    s = Scout(plugins=["good", escaper], env=_env(site, marker), enumerate_timeout=10)
    found = s.discover(isolated=True)
    assert sorted(d.id for d in found.devices) == sorted(["good0", f"{escaper}0"])
    assert eventually(lambda: not processes_with_env("GPUSCOUT_TEST_MARK", marker), within=3), (
        f"left running: {processes_with_env('GPUSCOUT_TEST_MARK', marker)}"
    )


@pytest.mark.parametrize("escaper", ["setsid", "daemon"])
def test_the_runner_kills_what_left_its_group(site: Path, marker: str, escaper: str) -> None:
    """A plugin's helper that left the runner's process group does not outlive the runner's discovery."""
    env = {**os.environ, **_env(site, marker)}
    command = [sys.executable, "-m", "gpuscout", "runner", "--port", "{port}", "--plugins", f"good,{escaper}"]
    devices = discover_in_child(env, timeout=20, command=command)
    assert sorted(d.id for d in devices) == sorted(["good0", f"{escaper}0"])
    assert eventually(lambda: not processes_with_env("GPUSCOUT_TEST_MARK", marker), within=3), (
        f"left running: {processes_with_env('GPUSCOUT_TEST_MARK', marker)}"
    )
