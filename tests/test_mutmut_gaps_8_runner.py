"""The eighth mutmut round's gaps (tests/MUTATION.md): the runner's HTTP replies (``_http``), its
server (``_server``) and the host's client (``_client``), tested in this process.

The runner's own suites start ``gpuscout runner`` as a child, where mutmut neither sees which
test reaches which function nor, for most mutants, runs them; here the server runs on a thread
of the test process (``_Server.run`` with its stop event, or ``serve`` with a short idle exit)
and is spoken to over 127.0.0.1 with plain sockets, each with a timeout, so that no test can
hang. No test asserts a duration: waits are safety nets only.
"""

from __future__ import annotations

import json
import math
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, cast

import pytest

from gpuscout import DeviceInfo
from gpuscout._records.encode import to_json
from gpuscout.errors import GpuscoutError
from gpuscout.runner import _client, _server
from gpuscout.runner._http import TOKEN_HEADER, busy_reply, handler_class, json_error
from gpuscout.runner._reply import ReplyHead, RunnerError, parse_whole_reply
from gpuscout.runner._server import HOST, MAX_REQUEST_HEAD, _Server, check_token, serve

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the runner is tested on Linux")

TOKEN = "0123456789abcdef0123456789abcdef"
CARD = DeviceInfo(id="0", uuid="GPU-0", library="CUDA", description="card")
SAFETY = 20.0  # seconds: a socket or join timeout that only a hang reaches


def _devices() -> list[DeviceInfo]:
    return [CARD]


@contextmanager
def server(
    devices: Callable[[], Sequence[DeviceInfo]] = _devices,
    *,
    token: str | None = TOKEN,
    read_timeout: float = 5.0,
    max_connections: int = 8,
    max_pending: int = 256,
) -> Iterator[_Server]:
    """A runner's ``_Server`` reading heads on a thread of this process, stopped after."""
    srv = _Server(
        (HOST, 0),
        handler_class(devices, token, read_timeout),
        read_timeout,
        max_connections,
        busy_reply(token, max_connections),
        max_pending,
    )
    stop = threading.Event()
    thread = threading.Thread(target=srv.run, args=(stop,), daemon=True)
    thread.start()
    try:
        yield srv
    finally:
        stop.set()
        srv.wake()
        thread.join(SAFETY)
        srv.close_refused()
        srv.server_close()
    assert not thread.is_alive()


def port_of(srv: _Server) -> int:
    return int(srv.server_address[1])


def connect(port: int) -> socket.socket:
    return socket.create_connection((HOST, port), timeout=SAFETY)


def read_all(sock: socket.socket) -> bytes:
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def exchange(port: int, raw: bytes) -> bytes:
    """Send ``raw`` and read until the server closes."""
    with connect(port) as sock:
        sock.sendall(raw)
        return read_all(sock)


def request(port: int, raw: bytes) -> tuple[ReplyHead, bytes]:
    return parse_whole_reply(exchange(port, raw))


def get(port: int, path: str = "/info", method: str = "GET") -> tuple[ReplyHead, bytes]:
    return request(port, f"{method} {path} HTTP/1.0\r\nHost: x\r\n\r\n".encode())


# --- _http: the replies ------------------------------------------------------------------------


def test_info_answers_200_with_the_device_array_as_json_and_its_exact_length() -> None:
    """``GET /info`` is 200, Content-Type application/json, Content-Length the body's length, the
    body the devices' wire array and the token header. Kills ``handler_class`` mutants of
    ``_reply``'s headers and of ``do_GET``'s success path."""
    with server() as srv:
        head, body = get(port_of(srv))
    assert head.status == 200
    assert body == to_json([CARD]).encode()
    assert head.headers["content-type"] == "application/json"
    assert head.headers["content-length"] == str(len(body))
    assert head.headers[TOKEN_HEADER.lower()] == TOKEN


def test_a_query_string_is_ignored_but_any_other_path_is_a_404_naming_it() -> None:
    """``/info?x`` is ``/info``; ``/infox``, ``/`` and ``/info/`` are 404 with a JSON error that
    names the path, cut at 200 characters (a client picks the path, the reply stays small)."""
    with server() as srv:
        port = port_of(srv)
        assert get(port, "/info?a=1?b=2")[0].status == 200
        for path in ("/infox", "/", "/info/", "/x?/info"):
            head, body = get(port, path)
            assert (head.status, json.loads(body)) == (404, {"error": f"not found: {path}"})
            assert head.headers[TOKEN_HEADER.lower()] == TOKEN
        long = "/" + "a" * 300
        head, body = get(port, long)
    assert (head.status, json.loads(body)) == (404, {"error": f"not found: {long[:200]}"})


def test_a_failing_discovery_is_a_500_carrying_the_error_text() -> None:
    """The host must hear why discovery failed, not see a dropped connection: 500 and
    ``{"error": str(exc)}``."""

    def broken() -> list[DeviceInfo]:
        raise OSError("driver went away")

    with server(broken) as srv:
        head, body = get(port_of(srv))
    assert (head.status, json.loads(body)) == (500, {"error": "driver went away"})
    assert head.headers["content-length"] == str(len(body))


