"""Isolated discovery with real child processes: a plugin that segfaults, one that calls
os._exit, one that hangs (with a grandchild), one that prints megabytes to stderr and one that
prints to stdout, installed for real next to a good one. Each crash costs only its plugin, the
reports say how it died, and no process is left behind (checked, not assumed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gpuscout import DeviceInfo, Scout
from gpuscout.testing import eventually, injected, processes_with_env, running

GOOD = """
    from gpuscout.plugin import DeviceInfo, hookimpl

    @hookimpl
    def gpuscout_enumerate(context):
        return [DeviceInfo(id="good0", library="Good", name="Good card", description="Good card",
                           pci_id="0000:0a:00.0", total_memory=8 << 30, free_memory=4 << 30,
                           runner_env_overrides={"GOOD_MODE": "1"}, nvidia_driver_major=0)]
"""
SEGV = """
    import ctypes, sys
    from gpuscout.plugin import hookimpl

    @hookimpl
    def gpuscout_enumerate(context):
        sys.stderr.write("segv: the driver is about to touch address 0\\n")
        sys.stderr.flush()
        ctypes.string_at(0)
"""
EXITER = """
    import os, sys
    from gpuscout.plugin import hookimpl

    @hookimpl
    def gpuscout_enumerate(context):
        print("exiter: giving up", file=sys.stderr, flush=True)
        os._exit(7)
"""
HANGER = """
    import subprocess, time
    from gpuscout.plugin import hookimpl

    @hookimpl
    def gpuscout_enumerate(context):
        subprocess.Popen(["sleep", "300"])  # a driver helper that would outlive us
        time.sleep(300)
"""
NOISY = """
    import sys
    from gpuscout.plugin import DeviceInfo, hookimpl

    @hookimpl
    def gpuscout_enumerate(context):
        for _ in range(80):
            sys.stderr.write("x" * 65535 + "\\n")
        sys.stderr.write("noisy: done\\n")
        print("noisy: this went to stdout")
        context.note("noisy wrote 5 MiB to stderr")
        return [DeviceInfo(id="n0", library="Noisy", total_memory=1 << 30)]
"""
SLEEPER = """
    import time
    from gpuscout.plugin import hookimpl

    @hookimpl
    def gpuscout_enumerate(context):
        time.sleep(300)
"""
PLUGINS = {"good": GOOD, "segv": SEGV, "exiter": EXITER, "hanger": HANGER, "noisy": NOISY, "sleeper": SLEEPER}


@pytest.fixture(scope="module")
def site(site_factory: Callable[..., Path]) -> Path:
    """An installed distribution with the five plugins as entry points."""
    return site_factory(
        "gpuscout-hostile-isolated",
        "1.0",
        {f"iso_{name}": source for name, source in PLUGINS.items()},
        {name: f"iso_{name}" for name in PLUGINS},
    )


@pytest.fixture
def marker() -> str:
    """A value put into the Scout's environment: every process of the discovery carries it."""
    return uuid.uuid4().hex


@pytest.fixture
def nothing_left(marker: str) -> Iterator[None]:
    """After the test, no process of its discovery is still running (a few seconds' grace)."""
    if not os.path.isdir("/proc"):
        pytest.skip("needs /proc to see processes")  # Linux only, like the CI machine
    yield
    assert eventually(lambda: not processes_with_env("GPUSCOUT_TEST_MARK", marker)), (
        f"processes left behind: {processes_with_env('GPUSCOUT_TEST_MARK', marker)}"
    )


def scout(
    site: Path,
    marker: str,
    monkeypatch: pytest.MonkeyPatch,
    *names: str,
    timeout: float = 2.0,
    extra: tuple[tuple[str, object], ...] = (),
) -> Scout:
    monkeypatch.syspath_prepend(str(site))
    env = {"GPUSCOUT_TEST_MARK": marker, "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    return Scout(
        plugins=[*names, *(n for n, _ in extra)], extra=list(extra), env=env, enumerate_timeout=timeout
    )


