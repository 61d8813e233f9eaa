"""In isolated discovery each plugin's worker answers on its own (issue 20, part 1): a worker
that forks without exec, kills its parent or its process group, writes garbage on every
descriptor it holds, stops its parent, closes its descriptors or answers near the size limit
costs only its own plugin. The good plugins' devices come back, the call ends in bounded time,
and no process started for it is left."""

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

from gpuscout import Scout
from gpuscout._host.isolation import MAX_ANSWER
from gpuscout.testing import eventually, processes_with_env

GOOD = """
    from gpuscout.plugin import DeviceInfo, hookimpl

    @hookimpl
    def gpuscout_enumerate(context):
        return [DeviceInfo(id="{name}0", library="Good", total_memory=8 << 30)]
"""
HOSTILE = """
    import os, signal, sys, time
    from gpuscout.plugin import DeviceInfo, hookimpl

    @hookimpl
    def gpuscout_enumerate(context):
        {attack}
        return [DeviceInfo(id="{name}0", library="Hostile", total_memory=1 << 30)]
"""
#: What each hostile plugin does in its enumerate before it returns a device of its own.
ATTACKS = {
    # A helper forked without exec holds whatever the worker holds, and sleeps.
    "forker": "if os.fork() == 0:\n            time.sleep(120)\n            os._exit(0)",
    # ... and one that writes garbage on every descriptor it has, after the worker is gone.
    "forkwriter": (
        "if os.fork() == 0:\n            time.sleep(0.5)\n"
        "            for fd in range(3, 256):\n"
        "                try: os.write(fd, b'}garbage{\\n' * 1000)\n"
        "                except OSError: pass\n"
        "            time.sleep(120)\n            os._exit(0)"
    ),
    "parentkiller": "os.kill(os.getppid(), signal.SIGKILL)\n        time.sleep(30)",
    "parentterm": "os.kill(os.getppid(), signal.SIGTERM)\n        time.sleep(30)",
    "groupkiller": "os.killpg(0, signal.SIGKILL)",
    "parentstopper": "os.kill(os.getppid(), signal.SIGSTOP)",
    "fdwriter": (
        "for fd in range(0, 256):\n"
        "            try: os.write(fd, b'}not json{\\n' * 100)\n"
        "            except OSError: pass"
    ),
    "closer": "os.closerange(0, 4096)",
}
#: A worker answering within a whisker of its limit, in as many devices as it takes.
NEAR_CAP = """
    import json
    from gpuscout.plugin import DeviceInfo, hookimpl
    from gpuscout._host.isolation import MAX_ANSWER, encode_device

    @hookimpl
    def gpuscout_enumerate(context):
        one = lambda i: DeviceInfo(id=f"big{i}", library="Big", name="n" * 4000,
                                   total_memory=1 << 30)
        size = len(json.dumps(encode_device(one(0)))) + 2
        return [one(i) for i in range((MAX_ANSWER - (256 << 10)) // size)]
"""
GOODS = ["good_a", "good_b", "good_c"]


def _modules() -> dict[str, str]:
    mods = {f"w_{g}": GOOD.replace("{name}", g) for g in GOODS}
    for name, attack in ATTACKS.items():
        mods[f"w_{name}"] = HOSTILE.replace("{attack}", attack).replace("{name}", name)
    mods["w_nearcap"] = NEAR_CAP
    return mods


@pytest.fixture(scope="module")
def site(site_factory: Callable[..., Path]) -> Path:
    modules = _modules()
    return site_factory(
        "gpuscout-hostile-workers", "1.0", modules, {m.removeprefix("w_"): m for m in modules}
    )


@pytest.fixture
def marker() -> Iterator[str]:
    if not sys.platform.startswith("linux"):
        pytest.skip("needs Linux /proc to see the processes a call leaves")
    value = uuid.uuid4().hex
    yield value
    for pid in processes_with_env("GPUSCOUT_TEST_MARK", value):
        try:
            os.kill(pid, 9)
        except OSError:
            pass


def _scout(
    site: Path, marker: str, plugins: list[str], timeout: float, monkeypatch: pytest.MonkeyPatch
) -> Scout:
    monkeypatch.syspath_prepend(str(site))
    return Scout(
        plugins=plugins,
        enumerate_timeout=timeout,
        env={
            "GPUSCOUT_TEST_MARK": marker,
            "PYTHONPATH": str(site),
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        },
    )