def test_head_is_answered_as_get_with_its_headers_and_no_body() -> None:
    """HEAD runs the discovery and answers GET's status and headers (its Content-Length
    included) with no body; a 404 by HEAD has no body either."""
    with server() as srv:
        port = port_of(srv)
        got = exchange(port, b"HEAD /info HTTP/1.0\r\n\r\n")
        missing = exchange(port, b"HEAD /nope HTTP/1.0\r\n\r\n")
    head_text, _, rest = got.partition(b"\r\n\r\n")
    assert rest == b""
    assert head_text.startswith(b"HTTP/1.0 200 ")
    assert f"Content-Length: {len(to_json([CARD]))}".encode() in head_text.split(b"\r\n")
    assert f"{TOKEN_HEADER}: {TOKEN}".encode() in head_text.split(b"\r\n")
    assert missing.startswith(b"HTTP/1.0 404 ") and missing.endswith(b"\r\n\r\n")


def test_without_a_token_no_token_header_is_sent() -> None:
    """A runner given no token sends no ``X-Gpuscout-Token`` header (an empty one would be
    refused by a host that expects a token), on a 200 and on a 503."""
    with server(token=None) as srv:
        head, _ = get(port_of(srv))
    assert head.status == 200
    assert TOKEN_HEADER.lower() not in head.headers
    assert TOKEN_HEADER.encode() not in busy_reply(None, 3)


def test_an_unknown_method_and_a_bad_request_line_are_json_errors_and_close() -> None:
    """``send_error`` answers like the rest: JSON ``{"error": message}`` with the token, the
    connection closed. A message http.server gives is kept; without one (an over-long request
    line: 414) the status's own phrase is the error. (A malformed request line is answered
    as HTTP/0.9 by http.server, body only.)"""
    with server() as srv:
        port = port_of(srv)
        head, body = get(port, "/info", method="POST")
        assert (head.status, json.loads(body)) == (501, {"error": "Unsupported method ('POST')"})
        assert head.headers[TOKEN_HEADER.lower()] == TOKEN
        assert head.headers["content-type"] == "application/json"
        # A bad request line leaves http.server at HTTP/0.9, which writes no headers.
        bad = exchange(port, b"GET /info HTTP/1.0 extra\r\n\r\n")
        assert json.loads(bad)["error"].startswith("Bad request")
        head, body = request(port, b"GET /" + b"a" * 70000 + b" HTTP/1.0\r\n\r\n")
    assert (head.status, json.loads(body)) == (414, {"error": "Request-URI Too Long"})


def test_a_keep_alive_request_after_an_error_is_not_read() -> None:
    """After an error reply the connection is closed (``close_connection``), even when the
    client asked HTTP/1.1 to keep it open: a second request on it gets nothing."""
    with server() as srv:
        raw = b"POST /info HTTP/1.1\r\nHost: x\r\n\r\nGET /info HTTP/1.1\r\nHost: x\r\n\r\n"
        data = exchange(port_of(srv), raw)
    assert data.count(b"HTTP/1.") == 1
    assert data.startswith(b"HTTP/1.0 501 ") or data.startswith(b"HTTP/1.1 501 ")


def test_a_client_that_never_reads_its_reply_frees_its_handler_at_the_read_timeout() -> None:
    """``read_timeout`` bounds each write too: a client that asks for a reply larger than the
    socket buffers and never reads it loses its handler when a write waits that long, so it
    cannot hold one of ``max_connections`` for ever. Kills ``x_handler_class__mutmut_1`` (no
    timeout on the handler's socket)."""
    big = [
        DeviceInfo(id=str(i), uuid=f"GPU-{i}", library="CUDA", description="c" * (1 << 20)) for i in range(24)
    ]
    with server(lambda: big, read_timeout=0.5, max_connections=1) as srv:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.settimeout(SAFETY)
        with sock:
            sock.connect((HOST, port_of(srv)))
            sock.sendall(b"GET /info HTTP/1.0\r\n\r\n")
            assert _eventually(lambda: srv.active == 1)
            assert _eventually(lambda: srv.active == 0), "the handler still waits on its write"


def test_each_request_is_logged_at_debug_level_with_its_line() -> None:
    """http.server's access line goes to gpuscout's log (event ``runner.request``, its text in
    ``line``), never to stderr. Kills ``x_handler_class__mutmut_85/86/88/89/90``."""
    from structlog.testing import capture_logs

    with capture_logs() as logs, server() as srv:
        get(port_of(srv))
        assert _eventually(lambda: any(e.get("event") == "runner.request" for e in logs))
    lines = [e for e in logs if e.get("event") == "runner.request"]
    assert lines[0]["log_level"] == "debug"
    assert lines[0]["line"] == '"GET /info HTTP/1.0" 200 -'


def test_the_busy_reply_is_a_whole_http_503_with_a_json_body() -> None:
    """The 503 written by the reading thread is a complete reply the host can parse: status
    line, JSON type, exact length, the token, the number of connections served."""
    raw = busy_reply(TOKEN, 3)
    head, body = parse_whole_reply(raw)
    assert head.status == 503
    assert json.loads(body) == {"error": "busy: 3 connections are being served"}
    assert head.headers["content-type"] == "application/json"
    assert head.headers["content-length"] == str(len(body))
    assert head.headers[TOKEN_HEADER.lower()] == TOKEN
    assert raw.startswith(b"HTTP/1.0 503 Service Unavailable\r\n")
    assert json_error('a "b"') == b'{"error": "a \\"b\\""}'


# --- _server: reading heads ---------------------------------------------------------------------


