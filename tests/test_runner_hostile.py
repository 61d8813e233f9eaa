"""Isolated discovery against hostile children: one deadline, bounded replies, no leftover processes."""

from __future__ import annotations

import math
import os
import signal
import socket
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuscout._records.device import DeviceInfo
from gpuscout.cli import main
from gpuscout.errors import GpuscoutError
from gpuscout.runner import MAX_BODY, RunnerError, discover_in_child, parse_reply, serve
from gpuscout.runner import _client as runner_module
from gpuscout.runner._reply import read_reply
from gpuscout.testing import eventually, running

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads /proc to find leftovers")

MARKER = "GPUSCOUT_TEST_CHILD"
DEVICES = b'[{"id":"0","backend":"CUDA"}]'
GOOD = b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(DEVICES), DEVICES)

# Each fake runner binds 127.0.0.1:{port} itself; answer() takes one connection and its request.
PRELUDE = f"""
import os, signal, socket, subprocess, sys, time
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", int(sys.argv[1])))
srv.listen(8)
GOOD = {GOOD!r}

def answer():
    conn, _ = srv.accept()
    conn.recv(65536)
    return conn
"""


def fake(script: str, *args: str) -> list[str]:
    """A child running PRELUDE then ``script``; extra args follow the port in sys.argv."""
    return [sys.executable, "-c", PRELUDE + textwrap.dedent(script), "{port}", *args]


def read_pid(path: Path, within: float = 5.0) -> int:
    assert eventually(path.exists, within), f"{path} never written"
    return int(path.read_text())


def test_a_trickling_child_is_cut_off_at_the_deadline(env: dict[str, str]) -> None:
    """One byte every 0.3 s cannot stretch the call past its one deadline."""
    script = """
        conn = answer()
        for byte in GOOD:
            conn.send(bytes([byte])); time.sleep(0.3)
    """
    start = time.monotonic()
    with pytest.raises(RunnerError, match=r"before timeout \(2 s\)"):
        discover_in_child(env, timeout=2, command=fake(script))
    assert time.monotonic() - start < 2 + 2.5


@pytest.mark.parametrize(
    ("script", "message"),
    [
        (
            'conn.sendall(b"HTTP/1.0 200 OK\\r\\n\\r\\n")\nwhile True: conn.sendall(b"[" * 65536)',
            f"over the limit of {MAX_BODY} bytes",
        ),
        (
            'conn.sendall(b"HTTP/1.0 200 OK\\r\\nContent-Length: 4294967296\\r\\n\\r\\n[")',
            "body of 4294967296 bytes is over the limit",
        ),
        (
            'conn.sendall(b"HTTP/1.0 200 OK\\r\\n")\nwhile True: conn.sendall(b"X-Pad: " + b"a" * 65536)',
            "headers are longer than 65536 bytes",
        ),
    ],
    ids=["endless-body", "4-GiB-content-length", "endless-headers"],
)
def test_a_flooding_child_is_refused_at_the_size_limit(
    env: dict[str, str], script: str, message: str
) -> None:
    """A reply over the header or body limit is refused at once, not read to its end."""
    start = time.monotonic()
    with pytest.raises(RunnerError, match=message):
        discover_in_child(env, timeout=10, command=fake(f"conn = answer()\n{script}\ntime.sleep(300)"))
    assert time.monotonic() - start < 5


def test_a_body_shorter_than_its_content_length_is_an_error(env: dict[str, str]) -> None:
    """A connection closed before Content-Length bytes is a cut-off reply."""
    script = """
        conn = answer()
        conn.sendall(b"HTTP/1.0 200 OK\\r\\nContent-Length: 100\\r\\n\\r\\n0123456789")
        conn.close()
        time.sleep(300)
    """
    with pytest.raises(RunnerError, match="after 10 of 100 body bytes"):
        discover_in_child(env, timeout=10, command=fake(script))


