"""The runner after a new user's trial (issue 22): HEAD is answered as GET without a body, and
SIGTERM ends it promptly. Only 127.0.0.1 is spoken to."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuscout import DeviceInfo
from gpuscout.runner import serve
from gpuscout.runner._reply import parse_whole_reply
from gpuscout.testing import plugin_test_env, promptly

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="signals and /proc as on Linux")

CARD = DeviceInfo(
    id="GPU-aaaa1111", library="CUDA", filter_id="GPU-aaaa1111", total_memory=1 << 30, free_memory=1 << 29
)


def ask(port: int, method: str, path: str = "/info") -> bytes:
    """Send one HTTP/1.0 request to 127.0.0.1:``port`` and read the reply until it closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
        sock.sendall(f"{method} {path} HTTP/1.0\r\nHost: x\r\n\r\n".encode())
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    return data


@pytest.fixture
def in_process_runner() -> Iterator[int]:
    """``serve`` on a thread (no signal handler there), serving ``CARD``; yields its port."""
    ports: list[int] = []
    ready = threading.Event()

    def announce(port: int) -> None:
        ports.append(port)
        ready.set()

    thread = threading.Thread(
        target=serve, args=(lambda: [CARD], 0), daemon=True, kwargs={"idle_exit": 0.5, "announce": announce}
    )
    thread.start()
    assert ready.wait(10)
    yield ports[0]
    thread.join(10)


def test_head_on_info_is_answered_as_get_without_a_body(in_process_runner: int) -> None:
    """HEAD /info is 200 with GET's headers (Content-Length included) and no body."""
    get_head, get_body = parse_whole_reply(ask(in_process_runner, "GET"))
    raw = ask(in_process_runner, "HEAD")
    head_part, _, body = raw.partition(b"\r\n\r\n")
    assert b" 200 " in head_part.split(b"\r\n")[0] and body == b""
    assert f"Content-Length: {len(get_body)}".encode() in head_part
    assert get_head.status == 200 and json.loads(get_body)[0]["id"] == "GPU-aaaa1111"


def test_head_on_another_path_is_a_404_without_a_body(in_process_runner: int) -> None:
    """HEAD of a path that is not /info is 404 and still sends no body."""
    raw = ask(in_process_runner, "HEAD", "/other")
    head_part, _, body = raw.partition(b"\r\n\r\n")
    assert b" 404 " in head_part.split(b"\r\n")[0] and body == b""


def test_post_is_still_refused_with_501(in_process_runner: int) -> None:
    """Methods other than GET and HEAD stay 501."""
    head, _ = parse_whole_reply(ask(in_process_runner, "POST"))
    assert head.status == 501


def test_sigterm_ends_a_serving_runner_well_under_half_a_second(env: dict[str, str], tmp_path: Path) -> None:
    """A runner that answered a request exits 0 within 0.5 s of SIGTERM, interpreter exit included."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gpuscout",
            "runner",
            "--port",
            "0",
            "--plugins",
            "cuda",
            "--root",
            str(tmp_path),
        ],
        env={**env, **plugin_test_env("cuda")},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert proc.stdout is not None
        port = int(json.loads(promptly(proc.stdout.readline, 30))["port"])
        assert parse_whole_reply(ask(port, "GET"))[0].status == 200
        time.sleep(0.2)  # back in its idle loop
        start = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(5) == 0
        assert time.monotonic() - start < 0.5
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(5)
        assert proc.stdout is not None
        proc.stdout.close()


# Several rounds: a Ctrl-C right after the announcement once met the reading thread unstarted.
@pytest.mark.parametrize("round_", range(4))
def test_ctrl_c_ends_a_runner_with_0(env: dict[str, str], tmp_path: Path, round_: int) -> None:
    """SIGINT stops a serving runner as SIGTERM does: exit 0, as the README's table says,
    however soon after the port's announcement it comes."""
    from tests.conftest import with_default_sigint

    argv = [
        sys.executable,
        "-m",
        "gpuscout",
        "runner",
        "--port",
        "0",
        "--plugins",
        "cuda",
        "--root",
        str(tmp_path),
    ]
    proc = subprocess.Popen(
        with_default_sigint(argv),
        env={**env, **plugin_test_env("cuda")},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert proc.stdout is not None
        json.loads(promptly(proc.stdout.readline, 30))
        proc.send_signal(signal.SIGINT)
        assert proc.wait(5) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(5)
        assert proc.stdout is not None
        proc.stdout.close()