def _nothing_left(marker: str) -> None:
    assert eventually(lambda: not processes_with_env("GPUSCOUT_TEST_MARK", marker), within=5), (
        f"left running: {processes_with_env('GPUSCOUT_TEST_MARK', marker)}"
    )


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_a_hostile_worker_costs_only_its_own_plugin(
    site: Path, marker: str, attack: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The good plugins around the hostile one come back, the call ends well inside its
    deadline plus the child's start, and nothing it started is left."""
    plugins = [GOODS[0], attack, GOODS[1], GOODS[2]]
    s = _scout(site, marker, plugins, 6.0, monkeypatch)
    start = time.monotonic()
    found = s.discover(isolated=True)
    took = time.monotonic() - start
    status = {p.name: p.status.value for p in found.plugins if p.status.value != "disabled"}
    assert sorted(d.id for d in found.devices if d.library == "Good") == [f"{g}0" for g in GOODS], {
        p.name: p.error for p in found.plugins
    }
    assert all(status[g] == "ok" for g in GOODS), status
    assert took < 6.0 + 5.0, f"took {took:.1f} s"
    _nothing_left(marker)


@pytest.mark.parametrize("attack", ["parentkiller", "groupkiller", "parentterm", "closer"])
def test_the_hostile_plugin_itself_is_reported_failed_with_what_became_of_it(
    site: Path, marker: str, attack: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The plugin that broke its own worker is ``failed``, and says how."""
    found = _scout(site, marker, [GOODS[0], attack], 6.0, monkeypatch).discover(isolated=True)
    report = found.report(attack)
    assert report.status.value == "failed"
    expected = {
        "parentkiller": "supervisor crashed: SIGKILL",
        "groupkiller": "supervisor crashed: SIGKILL",
        "parentterm": "supervisor crashed: SIGTERM",
        "closer": "exited without an answer",
    }[attack]
    assert expected in report.error, report.error
    assert not any(d.library == "Hostile" for d in found.devices)
    _nothing_left(marker)


def test_a_worker_that_stops_its_parent_times_out_alone(
    site: Path, marker: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stopped supervisor never says how its worker did: at the deadline its group is
    killed and the plugin is ``timeout``; the others answered long before."""
    found = _scout(site, marker, [GOODS[0], "parentstopper"], 2.0, monkeypatch).discover(isolated=True)
    status = {p.name: p.status.value for p in found.plugins if p.status.value != "disabled"}
    assert status == {GOODS[0]: "ok", "parentstopper": "timeout"}
    _nothing_left(marker)


def test_garbage_on_every_descriptor_reaches_no_other_answer(
    site: Path, marker: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker that writes garbage on every descriptor it holds spoils only its own answer
    (its descriptors are its answer pipe and its stderr): its plugin is ``failed`` with an
    unreadable answer, and the host's answer is whole."""
    found = _scout(site, marker, [GOODS[0], "fdwriter", GOODS[1]], 6.0, monkeypatch).discover(isolated=True)
    report = found.report("fdwriter")
    assert report.status.value == "failed"
    assert "unreadable answer" in report.error, report.error
    assert sorted(d.id for d in found.devices) == [f"{g}0" for g in GOODS[:2]]
    _nothing_left(marker)


def test_an_answer_near_the_limit_costs_no_other_plugin(
    site: Path, marker: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One worker answering just under MAX_ANSWER: its devices and every other plugin's come
    back (the zygote's answer is bounded per plugin, not by one worker's limit)."""
    found = _scout(site, marker, [GOODS[0], "nearcap", GOODS[1]], 30.0, monkeypatch).discover(isolated=True)
    status = {p.name: p.status.value for p in found.plugins if p.status.value != "disabled"}
    assert status == {GOODS[0]: "ok", "nearcap": "ok", GOODS[1]: "ok"}, {
        p.name: p.error for p in found.plugins
    }
    big = [d for d in found.devices if d.library == "Big"]
    assert len(big) > 7000 and len(big) * 4000 < MAX_ANSWER
    _nothing_left(marker)


def test_every_attack_at_once_through_the_command_line(site: Path, marker: str) -> None:
    """``gpuscout list --isolated`` with every hostile plugin loaded together: the good
    devices are listed, the command ends in bounded time with status 0, and nothing is left."""
    plugins = [GOODS[0], *sorted(ATTACKS), GOODS[1], GOODS[2]]
    env = {**os.environ, "PYTHONPATH": str(site), "GPUSCOUT_TEST_MARK": marker}
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
            "5",
            "--plugins",
            ",".join(plugins),
        ],
        env=env,
        capture_output=True,
        timeout=60,
    )
    took = time.monotonic() - start
    assert out.returncode == 0, out.stderr[-2000:]
    listed = json.loads(out.stdout)
    ids = sorted(d["id"] for d in listed["devices"])
    assert [i for i in ids if i.startswith("good")] == [f"{g}0" for g in GOODS]
    assert took < 5 + 5 + 10, f"took {took:.1f} s"
    _nothing_left(marker)
