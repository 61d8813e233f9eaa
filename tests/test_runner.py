"""Isolated discovery in a child process polled over HTTP on 127.0.0.1, and init validation."""

from __future__ import annotations

import io
import json
import os
import re
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from gpuscout import DeviceInfo, Scout, hookimpl
from gpuscout.cli import main
from gpuscout.runner import RunnerError, discover_in_child, validate_devices
from gpuscout.testing import ScoutFactory, eventually, running

CHILD_PLUGIN = """
    import os
    from gpuscout import DeviceInfo, hookimpl

    @hookimpl
    def gpuscout_enumerate(context):
        # Sees the card only when the host made it visible, as a driver would.
        if context.env.get("CUDA_VISIBLE_DEVICES", "GPU-child") not in ("GPU-child", ""):
            return []
        if context.env.get("CHILD_CRASH_ON_INIT") and context.env.get("GGML_CUDA_INIT") == "1":
            os._exit(134)
        return [DeviceInfo(id="GPU-child", uuid="GPU-child", library="CUDA", description="card",
                           total_memory=1024, free_memory=512)]
"""


@pytest.fixture(scope="module")
def child_site(site_factory: Callable[..., Path]) -> Path:
    """A site folder with a distribution whose gpuscout plugin reports one CUDA card."""
    return site_factory("gpuscout-childcard", "1.0", {"childcard": CHILD_PLUGIN}, {"childcard": "childcard"})


def child_env(site: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(site), "VK_DRIVER_FILES": "/nonexistent.json", **extra}


def fake_runner(body: str) -> list[str]:
    """A child that serves one canned handler on {port}."""
    code = textwrap.dedent(f"""
        import sys
        from http.server import BaseHTTPRequestHandler, HTTPServer
        replies = []
        class H(BaseHTTPRequestHandler):
            def log_message(self, *a): pass
            def send(self, status, text):
                self.send_response(status); self.end_headers(); self.wfile.write(text.encode())
            def do_GET(self):
        {textwrap.indent(textwrap.dedent(body), " " * 16)}
        HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
    """)
    return [sys.executable, "-c", code, "{port}"]


def test_the_gpuscout_runner_reports_what_the_child_sees(child_site: Path) -> None:
    """The real `gpuscout runner` child answers /info with the devices it found."""
    devices = discover_in_child(child_env(child_site), timeout=30)
    assert [(d.id, d.library, d.free_memory) for d in devices] == [("GPU-child", "CUDA", 512)]


def test_a_crashing_child_is_reported_as_a_crash() -> None:
    """A child that dies before answering is a crash with its exit code."""
    with pytest.raises(RunnerError, match=r"runner exited with status 3"):
        discover_in_child(os.environ, timeout=10, command=[sys.executable, "-c", "raise SystemExit(3)"])


def test_a_404_means_the_runner_cannot_report_devices() -> None:
    """/info answering 404 is told apart from other failures."""
    with pytest.raises(RunnerError, match="404"):
        discover_in_child(os.environ, timeout=10, command=fake_runner("self.send(404, 'no')"))


def test_an_error_status_carries_the_body() -> None:
    """A non-200 reply is an error that quotes the runner's body."""
    with pytest.raises(RunnerError, match=r"status 500.*out of memory"):
        discover_in_child(os.environ, timeout=10, command=fake_runner("self.send(500, 'out of memory')"))


def test_an_unparsable_reply_is_retried_until_a_good_one() -> None:
    """Garbage is polled past, as the seed does; a later valid reply wins."""
    body = """
        replies.append(1)
        self.send(200, '[{"id": 5}]' if len(replies) < 3 else '[{"id":"0","backend":"CUDA"}]')
    """
    devices = discover_in_child(os.environ, timeout=10, command=fake_runner(body))
    assert [d.id for d in devices] == ["0"]


def test_a_silent_child_times_out_and_is_reaped() -> None:
    """No answer before the deadline is a timeout; the child does not outlive the call."""
    start = time.monotonic()
    with pytest.raises(RunnerError, match="before timeout"):
        discover_in_child(
            os.environ, timeout=0.5, command=[sys.executable, "-c", "import time; time.sleep(30)"]
        )
    assert time.monotonic() - start < 5


class ParentCard:
    @hookimpl
    def gpuscout_enumerate(self, context: object) -> list[DeviceInfo]:
        return [
            DeviceInfo(
                id="GPU-child",
                uuid="GPU-child",
                library="CUDA",
                description="card",
                total_memory=1024,
                free_memory=512,
            )
        ]