def test_a_request_over_the_handlers_is_answered_503_and_the_held_one_still_200() -> None:
    """With every handler busy, a request whose head is in gets the busy reply (503) at once;
    the busy handler's request is answered when it finishes, and a slot freed serves again."""
    release = threading.Event()
    entered = threading.Event()

    def slow() -> list[DeviceInfo]:
        entered.set()
        release.wait(SAFETY)
        return [CARD]

    with server(slow, max_connections=1) as srv:
        port = port_of(srv)
        first = connect(port)
        first.sendall(b"GET /info HTTP/1.0\r\n\r\n")
        assert entered.wait(SAFETY)
        head, body = get(port)
        assert (head.status, json.loads(body)) == (503, {"error": "busy: 1 connections are being served"})
        release.set()
        with first:
            assert parse_whole_reply(read_all(first))[0].status == 200
        # The slot is freed when the handler thread has closed its side, which may come a
        # moment after the client read the whole reply: until then the busy reply is right.
        deadline = time.monotonic() + SAFETY
        while (status := get(port)[0].status) == 503 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert status == 200


def test_a_head_ended_by_bare_lf_lines_or_sent_in_pieces_is_served() -> None:
    """A head ends at its first blank line, CR LF or bare LF (as http.server reads it), even
    when the blank line arrives split over two reads: the search looks back 3 bytes into
    what came before."""
    whole = b"GET /info HTTP/1.0\r\nHost: x\r\n\r\n"
    with server() as srv:
        port = port_of(srv)
        assert request(port, b"GET /info HTTP/1.0\nHost: x\n\n")[0].status == 200
        for cut in range(len(whole) - 4, len(whole)):
            with connect(port) as sock:
                sock.sendall(whole[:cut])
                time.sleep(0.1)  # the server reads the first piece alone (not a bound)
                sock.sendall(whole[cut:])
                assert parse_whole_reply(read_all(sock))[0].status == 200, cut


def test_a_client_that_stops_sending_gets_what_came_answered() -> None:
    """A client that half-closes before a blank line has its bytes handed to a handler (which
    answers what it can) rather than waiting for the read timeout."""
    with server(read_timeout=SAFETY) as srv, connect(port_of(srv)) as sock:
        sock.sendall(b"GET /info HTTP/1.0\r\n")
        sock.shutdown(socket.SHUT_WR)
        head, _ = parse_whole_reply(read_all(sock))
    assert head.status == 200


def test_a_head_that_never_ends_is_cut_at_the_read_timeout_without_a_reply() -> None:
    """A connection that has not delivered its head within ``read_timeout`` of its accept is
    closed with no reply, while a later request is served."""
    with server(read_timeout=0.3) as srv:
        port = port_of(srv)
        with connect(port) as sock:
            sock.sendall(b"GET /info HTTP/1.0\r\n")
            assert read_all(sock) == b""
        assert get(port)[0].status == 200
        assert _eventually(lambda: srv.idle_for(time.monotonic()) > 0)


