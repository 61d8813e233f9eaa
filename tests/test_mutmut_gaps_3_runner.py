"""Rules of the runner's init validation and reply parsing that the fifth mutmut round found
untested.

Each test states the rule and names the mutants of ``gpuscout.runner._validation`` or
``gpuscout.runner._reply`` it kills (tests/MUTATION.md, "Fifth mutmut round"). Validation is
tested without a child process: ``discover_under`` (the one call that starts a child) is
replaced by a fake that answers from the environment each device's child would get.
"""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest

from gpuscout._records.device import DeviceInfo
from gpuscout.runner import _validation
from gpuscout.runner._reply import (
    MAX_BODY,
    MAX_HEAD,
    MAX_PORT_LINE,
    RunnerError,
    find_head_end,
    parse_head,
    parse_reply,
    parse_whole_reply,
    read_port_line,
    read_reply,
    remaining,
    show,
    timed_out,
)
from gpuscout.runner._validation import validate_devices, validation_progress

Events = list[tuple[str, str, float]]


def card(n: int, **kw: Any) -> DeviceInfo:
    fields: dict[str, Any] = {"id": f"GPU-{n}", "library": "CUDA", "name": f"Card {n}", "total_memory": 1024}
    return DeviceInfo(**{**fields, **kw})


class FakeChild:
    """What ``started`` is handed: only a pid no process has (killpg then fails harmlessly)."""

    pid = 2**22 + 12345


@pytest.fixture
def fake_children(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Mapping[str, str], float, float]]:
    """Replaces the child: env["SEES"] is the JSON-free list of devices it reports ("a,b" by
    id; "uuid:X" one device of that UUID), env["FAIL"] a RunnerError's text, env["RAISE"] another
    exception's, env["HANG"] seconds to wait first. Records (env, deadline, seconds) per call."""
    calls: list[tuple[Mapping[str, str], float, float]] = []
    lock = threading.Lock()

    def discover_under(
        env: Mapping[str, str],
        deadline: float,
        seconds: float,
        command: Sequence[str] | None,
        started: Callable[[Any], None] | None = None,
    ) -> list[DeviceInfo]:
        with lock:
            calls.append((env, deadline, seconds))
            threads.append(threading.current_thread())
        if started is not None:
            started(FakeChild())
        if "HANG" in env:
            time.sleep(float(env["HANG"]))
        if "FAIL" in env:
            raise RunnerError(env["FAIL"])
        if "RAISE" in env:
            raise ValueError(env["RAISE"])
        return [DeviceInfo(**dict(_seen(part))) for part in env.get("SEES", "").split(",") if part]

    monkeypatch.setattr(_validation, "discover_under", discover_under)
    return calls


#: The thread each fake child was started from, in the order of the calls.
threads: list[threading.Thread] = []


def _seen(part: str) -> list[tuple[str, Any]]:
    library, _, rest = part.partition("/")
    fields: dict[str, Any] = {"library": library, "id": "child-id", "total_memory": 1024}
    for item in rest.split(";"):
        key, _, value = item.partition("=")
        fields[key] = value
    return list(fields.items())


def recorder(events: Events) -> Callable[[DeviceInfo, str, float], None]:
    return lambda device, state, elapsed: events.append((device.id, state, elapsed))


# -- which device the child saw ----------------------------------------------------------------


def _kept(device: DeviceInfo, sees: str) -> bool:
    kept, dropped = validate_devices([(device, {"SEES": sees})], timeout=5)
    assert len(kept) + len(dropped) == 1
    return bool(kept)


def test_the_child_confirms_a_device_by_uuid_then_pci_id_then_id_within_its_library(
    fake_children: list[Any],
) -> None:
    """A device passes validation when its child reports the same device: of the same library,
    and then the same UUID when both have one, else the same PCI id when both have one (any
    case), else the same id. A UUID only one side has decides nothing. Kills
    _same_device__mutmut_2 (another library's device counts), _3 and _7 (a UUID or a PCI id on one
    side only decides), _8/_9/_10 (PCI ids compared in different cases, or unequal ones matched) and
    _11 (ids compared with !=)."""
    pci = "0000:0A:00.0"
    assert not _kept(card(0, uuid="GPU-aa"), "Vulkan/uuid=GPU-aa")
    assert _kept(card(0, uuid="GPU-aa"), "CUDA/uuid=GPU-AA")
    assert _kept(card(0, uuid="GPU-aa", pci_id=pci), "CUDA/pci_id=0000:0a:00.0")
    assert _kept(card(0, pci_id="0000:0a:00.0"), f"CUDA/pci_id={pci}")
    assert not _kept(card(0, pci_id=pci), "CUDA/id=GPU-0;pci_id=0000:0b:00.0")
    assert _kept(card(0, pci_id=pci), "CUDA/id=GPU-0")
    assert _kept(card(0), "CUDA/id=GPU-0")
    assert not _kept(card(0), "CUDA/id=GPU-1")


