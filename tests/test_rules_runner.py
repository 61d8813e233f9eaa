"""Rules of the host's side of isolated discovery (``gpuscout.runner``), each stated once."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from gpuscout.runner import MAX_BODY, RunnerError, discover_in_child, parse_reply
from gpuscout.runner._reply import read_port_line
from tests.test_runner_hostile import fake

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="fake runners as in test_runner_hostile")


def test_a_busy_runner_is_asked_again_until_it_answers(env: dict[str, str]) -> None:
    """A 503 means "more connections than I serve": the host polls again and reads the devices."""
    script = """
        conn = answer(); conn.sendall(b"HTTP/1.0 503 Busy\\r\\nContent-Length: 0\\r\\n\\r\\n"); conn.close()
        conn = answer(); conn.sendall(GOOD); conn.close()
        time.sleep(60)
    """
    devices = discover_in_child(env, timeout=20, command=fake(script))
    assert [(d.id, d.library) for d in devices] == [("0", "CUDA")]


def test_a_parse_error_stays_the_reason_when_a_later_poll_times_out(env: dict[str, str]) -> None:
    """After an unparsable reply, a poll cut short by the deadline does not hide that reason."""
    script = """
        conn = answer(); conn.sendall(b"HTTP/1.0 200 OK\\r\\nContent-Length: 1\\r\\n\\r\\n["); conn.close()
        held = answer()
        time.sleep(60)
    """
    with pytest.raises(RunnerError, match=r"before timeout \(5 s\); last attempt: unparsable reply"):
        discover_in_child(env, timeout=5, command=fake(script))


def announced(line: bytes) -> int:
    child = subprocess.Popen(
        [sys.executable, "-c", f"import sys; sys.stdout.buffer.write({line!r}); sys.stdout.flush()"],
        stdout=subprocess.PIPE,
    )
    try:
        return read_port_line(child, time.monotonic() + 20, 20)
    finally:
        child.wait(20)
        assert child.stdout is not None
        child.stdout.close()


def test_an_announced_port_is_read_from_the_first_line() -> None:
    """``{"port": N}`` with N in 1-65535 is the port the host connects to."""
    assert announced(b'{"port": 1}\n') == 1
    assert announced(b'{"port": 65535}\r\n') == 65535


@pytest.mark.parametrize("line", [b'{"port": 0}\n', b'{"port": 65536}\n', b'{"port": true}\n'])
def test_an_announced_port_outside_1_to_65535_is_refused(line: bytes) -> None:
    """Port 0 is not a port anyone listens on; the line names the range."""
    with pytest.raises(RunnerError, match=r"with N in 1-65535"):
        announced(line)


def test_a_body_without_content_length_may_be_as_long_as_the_limit() -> None:
    """Read to the close, a body of exactly MAX_BODY bytes is accepted."""
    body = b"x" * MAX_BODY
    assert parse_reply(b"HTTP/1.0 200 OK\r\n\r\n" + body) == (200, body)


def test_a_body_without_content_length_over_the_limit_is_refused() -> None:
    """Read to the close, one byte past MAX_BODY is an error naming the limit."""
    with pytest.raises(RunnerError, match=f"over the limit of {MAX_BODY} bytes"):
        parse_reply(b"HTTP/1.0 200 OK\r\n\r\n" + b"x" * (MAX_BODY + 1))