def test_a_head_over_the_limit_goes_to_a_handler_at_once() -> None:
    """Once a head passes MAX_REQUEST_HEAD bytes with no blank line, the server stops reading
    and hands it over (the handler answers 431/414/400), long before the read timeout."""
    line = b"GET /info HTTP/1.0\r\n"
    filler = b"X-Fill: " + b"a" * 1000 + b"\r\n"
    raw = line + filler * (MAX_REQUEST_HEAD // len(filler) + 2)
    with server(read_timeout=SAFETY) as srv, connect(port_of(srv)) as sock:
        sock.sendall(raw)
        got = read_all(sock)
    assert got.startswith(b"HTTP/1.0 431 ") or got.startswith(b"HTTP/1.0 400 ")


def test_a_head_of_exactly_the_limit_is_still_waited_on() -> None:
    """A head of exactly MAX_REQUEST_HEAD bytes and no blank line is not over the limit: the
    server waits for more (here, the read timeout cuts it without a reply)."""
    line = b"GET /info HTTP/1.0\r\nX-Fill: "
    raw = line + b"a" * (MAX_REQUEST_HEAD - len(line))
    assert len(raw) == MAX_REQUEST_HEAD
    with server(read_timeout=1.0) as srv, connect(port_of(srv)) as sock:
        sock.sendall(raw)
        assert read_all(sock) == b""


def test_a_connection_closed_without_a_word_is_dropped_and_the_server_goes_idle() -> None:
    """A client that connects and closes at once frees its place: the active count returns to
    zero (``idle_for`` > 0) and the server still answers."""
    with server() as srv:
        port = port_of(srv)
        connect(port).close()
        assert _eventually(lambda: srv.idle_for(time.monotonic()) > 0)
        assert srv.active == 0
        assert get(port)[0].status == 200
        assert _eventually(lambda: srv.active == 0)


def test_one_connection_over_max_pending_drops_the_oldest_silent_one() -> None:
    """At ``max_pending`` connections reading, one more drops the oldest (closed with no
    reply), keeps the others and is read itself."""
    with server(max_pending=2, read_timeout=SAFETY) as srv:
        port = port_of(srv)
        oldest, second = connect(port), connect(port)
        assert _eventually(lambda: len(srv.pending) == 2)
        with oldest, second:
            head, _ = get(port)
            assert head.status == 200
            oldest.settimeout(SAFETY / 2)  # dropped at once, not cut at the read timeout (SAFETY)
            assert read_all(oldest) == b""
            second.settimeout(0.3)
            with pytest.raises(TimeoutError):
                second.recv(1)  # still open, still waited on
            second.settimeout(SAFETY)
            second.sendall(b"GET /info HTTP/1.0\r\n\r\n")
            assert parse_whole_reply(read_all(second))[0].status == 200


def test_idle_for_is_zero_while_a_connection_is_open() -> None:
    """A runner is not idle while a client holds a connection, however silent."""
    with server(read_timeout=SAFETY) as srv, connect(port_of(srv)):
        assert _eventually(lambda: srv.active == 1)
        assert srv.idle_for(time.monotonic() + 1000) == 0.0
    assert srv.idle_for(srv.last_activity + 5) == 5


def test_refused_connections_are_closed_only_when_their_moment_has_passed() -> None:
    """``close_refused(now)`` closes those due by ``now`` and keeps the rest; without ``now``
    it closes them all."""
    with server() as srv:
        a, b = socket.socketpair()
        c, d = socket.socketpair()
        with a, b, c, d:
            a.setblocking(False)  # as _refuse leaves them: the drain before close must not block
            c.setblocking(False)
            srv.refused = [(10.0, a), (20.0, c)]
            srv.close_refused(15.0)
            assert a.fileno() == -1 and c.fileno() != -1
            assert srv.refused == [(20.0, c)]
            srv.close_refused()
            assert c.fileno() == -1 and srv.refused == []


def test_a_wake_after_close_raises_nothing() -> None:
    """``wake`` is called on the way out, when the pair may be closed already."""
    with server() as srv:
        pass
    srv.wake()


def _eventually(predicate: Callable[[], bool]) -> bool:
    end = time.monotonic() + SAFETY
    while not predicate():
        if time.monotonic() > end:
            return False
        time.sleep(0.01)
    return True


# --- _server: serve's arguments and lifetime ----------------------------------------------------


@pytest.mark.parametrize("port", [True, -1, 65536, 1.0, "80"])
def test_serve_refuses_a_port_that_is_not_an_int_from_0_to_65535(port: Any) -> None:
    """The port is an int in 0-65535 (bool is not one), checked before anything binds."""
    with pytest.raises(GpuscoutError, match="is out of range 0-65535"):
        serve(_devices, port)


@pytest.mark.parametrize("value", [0, -1, 0.0, math.nan, math.inf, True, "5", None, 10**400])
@pytest.mark.parametrize("name", ["idle_exit", "read_timeout"])
def test_serve_wants_finite_positive_seconds(name: str, value: Any) -> None:
    """``idle_exit`` and ``read_timeout`` are finite numbers of seconds > 0 (not bool)."""
    with pytest.raises(GpuscoutError, match=f"^{name} must be a finite number of seconds > 0, got "):
        serve(_devices, 0, **{name: value})


def test_seconds_takes_ints_and_floats_as_floats() -> None:
    """An int or float in range is taken as the float, up to the largest double."""
    assert _server._seconds(1, "x") == 1.0 and isinstance(_server._seconds(1, "x"), float)
    assert _server._seconds(1e-9, "x") == 1e-9
    assert _server._seconds(sys.float_info.max, "x") == sys.float_info.max


@pytest.mark.parametrize("value", [0, -1, True, 1.0, "8", None])
def test_serve_wants_max_connections_an_int_of_at_least_1(value: Any) -> None:
    """``max_connections`` is an int >= 1, not bool."""
    with pytest.raises(GpuscoutError, match=r"^max_connections must be an int >= 1, got "):
        serve(_devices, 0, max_connections=value)


def test_check_token_takes_1_to_256_visible_ascii_characters() -> None:
    """None or "" is no token; 1 to 256 characters from ``!`` to ``~`` are kept as they are;
    anything else (a space, CR LF, non-ASCII, 257 characters, not a str) is an error."""
    assert check_token(None) is None and check_token("") is None
    for good in ("!", "~" * 256, TOKEN):
        assert check_token(good) == good
    for bad in (" ", "a b", "a\r\nX: y", "é", "a" * 257, b"abc", 5):
        with pytest.raises(GpuscoutError, match=r"^the runner token \(GPUSCOUT_RUNNER_TOKEN\) must be"):
            check_token(bad)


def test_serve_announces_its_port_answers_with_the_token_and_exits_0_when_idle() -> None:
    """``serve(port=0)`` binds a port the system picks, announces it, answers there with the
    token, and returns 0 once ``idle_exit`` passes with no connection (on a thread: no
    signal handler is installed)."""
    ports: list[int] = []
    got = threading.Event()
    result: list[int] = []

    def announce(port: int) -> None:
        ports.append(port)
        got.set()

    thread = threading.Thread(
        target=lambda: result.append(serve(_devices, 0, 0.5, token=TOKEN, announce=announce)), daemon=True
    )
    thread.start()
    assert got.wait(SAFETY)
    head, body = get(ports[0])
    assert head.status == 200 and head.headers[TOKEN_HEADER.lower()] == TOKEN
    assert body == to_json([CARD]).encode()
    thread.join(SAFETY)
    assert not thread.is_alive() and result == [0]
    with socket.socket() as sock, pytest.raises(ConnectionRefusedError):
        sock.settimeout(SAFETY)
        sock.connect((HOST, ports[0]))


def test_serve_answers_503_over_max_connections() -> None:
    """``serve``'s ``max_connections`` is the number of handlers: with 1, a second request while
    the first is in its discovery is answered 503 naming 1 connection."""
    release = threading.Event()
    entered = threading.Event()
    ports: list[int] = []
    got = threading.Event()

    def slow() -> list[DeviceInfo]:
        entered.set()
        release.wait(SAFETY)
        return [CARD]

    def announce(port: int) -> None:
        ports.append(port)
        got.set()

    thread = threading.Thread(
        target=serve, args=(slow, 0, 0.5), kwargs={"announce": announce, "max_connections": 1}, daemon=True
    )
    thread.start()
    assert got.wait(SAFETY)
    with connect(ports[0]) as first:
        first.sendall(b"GET /info HTTP/1.0\r\n\r\n")
        assert entered.wait(SAFETY)
        head, body = get(ports[0])
        release.set()
        assert parse_whole_reply(read_all(first))[0].status == 200
    assert (head.status, json.loads(body)) == (503, {"error": "busy: 1 connections are being served"})
    assert TOKEN_HEADER.lower() not in head.headers
    thread.join(SAFETY)
    assert not thread.is_alive()


def test_serve_gives_the_handlers_its_read_timeout() -> None:
    """``serve``'s ``read_timeout`` bounds a head's delivery: a silent connection is cut, with
    no reply, long before the safety net."""
    ports: list[int] = []
    got = threading.Event()

    def announce(port: int) -> None:
        ports.append(port)
        got.set()

    thread = threading.Thread(
        target=serve, args=(_devices, 0, 0.5), kwargs={"announce": announce, "read_timeout": 0.3}, daemon=True
    )
    thread.start()
    assert got.wait(SAFETY)
    with connect(ports[0]) as sock:
        sock.settimeout(4.0)  # under the default 5 s (which would fail here), 13 times the 0.3 s
        assert read_all(sock) == b""
    thread.join(SAFETY)
    assert not thread.is_alive()


# --- _client: the host's checks -----------------------------------------------------------------


@pytest.mark.parametrize("value", [0, -1, 0.0, math.nan, math.inf, -math.inf, True, "5", None])
def test_check_timeout_wants_a_finite_number_over_0(value: Any) -> None:
    """The host's timeout is an int or float, finite and > 0, not bool; the message quotes it."""
    with pytest.raises(RunnerError, match=r"^timeout must be a finite number of seconds > 0, got "):
        _client.check_timeout(value)


def test_check_timeout_clamps_to_max_timeout_as_a_float() -> None:
    """A huge timeout (an int past a double's range too) is MAX_TIMEOUT; others are kept, as float."""
    assert _client.check_timeout(10**400) == _client.MAX_TIMEOUT
    assert _client.check_timeout(_client.MAX_TIMEOUT * 2) == _client.MAX_TIMEOUT
    assert _client.check_timeout(_client.MAX_TIMEOUT) == _client.MAX_TIMEOUT
    assert _client.check_timeout(3) == 3.0 and isinstance(_client.check_timeout(3), float)
    assert _client.check_timeout(1e-6) == 1e-6


@pytest.mark.parametrize("command", ["python", b"python", None, 5, ["a", 1], [b"a"]])
def test_a_runner_command_must_be_a_sequence_of_str(command: Any) -> None:
    """A str or bytes is never an argv; nor is a non-sequence or one holding other than str."""
    with pytest.raises(RunnerError, match=r"^runner command must be a sequence of str, got "):
        _client._check_command(command)


def test_an_empty_command_is_refused_and_a_tuple_is_a_list() -> None:
    """An empty argv runs nothing and is refused by name; a tuple of str is taken as a list."""
    with pytest.raises(RunnerError, match=r"^runner command is empty$"):
        _client._check_command(())
    assert _client._check_command(("a", "b")) == ["a", "b"]


def _head(**headers: str) -> ReplyHead:
    return ReplyHead(200, {k.lower(): v for k, v in headers.items()}, None)


def test_check_token_refuses_another_token_and_a_missing_one_when_required() -> None:
    """Without a token of its own the host checks nothing; a header without the token is
    refused; a missing header is refused only when required (gpuscout's own runner)."""
    key = TOKEN_HEADER.lower()
    _client._check_token(_head(), 1, None, True)
    _client._check_token(ReplyHead(200, {key: "other"}, None), 1, None, True)
    _client._check_token(_head(), 1, TOKEN, False)
    _client._check_token(ReplyHead(200, {key: TOKEN}, None), 1, TOKEN, True)
    with pytest.raises(
        RunnerError,
        match=f"^the answer on port 7 did not carry this child's token \\(no {TOKEN_HEADER} header\\)",
    ):
        _client._check_token(_head(), 7, TOKEN, True)
    for wrong in ("other", TOKEN + "0", TOKEN[:-1], ""):
        with pytest.raises(RunnerError, match=f"\\(another {TOKEN_HEADER}\\): another process answered$"):
            _client._check_token(ReplyHead(200, {key: wrong}, None), 7, TOKEN, False)


# --- _client: poll_runner against a scripted loopback server ------------------------------------


class FakeChild:
    """What poll_runner asks of its child: ``poll()`` and ``wait(timeout)`` (None: running)."""

    def __init__(self, code: int | None = None) -> None:
        self.code = code

    def poll(self) -> int | None:
        return self.code

    def wait(self, timeout: float | None = None) -> int:
        # A running child waited on without a timeout would block the host for ever.
        assert timeout is not None, "waited on the child without a timeout"
        if self.code is None:
            raise subprocess.TimeoutExpired("fake", timeout)
        return self.code


def reply(status: int, body: bytes, token: str | None = TOKEN, length: bool = True) -> bytes:
    head = [f"HTTP/1.0 {status} X"]
    if length:
        head.append(f"Content-Length: {len(body)}")
    if token is not None:
        head.append(f"{TOKEN_HEADER}: {token}")
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


GOOD_BODY = to_json([CARD]).encode()


@contextmanager
def scripted(replies: Sequence[bytes | None]) -> Iterator[tuple[int, list[bytes]]]:
    """A loopback server answering its n-th connection with ``replies[n]`` (the last one again
    after the end; None: read the request and say nothing until the client goes). Yields the
    port and the requests it read."""
    listener = socket.socket()
    listener.bind((HOST, 0))
    listener.listen(64)
    listener.settimeout(0.05)
    requests: list[bytes] = []
    done = threading.Event()

    def serve_them() -> None:
        n = 0
        while not done.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with conn:
                conn.settimeout(SAFETY)
                data = b""
                while b"\r\n\r\n" not in data and (chunk := conn.recv(4096)):
                    data += chunk
                requests.append(data)
                answer = replies[min(n, len(replies) - 1)]
                n += 1
                try:
                    if answer is None:
                        conn.recv(1)  # until the client closes
                    else:
                        conn.sendall(answer)
                except OSError:
                    pass

    thread = threading.Thread(target=serve_them, daemon=True)
    thread.start()
    try:
        yield int(listener.getsockname()[1]), requests
    finally:
        done.set()
        thread.join(SAFETY)
        listener.close()


def poll(port: int, seconds: float = SAFETY, child: FakeChild | None = None, **kw: Any) -> list[DeviceInfo]:
    fake: Any = child or FakeChild()
    return _client.poll_runner(port, fake, time.monotonic() + seconds, seconds, **kw)


def test_poll_runner_sends_one_http_1_0_get_and_reads_the_devices() -> None:
    """The host asks ``GET /info`` in HTTP/1.0 with ``Host: 127.0.0.1:PORT`` (so a conforming
    server neither chunks nor keeps the connection) and decodes the device array. Kills the
    ``_get_info`` mutants of the request text and of ``read_reply``'s arguments."""
    with scripted([reply(200, GOOD_BODY)]) as (port, requests):
        assert poll(port, token=TOKEN, require_token=True) == [CARD]
    assert requests == [
        f"GET /info HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\r\n".encode()
    ]


def test_poll_runner_asks_again_after_a_503_and_an_unparsable_reply() -> None:
    """A busy runner (503) and an unparsable body are asked again, 10 ms apart, until an
    answer; the answer is returned."""
    with scripted([reply(503, b"{}"), reply(200, b"[{"), reply(200, GOOD_BODY)]) as (port, requests):
        assert poll(port, token=TOKEN) == [CARD]
    assert len(requests) == 3


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        (reply(503, b"{}"), "runner busy (status 503)"),
        (reply(200, b"[{"), "unparsable reply: "),
        (None, "no complete reply"),
    ],
)
def test_at_the_deadline_the_last_problem_is_named(answer: bytes | None, problem: str) -> None:
    """When the deadline passes, the error names the timeout and the last problem seen: busy,
    unparsable (and what the parser said), or no complete reply. A busy or unparsable answer
    is asked again POLL_INTERVAL (10 ms) later, not a second later: within a second's deadline
    there is more than one request (kills ``x_poll_runner__mutmut_70``, a sleep of >= 1 s)."""
    with scripted([answer]) as (port, requests), pytest.raises(RunnerError) as caught:
        poll(port, seconds=1.0)
    assert str(caught.value).startswith(
        f"failed to finish discovery before timeout (1 s); last attempt: {problem}"
    )
    if answer is not None:
        assert len(requests) >= 2


