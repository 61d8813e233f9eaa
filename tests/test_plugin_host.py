"""Fault isolation and plugin selection: bad plugins are reported, never felt by the host."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gpuscout import DeviceInfo, Scout, hookimpl
from gpuscout.errors import UnknownPluginError
from gpuscout.testing import ScoutFactory

BUILTINS = ["cuda", "rocm", "metal", "vulkan"]


class Good:
    @hookimpl
    def gpuscout_enumerate(self, context: Any) -> list[DeviceInfo]:
        return [DeviceInfo(id="g0", library="Good", total_memory=1)]


class Raises:
    @hookimpl
    def gpuscout_enumerate(self, context: Any) -> list[DeviceInfo]:
        raise RuntimeError("driver exploded")

    @hookimpl
    def gpuscout_minimum_memory(self, device: DeviceInfo) -> int | None:
        raise RuntimeError("rule exploded")


class WrongType:
    @hookimpl
    def gpuscout_enumerate(self, context: Any) -> Any:
        return {"not": "a list"}

    @hookimpl
    def gpuscout_preferred_library(self, device: DeviceInfo, other: DeviceInfo) -> Any:
        return "yes"


class Hangs:
    @hookimpl
    def gpuscout_enumerate(self, context: Any) -> list[DeviceInfo]:
        time.sleep(3)
        return [DeviceInfo(id="late", library="Hangs")]


class BadSignature:
    @hookimpl
    def gpuscout_enumerate(self, ctx_misnamed: Any) -> list[DeviceInfo]:
        return []


def report(s: Scout, name: str) -> Any:
    return next(r for r in s.reports if r.name == name)


def test_a_raising_plugin_is_reported_and_others_still_answer(gpuscout_scout: ScoutFactory) -> None:
    """An enumerate that raises costs only its own plugin."""
    s = gpuscout_scout(("bad", Raises()), ("good", Good()))
    found = s.discover()
    assert [d.id for d in found.devices] == ["g0"]
    bad = report(s, "bad")
    assert bad.status == "failed" and "driver exploded" in bad.error and "RuntimeError" in bad.error


def test_a_wrong_type_is_reported_and_ignored(gpuscout_scout: ScoutFactory) -> None:
    """An enumerate answer that is not a list of DeviceInfo is a failure of that plugin."""
    s = gpuscout_scout(("wrong", WrongType()), ("good", Good()))
    assert [d.id for d in s.discover().devices] == ["g0"]
    assert "expected a list of DeviceInfo" in report(s, "wrong").error


def test_a_hanging_plugin_times_out_and_its_late_answer_is_ignored(gpuscout_scout: ScoutFactory) -> None:
    """An enumerate past its deadline is reported as timeout; discovery returns on time."""
    s = gpuscout_scout(("slow", Hangs()), ("good", Good()), enumerate_timeout=0.2)
    start = time.monotonic()
    found = s.discover()
    assert time.monotonic() - start < 2
    assert [d.id for d in found.devices] == ["g0"]
    slow = report(s, "slow")
    assert slow.status == "timeout" and "0.2 s" in slow.error and slow.devices == 0


def test_a_raising_rule_hook_falls_back_and_is_reported(gpuscout_scout: ScoutFactory) -> None:
    """A rule hook that raises is skipped (core default applies) and the plugin reported."""
    s = gpuscout_scout(("bad", Raises()))
    assert s.minimum_memory(DeviceInfo(library="X")) == 457 * 1024**2
    assert "gpuscout_minimum_memory" in report(s, "bad").error


def test_a_wrong_type_from_a_rule_hook_is_ignored(gpuscout_scout: ScoutFactory) -> None:
    """A non-bool preference is not taken as an answer."""
    s = gpuscout_scout(("wrong", WrongType()))
    assert s.preferred(DeviceInfo(library="A"), DeviceInfo(library="B")) is False
    assert "expected bool or None" in report(s, "wrong").error


def test_a_plugin_with_a_bad_hook_signature_fails_to_load(gpuscout_scout: ScoutFactory) -> None:
    """A hookimpl whose arguments the spec does not know is refused at registration."""
    s = gpuscout_scout(("odd", BadSignature()), ("good", Good()))
    assert report(s, "odd").status == "failed" and "ctx_misnamed" in report(s, "odd").error
    assert [d.id for d in s.discover().devices] == ["g0"]


def test_reports_count_devices_and_time(gpuscout_scout: ScoutFactory) -> None:
    """Each report says how many devices its plugin found and how long it took."""
    s = gpuscout_scout(("good", Good()))
    s.discover()
    good = report(s, "good")
    assert (good.status, good.devices, good.error) == ("ok", 1, "")
    assert 0 <= good.elapsed < 1 and good.hooks == ["gpuscout_enumerate"]


def test_builtins_are_registered_under_their_short_names() -> None:
    """The four built-ins load by default, named cuda, rocm, metal, vulkan."""
    s = Scout(entry_points=False, env={})
    assert [r.name for r in s.reports] == BUILTINS
    assert all(r.distribution == "gpuscout" and r.status == "ok" for r in s.reports)


@pytest.mark.parametrize(
    ("kwargs", "env", "loaded"),
    [
        ({"plugins": ["cuda"]}, {}, ["cuda"]),
        ({"disable": ["cuda", "rocm"]}, {}, ["metal", "vulkan"]),
        ({}, {"GPUSCOUT_PLUGINS": "rocm, vulkan"}, ["rocm", "vulkan"]),
        ({}, {"GPUSCOUT_DISABLE_PLUGINS": "vulkan"}, ["cuda", "rocm", "metal"]),
        ({"plugins": ["cuda", "rocm"]}, {"GPUSCOUT_DISABLE_PLUGINS": "rocm"}, ["cuda"]),
        # The argument overrides the environment's allow list; deny lists add up.
        ({"plugins": ["cuda", "rocm"]}, {"GPUSCOUT_PLUGINS": "rocm,metal"}, ["cuda", "rocm"]),
        ({"plugins": [" CUDA ", "Vulkan"]}, {}, ["cuda", "vulkan"]),
        ({"disable": ["ROCm"]}, {"GPUSCOUT_DISABLE_PLUGINS": " Metal "}, ["cuda", "vulkan"]),
    ],
)
def test_allow_and_deny_lists_choose_the_plugins(
    kwargs: dict[str, Any], env: dict[str, str], loaded: list[str]
) -> None:
    """Arguments and GPUSCOUT_PLUGINS / GPUSCOUT_DISABLE_PLUGINS pick what loads."""
    s = Scout(entry_points=False, env=env, **kwargs)
    assert [r.name for r in s.reports if r.status == "ok"] == loaded
    assert {r.name for r in s.reports if r.status == "disabled"} == set(BUILTINS) - set(loaded)


def test_a_blocked_builtin_is_never_imported() -> None:
    """Blocking happens before import: the blocked module never enters sys.modules."""
    code = (
        "import sys; from gpuscout import Scout; Scout(disable=['cuda'], entry_points=False);"
        "print('gpuscout.plugins.cuda' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr


# -- real entry points -------------------------------------------------------------------------

ENTRY_PLUGINS = {
    "eptest_good": """
        from gpuscout import DeviceInfo, hookimpl

        @hookimpl
        def gpuscout_enumerate(context):
            return [DeviceInfo(id="ep0", library="EntryPoint", description="from an entry point",
                               total_memory=2 * 1024**3, free_memory=1024**3)]
    """,
    "eptest_raiser": """
        from gpuscout import hookimpl

        @hookimpl
        def gpuscout_enumerate(context):
            raise OSError("no such driver")
    """,
    "eptest_broken": """
        raise ImportError("this plugin cannot be imported")
    """,
    "eptest_exits": """
        import sys
        sys.exit("this plugin calls sys.exit() at import")
    """,
    "eptest_blocked": """
        import os
        open(os.environ["EPTEST_MARKER"], "w").write("imported")
    """,
}


@pytest.fixture(scope="module")
def entry_point_dir(site_factory: Callable[..., Path]) -> Path:
    """A folder holding a real installed distribution with four gpuscout entry points."""
    return site_factory(
        "gpuscout-eptest", "1.2.3", ENTRY_PLUGINS, {m.removeprefix("eptest_"): m for m in ENTRY_PLUGINS}
    )


def test_entry_point_plugins_load_fail_and_block_independently(entry_point_dir: Path, tmp_path: Path) -> None:
    """Through real entry points: one works, one raises, one cannot import, one exits at import,
    one is never imported."""
    marker = tmp_path / "marker"
    env = {
        "PYTHONPATH": str(entry_point_dir),
        "EPTEST_MARKER": str(marker),
        "GPUSCOUT_DISABLE_PLUGINS": "blocked",
        "VK_DRIVER_FILES": "/nonexistent.json",
        "PATH": "/usr/bin:/bin",
    }
    out = subprocess.run(
        [sys.executable, "-m", "gpuscout", "list", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert [d["id"] for d in doc["devices"]] == ["ep0"]
    reports = {r["name"]: r for r in doc["plugins"]}
    assert reports["good"]["status"] == "ok" and reports["good"]["version"] == "1.2.3"
    assert reports["good"]["distribution"] == "gpuscout-eptest"
    assert reports["raiser"]["status"] == "failed" and "no such driver" in reports["raiser"]["error"]
    assert reports["broken"]["status"] == "failed"
    assert "cannot be imported" in reports["broken"]["error"]
    assert reports["blocked"]["status"] == "disabled" and not marker.exists()
    assert reports["exits"]["status"] == "failed" and "sys.exit()" in reports["exits"]["error"]
    assert "plugin raiser failed" in out.stderr


def test_entry_points_can_be_switched_off(entry_point_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """entry_points=False loads no third-party plugin: naming one in the allow list is refused."""
    monkeypatch.syspath_prepend(str(entry_point_dir))
    assert any(r.name == "good" for r in Scout(entry_points=True).reports)
    with pytest.raises(UnknownPluginError, match="'good'"):
        Scout(entry_points=False, plugins=["good"])
    assert all(r.name != "good" for r in Scout(entry_points=False).reports)


class FailsOnce:
    def __init__(self) -> None:
        self.calls = 0

    @hookimpl
    def gpuscout_enumerate(self, context: Any) -> list[DeviceInfo]:
        self.calls += 1
        if self.calls == 1:
            raise RuntimeError("first call fails")
        return [DeviceInfo(id="x", library="Flaky")]


def test_each_discovery_reports_its_own_run(gpuscout_scout: ScoutFactory) -> None:
    """A plugin that failed once is ok in the next run; an earlier Discovery keeps its report."""
    s = gpuscout_scout(("flaky", FailsOnce()))
    first = s.discover()
    second = s.discover()
    assert (first.plugins[-1].status, first.plugins[-1].devices) == ("failed", 0)
    assert (second.plugins[-1].status, second.plugins[-1].error, second.plugins[-1].devices) == ("ok", "", 1)
    assert [d.id for d in second.devices] == ["x"]


def test_a_load_failure_stays_reported_across_runs(gpuscout_scout: ScoutFactory) -> None:
    """A plugin that could not register is reported failed in every discovery."""
    s = gpuscout_scout(("odd", BadSignature()))
    s.discover()
    assert s.discover().plugins[-1].status == "failed"


def test_concurrent_discoveries_on_one_scout_do_not_mix_reports(gpuscout_scout: ScoutFactory) -> None:
    """Discoveries from several threads each return complete, consistent reports."""
    import threading

    s = gpuscout_scout(("good", Good()))
    results: list[Any] = []
    threads = [threading.Thread(target=lambda: results.append(s.discover())) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [(r.plugins[-1].status, r.plugins[-1].devices) for r in results] == [("ok", 1)] * 4


class Exits:
    @hookimpl
    def gpuscout_enumerate(self, context: Any) -> list[DeviceInfo]:
        raise SystemExit(3)

    @hookimpl
    def gpuscout_flash_attention(self, device: DeviceInfo) -> bool | None:
        raise SystemExit(4)


def test_a_plugin_calling_sys_exit_does_not_end_the_host(gpuscout_scout: ScoutFactory) -> None:
    """SystemExit from a hook is a plugin failure like any other."""
    s = gpuscout_scout(("exits", Exits()), ("good", Good()))
    assert [d.id for d in s.discover().devices] == ["g0"]
    assert s.flash_attention_supported([DeviceInfo(library="cpu")]) is True
    assert "sys.exit(3)" in report(s, "exits").error
