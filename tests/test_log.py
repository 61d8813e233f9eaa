"""gpuscout.log: cached loggers, the three routes an event takes, and logging that never fails."""

from __future__ import annotations

import itertools
import json
import logging
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import structlog
from structlog.testing import LogCapture, capture_logs

from gpuscout import log

_ids = itertools.count()


@pytest.fixture
def name() -> str:
    """A logger name no other test used, so nothing of it is cached yet."""
    return f"gpuscout.test_log.n{next(_ids)}"


@pytest.fixture
def records() -> Iterator[list[logging.LogRecord]]:
    """Every record that reaches the stdlib logger ``gpuscout``, with it set to debug."""
    seen: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record)

    handler = Keep()
    root = logging.getLogger("gpuscout")
    old = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    yield seen
    root.removeHandler(handler)
    root.setLevel(old)


def counting(monkeypatch: pytest.MonkeyPatch, owner: Any, attribute: str) -> list[Any]:
    """Replace ``owner.attribute`` by a wrapper that records each call's arguments."""
    calls: list[Any] = []
    real = getattr(owner, attribute)

    def wrapper(*args: Any, **kw: Any) -> Any:
        calls.append(args)
        return real(*args, **kw)

    monkeypatch.setattr(owner, attribute, wrapper)
    return calls


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)


# -- caching ------------------------------------------------------------------------------------


def test_one_name_gives_one_logger(name: str) -> None:
    """get_logger returns the same object for the same name, and ``gpuscout`` by default."""
    assert log.get_logger(name) is log.get_logger(name)
    assert log.get_logger() is log.get_logger("gpuscout")
    assert log.get_logger(name).name == name


def test_initial_keys_give_a_view_of_the_same_logger(name: str) -> None:
    """get_logger(name, **keys) is a new view with the same name, not the cached logger."""
    view = log.get_logger(name, plugin="cuda")
    assert view is not log.get_logger(name) and view.name == name


def test_existing_callers_get_the_gpuscout_logger_with_keys(records: list[logging.LogRecord]) -> None:
    """get_logger(**keys) still binds keys on the ``gpuscout`` logger."""
    log.get_logger(plugin="cuda").bind(device="0").info("e")
    assert [(r.name, r.getMessage()) for r in records] == [("gpuscout", "e plugin=cuda device=0")]


def test_a_third_party_name_nests_under_gpuscout(records: list[logging.LogRecord]) -> None:
    """A plugin's own module name is placed under ``gpuscout.``, which governs its level."""
    acme = log.get_logger("acme_backend")
    assert acme.name == "gpuscout.acme_backend" and acme is log.get_logger("gpuscout.acme_backend")
    acme.debug("acme.probe")
    assert [r.name for r in records] == ["gpuscout.acme_backend"]