def test_a_parse_error_is_not_hidden_by_a_later_incomplete_reply() -> None:
    """An unparsable reply says more than a later exchange cut by the deadline: it stays the
    reason."""
    with (
        scripted([reply(200, b"[{"), None]) as (port, _),
        pytest.raises(RunnerError, match="unparsable reply"),
    ):
        poll(port, seconds=0.5)


def test_a_refusal_before_an_incomplete_reply_is_replaced_by_it() -> None:
    """A refusal (busy) seen before an exchange the deadline cut is stale: the reason is the
    incomplete reply."""
    with scripted([reply(503, b"{}"), None]) as (port, _), pytest.raises(RunnerError) as caught:
        poll(port, seconds=0.5)
    assert str(caught.value).endswith("; last attempt: no complete reply")


def test_a_deadline_already_passed_names_no_problem() -> None:
    """Nothing is tried after the deadline: the error names only the timeout."""
    with pytest.raises(RunnerError) as caught:
        _client.poll_runner(1, cast(Any, FakeChild()), time.monotonic() - 1, 5.0)
    assert str(caught.value) == "failed to finish discovery before timeout (5 s)"


def test_a_404_and_other_statuses_end_the_poll_at_once() -> None:
    """404 means a runner without /info; another status ends the call with up to 200 bytes of
    its body."""
    with scripted([reply(404, b"{}")]) as (port, _), pytest.raises(RunnerError) as caught:
        poll(port)
    assert str(caught.value) == "runner does not report devices (/info answered 404)"
    body = b"e" * 300
    with scripted([reply(500, body)]) as (port, _), pytest.raises(RunnerError) as caught:
        poll(port)
    assert str(caught.value) == f"runner error (status 500): {'e' * 200}"
    with scripted([reply(201, b"\xff")]) as (port, _), pytest.raises(RunnerError) as caught:
        poll(port)
    assert str(caught.value) == "runner error (status 201): \ufffd"


