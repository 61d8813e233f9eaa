"""The one logging helper of the library. Library code never configures logging.

``get_logger(__name__)`` returns a logger cached per module name; ``bind(plugin=...)`` gives a
cheap view that carries its keys into every event. A name outside the ``gpuscout`` namespace
(a third-party plugin's ``acme_backend``) is placed under it (``gpuscout.acme_backend``), so the
standard library logger ``gpuscout`` governs every event gpuscout and its plugins emit.

Where an event goes is decided per event, by a test that costs a dict lookup or two:

1. the host configured structlog (``structlog.is_configured()``): through structlog as
   configured, to ``structlog.get_logger(name)``, a lazy proxy cached per name that follows any
   later reconfiguration;
2. else the gpuscout CLI asked for logging (``configure_cli``): structlog to stderr, with the
   CLI's level and format, set up once on the first event that passes (global structlog
   configuration is left alone, so a host that configures structlog later still wins);
3. else the standard library logger of that name: ``isEnabledFor`` first, then a message
   ``event key=value ...`` rendered here, the fields also in ``record.gpuscout``. Warnings reach
   stderr through logging's last-resort handler; debug is dropped unless the host enables it.

structlog is imported only on routes 1 (the host already imported it) and 2 (an event passed the
CLI's level): importing it costs about half of gpuscout's start-up, and a quiet run logs nothing.
Nothing is wrapped per event, nothing is ever printed to stdout, and an exception raised while
logging (a broken handler or processor of the host) is swallowed: logging never fails discovery.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TextIO, cast

if TYPE_CHECKING:
    import logging

#: The namespace, and the standard library logger, that governs every gpuscout event.
ROOT = "gpuscout"

LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40, "critical": 50}

_lock = threading.Lock()
#: Logger name -> the logger without bound keys (whose per-name backends every view shares).
_loggers: dict[str, Logger] = {}
#: The CLI's wish: (minimum level, "console" or "json"); None in library use.
_cli: tuple[int, str] | None = None
#: The structlog logger built for that wish, with the wish it was built for.
_cli_logger: tuple[tuple[int, str], Any] | None = None


def configure_cli(level: int, fmt: str) -> None:
    """Record the CLI's logging wish (minimum level, ``"console"`` or ``"json"``): events at or
    above ``level`` go to stderr through structlog, set up on the first event that passes."""
    global _cli
    _cli = (level, fmt)


def reset_for_tests() -> None:
    """Forget the CLI's wish, as in a process that never ran the CLI."""
    global _cli, _cli_logger
    with _lock:
        _cli, _cli_logger = None, None


def logger_name(name: str) -> str:
    """``name`` as a gpuscout logger name: ``gpuscout`` and ``gpuscout.*`` unchanged, any other
    (a third-party plugin's module) placed under ``gpuscout.``, empty as ``gpuscout``."""
    if not name or name == ROOT:
        return ROOT
    return name if name.startswith(ROOT + ".") else f"{ROOT}.{name}"


def render(event: str, fields: Mapping[str, Any]) -> str:
    """``event key=value ...``: plain strings as they are, anything else as its ``repr``, so
    spaces, quotes and control characters can neither split a pair nor break the line."""
    return " ".join([event, *(f"{key}={_value(value)}" for key, value in fields.items())])


def _value(value: Any) -> str:
    if isinstance(value, str) and value and value.isprintable() and not any(c in value for c in " =\"'"):
        return value
    try:
        return repr(value)
    except Exception:  # a plugin's broken __repr__ must not cost the event
        return f"<{type(value).__name__} without repr>"


class _CurrentStderr:
    """Whatever sys.stderr is at the time of writing (it may be replaced after configuration)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def _cli_structlog(wish: tuple[int, str]) -> Any:
    """The structlog logger for the CLI's ``wish``, built once per wish."""
    global _cli_logger
    built = _cli_logger
    if built is not None and built[0] is wish:
        return built[1]
    with _lock:
        if _cli_logger is None or _cli_logger[0] is not wish:
            import structlog

            level, fmt = wish
            renderer: Any = (
                structlog.processors.JSONRenderer()
                if fmt == "json"
                else structlog.dev.ConsoleRenderer(colors=False)
            )
            wrapper: Any = structlog.make_filtering_bound_logger(level)
            _cli_logger = (
                wish,
                wrapper(
                    structlog.PrintLogger(file=cast(TextIO, _CurrentStderr())),
                    [
                        structlog.processors.add_log_level,
                        structlog.processors.TimeStamper(fmt="iso"),
                        renderer,
                    ],
                    {},
                ),
            )
        return _cli_logger[1]