# -- what validation answers -------------------------------------------------------------------


def test_a_check_that_fails_with_any_other_exception_drops_the_device_and_quotes_it(
    fake_children: list[Any],
) -> None:
    """Whatever goes wrong in a device's check, the device is dropped, never kept unconfirmed:
    a RunnerError gives its text, any other exception its repr cut to 200 characters. Kills
    validate_devices__mutmut_36 (the reason of a real failure left "cancelled") and _37 (the
    device kept)."""
    checks = [
        (card(0), {"RAISE": "x" * 300}),
        (card(1), {"FAIL": "runner exited with status 134"}),
        (card(2), {"SEES": "CUDA/id=GPU-2"}),
    ]
    kept, dropped = validate_devices(checks, timeout=5)
    assert kept == [card(2)]
    assert [(d.device.id, d.reason) for d in dropped] == [
        ("GPU-0", "init validation failed: " + repr(ValueError("x" * 300))[:200]),
        ("GPU-1", "init validation failed: runner exited with status 134"),
    ]


def test_the_default_timeout_gives_the_children_30_seconds(fake_children: list[Any]) -> None:
    """Called without a timeout, the whole validation gets 30 s: each child is started with 30
    s and a deadline 30 s away. Kills validate_devices__mutmut_1 (31 s)."""
    before = time.monotonic()
    assert validate_devices([(card(0), {"SEES": "CUDA/id=GPU-0"})]) == ([card(0)], [])
    after = time.monotonic()
    ((_, deadline, seconds),) = fake_children
    assert seconds == 30.0
    assert before + 30.0 <= deadline <= after + 30.0


def test_progress_hears_each_checked_device_start_then_its_outcome(fake_children: list[Any]) -> None:
    """Progress (here the one ``validation_progress`` set for the block) hears "started" at 0 s
    for every device that has a check, before any outcome, then "ok" or "failed" for each; a
    device without a check is kept silently, and the kept and dropped devices keep the order
    of the checks. Kills validate_devices__mutmut_65/71 ("started" at None or 1 s) and _113
    (the outcome's elapsed time counted from 0, not from the start)."""
    events: Events = []
    checks = [
        (card(0), {"SEES": "CUDA/id=GPU-0"}),
        (card(1), None),
        (card(2), {"FAIL": "crashed"}),
        (card(3), {"SEES": "CUDA/id=GPU-3"}),
    ]
    with validation_progress(recorder(events)):
        kept, dropped = validate_devices(checks, timeout=5)
    assert kept == [card(0), card(1), card(3)] and [d.device for d in dropped] == [card(2)]
    assert events[:3] == [("GPU-0", "started", 0.0), ("GPU-2", "started", 0.0), ("GPU-3", "started", 0.0)]
    assert sorted(e[:2] for e in events[3:]) == [("GPU-0", "ok"), ("GPU-2", "failed"), ("GPU-3", "ok")]
    assert all(0.0 <= e[2] < 5.0 for e in events[3:])
    assert len(fake_children) == 3


def test_each_check_runs_on_its_own_daemon_thread_named_for_validation(fake_children: list[Any]) -> None:
    """Every check runs on a thread of its own, a daemon (a check stuck in a driver must not
    keep the interpreter from exiting) named "gpuscout-validate" (what a thread dump of a hung
    validation shows). Kills validate_devices__mutmut_53/57/59/60 (another name) and _54/_58/_61 (not a
    daemon)."""
    threads.clear()
    validate_devices([(card(n), {"SEES": f"CUDA/id=GPU-{n}"}) for n in range(2)], timeout=5)
    assert len({id(t) for t in threads}) == 2 and threading.current_thread() not in threads
    assert [(t.name, t.daemon) for t in threads] == [("gpuscout-validate", True)] * 2