@pytest.fixture
def scout_for(gpuscout_scout: ScoutFactory) -> Callable[[dict[str, str]], Scout]:
    """``scout_for(env)``: a Scout of the cuda plugin and ParentCard under ``env``."""
    return lambda env: gpuscout_scout("cuda", ("parent", ParentCard()), env=env)


def test_a_device_that_initialises_in_the_child_is_kept(
    child_site: Path, scout_for: Callable[[dict[str, str]], Scout]
) -> None:
    """Init validation keeps a CUDA device the child sees with only it visible."""
    scout = scout_for(child_env(child_site))
    checks = [(d, scout.init_check_env(d)) for d in scout.discover().devices]
    assert checks[0][1] is not None and checks[0][1]["GGML_CUDA_INIT"] == "1"
    kept, dropped = validate_devices(checks, timeout=30)
    assert [d.id for d in kept] == ["GPU-child"] and dropped == []


def test_a_device_whose_init_crashes_the_child_is_dropped(
    child_site: Path, scout_for: Callable[[dict[str, str]], Scout]
) -> None:
    """A crash under GGML_CUDA_INIT=1 drops the device with the reason."""
    scout = scout_for(child_env(child_site, CHILD_CRASH_ON_INIT="1"))
    found = scout.discover(validate=True)
    assert found.devices == []
    assert [d.reason for d in found.dropped] == ["init validation failed: runner exited with status 134"]


def test_devices_that_need_no_validation_are_not_started(
    child_site: Path, gpuscout_scout: ScoutFactory
) -> None:
    """A device without an init env is kept without a child."""
    scout = gpuscout_scout("cuda")
    vk = DeviceInfo(id="0", library="Vulkan")
    assert scout.init_check_env(vk) is None
    assert validate_devices([(vk, scout.init_check_env(vk))], timeout=0.01) == ([vk], [])


# -- init validation in parallel ---------------------------------------------------------------

BARRIER_PLUGIN = """
    import os, time
    from gpuscout import DeviceInfo, hookimpl

    @hookimpl
    def gpuscout_enumerate(context):
        env = context.env
        cards = [c for c in env["FAKE_CARDS"].split(",")
                 if env.get("CUDA_VISIBLE_DEVICES", c) == c]
        if env.get("GGML_CUDA_INIT") == "1" and len(cards) == 1:
            # Each validating child leaves its pid, then waits for all the others to start:
            # only children that run at the same time get past this.
            barrier = env["FAKE_BARRIER"]
            with open(os.path.join(barrier, cards[0] + ".tmp"), "w") as f:
                f.write(str(os.getpid()))
            os.rename(os.path.join(barrier, cards[0] + ".tmp"), os.path.join(barrier, cards[0]))
            while len([n for n in os.listdir(barrier) if not n.endswith(".tmp")]) < int(
                    env["FAKE_BARRIER_COUNT"]):
                time.sleep(0.01)
            if cards[0] == env.get("FAKE_CRASH"):
                os._exit(134)
            if cards[0] == env.get("FAKE_HANG"):
                time.sleep(300)
        return [DeviceInfo(id=c, uuid=c, library="CUDA", description="card", total_memory=1024,
                           free_memory=512) for c in cards]
"""


@pytest.fixture(scope="module")
def barrier_site(site_factory: Callable[..., Path]) -> Path:
    """A site folder with a plugin whose cards meet at a barrier when validated."""
    return site_factory(
        "gpuscout-barriercard", "1.0", {"barriercard": BARRIER_PLUGIN}, {"barriercard": "barriercard"}
    )


class Validation:
    """Init checks of fake cards, one child each, meeting at a barrier in ``folder``."""

    def __init__(self, site: Path, folder: Path, cards: list[str], **fake: str) -> None:
        self.folder = folder
        self.devices = [DeviceInfo(id=c, uuid=c, library="CUDA", description="card") for c in cards]
        self.env = {
            **os.environ,
            "PYTHONPATH": str(site),
            "GPUSCOUT_PLUGINS": "barriercard",
            "FAKE_CARDS": ",".join(cards),
            "FAKE_BARRIER": str(folder),
            "FAKE_BARRIER_COUNT": str(len(cards)),
            **{f"FAKE_{k.upper()}": v for k, v in fake.items()},
        }

    def checks(self) -> list[tuple[DeviceInfo, dict[str, str] | None]]:
        return [(d, {**self.env, "CUDA_VISIBLE_DEVICES": d.id, "GGML_CUDA_INIT": "1"}) for d in self.devices]

    def children_gone(self) -> bool:
        """Whether every child that reached the barrier has ended (after a wait)."""
        pids = [int(p.read_text()) for p in self.folder.iterdir() if p.suffix != ".tmp"]
        return eventually(lambda: not any(running(pid) for pid in pids))