class _Backends:
    """What one logger name sends events to, built on the first event of each route."""

    __slots__ = ("name", "stdlib", "structlog")

    def __init__(self, name: str) -> None:
        self.name = name
        self.stdlib: logging.Logger | None = None
        self.structlog: Any = None

    def stdlib_logger(self) -> logging.Logger:
        logger = self.stdlib
        if logger is None:
            import logging

            logger = self.stdlib = logging.getLogger(self.name)  # the same object every time
        return logger

    def structlog_logger(self, structlog: Any) -> Any:
        logger = self.structlog
        if logger is None:
            with _lock:
                if self.structlog is None:
                    self.structlog = structlog.get_logger(self.name)
                logger = self.structlog
        return logger


class Logger:
    """A structlog-style logger (``debug`` ... ``critical``, ``bind``) whose events go where the
    host wants them (see the module docstring); it imports nothing for an event filtered out."""

    __slots__ = ("_backends", "_bound")

    def __init__(self, backends: _Backends, bound: dict[str, Any]) -> None:
        self._backends = backends
        self._bound = bound

    @property
    def name(self) -> str:
        """The logger name, ``gpuscout`` or ``gpuscout.*``."""
        return self._backends.name

    def __repr__(self) -> str:
        return f"<gpuscout Logger {self.name!r} {self._bound!r}>"

    def bind(self, **more: Any) -> Logger:
        """A view of this logger with ``more`` keys bound as well."""
        return Logger(self._backends, {**self._bound, **more})

    def _emit(self, level: int, method: str, event: str, kw: dict[str, Any]) -> None:
        try:
            structlog = sys.modules.get("structlog")
            if structlog is not None and structlog.is_configured():
                fields = {**self._bound, **kw} if self._bound else kw
                getattr(self._backends.structlog_logger(structlog), method)(event, **fields)
                return
            wish = _cli
            if wish is not None:
                if level >= wish[0]:
                    fields = {**self._bound, **kw} if self._bound else kw
                    getattr(_cli_structlog(wish), method)(event, **fields)
                return
            logger = self._backends.stdlib_logger()
            if logger.isEnabledFor(level):
                fields = {**self._bound, **kw} if self._bound else kw
                # stacklevel 3: the record names the caller of debug() ... critical(), not us.
                logger.log(
                    level, render(event, fields), stacklevel=3, extra={"gpuscout": {"event": event, **fields}}
                )
        except Exception:  # a broken handler or processor of the host must not stop discovery
            pass

    def debug(self, event: str, **kw: Any) -> None:
        """Log ``event`` at debug level."""
        self._emit(10, "debug", event, kw)

    def info(self, event: str, **kw: Any) -> None:
        """Log ``event`` at info level."""
        self._emit(20, "info", event, kw)

    def warning(self, event: str, **kw: Any) -> None:
        """Log ``event`` at warning level."""
        self._emit(30, "warning", event, kw)

    def error(self, event: str, **kw: Any) -> None:
        """Log ``event`` at error level."""
        self._emit(40, "error", event, kw)

    def critical(self, event: str, **kw: Any) -> None:
        """Log ``event`` at critical level."""
        self._emit(50, "critical", event, kw)


def get_logger(name: str = ROOT, **initial: Any) -> Logger:
    """The logger for module ``name`` (``get_logger(__name__)``), the same object on every call;
    with ``initial`` keys, a view of it with those keys bound. A name outside ``gpuscout.`` is
    placed under it (see ``logger_name``)."""
    key = logger_name(name)
    logger = _loggers.get(key)
    if logger is None:
        with _lock:
            logger = _loggers.setdefault(key, Logger(_Backends(key), {}))
    return logger.bind(**initial) if initial else logger
