"""The runner serves its host first (issue 20): slow clients, however many reconnect in a loop,
hold no request handler and are cut at a total deadline, so ordinary /info requests are served."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from gpuscout import DeviceInfo
from gpuscout.runner import TOKEN_ENV, serve
from gpuscout.runner._reply import ReplyHead, parse_whole_reply
from gpuscout.testing import eventually, promptly

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="loopback timing, Linux CI only")

TOKEN = "fedcba9876543210fedcba9876543210"
RUNNER = [sys.executable, "-m", "gpuscout", "runner", "--port", "0", "--plugins", "cuda"]
REQUEST = f"GET /info HTTP/1.0\r\nHost: x\r\nX-Gpuscout-Token: {TOKEN}\r\n\r\n".encode()


def get(port: int, timeout: float = 10) -> tuple[ReplyHead, bytes]:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(REQUEST)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    return parse_whole_reply(data)


@pytest.fixture
def runner(env: dict[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    """A `gpuscout runner --port 0 --read-timeout 2`; its port is ``.port``."""
    proc = subprocess.Popen(
        [*RUNNER, "--read-timeout", "2"],
        env={**env, TOKEN_ENV: TOKEN},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
    )
    assert proc.stdout is not None
    proc.port = int(json.loads(promptly(proc.stdout.readline, 30))["port"])  # type: ignore[attr-defined]
    yield proc
    proc.kill()
    proc.wait(10)
    proc.stdout.close()


def attacker(port: int, stop: threading.Event, connections: list[int]) -> None:
    """Connect, send a few bytes slowly, never finish the head; reconnect when cut off."""
    while not stop.is_set():
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
                connections.append(1)
                sock.settimeout(0.2)
                for byte in b"GET /info HTTP/1.0\r\nHost: x\r\n":
                    if stop.is_set():
                        return
                    sock.sendall(bytes([byte]))
                    try:
                        if sock.recv(1) == b"":
                            break  # cut off: reconnect at once
                    except TimeoutError:
                        pass
        except OSError:
            time.sleep(0.01)


def test_ordinary_requests_are_served_while_64_slow_clients_reconnect(
    runner: subprocess.Popen[bytes],
) -> None:
    """64 trickling clients reconnecting in a loop: at least 45 of 50 /info requests are
    answered 200 within 10 s, and the runner still answers once they stop (once the connections
    they left are cut, 2 s at most: until then a full runner rightly says 503 busy)."""
    port: int = runner.port  # type: ignore[attr-defined]
    stop = threading.Event()
    connections: list[int] = []
    threads = [
        threading.Thread(target=attacker, args=(port, stop, connections), daemon=True) for _ in range(64)
    ]
    for thread in threads:
        thread.start()
    try:
        time.sleep(0.5)  # every attacker connected and trickling
        served, latencies = 0, []
        begin = time.monotonic()
        for i in range(50):  # one every 0.1 s: across two rounds of the attackers' reconnects
            time.sleep(max(0.0, begin + 0.1 * i - time.monotonic()))
            if time.monotonic() - begin > 10:
                break
            start = time.monotonic()
            try:
                head, _body = get(port, timeout=2)
            except OSError:
                continue
            if head.status == 200 and head.headers.get("x-gpuscout-token") == TOKEN:
                served += 1
                latencies.append(time.monotonic() - start)
        elapsed = time.monotonic() - begin
        print(
            f"served {served}/50 in {elapsed:.2f}s, max latency {max(latencies, default=0):.3f}s,"
            f" attacker connections {len(connections)}"
        )
        assert served >= 45 and elapsed < 10
    finally:
        stop.set()
        for thread in threads:
            thread.join(5)
    assert runner.poll() is None
    assert eventually(lambda: status(port) == 200, within=10)


def status(port: int) -> int:
    """The status of one /info request, 0 when the connection fails."""
    try:
        return get(port, timeout=2)[0].status
    except OSError:
        return 0


def test_a_trickling_client_is_cut_at_the_total_deadline(runner: subprocess.Popen[bytes]) -> None:
    """A client sending one byte every 0.25 s (each read on time) is cut 2 s after it connected."""
    port: int = runner.port  # type: ignore[attr-defined]
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        begin = time.monotonic()
        sock.settimeout(0.25)
        cut = None
        for byte in b"GET /info HTTP/1.0\r\n" + b"X-Slow: " + b"a" * 100:
            try:
                sock.sendall(bytes([byte]))
                if sock.recv(1) == b"":
                    cut = time.monotonic() - begin
                    break
            except TimeoutError:
                continue
            except OSError:
                cut = time.monotonic() - begin
                break
        assert cut is not None and 1.5 < cut < 3.5, cut
    assert get(port)[0].status == 200


def test_a_request_over_the_busy_handlers_is_answered_503_at_once() -> None:
    """With all 8 handlers busy in discovery, a ninth whole request is refused with 503 (and
    the token) without waiting; the runner answers again once they are done."""
    ports: list[int] = []
    release = threading.Event()
    calls: list[int] = []

    def slow() -> list[DeviceInfo]:
        calls.append(1)
        release.wait(10)
        return []

    server = threading.Thread(
        target=serve, args=(slow, 0, 1.0), daemon=True, kwargs={"announce": ports.append, "token": TOKEN}
    )
    server.start()
    assert eventually(lambda: bool(ports))
    held = [socket.create_connection(("127.0.0.1", ports[0]), timeout=10) for _ in range(8)]
    try:
        for sock in held:
            sock.sendall(REQUEST)
        assert eventually(lambda: len(calls) == 8)
        begin = time.monotonic()
        head, body = get(ports[0])
        assert head.status == 503 and head.headers["x-gpuscout-token"] == TOKEN
        assert "busy" in json.loads(body)["error"] and time.monotonic() - begin < 2
    finally:
        release.set()
        for sock in held:
            sock.close()
    assert eventually(lambda: get(ports[0])[0].status == 200)
    server.join(10)