def test_devices_are_validated_at_once_and_only_the_crashing_one_is_dropped(
    barrier_site: Path, tmp_path: Path
) -> None:
    """Three children run together (they meet at a barrier); the one that crashes is dropped,
    the others kept in input order."""
    check = Validation(barrier_site, tmp_path, ["GPU-a", "GPU-crash", "GPU-b"], crash="GPU-crash")
    start = time.monotonic()
    kept, dropped = validate_devices(check.checks(), timeout=20)
    assert time.monotonic() - start < 10
    assert [d.id for d in kept] == ["GPU-a", "GPU-b"]
    assert [(d.device.id, d.reason) for d in dropped] == [
        ("GPU-crash", "init validation failed: runner exited with status 134")
    ]
    assert check.children_gone()


def test_a_hanging_device_is_dropped_at_the_one_overall_deadline(barrier_site: Path, tmp_path: Path) -> None:
    """The timeout covers the whole validation: the hanging child is killed then, the other
    device is kept."""
    check = Validation(barrier_site, tmp_path, ["GPU-hang", "GPU-a"], hang="GPU-hang")
    start = time.monotonic()
    kept, dropped = validate_devices(check.checks(), timeout=3)
    assert 3 <= time.monotonic() - start < 6
    assert [d.id for d in kept] == ["GPU-a"]
    assert [(d.device.id, d.reason) for d in dropped] == [
        (
            "GPU-hang",
            "init validation failed: failed to finish discovery before timeout (3 s); "
            "last attempt: no complete reply",
        )
    ]
    assert check.children_gone()


def test_progress_hears_each_device_start_and_end_on_the_calling_thread(
    barrier_site: Path, tmp_path: Path
) -> None:
    """``progress`` gets "started" for every checked device, then "ok" or "failed"."""
    check = Validation(barrier_site, tmp_path, ["GPU-a", "GPU-crash"], crash="GPU-crash")
    vk = DeviceInfo(id="0", library="Vulkan")
    heard: list[tuple[str, str, bool]] = []

    def progress(device: DeviceInfo, state: str, elapsed: float) -> None:
        heard.append((device.id, state, threading.current_thread() is threading.main_thread()))

    kept, _ = validate_devices([*check.checks(), (vk, None)], timeout=20, progress=progress)
    assert [d.id for d in kept] == ["GPU-a", "0"]
    assert heard[:2] == [("GPU-a", "started", True), ("GPU-crash", "started", True)]
    assert sorted(heard[2:]) == [("GPU-a", "ok", True), ("GPU-crash", "failed", True)]


def test_an_interrupted_validation_kills_every_child(barrier_site: Path, tmp_path: Path) -> None:
    """A KeyboardInterrupt on the calling thread ends the children still running."""
    check = Validation(barrier_site, tmp_path, ["GPU-hang", "GPU-a"], hang="GPU-hang")

    def interrupt(device: DeviceInfo, state: str, elapsed: float) -> None:
        if state != "started":
            raise KeyboardInterrupt

    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        validate_devices(check.checks(), timeout=20, progress=interrupt)
    assert time.monotonic() - start < 10
    assert check.children_gone()


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("terminal", [True, False], ids=["terminal", "pipe"])
def test_list_validate_shows_progress_only_on_a_terminal(
    child_site: Path,
    scout_for: Callable[[dict[str, str]], Scout],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    terminal: bool,
) -> None:
    """`gpuscout list --validate` writes a line per validated device to a terminal's stderr."""
    stderr = Terminal() if terminal else io.StringIO()
    monkeypatch.setattr(sys, "stderr", stderr)
    factory = lambda args: scout_for(child_env(child_site))  # noqa: E731
    assert main(["list", "--validate", "--json"], scout_factory=factory) == 0
    assert [d["id"] for d in json.loads(capsys.readouterr().out)["devices"]] == ["GPU-child"]
    if terminal:
        assert re.search(r"validating CUDA GPU-child \.\.\. ok \([0-9.]+ s\)", stderr.getvalue())
    else:
        assert "validating" not in stderr.getvalue()