def test_each_crash_costs_only_its_plugin(
    site: Path, marker: str, nothing_left: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Isolated, a plugin's crash, exit, hang or noise fails only that plugin, within its deadline."""
    s = scout(site, marker, monkeypatch, *(n for n in PLUGINS if n != "sleeper"))
    start = time.monotonic()
    found = s.discover(isolated=True)
    took = time.monotonic() - start
    reports = {r.name: r for r in found.plugins}
    assert [d.id for d in found.devices] == ["good0", "n0"]
    assert (reports["good"].status, reports["good"].devices) == ("ok", 1)
    assert reports["segv"].status == "failed"
    assert reports["segv"].error == (
        "gpuscout_enumerate: crashed: SIGSEGV; last stderr: segv: the driver is about to touch address 0"
    )
    assert reports["exiter"].status == "failed"
    assert reports["exiter"].error == (
        "gpuscout_enumerate: exited with status 7; last stderr: exiter: giving up"
    )
    assert reports["hanger"].status == "timeout"
    assert "within 2 s" in reports["hanger"].error
    assert (reports["noisy"].status, reports["noisy"].note) == ("ok", "noisy wrote 5 MiB to stderr")
    # The hanging plugin's deadline, plus the child's start, not the sum of anything.
    assert took < 2.0 + 4.0


def test_records_cross_the_boundary_whole_and_equal_in_process(
    site: Path, marker: str, nothing_left: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Discovery has the same shape: even fields the wire format leaves out survive."""
    s = scout(site, marker, monkeypatch, "good", "noisy")
    isolated, local = s.discover(isolated=True), s.discover()
    assert isolated.devices == local.devices
    assert isolated.devices[0].runner_env_overrides == {"GOOD_MODE": "1"}
    assert [(r.name, r.status, r.devices) for r in isolated.plugins] == [
        (r.name, r.status, r.devices) for r in local.plugins
    ]


def test_an_in_process_plugin_runs_here_and_says_so(
    site: Path, marker: str, nothing_left: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plugin object passed in runs in the host even when isolated, and its report says so."""
    card = DeviceInfo(id="x0", library="Extra", total_memory=1 << 30)
    s = scout(site, marker, monkeypatch, "good", extra=(injected([card]),))
    found = s.discover(isolated=True)
    assert sorted(d.id for d in found.devices) == ["good0", "x0"]
    report = found.report("injected")
    assert report.status == "ok" and "cannot be loaded in a child" in report.note


def test_the_child_sees_exactly_the_scouts_env_platform_and_root(
    site_factory: Callable[..., Path],
    tmp_path: Path,
    marker: str,
    nothing_left: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The isolation child gives plugins exactly the Scout's env, platform and root."""
    echo = """
        import os
        from gpuscout.plugin import DeviceInfo, hookimpl

        @hookimpl
        def gpuscout_enumerate(context):
            text = context.read_text("/etc/acme") or ""
            same = dict(os.environ) == dict(context.env)
            return [DeviceInfo(id=f"{context.platform}|{text}|{same}|{context.env['ACME']}",
                               library="Echo")]
    """
    site = site_factory("gpuscout-echo", "1.0", {"iso_echo": echo}, {"echo": "iso_echo"})
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "acme").write_text("recorded")
    monkeypatch.syspath_prepend(str(site))
    s = Scout(
        plugins=["echo"],
        env={"GPUSCOUT_TEST_MARK": marker, "ACME": "$(x)'\""},
        platform="linux",
        root=str(tmp_path),
    )
    assert [d.id for d in s.discover(isolated=True).devices] == ["linux|recorded|True|$(x)'\""]


def test_list_isolated_reports_a_crash_and_a_hang_on_the_command_line(
    site: Path, marker: str, nothing_left: None
) -> None:
    """list --isolated exits 0 with the good devices and reports the crash and the hang."""
    env = {**os.environ, "PYTHONPATH": str(site), "GPUSCOUT_TEST_MARK": marker}
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpuscout",
            "list",
            "--isolated",
            "--json",
            "--timeout",
            "2",
            "--plugins",
            "good,segv,hanger",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert out.returncode == 0, out.stderr
    document = json.loads(out.stdout)
    assert [d["id"] for d in document["devices"]] == ["good0"]
    status = {p["name"]: (p["status"], p["error"]) for p in document["plugins"]}
    assert status["segv"][0] == "failed" and "crashed: SIGSEGV" in status["segv"][1]
    assert status["hanger"][0] == "timeout"
    assert "gpuscout: plugin segv failed: gpuscout_enumerate: crashed: SIGSEGV" in out.stderr


def test_without_isolation_the_segfault_takes_the_host_down(site: Path) -> None:
    """Why the option exists: the same plugin in-process kills the whole command."""
    env = {**os.environ, "PYTHONPATH": str(site)}
    out = subprocess.run(
        [sys.executable, "-m", "gpuscout", "list", "--json", "--plugins", "good,segv"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert out.returncode < 0 and out.stdout == ""


def test_a_host_killed_outright_leaves_nothing_behind(site: Path, marker: str, nothing_left: None) -> None:
    """SIGKILL runs no clean-up in the host (a Ray worker cancelled by force dies so): the
    isolation child learns of its parent's death from the kernel and kills its whole group,
    the hanging plugin's worker and its ``sleep 300`` grandchild included."""
    env = {**os.environ, "PYTHONPATH": str(site), "GPUSCOUT_TEST_MARK": marker}
    host = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gpuscout",
            "list",
            "--isolated",
            "--json",
            "--timeout",
            "60",
            "--plugins",
            "good,hanger",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    try:
        # The grandchild is running: the hanging plugin has started in its worker.
        assert eventually(
            lambda: any(
                cmdline(pid).startswith(b"sleep\0")
                for pid in processes_with_env("GPUSCOUT_TEST_MARK", marker)
                if running(pid)
            ),
            within=30,
        )
    finally:
        host.kill()
        host.wait()


def parent_of(pid: int) -> int:
    """``pid``'s parent (Linux /proc); 0 once it has gone."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[1])
    except OSError:
        return 0


def cmdline(pid: int) -> bytes:
    """``pid``'s command line (Linux /proc), b"" once it has gone: a process listed a moment
    ago may have ended before it is read."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def test_a_worker_dies_with_its_zygote_however_the_zygote_dies(
    site: Path, marker: str, nothing_left: None
) -> None:
    """A host's own clean-up may SIGKILL its direct children (Ray's workers do on exit), which
    leaves the zygote no chance to kill its group: each plugin's worker, and the supervisor
    that watches it, die with it anyway."""
    env = {**os.environ, "PYTHONPATH": str(site), "GPUSCOUT_TEST_MARK": marker}
    host = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gpuscout",
            "list",
            "--isolated",
            "--json",
            "--timeout",
            "60",
            "--plugins",
            "sleeper",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )

    def isolation() -> list[int]:
        return [
            p
            for p in processes_with_env("GPUSCOUT_TEST_MARK", marker)
            if p != host.pid and b"gpuscout._host.isolation.child" in cmdline(p)
        ]

    try:
        assert eventually(lambda: len(isolation()) == 3, within=30), "zygote, supervisor, worker"
        zygote = next(p for p in isolation() if parent_of(p) == host.pid)
        below = [p for p in isolation() if p != zygote]
        os.kill(zygote, 9)
        assert eventually(lambda: not any(running(p) for p in below), within=5), (
            "the worker or its supervisor outlived the zygote"
        )
    finally:
        host.kill()
        host.wait()


SEGV_ON_IMPORT = """
    import ctypes, sys
    sys.stderr.write("segv-import: loading the vendor library\\n")
    sys.stderr.flush()
    ctypes.string_at(0)
"""
HANG_ON_IMPORT = """
    import time
    time.sleep(300)
"""


@pytest.fixture(scope="module")
def import_site(site_factory: Callable[..., Path]) -> Path:
    """Plugins that crash or hang when imported, next to a good one."""
    return site_factory(
        "gpuscout-hostile-imports",
        "1.0",
        {"imp_good": GOOD, "imp_segv": SEGV_ON_IMPORT, "imp_hang": HANG_ON_IMPORT},
        {"good": "imp_good", "segvimport": "imp_segv", "hangimport": "imp_hang"},
    )


def test_isolated_imports_keep_a_crashing_import_out_of_the_host(
    import_site: Path, marker: str, nothing_left: None
) -> None:
    """--isolated imports each plugin in a child first: one that segfaults on import, or hangs
    there, is reported and never imported by the host, which lists the rest."""
    env = {**os.environ, "PYTHONPATH": str(import_site), "GPUSCOUT_TEST_MARK": marker}
    start = time.monotonic()
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpuscout",
            "list",
            "--isolated",
            "--json",
            "--timeout",
            "2",
            "--plugins",
            "good,segvimport,hangimport",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert out.returncode == 0, out.stderr
    document = json.loads(out.stdout)
    assert [d["id"] for d in document["devices"]] == ["good0"]
    status = {p["name"]: (p["status"], p["error"]) for p in document["plugins"]}
    assert status["good"][0] == "ok"
    assert status["segvimport"] == (
        "failed",
        "plugin 'segvimport': import crashed: SIGSEGV in a child (the plugin was not "
        "imported here); last stderr: segv-import: loading the vendor library",
    )
    assert status["hangimport"][0] == "timeout"
    assert "import did not finish within 2 s (in a child" in status["hangimport"][1]
    assert time.monotonic() - start < 2 + 2 * 5 + 10


def test_a_scout_can_contain_imports_in_process(
    import_site: Path, marker: str, nothing_left: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same through the library: Scout(isolate_imports=True) survives the plugin."""
    monkeypatch.syspath_prepend(str(import_site))
    env = {"GPUSCOUT_TEST_MARK": marker, "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    s = Scout(plugins=["good", "segvimport"], env=env, enumerate_timeout=2.0, isolate_imports=True)
    reports = {r.name: r for r in s.reports}
    assert reports["segvimport"].status == "failed"
    assert "crashed: SIGSEGV" in reports["segvimport"].error
    assert [d.id for d in s.discover().devices] == ["good0"]


def test_built_in_plugins_load_nothing_native_when_imported() -> None:
    """Why the import probe skips the built-ins: importing them loads no driver binding (their
    ctypes, cffi, pynvml and amdsmi imports wait for enumerate, where isolation covers them)."""
    code = (
        "import sys; import gpuscout.plugins.cuda, gpuscout.plugins.rocm, "
        "gpuscout.plugins.metal, gpuscout.plugins.vulkan; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'ctypes', '_ctypes', 'cffi', '_cffi_backend', 'vulkan', 'pynvml', 'amdsmi', 'Metal'}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert (out.returncode, out.stdout.strip()) == (0, "[]"), out.stderr