def test_the_token_is_checked_before_the_status() -> None:
    """Another process's 404 or 503 is refused as another process's, not believed."""
    for status in (404, 503, 200):
        with (
            scripted([reply(status, b"[]", token="x" * 32)]) as (port, _),
            pytest.raises(RunnerError, match="another process answered"),
        ):
            poll(port, token=TOKEN)
    with (
        scripted([reply(200, b"[]", token=None)]) as (port, _),
        pytest.raises(RunnerError, match="no X-Gpuscout"),
    ):
        poll(port, token=TOKEN, require_token=True)
    with scripted([reply(200, GOOD_BODY, token=None)]) as (port, _):
        assert poll(port, token=TOKEN) == [CARD]


def test_nothing_listening_is_polled_until_the_deadline_or_the_childs_exit() -> None:
    """A port nobody listens on is tried again (the child may not have bound it yet) until
    the deadline, which names the refusal; a child that has exited ends the poll at once."""
    with socket.socket() as taken:
        taken.bind((HOST, 0))
        port = taken.getsockname()[1]  # bound, not listening: connections are refused
        with pytest.raises(RunnerError) as caught:
            poll(port, seconds=0.3)
        refused = "failed to finish discovery before timeout (0.3 s); last attempt: Connection refused"
        assert str(caught.value) == refused
        with pytest.raises(RunnerError) as caught:
            poll(port, child=FakeChild(3))
        assert str(caught.value) == "runner exited with status 3"