def test_a_check_past_the_deadline_is_dropped_and_the_others_are_kept(
    fake_children: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A check that has not answered by the deadline plus the time to reap its child is
    dropped as not finished before the timeout; the checks that answered keep their outcome.
    (REAP_GRACE is cut to 0 here, so the host waits the timeout plus 1 s.) Kills
    validate_devices__mutmut_78 (waiting for an answer without a limit), _92/_93/_94/_95 (the
    late check's reason lost, so it is kept) and _96 (``return``: no answer at all)."""
    monkeypatch.setattr(_validation, "REAP_GRACE", 0.0)
    start = time.monotonic()
    checks = [(card(0), {"HANG": "4"}), (card(1), {"SEES": "CUDA/id=GPU-1"}), (card(2), {"FAIL": "crashed"})]
    kept, dropped = validate_devices(checks, timeout=0.25)
    assert time.monotonic() - start < 3.0
    assert kept == [card(1)]
    assert [(d.device.id, d.reason) for d in dropped] == [
        ("GPU-0", "failed to finish validation before timeout (0.25 s)"),
        ("GPU-2", "init validation failed: crashed"),
    ]


def test_an_interrupt_kills_the_children_started_and_refuses_later_ones(
    fake_children: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A KeyboardInterrupt on the calling thread (here raised by progress at the first outcome)
    kills the process group of every child already started, and a check that starts its child
    only afterwards is refused (``started`` raises), so no child outlives the call. Kills
    validate_devices__mutmut_114/115 (``cancelled`` left false: the late child is let in)."""
    children: list[subprocess.Popen[bytes]] = []
    refused: list[str] = []

    def discover_under(
        env: Mapping[str, str],
        deadline: float,
        seconds: float,
        command: Sequence[str] | None,
        started: Callable[[Any], None] | None = None,
    ) -> list[DeviceInfo]:
        assert started is not None
        time.sleep(float(env["WAIT"]))
        if "ANSWER" in env:
            return []
        child = subprocess.Popen(["sleep", "30"], start_new_session=True)
        children.append(child)
        try:
            started(child)
        except BaseException:
            refused.append(env["WAIT"])
            child.kill()
            child.wait()
            raise
        child.wait()
        return []

    monkeypatch.setattr(_validation, "discover_under", discover_under)

    def interrupt(device: DeviceInfo, state: str, elapsed: float) -> None:
        if state != "started":
            raise KeyboardInterrupt

    checks = [(card(0), {"WAIT": "0"}), (card(1), {"WAIT": "0.3", "ANSWER": ""}), (card(2), {"WAIT": "1"})]
    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        validate_devices(checks, timeout=20, progress=interrupt)
    assert time.monotonic() - start < 10
    assert refused == ["1"] and len(children) == 2
    assert all(child.wait(5) == -signal.SIGKILL for child in children)


def test_a_check_is_waited_for_until_the_deadline_plus_the_reap_grace_plus_1_s(
    fake_children: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A check's child may be killed at the deadline and reaped within REAP_GRACE, so the host
    waits for its answer until the deadline plus REAP_GRACE plus 1 s, and not longer: an
    answer 0.5 s past the deadline counts (REAP_GRACE cut to 0 here), one 1.7 s past it does
    not. Kills validate_devices__mutmut_73 (deadline + REAP_GRACE - 1) and _75 (+ 2)."""
    monkeypatch.setattr(_validation, "REAP_GRACE", 0.0)
    checks = [
        (card(0), {"HANG": "0.8", "SEES": "CUDA/id=GPU-0"}),
        (card(1), {"HANG": "2.0", "SEES": "CUDA/id=GPU-1"}),
    ]
    kept, dropped = validate_devices(checks, timeout=0.3)
    assert kept == [card(0)]
    assert [(d.device.id, d.reason) for d in dropped] == [
        ("GPU-1", "failed to finish validation before timeout (0.3 s)")
    ]


def test_an_interrupt_waits_for_a_stuck_check_only_reap_grace(
    fake_children: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """After an interrupt the host gives each check still running REAP_GRACE to finish (cut to
    0.3 s here), then raises anyway: a check stuck in a driver does not hold the interrupt up.
    Kills validate_devices__mutmut_122 (joined without a limit)."""
    monkeypatch.setattr(_validation, "REAP_GRACE", 0.3)

    def interrupt(device: DeviceInfo, state: str, elapsed: float) -> None:
        if state != "started":
            raise KeyboardInterrupt

    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        validate_devices([(card(0), {"HANG": "4"}), (card(1), {})], timeout=20, progress=interrupt)
    assert time.monotonic() - start < 2.5


# -- reading a runner's reply ------------------------------------------------------------------

OK = b"HTTP/1.0 200 OK\r\n"


def test_show_quotes_at_most_80_bytes_and_marks_a_cut() -> None:
    """Error messages quote a runner's bytes as a bytes literal, the first 80 only, with "..."
    when more were cut. Kills show__mutmut_1..10."""
    assert show(b"a" * 80) == repr(b"a" * 80)
    assert show(bytearray(b"a" * 81)) == repr(b"a" * 80) + "..."


def test_the_blank_line_is_found_across_reads_and_only_within_max_head() -> None:
    """The end of the headers is the first blank line (CRLF or bare LF), also when it straddles
    two reads (``start`` is how far an earlier call looked); a blank line past MAX_HEAD bytes,
    or MAX_HEAD bytes without one, is an error; up to MAX_HEAD without one is "not yet". Kills
    find_head_end__mutmut_11/12 (the search starts one byte late, or past the straddling
    line), _14/_16/_17/_18/_19 (the MAX_HEAD bounds) and _20 (the message)."""
    reply = OK + b"A: b\r\n\r\nbody"
    end = len(OK + b"A: b")
    # Two reads, the first of ``cut`` bytes without the whole blank line, as read_reply does.
    for cut in range(1, end + 4):
        assert find_head_end(reply[:cut]) is None
        assert find_head_end(reply, cut) == (end, end + 4)
    assert find_head_end(b"HTTP/1.0 200 OK\n\nbody", 17) == (15, 17)
    assert find_head_end(b"\n\nbody") == (0, 2)
    assert find_head_end(b"x" * MAX_HEAD) is None
    assert find_head_end(b"x" * MAX_HEAD + b"\r\n\r\n") == (MAX_HEAD, MAX_HEAD + 4)
    with pytest.raises(RunnerError, match=f"longer than {MAX_HEAD} bytes"):
        find_head_end(b"x" * (MAX_HEAD + 1))
    with pytest.raises(RunnerError, match=f"longer than {MAX_HEAD} bytes"):
        find_head_end(b"x" * (MAX_HEAD + 1) + b"\r\n\r\n")


def test_a_head_is_a_status_line_and_well_formed_headers_only() -> None:
    """The status line is ``HTTP/d.d NNN`` with an optional reason; each header is a token, a
    colon and a value (blanks around it dropped), names are compared in lower case, and a
    repeated header keeps its last value. A bad status or header line is an error quoting it.
    Kills parse_head__mutmut_11/12/13 and _19/20 (the bad line not quoted)."""
    head = parse_head(b"HTTP/1.1 404\r\nX-A:  one \r\nx-a: two\nContent-Length: 0012\r\nE: caf\xe9")
    assert head.status == 404
    assert head.headers == {"x-a": "two", "content-length": "0012", "e": "café"}
    assert head.length == 12
    assert parse_head(b"HTTP/1.0 200 OK").headers == {}
    with pytest.raises(RunnerError, match=r"bad status line: b'HTTP/1.0 20'"):
        parse_head(b"HTTP/1.0 20")
    with pytest.raises(RunnerError, match=r"bad header line: b'no colon'"):
        parse_head(b"HTTP/1.0 200 OK\r\nno colon")


def test_content_length_must_be_one_value_of_decimal_digits_within_max_body() -> None:
    """Content-Length is decimal digits (leading zeros allowed); repeated, it must repeat the
    same value; over MAX_BODY (or more than 12 digits, before converting) is "over the limit",
    quoting at most 40 digits; a body without it is read until the runner closes, and
    Transfer-Encoding is refused (a server may not use it in reply to HTTP/1.0). Kills
    _content_length__mutmut_4/5 (the bad value's quote), _8/_9/_11 (leading zeros), _12/_16
    (the limit), _17.._24 (the quoted digits), _too_long__mutmut_1 and parse_head__mutmut_42/43
    (Transfer-Encoding let through) and _45.._50 (its message)."""

    def length(*values: str) -> int | None:
        return parse_head(OK + b"".join(b"\r\nContent-Length: " + v.encode() for v in values)[2:]).length

    assert parse_head(b"HTTP/1.0 200 OK").length is None
    assert length("000") == 0
    assert length("100") == 100
    assert length(str(MAX_BODY), str(MAX_BODY)) == MAX_BODY
    with pytest.raises(RunnerError, match=r"two Content-Lengths: '1' and '2'"):
        length("1", "2")
    for bad in ("", "-1", "+1", "1 2", "0x10", "\uff11"):
        with pytest.raises(RunnerError, match="bad Content-Length"):
            length(bad)
    with pytest.raises(RunnerError, match=r"bad Content-Length: '" + "x" * 40 + "'$"):
        length("x" * 50)
    with pytest.raises(
        RunnerError, match=f"body of {MAX_BODY + 1} bytes is over the limit of {MAX_BODY} bytes"
    ):
        length(str(MAX_BODY + 1))
    with pytest.raises(RunnerError, match=r"body of 9999999999999 bytes is over"):
        length("0009999999999999")
    with pytest.raises(RunnerError, match=r"body of " + "9" * 40 + r"\.\.\. bytes is over"):
        length("9" * 5000)
    with pytest.raises(RunnerError, match=r"body of " + "9" * 40 + r" bytes is over"):
        length("9" * 40)
    with pytest.raises(RunnerError, match=r"body of " + "9" * 40 + r"\.\.\. bytes is over"):
        length("9" * 41)
    with pytest.raises(RunnerError, match=r"Transfer-Encoding 'chunked' in reply to an HTTP/1\.0 request"):
        parse_head(b"HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked")


def test_a_whole_reply_is_its_head_and_exactly_its_announced_body() -> None:
    """parse_whole_reply: an empty read, a reply cut inside its head, or a body shorter than its
    Content-Length are errors naming what was read; bytes past the Content-Length are ignored;
    without a Content-Length the body is what came, up to MAX_BODY. Kills
    parse_whole_reply__mutmut_2/3/4/8/16 (the messages), _15 (a body of MAX_BODY refused) and
    parse_reply__mutmut_1/2."""
    with pytest.raises(RunnerError, match=r"^runner closed the connection without a reply$"):
        parse_whole_reply(b"")
    with pytest.raises(RunnerError, match=r"inside the reply headers \(17 bytes\)"):
        parse_whole_reply(OK)
    with pytest.raises(RunnerError, match="after 2 of 3 body bytes"):
        parse_whole_reply(OK + b"Content-Length: 3\r\n\r\nab")
    head, body = parse_whole_reply(OK + b"Content-Length: 3\r\n\r\nabcdef")
    assert (head.status, head.length, body) == (200, 3, b"abc")
    assert parse_reply(OK + b"Content-Length: 3\r\n\r\nabcdef") == (200, b"abc")
    assert parse_whole_reply(OK + b"\r\n" + b"b" * MAX_BODY)[1] == b"b" * MAX_BODY
    with pytest.raises(RunnerError, match=f"body of {MAX_BODY + 1} bytes is over the limit"):
        parse_whole_reply(OK + b"\r\n" + b"b" * (MAX_BODY + 1))


def test_the_deadline_and_the_timeout_message(monkeypatch: pytest.MonkeyPatch) -> None:
    """``remaining`` gives the seconds left and raises TimeoutError once none are (a deadline
    reached exactly is passed); the timeout error names the timeout (``%g``) and the last
    problem seen, if any. Kills remaining__mutmut_2..7 and timed_out__mutmut_1..5."""
    assert 9.0 < remaining(time.monotonic() + 10.0) <= 10.0
    monkeypatch.setattr(time, "monotonic", lambda: 1000.0)  # the clock _reply reads
    assert remaining(1000.5) == 0.5
    for passed in (1000.0, 999.0):
        with pytest.raises(TimeoutError, match=r"^deadline passed$"):
            remaining(passed)
    monkeypatch.undo()
    assert str(timed_out(2.5, "")) == "failed to finish discovery before timeout (2.5 s)"
    assert (
        str(timed_out(30.0, "refused"))
        == "failed to finish discovery before timeout (30 s); last attempt: refused"
    )


# -- reading a reply off the socket --------------------------------------------------------------


def _runner_writes(pieces: Sequence[bytes], close_after: float | None) -> socket.socket:
    """The host's end of a socket pair whose other end writes ``pieces`` one by one, then closes
    after ``close_after`` seconds (None: at once)."""
    host, runner = socket.socketpair()

    def write() -> None:
        with runner:
            for piece in pieces:
                runner.sendall(piece)
            if close_after is not None:
                time.sleep(close_after)

    threading.Thread(target=write, daemon=True).start()
    return host


def test_a_reply_is_whole_at_its_content_length_though_the_runner_keeps_the_connection_open() -> None:
    """read_reply gathers the reply across reads (here one byte each) and returns once it holds
    the head and Content-Length bytes of body, without waiting for the runner to close. Kills
    read_reply__mutmut_17 (only the last read kept), _20/_25/_26 (the
    head's end not found), _29/_33/_34/_36 (the Content-Length ignored), _39/_40 (not whole
    at exactly its length)."""
    reply = OK + b"Content-Length: 5\r\n\r\nhello"
    with _runner_writes([reply[i : i + 1] for i in range(len(reply))], close_after=5.0) as sock:
        head, body = read_reply(sock, time.monotonic() + 2.0)
    assert (head.status, head.length, body) == (200, 5, b"hello")


def test_without_a_content_length_the_body_ends_when_the_runner_closes() -> None:
    """Without Content-Length the body is everything up to the close, up to MAX_BODY bytes
    (MAX_BODY + 1 is refused as soon as it is read, naming how much was read). Kills
    read_reply__mutmut_35/_38 (a length assumed), _43/_44 (the limit) and _45/_46 (its
    message)."""
    with _runner_writes([OK, b"\r\n", b"part one, ", b"part two"], close_after=None) as sock:
        assert read_reply(sock, time.monotonic() + 5.0)[1] == b"part one, part two"
    with _runner_writes([OK + b"\r\n", b"b" * MAX_BODY], close_after=None) as sock:
        assert len(read_reply(sock, time.monotonic() + 20.0)[1]) == MAX_BODY
    with (
        _runner_writes([OK + b"\r\n", b"b" * (MAX_BODY + 1)], close_after=5.0) as sock,
        pytest.raises(RunnerError, match=rf"^runner reply body of more than {MAX_BODY + 1} bytes is over"),
    ):
        read_reply(sock, time.monotonic() + 20.0)


def test_a_close_before_any_byte_is_a_transport_failure_and_after_some_a_bad_reply() -> None:
    """A runner that closes without sending a byte is a ConnectionAbortedError (as http.client
    says, so the host polls again); one that closes inside its head is a RunnerError quoting
    how much came. Kills read_reply__mutmut_10..15."""
    with (
        _runner_writes([], close_after=None) as sock,
        pytest.raises(ConnectionAbortedError, match=r"^runner closed the connection without a reply$"),
    ):
        read_reply(sock, time.monotonic() + 5.0)
    with (
        _runner_writes([OK], close_after=None) as sock,
        pytest.raises(RunnerError, match=r"inside the reply headers \(17 bytes\)"),
    ):
        read_reply(sock, time.monotonic() + 5.0)


def test_a_silent_runner_is_given_only_what_is_left_of_the_deadline() -> None:
    """Each read waits only for what is left of the caller's deadline: a runner silent past it
    is a TimeoutError then, not when it would have answered. Kills read_reply__mutmut_5 (a read
    without a timeout)."""
    start = time.monotonic()
    with _runner_writes([], close_after=3.0) as sock, pytest.raises(TimeoutError):
        read_reply(sock, time.monotonic() + 0.3)
    assert time.monotonic() - start < 2.0


# -- the port line -----------------------------------------------------------------------------

_PRINTER = (
    "import os, sys, time\n"
    "os.write(1, bytes.fromhex(sys.argv[1]))\n"
    "if sys.argv[5]:\n"
    "    time.sleep(0.3)\n"
    "    os.write(1, bytes.fromhex(sys.argv[5]))\n"
    "if sys.argv[3] == 'close':\n"
    "    os.close(1)\n"
    "time.sleep(float(sys.argv[2]))\n"
    "sys.exit(int(sys.argv[4]))\n"
)


def _port_line(
    printed: bytes,
    then: float = 0.0,
    *,
    close: bool = False,
    status: int = 0,
    wait: float = 5.0,
    later: bytes = b"",
) -> int:
    """read_port_line on a child that prints ``printed`` (and ``later`` 0.3 s after), optionally
    closes its stdout, waits ``then`` seconds and exits with ``status``."""
    argv = [sys.executable, "-c", _PRINTER, printed.hex(), str(then), "close" if close else "-", str(status)]
    argv.append(later.hex())
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        return read_port_line(child, time.monotonic() + wait, wait)
    finally:
        child.kill()
        child.wait()
        assert child.stdout is not None
        child.stdout.close()


def test_the_port_line_is_json_with_a_port_from_1_to_65535() -> None:
    """The runner's first stdout line is ``{"port": N}``, N an int in 1-65535 (not a bool),
    CRLF allowed and anything after the line ignored (also a second line); an empty first line,
    or anything else, is refused, quoting the line. Kills read_port_line__mutmut_9 (the last
    newline taken), _11/_12 (an empty first line passed over) and the other parsing and range
    mutants."""
    assert _port_line(b'{"port": 1}\n') == 1
    assert _port_line(b'{"port": 2}\n{"port": 3}\n') == 2
    with pytest.raises(RunnerError, match=r"1-65535: b''$"):
        _port_line(b'\n{"port": 5}\n')
    assert _port_line(b'{"port": 65535}\r\nmore') == 65535
    assert _port_line(b'{"port": 80}' + b" " * (MAX_PORT_LINE - 12) + b"\n") == 80
    for bad in (b"0", b"65536", b"true", b'"80"', b"80.0", b"null"):
        with pytest.raises(
            RunnerError, match=r"""^runner's first stdout line is not \{"port": N\} with N in 1-65535: """
        ):
            _port_line(b'{"port": ' + bad + b"}\n")
    for bad in (b"[80]\n", b"port 80\n", b"[" * 4000 + b"\n"):
        with pytest.raises(RunnerError, match="is not "):
            _port_line(bad)
    with pytest.raises(RunnerError, match=re.escape("N in 1-65535: b'hello'") + "$"):
        _port_line(b"hello\r\n")


def test_a_port_line_over_max_port_line_bytes_is_refused_quoting_its_start() -> None:
    """The host reads at most MAX_PORT_LINE bytes looking for the line's end, over as many reads
    as it takes: a line of MAX_PORT_LINE bytes whose newline comes in a later read is read whole,
    and MAX_PORT_LINE + 1 bytes without a newline are an error quoting the first 80, even when a
    newline would follow. Kills read_port_line__mutmut_13 (MAX_PORT_LINE bytes refused), _39/_41
    (more read than the limit allows) and _57 (an earlier read forgotten)."""
    padded = b'{"port": 80}'.ljust(MAX_PORT_LINE)
    assert _port_line(padded, later=b"\n") == 80
    for first, rest in ((padded[:100], padded[100:] + b"  \n"), (padded + b" \n", b"")):
        with pytest.raises(RunnerError, match="longer than"):
            _port_line(first, later=rest)
    with pytest.raises(
        RunnerError,
        match=rf"^runner's first stdout line is longer than {MAX_PORT_LINE} bytes: b'x{{80}}'\.\.\.$",
    ):
        _port_line(b"x" * (MAX_PORT_LINE + 1))


def test_a_runner_that_ends_or_closes_stdout_before_its_port_line_is_named_so() -> None:
    """A runner that exits before the line is named by its exit, one that closes its stdout
    and lives on by that, each with what it printed; a silent runner times out naming it."""
    with pytest.raises(
        RunnerError, match=r"^runner exited with status 3 before announcing its port; it printed b'part'$"
    ):
        _port_line(b"part", status=3)
    with pytest.raises(
        RunnerError, match=r"^runner closed its stdout before announcing its port; it printed b''$"
    ):
        _port_line(b"", 5.0, close=True)
    start = time.monotonic()
    with pytest.raises(
        RunnerError,
        match=r"^failed to finish discovery before timeout \(0\.5 s\); "
        r"last attempt: no port announced on stdout \(it printed b'ab'\)$",
    ):
        _port_line(b"ab", 10.0, wait=0.5)
    assert time.monotonic() - start < 3.0
    with pytest.raises(RunnerError, match=r"last attempt: no port announced on stdout$"):
        _port_line(b"", 10.0, wait=0.5)