def test_bytes_past_the_content_length_are_not_waited_for(env: dict[str, str]) -> None:
    """The body ends at Content-Length even when the child keeps sending and never closes."""
    script = """
        conn = answer()
        conn.sendall(GOOD + b"trailing junk" * 100)
        time.sleep(300)
    """
    start = time.monotonic()
    devices = discover_in_child(env, timeout=10, command=fake(script))
    assert [d.id for d in devices] == ["0"] and time.monotonic() - start < 5


def test_a_reply_without_content_length_is_read_to_the_end(env: dict[str, str]) -> None:
    """Without Content-Length the body is whatever arrives before the child closes."""
    script = """
        conn = answer()
        conn.sendall(b"HTTP/1.0 200 OK\\r\\n\\r\\n" + GOOD.split(b"\\r\\n\\r\\n")[1])
        conn.close()
        time.sleep(300)
    """
    assert [d.id for d in discover_in_child(env, timeout=10, command=fake(script))] == ["0"]


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (b"SSH-2.0-OpenSSH_9.6\r\n\r\n", "bad status line: b'SSH-2.0-OpenSSH_9.6'"),
        (b"HTTP/1.0 2OO OK\r\n\r\n", "bad status line"),
        (b"HTTP/1.0 200 OK\r\nno colon here\r\n\r\n", "bad header line: b'no colon here'"),
        (b"HTTP/1.0 200 OK\r\nContent-Length: -5\r\n\r\n", "bad Content-Length: '-5'"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", "Transfer-Encoding"),
    ],
    ids=["ssh-banner", "letters-in-status", "no-colon", "negative-length", "chunked"],
)
def test_a_malformed_reply_is_an_error(env: dict[str, str], reply: bytes, message: str) -> None:
    """Garbage where an HTTP reply belongs is a RunnerError that quotes it."""
    script = f"conn = answer()\nconn.sendall({reply!r})\ntime.sleep(300)"
    with pytest.raises(RunnerError, match=message.replace("(", r"\(")):
        discover_in_child(env, timeout=10, command=fake(script))


def test_a_child_that_never_listens_times_out(env: dict[str, str]) -> None:
    """A port that keeps refusing is polled until the deadline, which the message names."""
    start = time.monotonic()
    with pytest.raises(RunnerError, match=r"before timeout \(0\.5 s\); last attempt: Connection refused"):
        discover_in_child(env, timeout=0.5, command=[sys.executable, "-c", "import time; time.sleep(300)"])
    assert time.monotonic() - start < 0.5 + 2.5


def test_a_child_that_accepts_but_never_answers_times_out(env: dict[str, str]) -> None:
    """An accepted connection with no reply ends at the deadline too."""
    start = time.monotonic()
    with pytest.raises(RunnerError, match=r"before timeout \(0\.5 s\); last attempt: no complete reply"):
        discover_in_child(env, timeout=0.5, command=fake("conn = answer()\ntime.sleep(300)"))
    assert time.monotonic() - start < 0.5 + 2.5


def test_an_unparsable_body_is_named_when_the_deadline_passes(env: dict[str, str]) -> None:
    """JSON that never parses is polled past, and the last parse error ends the timeout message."""
    script = """
        while True:
            conn = answer(); conn.sendall(b"HTTP/1.0 200 OK\\r\\n\\r\\n" + b"[" * 100000); conn.close()
    """
    with pytest.raises(RunnerError, match=r"before timeout \(1 s\); last attempt: unparsable reply"):
        discover_in_child(env, timeout=1, command=fake(script))


def test_a_child_killed_by_a_signal_is_a_crash_named_by_the_signal(env: dict[str, str]) -> None:
    """A negative exit code is reported as the signal's name."""
    with pytest.raises(RunnerError, match=r"runner crashed: SIGSEGV$"):
        discover_in_child(env, timeout=10, command=fake("os.kill(os.getpid(), signal.SIGSEGV)"))


def test_a_child_that_dies_mid_reply_is_a_crash(env: dict[str, str]) -> None:
    """A reply cut short by the child's death says both."""
    script = """
        conn = answer()
        conn.sendall(b"HTTP/1.0 200 OK\\r\\nContent-Length: 100\\r\\n\\r\\n0123456789")
        os.kill(os.getpid(), signal.SIGSEGV)
    """
    with pytest.raises(RunnerError, match=r"runner crashed: SIGSEGV: .* after 10 of 100 body bytes"):
        discover_in_child(env, timeout=10, command=fake(script))