def test_a_reply_cut_short_by_a_child_that_exited_names_the_exit() -> None:
    """A broken reply from a child that has exited is said as its exit with the reply's
    problem; from a running child, the problem alone, after a short wait (CRASH_GRACE), never
    an unbounded one. Kills ``x__broken_reply__mutmut_3`` (``exit_code(child, None)``)."""
    cut = b"HTTP/1.0 200 OK\r\nContent-Length: 100\r\n\r\n[]"
    with scripted([cut]) as (port, _), pytest.raises(RunnerError) as caught:
        poll(port, child=FakeChild(-9))
    problem = "runner closed the connection after 2 of 100 body bytes"
    assert str(caught.value) == f"runner crashed: SIGKILL: {problem}"
    with scripted([cut]) as (port, _), pytest.raises(RunnerError) as caught:
        poll(port)
    assert str(caught.value) == problem
    with scripted([cut]) as (port, _), pytest.raises(RunnerError) as caught:
        poll(port, child=FakeChild(0))  # exited 0: not a crash, the problem alone
    assert str(caught.value) == problem


def test_a_connect_to_a_full_backlog_is_bounded_by_the_deadline() -> None:
    """A port whose listen backlog is full drops the SYN, and a connect without a timeout would
    wait for the kernel's retries (minutes): the connect gets only what is left of the one
    deadline. Kills ``x__get_info__mutmut_5`` (``settimeout(None)`` before connect)."""
    with socket.socket() as listener:
        listener.bind((HOST, 0))
        listener.listen(0)
        port = listener.getsockname()[1]
        fillers = []
        for _ in range(8):  # never accepted: the backlog fills; later connects block
            one = socket.socket()
            one.setblocking(False)
            try:
                one.connect((HOST, port))
            except BlockingIOError:
                pass
            fillers.append(one)
        outcome: list[BaseException | list[DeviceInfo]] = []

        def run() -> None:
            try:
                outcome.append(poll(port, seconds=1.0))
            except BaseException as exc:
                outcome.append(exc)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        thread.join(SAFETY)
        for one in fillers:
            one.close()
        assert not thread.is_alive(), "the connect was not bounded by the deadline"
    assert isinstance(outcome[0], RunnerError)
    assert str(outcome[0]).startswith("failed to finish discovery before timeout (1 s)")


def test_the_stderr_tail_waits_only_briefly_for_a_pipe_held_open() -> None:
    """A dead child's last words are read after at most CRASH_GRACE even when its stderr pipe
    stays open (a grandchild that left its group holds it). Kills
    ``xǁ_StderrTailǁlast_words__mutmut_1`` (``wait(None)``: until the pipe ends)."""
    import os

    read_end, write_end = os.pipe()

    class Child:
        stderr = os.fdopen(read_end, "rb")

    try:
        tail = _client._StderrTail(cast(Any, Child()))
        os.write(write_end, b"first\nlast words\n\n")
        assert _eventually(lambda: tail.data.bytes().endswith(b"\n\n"))
        words: list[str] = []
        thread = threading.Thread(target=lambda: words.append(tail.last_words()), daemon=True)
        thread.start()
        thread.join(SAFETY)
        assert not thread.is_alive(), "last_words waited for the pipe's end"
        assert words == ["last words"]
    finally:
        os.close(write_end)
        Child.stderr.close()


def test_discover_in_child_defaults_to_30_seconds() -> None:
    """The documented default timeout of an isolated discovery (30 s, as validate_devices)."""
    import inspect

    assert inspect.signature(_client.discover_in_child).parameters["timeout"].default == 30.0


