"""Every answer is bounded in records as well as bytes (at most 100,000 objects, counted before
decoding), decoded under its call's deadline, and a refusal costs only that answer's plugin;
a recording's answer files are read once per inode and only for plugins that exist
(docs/containment.md, "Input")."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from gpuscout import DeviceInfo, GpuscoutError, Scout, from_json
from gpuscout._recording.replay import load
from gpuscout._records.bounds import MAX_JSON_RECORDS
from gpuscout.plugin import RecordingError

MANY = "[" + ",".join(["{}"] * 1_500_000) + "]"  # 4.5 MB: a tenth of what 64 MiB would allow


def test_from_json_refuses_a_million_empty_records_before_decoding() -> None:
    """from_json of 1.5 million {} (4.5 MB) is refused in well under a second, not decoded."""
    start = time.monotonic()
    with pytest.raises(GpuscoutError, match=f"more than {MAX_JSON_RECORDS} objects"):
        from_json(MANY, list[DeviceInfo])
    assert time.monotonic() - start < 2.0


def test_from_json_still_reads_braces_inside_strings() -> None:
    """Braces inside string values are not records: a name of 200,000 '{' reads."""
    (device,) = from_json(json.dumps([{"id": "a", "backend": "X", "name": "{" * 200_000}]), list[DeviceInfo])
    assert device.name == "{" * 200_000


#: A runner answering every GET with 1.5 million empty records (4.5 MB).
FLOODING_RUNNER = """
import http.server, sys

BODY = b"[" + b",".join([b"{}"] * 1_500_000) + b"]"


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)

    def log_message(self, *args):
        pass


http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
"""


def test_a_custom_runners_million_record_reply_costs_only_its_deadline(tmp_path: Path) -> None:
    """discover_in_child(timeout=3) against a runner replying 1.5 million {} ends at its deadline
    with a RunnerError, not 20 s and 700 MB later."""
    from gpuscout.runner import RunnerError, discover_in_child

    script = tmp_path / "runner.py"
    script.write_text(FLOODING_RUNNER)
    start = time.monotonic()
    with pytest.raises(RunnerError, match="timeout"):
        discover_in_child(
            {"PATH": os.environ.get("PATH", "")}, timeout=3, command=[sys.executable, str(script), "{port}"]
        )
    assert time.monotonic() - start < 3 + 3


#: Writes a million empty records (3 MB, a tenth of a worker's byte limit) straight onto its
#: answer pipe (the descriptor above 2 it holds) and leaves as a worker does.
HUGE_WORKER = """
    import os
    from gpuscout.plugin import hookimpl

    @hookimpl
    def gpuscout_enumerate(context):
        answer = b'{"status": "ok", "devices": [' + b",".join([b"{}"] * 1_000_000) + b"]}"
        for fd in sorted(int(n) for n in os.listdir("/proc/self/fd")):
            if fd > 2:
                try:
                    os.write(fd, answer)
                except OSError:
                    pass
        os._exit(0)
"""
GOOD = """
    from gpuscout.plugin import DeviceInfo, hookimpl

    @hookimpl
    def gpuscout_enumerate(context):
        return [DeviceInfo(id="good0", library="Good", total_memory=1 << 30)]
"""


def test_an_isolated_worker_answering_150000_records_fails_alone(
    site_factory: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Isolated, a worker answering a million records fails with the bound named, well within its
    deadline; the good plugin's device is kept."""
    site = site_factory(
        "gpuscout-many-records",
        "1.0",
        {"mr_huge": HUGE_WORKER, "mr_good": GOOD},
        {"huge": "mr_huge", "good": "mr_good"},
    )
    monkeypatch.syspath_prepend(str(site))
    found = Scout(plugins=["huge", "good"], env=dict(os.environ), enumerate_timeout=20).discover(
        isolated=True
    )
    reports = {r.name: r for r in found.plugins}
    assert [d.id for d in found.devices] == ["good0"]
    assert reports["huge"].status == "failed" and "more than 100000 records" in reports["huge"].error


def _recording(where: Path) -> Path:
    (where / "answers").mkdir(parents=True)
    (where / "recording.json").write_text(json.dumps({"format": 1, "platform": "linux", "env": {}}))
    return where


def test_an_answer_file_of_a_million_objects_is_refused_before_decoding(tmp_path: Path) -> None:
    """answers/cuda.json holding 1.5 million {} is one RecordingError, found before decoding."""
    rec = _recording(tmp_path / "rec")
    (rec / "answers" / "cuda.json").write_text('{"nvml": ' + MANY + "}")
    start = time.monotonic()
    with pytest.raises(RecordingError, match="more than 100000 JSON objects"):
        Scout(replay=rec, plugins=["cuda"], entry_points=False)
    assert time.monotonic() - start < 3.0


def test_answer_files_of_plugins_that_do_not_exist_are_never_read(tmp_path: Path) -> None:
    """A malformed answers/nosuchplugin.json does not matter to a Scout without that plugin."""
    rec = _recording(tmp_path / "rec")
    (rec / "answers" / "nosuchplugin.json").write_text("[not json")
    assert load(rec).answers == {}
    Scout(replay=rec, plugins=["cuda"], entry_points=False).discover()


def test_hard_linked_answer_files_are_read_once(tmp_path: Path) -> None:
    """Six names linked to one answer file are read and kept once: the same object for each."""
    rec = _recording(tmp_path / "rec")
    (rec / "answers" / "cuda.json").write_text('{"missing": "no NVML here"}')
    for name in ("vulkan", "rocm", "metal", "a", "b"):
        os.link(rec / "answers" / "cuda.json", rec / "answers" / f"{name}.json")
    recording = load(rec).with_answers(["cuda", "vulkan", "rocm", "metal", "a", "b"])
    assert len({id(recording.answers_for(n)) for n in ("cuda", "vulkan", "rocm", "metal", "a", "b")}) == 1
