"""Rules of isolated discovery's per-plugin workers (``gpuscout._host.isolation``), each stated once."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from gpuscout import Scout

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="workers are forked (Linux, as test_isolation_workers)"
)

GOOD = """
from gpuscout.plugin import DeviceInfo, hookimpl

@hookimpl
def gpuscout_enumerate(context):
    return [DeviceInfo(id="good0", library="Good", total_memory=8 << 30)]
"""
#: A worker whose answer is a little over MAX_ANSWER (by 16 KiB and one device).
OVER_CAP = """
import json
from gpuscout.plugin import DeviceInfo, hookimpl
from gpuscout._host.isolation import MAX_ANSWER, encode_device

@hookimpl
def gpuscout_enumerate(context):
    one = lambda i: DeviceInfo(id=f"big{i}", library="Big", name="n" * 4000, total_memory=1 << 30)
    size = len(json.dumps(encode_device(one(0)))) + 2
    return [one(i) for i in range((MAX_ANSWER + (16 << 10)) // size + 1)]
"""


@pytest.fixture(scope="module")
def site(site_factory: Callable[..., Path]) -> Path:
    return site_factory(
        "gpuscout-rules-isolation",
        "1.0",
        {"r_good": GOOD, "r_overcap": OVER_CAP},
        {"good": "r_good", "overcap": "r_overcap"},
    )


def test_a_worker_answer_over_max_answer_fails_only_its_plugin(
    site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An answer past MAX_ANSWER bytes kills its worker: that plugin fails, saying so; others answer."""
    monkeypatch.syspath_prepend(str(site))
    scout = Scout(
        plugins=["good", "overcap"],
        enumerate_timeout=30.0,
        env={"PYTHONPATH": str(site), "PATH": os.environ.get("PATH", "/usr/bin:/bin")},
    )
    found = scout.discover(isolated=True)
    report = {p.name: (p.status.value, p.error) for p in found.plugins}
    assert report["overcap"] == ("failed", "gpuscout_enumerate: its child was killed: answer too large"), (
        report
    )
    assert report["good"][0] == "ok"
    assert [d.id for d in found.devices] == ["good0"]