def test_a_missing_executable_cannot_start(env: dict[str, str]) -> None:
    """A command that does not exist is a RunnerError, not a FileNotFoundError."""
    with pytest.raises(RunnerError, match="cannot start runner: '/nonexistent/gpuscout-runner'"):
        discover_in_child(env, timeout=10, command=["/nonexistent/gpuscout-runner", "{port}"])


@pytest.mark.parametrize("timeout", [0, -1, -math.inf, math.nan, math.inf, "3", True, None])
def test_a_timeout_that_is_not_a_positive_finite_number_is_refused(timeout: object) -> None:
    """The timeout is checked before any child starts."""
    with pytest.raises(GpuscoutError, match="timeout must be a finite number of seconds > 0"):
        discover_in_child(os.environ, timeout=timeout, command=["/nonexistent"])  # type: ignore[arg-type]


@pytest.mark.parametrize("command", [[], "python -m gpuscout runner", [sys.executable, 3]])
def test_a_command_that_is_not_an_argv_is_refused(command: object) -> None:
    """An empty command, a bare string or non-str parts are refused before starting anything."""
    with pytest.raises(RunnerError, match="runner command"):
        discover_in_child(os.environ, timeout=10, command=command)  # type: ignore[arg-type]


SLEEP_GRANDCHILD = """
    sub = subprocess.Popen(["sleep", "300"])
    open(sys.argv[2] + ".tmp", "w").write(str(sub.pid)); os.rename(sys.argv[2] + ".tmp", sys.argv[2])
"""
DOUBLE_FORK = """
    if os.fork() == 0:
        if os.fork() == 0:
            open(sys.argv[2] + ".tmp", "w").write(str(os.getpid()))
            os.rename(sys.argv[2] + ".tmp", sys.argv[2])
            time.sleep(300)
        os._exit(0)
    while not os.path.exists(sys.argv[2]):
        time.sleep(0.01)
"""


@pytest.mark.parametrize("spawn", [SLEEP_GRANDCHILD, DOUBLE_FORK], ids=["sleep-subprocess", "double-fork"])
@pytest.mark.parametrize("then", ["hang", "answer"])
def test_a_grandchild_does_not_outlive_the_call(
    env: dict[str, str], tmp_path: Path, spawn: str, then: str
) -> None:
    """The child's whole process group is killed when the call ends, answered or not."""
    pidfile = tmp_path / "grandchild.pid"
    rest = "time.sleep(300)" if then == "hang" else "conn = answer(); conn.sendall(GOOD); time.sleep(300)"
    command = fake(textwrap.dedent(spawn) + rest, str(pidfile))
    if then == "hang":
        with pytest.raises(RunnerError, match="before timeout"):
            discover_in_child(env, timeout=1, command=command)
    else:
        assert [d.id for d in discover_in_child(env, timeout=10, command=command)] == ["0"]
    pid = read_pid(pidfile)
    assert eventually(lambda: not running(pid)), f"grandchild {pid} still running"


