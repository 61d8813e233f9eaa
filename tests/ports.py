"""Ports for the suite's fake runners, which no other worker of the same run can be handed.

``free_port`` asks the kernel for an ephemeral port and lets it go; the child binds it a moment
later. Under xdist, another worker's ``bind(0)`` can be handed the same port in that moment, and
a test that expected "Connection refused" met another test's child instead. Here each worker
draws from its own share of a band below the kernel's ephemeral range (which ``bind(0)`` never
hands out), and a port is only handed out after a bind shows it free.
"""

from __future__ import annotations

import itertools
import os
import socket
from collections.abc import Callable, Iterator
from pathlib import Path

HOST = "127.0.0.1"
# Below Linux's default ephemeral range (32768-60999), above the usual service ports.
BAND = range(20000, 32000)


def ephemeral_floor(path: Path = Path("/proc/sys/net/ipv4/ip_local_port_range")) -> int:
    """The lowest port the kernel hands to ``bind(0)`` (32768 where it cannot be read)."""
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def worker_share(worker: str | None, workers: str | None) -> tuple[int, int]:
    """``(index, count)`` of this xdist worker (``gw3`` of 8 is ``(3, 8)``); ``(0, 1)`` alone."""
    if not worker or not worker.startswith("gw") or not worker[2:].isdigit():
        return 0, 1
    count = int(workers) if workers and workers.isdigit() and int(workers) > 0 else 1
    return int(worker[2:]) % count, count


def band_ports(index: int, count: int, top: int) -> Iterator[int]:
    """This worker's ports of BAND below ``top``, round and round."""
    mine = [port for port in BAND if port < top and port % count == index]
    if not mine:
        raise RuntimeError(
            f"no port of {BAND.start}-{BAND.stop - 1} below {top} for worker {index} of {count}"
        )
    return itertools.cycle(mine)


def is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((HOST, port))
        except OSError:
            return False
    return True


def this_worker() -> tuple[int, int]:
    """The share of the xdist worker this process is (``(0, 1)`` without xdist)."""
    return worker_share(os.environ.get("PYTEST_XDIST_WORKER"), os.environ.get("PYTEST_XDIST_WORKER_COUNT"))


def allocator(share: tuple[int, int] | None = None) -> Callable[[], int]:
    """A ``free_port`` for a share (this worker's by default): its next port that binds."""
    index, count = this_worker() if share is None else share
    ports = band_ports(index, count, ephemeral_floor())

    def free_port() -> int:
        for port in itertools.islice(ports, 200):
            if is_free(port):
                return port
        raise OSError("no free port in this worker's share of the test band")

    return free_port
