"""The suite's port band (tests/ports.py) and the real ``free_port`` it stands in for."""

from __future__ import annotations

import itertools
import socket
from pathlib import Path

import pytest

import gpuscout.runner
from gpuscout.runner import _client as client
from tests import ports


def test_the_real_free_port_is_an_ephemeral_port_that_binds() -> None:
    """The product's free_port hands out a port the kernel chose, which binds right after."""
    port = gpuscout.runner.free_port()
    assert port >= ports.ephemeral_floor() and ports.is_free(port)


def test_runners_in_the_suite_get_ports_of_this_workers_share() -> None:
    """client.free_port is the band allocator here: below the ephemeral range, this worker's residue."""
    index, count = ports.this_worker()
    got = [client.free_port() for _ in range(5)]
    assert all(ports.BAND.start <= p < ports.ephemeral_floor() and p % count == index for p in got)
    assert len(set(got)) == 5


@pytest.mark.parametrize(
    ("worker", "workers", "share"),
    [
        ("gw3", "8", (3, 8)),
        ("gw0", "1", (0, 1)),
        (None, None, (0, 1)),
        ("master", "4", (0, 1)),
        ("gw9", "x", (0, 1)),
    ],
)
def test_a_worker_name_and_count_give_its_share(
    worker: str | None, workers: str | None, share: tuple[int, int]
) -> None:
    """xdist's gwN of M is share N of M; no worker (or a name not of that form) is the whole band."""
    assert ports.worker_share(worker, workers) == share


def test_two_workers_never_share_a_port() -> None:
    """The shares of workers 0..7 of 8 are disjoint and cover the band below the floor."""
    shares = [set(itertools.islice(ports.band_ports(i, 8, 32768), 1500)) for i in range(8)]
    assert sum(len(s) for s in shares) == len(set().union(*shares)) == 12000


def test_a_port_in_use_is_passed_over() -> None:
    """A port some socket holds is not handed out; the next free one of the share is."""
    first = ports.allocator()()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind((ports.HOST, first))
        assert ports.allocator()() != first


def test_an_unreadable_port_range_falls_back_to_the_default(tmp_path: Path) -> None:
    """A missing or garbled ip_local_port_range reads as Linux's default floor."""
    garbled = tmp_path / "range"
    garbled.write_text("lots\n")
    assert ports.ephemeral_floor(tmp_path / "missing") == ports.ephemeral_floor(garbled) == 32768
    garbled.write_text("40000\t60999\n")
    assert ports.ephemeral_floor(garbled) == 40000
