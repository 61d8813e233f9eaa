"""Rules of the plugin host: allow lists and per-call deadlines, each stated once."""

from __future__ import annotations

import threading
import time

import pytest

from gpuscout import Scout
from gpuscout._host import workers


def test_an_empty_allow_list_allows_no_plugin() -> None:
    """``plugins=[]`` is a list naming nothing: every plugin is disabled, none is loaded."""
    reports = Scout(plugins=[], env={}).reports
    assert reports and {r.status.value for r in reports} == {"disabled"}


def test_an_allow_list_of_blank_names_allows_no_plugin() -> None:
    """Blank names are dropped from an explicit list; what is left (nothing) is the allow list."""
    reports = Scout(plugins=["", "  "], env={}).reports
    assert reports and {r.status.value for r in reports} == {"disabled"}


class _Clock:
    """The real monotonic clock plus simulated seconds that a fake plugin call "spends"."""

    def __init__(self) -> None:
        self.offset = 0.0

    def monotonic(self) -> float:
        return time.monotonic() + self.offset


def test_each_call_of_a_batch_has_the_whole_limit_to_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    """Calls of 4 s each under a 5 s limit never overrun, however long the batch takes in all."""
    clock = _Clock()
    monkeypatch.setattr(workers, "time", clock)
    last_started, release = threading.Event(), threading.Event()

    def call(item: int) -> int:
        if item == 2:
            last_started.set()
            release.wait(30)
        clock.offset += 4.0  # this call took 4 simulated seconds
        return item

    batch = workers.Batch(call, [0, 1, 2], "rules-host-test")
    assert last_started.wait(30)  # two calls done: 8 simulated seconds since the batch began
    timer = threading.Timer(0.2, release.set)
    timer.start()
    try:
        assert batch.wait(5.0) is True
    finally:
        release.set()
        timer.cancel()
    assert [answer for _, answer in batch.results] == [0, 1, 2]