def test_an_interrupted_call_still_kills_the_group(
    env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A KeyboardInterrupt while polling leaves no child or grandchild behind."""
    pidfile = tmp_path / "grandchild.pid"

    def interrupted(port: int, deadline: float) -> object:
        read_pid(pidfile)
        raise KeyboardInterrupt

    monkeypatch.setattr(runner_module, "_get_info", interrupted)
    with pytest.raises(KeyboardInterrupt):
        discover_in_child(
            env, timeout=10, command=fake(textwrap.dedent(SLEEP_GRANDCHILD) + "time.sleep(300)", str(pidfile))
        )
    pid = read_pid(pidfile)
    assert eventually(lambda: not running(pid)), f"grandchild {pid} still running"


def test_discovery_works_from_a_worker_thread(env: dict[str, str]) -> None:
    """A thread other than the main one can run isolated discovery."""
    results: list[list[DeviceInfo] | BaseException] = []

    def work() -> None:
        try:
            results.append(
                discover_in_child(
                    env, timeout=10, command=fake("conn = answer(); conn.sendall(GOOD); time.sleep(300)")
                )
            )
        except BaseException as exc:
            results.append(exc)

    worker = threading.Thread(target=work)
    worker.start()
    worker.join(15)
    assert not worker.is_alive()
    assert [[d.id for d in r] for r in results if isinstance(r, list)] == [["0"]], results


def test_discovery_installs_no_signal_handler(env: dict[str, str]) -> None:
    """Every signal disposition is the same after a call as before it."""
    before = {s: signal.getsignal(s) for s in signal.valid_signals()}
    discover_in_child(env, timeout=10, command=fake("conn = answer(); conn.sendall(GOOD); time.sleep(300)"))
    assert {s: signal.getsignal(s) for s in signal.valid_signals()} == before


def test_serve_refuses_a_port_out_of_range() -> None:
    """The child side names an impossible port."""
    with pytest.raises(GpuscoutError, match="port 99999 is out of range 0-65535"):
        serve(list, port=99999)


def test_serve_names_a_port_in_use() -> None:
    """A port another socket listens on is one GpuscoutError naming the port and the reason."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        with pytest.raises(GpuscoutError, match=f"127.0.0.1:{port}: Address already in use"):
            serve(list, port=port)


def test_the_runner_command_reports_a_bad_port_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    """`gpuscout runner --port 99999` exits 2 with one line on stderr."""
    assert main(["runner", "--port", "99999", "--plugins", "cuda"]) == 2
    err = capsys.readouterr().err
    assert err == "gpuscout: error: port 99999 is out of range 0-65535\n"


HEAD_PIECES = [
    b"HTTP/1.0 200 OK",
    b"HTTP/1.1 404",
    b"\r\n",
    b"\n",
    b"\r\n\r\n",
    b"Content-Length: ",
    b"Content-Length: 2",
    b"Transfer-Encoding: chunked",
    b": ",
    b"0",
    b"7",
    b"99999999999999",
    b"\x00",
    b"[]",
]
replies = st.lists(st.one_of(st.binary(max_size=30), st.sampled_from(HEAD_PIECES)), max_size=16).map(b"".join)


@settings(max_examples=500, deadline=None)
@given(replies)
def test_the_reply_parser_raises_only_runner_error(data: bytes) -> None:
    """No byte string makes parse_reply raise anything but RunnerError."""
    try:
        status, body = parse_reply(data)
    except RunnerError:
        return
    assert 0 <= status <= 999 and len(body) <= len(data)


@settings(max_examples=200, deadline=None)
@given(st.integers(100, 599), st.binary(max_size=2000), st.booleans(), st.binary(max_size=50))
def test_the_reply_parser_reads_back_a_well_formed_reply(
    status: int, body: bytes, with_length: bool, extra: bytes
) -> None:
    """Status and body come back as sent; bytes after Content-Length are dropped."""
    length = f"Content-Length: {len(body)}\r\n" if with_length else ""
    data = f"HTTP/1.1 {status} Some Reason\r\nServer: fake\r\n{length}\r\n".encode() + body
    assert parse_reply(data + extra if with_length else data) == (status, body)


@settings(max_examples=200, deadline=None)
@given(replies.filter(bool), st.lists(st.integers(1, 40), max_size=10))
def test_the_streaming_reader_agrees_with_the_parser(data: bytes, cuts: list[int]) -> None:
    """However the bytes are split into packets, the socket reader gives what parse_reply gives."""
    try:
        expected: object = parse_reply(data)
    except RunnerError:
        expected = RunnerError
    here, there = socket.socketpair()
    with here, there:
        at = 0
        for cut in cuts:
            there.sendall(data[at : at + cut])
            at += cut
        there.sendall(data[at:])
        there.close()
        try:
            head, body = read_reply(here, time.monotonic() + 5)
            got: object = (head.status, body)
        except RunnerError:
            got = RunnerError
    assert got == expected