def test_serve_on_the_main_thread_stops_on_sigterm_and_puts_the_handler_back() -> None:
    """On the main thread ``serve`` handles SIGTERM while it runs (it returns 0, promptly: it
    does not wait for ``idle_exit``) and puts the previous handler back after."""
    import os
    import signal

    if threading.current_thread() is not threading.main_thread():
        pytest.skip("needs the main thread")
    before = signal.getsignal(signal.SIGTERM)
    seen: list[object] = []
    answers: list[int] = []

    def announce(port: int) -> None:
        def client() -> None:
            answers.append(get(port)[0].status)
            seen.append(signal.getsignal(signal.SIGTERM))
            if seen[0] is not before:  # only a handler of serve's own may get it
                os.kill(os.getpid(), signal.SIGTERM)

        threading.Thread(target=client, daemon=True).start()

    fired: list[bool] = []

    def end_a_hang() -> None:  # serve ends on KeyboardInterrupt too; the test then fails
        fired.append(True)
        os.kill(os.getpid(), signal.SIGINT)

    done = threading.Timer(SAFETY, end_a_hang)
    done.start()
    try:
        assert serve(_devices, 0, 1000.0, announce=announce) == 0
    finally:
        done.cancel()
    assert not fired, "SIGTERM did not stop serve"
    assert answers == [200]
    assert seen and seen[0] is not before
    assert signal.getsignal(signal.SIGTERM) is before


def test_the_reply_is_decoded_under_the_exchanges_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """The body is decoded under the same deadline as the exchange; a decode that runs past it
    is the timeout, naming the decoding. Kills ``x_poll_runner__mutmut_87/90`` (no deadline for
    the decoder) and ``_91`` to ``_96`` (the message)."""
    import gpuscout._records.decode as decode

    seen: list[object] = []

    def slow_decoder(text: bytes, cls: object, *, deadline: float | None = None) -> object:
        seen.append(deadline)
        raise TimeoutError

    monkeypatch.setattr(decode, "from_json", slow_decoder)
    deadline = time.monotonic() + SAFETY
    with scripted([reply(200, GOOD_BODY)]) as (port, _), pytest.raises(RunnerError) as caught:
        _client.poll_runner(port, cast(Any, FakeChild()), deadline, 7.0)
    assert seen == [deadline]
    assert str(caught.value) == (
        "failed to finish discovery before timeout (7 s); last attempt: the reply was still being decoded"
    )


def test_an_unparsable_reply_is_named_in_200_characters_and_logged(monkeypatch: pytest.MonkeyPatch) -> None:
    """The parser's complaint, cut at 200 characters, is the reason at the deadline and goes to
    the log as a warning (``runner.unparsable_reply``). Kills ``x_poll_runner__mutmut_98/99``
    and ``_100`` to ``_106``."""
    from structlog.testing import capture_logs

    import gpuscout._records.decode as decode

    complaint = "bad " + "e" * 300

    def refusing(text: bytes, cls: object, *, deadline: float | None = None) -> object:
        raise GpuscoutError(complaint)

    monkeypatch.setattr(decode, "from_json", refusing)
    with (
        capture_logs() as logs,
        scripted([reply(200, GOOD_BODY)]) as (port, _),
        pytest.raises(RunnerError) as caught,
    ):
        poll(port, seconds=0.5)
    assert str(caught.value).endswith(f"; last attempt: unparsable reply: {complaint[:200]}")
    warned = [e for e in logs if e.get("event") == "runner.unparsable_reply"]
    assert warned and warned[0]["log_level"] == "warning"
    assert warned[0]["error"] == complaint[:200]


def test_the_count_of_open_connections_returns_to_zero_after_several_at_once() -> None:
    """Each accepted connection counts once and each end once, however many overlap, so the
    runner goes idle (and can exit) after them. Kills ``xǁ_Serverǁ_accept__mutmut_28/29/30``
    and ``xǁ_Serverǁ_finished__mutmut_1/2/3`` (``active`` set, or counted by 2 or backwards)."""
    with server(read_timeout=SAFETY) as srv:
        port = port_of(srv)
        first, second, third = connect(port), connect(port), connect(port)
        assert _eventually(lambda: srv.active == 3)
        first.close()
        second.sendall(b"GET /info HTTP/1.0\r\n\r\n")
        with second:
            assert parse_whole_reply(read_all(second))[0].status == 200
        assert _eventually(lambda: srv.active == 1)
        assert srv.idle_for(time.monotonic()) == 0.0
        third.close()
        assert _eventually(lambda: srv.active == 0)
        assert srv.idle_for(time.monotonic()) > 0


def test_a_client_that_resets_while_its_head_is_read_is_dropped_and_others_are_served() -> None:
    """A connection reset before its head is in is dropped (its recv fails) without ending the
    reading thread. Kills ``xǁ_Serverǁ_read__mutmut_8`` (``_drop(None)``)."""
    import struct

    with server(read_timeout=SAFETY) as srv:
        port = port_of(srv)
        sock = connect(port)
        sock.sendall(b"GET /info HTTP/1.0\r\n")
        assert _eventually(lambda: any(len(buf) for _, buf in list(srv.pending.values())))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()  # RST
        assert _eventually(lambda: srv.active == 0)
        assert get(port)[0].status == 200


def test_the_pending_connections_are_closed_when_the_reader_stops() -> None:
    """When the reading thread stops, every connection whose head is not in is closed (its
    client sees the end), not left open. Kills ``xǁ_Serverǁrun__mutmut_16/17``."""
    with server(read_timeout=SAFETY) as srv:
        sock = connect(port_of(srv))
        assert _eventually(lambda: srv.active == 1)
    with sock:
        sock.settimeout(SAFETY / 2)  # closed at the stop, not at the read timeout (SAFETY)
        assert read_all(sock) == b""
    assert srv.pending == {}