def test_host_route_asks_structlog_once_per_name(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """Through a host's structlog, events of every view of a name share one structlog.get_logger."""
    got, wrapped = (
        counting(monkeypatch, structlog, "get_logger"),
        counting(monkeypatch, structlog, "wrap_logger"),
    )
    with capture_logs() as logs:
        for i in range(3):
            log.get_logger(name).info("e", i=i)
            log.get_logger(name, plugin="x").info("e", i=i)
    assert len(logs) == 6 and got == [(name,)] and wrapped == []


def test_cli_route_builds_its_logger_once(
    monkeypatch: pytest.MonkeyPatch, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """On the CLI's route, no event calls structlog's get_logger or wrap_logger; one build in all."""
    built = counting(monkeypatch, structlog, "make_filtering_bound_logger")
    got, wrapped = (
        counting(monkeypatch, structlog, "get_logger"),
        counting(monkeypatch, structlog, "wrap_logger"),
    )
    log.configure_cli(logging.DEBUG, "json")
    for i in range(3):
        log.get_logger(name).info("e", i=i)
        log.get_logger(f"{name}.other").debug("e", i=i)
    assert len(capsys.readouterr().err.splitlines()) == 6
    assert len(built) == 1 and got == [] and wrapped == []


def test_stdlib_route_looks_the_logger_up_once(
    monkeypatch: pytest.MonkeyPatch, name: str, records: list[logging.LogRecord]
) -> None:
    """Without structlog configured, logging.getLogger is called once per name, not per event."""
    got = counting(monkeypatch, logging, "getLogger")
    for i in range(3):
        log.get_logger(name).info("e", i=i)
    assert len(records) == 3 and got == [(name,)]


# -- route 3: the standard library --------------------------------------------------------------


def test_stdlib_route_renders_event_and_keys(caplog: pytest.LogCaptureFixture, name: str) -> None:
    """The message is ``event key=value``, odd values as repr; the fields ride in record.gpuscout."""
    caplog.set_level(logging.INFO, logger="gpuscout")
    log.get_logger(name).bind(plugin="cuda").info("discovery.done", devices=2, note="a b\nc")
    [record] = caplog.records
    assert record.name == name and record.levelno == logging.INFO
    assert record.getMessage() == "discovery.done plugin=cuda devices=2 note='a b\\nc'"
    assert record.__dict__["gpuscout"] == {
        "event": "discovery.done",
        "plugin": "cuda",
        "devices": 2,
        "note": "a b\nc",
    }


def test_stdlib_record_names_the_caller(caplog: pytest.LogCaptureFixture, name: str) -> None:
    """A record's file and function are the code that logged, not gpuscout/log.py."""
    caplog.set_level(logging.WARNING, logger="gpuscout")
    log.get_logger(name).warning("e")
    [record] = caplog.records
    assert record.filename == "test_log.py"
    assert record.funcName == "test_stdlib_record_names_the_caller"


def test_stdlib_route_drops_debug_by_default(caplog: pytest.LogCaptureFixture, name: str) -> None:
    """With the host's levels untouched, warnings pass and debug does not."""
    log.get_logger(name).debug("quiet")
    log.get_logger(name).warning("loud")
    assert [r.getMessage() for r in caplog.records if r.name == name] == ["loud"]


def test_bound_keys_yield_to_the_event_keys(records: list[logging.LogRecord], name: str) -> None:
    """A key given with the event overrides the same key bound on the view."""
    log.get_logger(name, plugin="a").bind(hook="h").info("e", plugin="b")
    assert records[0].getMessage() == "e plugin=b hook=h"


def test_an_unconfigured_process_sends_warnings_to_stderr_only() -> None:
    """With nothing configured, a warning reaches stderr (last resort), debug nothing, stdout nothing."""
    out = run_python(
        "import gpuscout.log as l; g = l.get_logger('acme');"
        "g.debug('d'); g.warning('acme.broken', why='no card')"
    )
    assert out.returncode == 0 and out.stdout == ""
    assert out.stderr == "acme.broken why='no card'\n"


@pytest.mark.parametrize("cli", ["", "l.configure_cli(30, 'json');"])
def test_a_quiet_run_never_imports_structlog(cli: str) -> None:
    """Debug events at warning level, from the library or the CLI, leave structlog unimported."""
    out = run_python(
        f"import gpuscout.log as l; {cli} l.get_logger('gpuscout.x').debug('e');"
        "import sys; print('structlog' in sys.modules)"
    )
    assert (out.returncode, out.stdout, out.stderr) == (0, "False\n", "")


# -- route 1: the host's structlog --------------------------------------------------------------


def test_host_structlog_gets_events_with_bound_keys(name: str) -> None:
    """A host that configured structlog gets each event and the view's bound keys."""
    with capture_logs() as logs:
        log.get_logger(name).bind(plugin="cuda").warning("cuda.order_fallback", reason="x")
    assert logs == [{"event": "cuda.order_fallback", "plugin": "cuda", "reason": "x", "log_level": "warning"}]


def test_host_structlog_logger_is_named_after_the_module(name: str) -> None:
    """The host's logger factory is asked for the module's logger name."""
    asked: list[tuple[Any, ...]] = []

    def factory(*args: Any) -> Any:
        asked.append(args)
        return structlog.ReturnLogger()

    structlog.configure(processors=[LogCapture()], logger_factory=factory)
    log.get_logger(name).info("e")
    assert asked == [(name,)]


def test_host_structlog_wins_over_the_cli(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    """When the host configured structlog, the CLI's wish does not reroute events to stderr."""
    log.configure_cli(logging.DEBUG, "json")
    with capture_logs() as logs:
        log.get_logger(name).info("e")
    assert [e["event"] for e in logs] == ["e"] and capsys.readouterr().err == ""


def test_the_route_follows_a_host_that_configures_structlog_later(
    name: str, records: list[logging.LogRecord]
) -> None:
    """A logger used on the stdlib route moves to structlog once the host configures it, and back."""
    logger = log.get_logger(name)
    logger.info("before")
    with capture_logs() as logs:
        logger.info("during")
    structlog.reset_defaults()
    logger.info("after")
    assert [r.getMessage() for r in records] == ["before", "after"]
    assert [e["event"] for e in logs] == ["during"]


# -- route 2: the CLI ---------------------------------------------------------------------------


def test_cli_json_lines_go_to_stderr(name: str, capfd: pytest.CaptureFixture[str]) -> None:
    """configure_cli(info, json): JSON lines with bound keys on stderr, debug dropped, stdout empty."""
    log.configure_cli(logging.INFO, "json")
    logger = log.get_logger(name, plugin="cuda")
    logger.debug("hidden")
    logger.info("discovery.done", devices=1)
    out, err = capfd.readouterr()
    [line] = err.splitlines()
    assert out == "" and json.loads(line) | {"timestamp": ""} == {
        "event": "discovery.done",
        "plugin": "cuda",
        "devices": 1,
        "level": "info",
        "timestamp": "",
    }


def test_cli_console_lines_go_to_stderr(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    """configure_cli(debug, console): a readable line with the event and keys on stderr."""
    log.configure_cli(logging.DEBUG, "console")
    log.get_logger(name, plugin="cuda").debug("vulkan.probe", mode="child")
    out, err = capsys.readouterr()
    assert out == "" and "vulkan.probe" in err and "plugin=cuda" in err and "mode=child" in err


def test_a_new_cli_wish_replaces_the_old(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A second configure_cli (another in-process CLI run) takes effect on the next event."""
    log.configure_cli(logging.WARNING, "json")
    log.get_logger(name).info("first")
    log.configure_cli(logging.INFO, "json")
    log.get_logger(name).info("second")
    assert [json.loads(line)["event"] for line in capsys.readouterr().err.splitlines()] == ["second"]


# -- logging never fails ------------------------------------------------------------------------


def test_a_raising_stdlib_handler_does_not_reach_the_caller(name: str) -> None:
    """A host handler (or filter) that raises is swallowed: the event is lost, discovery goes on."""

    class Broken(logging.Handler):
        def handle(self, record: logging.LogRecord) -> bool:
            raise RuntimeError("host handler bug")

    handler = Broken()
    logging.getLogger(name).addHandler(handler)
    try:
        log.get_logger(name).warning("e")
    finally:
        logging.getLogger(name).removeHandler(handler)


def test_a_raising_structlog_processor_does_not_reach_the_caller(name: str) -> None:
    """A host structlog processor that raises is swallowed."""

    def broken(logger: Any, method: str, event: Any) -> Any:
        raise RuntimeError("host processor bug")

    structlog.configure(processors=[broken])
    log.get_logger(name).error("e")


def test_a_broken_stderr_does_not_reach_the_caller(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """On the CLI's route, a stderr that cannot be written is swallowed."""

    class Closed:
        def write(self, text: str) -> int:
            raise OSError("closed")

        def flush(self) -> None:
            raise OSError("closed")

    log.configure_cli(logging.DEBUG, "console")
    monkeypatch.setattr(sys, "stderr", Closed())
    log.get_logger(name).info("e")


def test_a_value_with_a_broken_repr_still_logs(records: list[logging.LogRecord], name: str) -> None:
    """A key whose value cannot be repr'd is named by its type; the event is kept."""

    class Odd:
        def __repr__(self) -> str:
            raise ValueError("no")

    log.get_logger(name).info("e", value=Odd())
    assert records[0].getMessage() == "e value=<Odd without repr>"


# -- threads ------------------------------------------------------------------------------------


def test_threads_share_one_logger_and_lose_no_event(name: str, records: list[logging.LogRecord]) -> None:
    """Eight threads asking for the same new name get one logger; all their events arrive."""
    seen: list[log.Logger] = []
    start = threading.Barrier(8)

    def work(n: int) -> None:
        start.wait()
        logger = log.get_logger(name)
        seen.append(logger)
        for i in range(50):
            logger.bind(thread=n).info("e", i=i)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(s) for s in seen}) == 1 and len(records) == 400
