"""The one logging helper of the library. Library code never configures structlog.

Loggers are lazy: nothing is imported until an event passes the level filter, because importing
structlog (which pulls in rich and asyncio) costs about half of gpuscout's start-up budget and
most discoveries log nothing worth showing.

Where an event goes, decided when it is logged:
- the host configured structlog: through structlog, as configured;
- the gpuscout CLI asked for logging (``configure_cli``): structlog to stderr, set up then;
- nobody did: the standard library logger ``gpuscout`` (structlog's own default would print
  every event, debug included, to the host's stdout). Warnings reach stderr through logging's
  last-resort handler; debug is dropped unless the host enables it.
"""

from __future__ import annotations

import sys
from typing import Any, TextIO, cast

LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40, "critical": 50}

#: The CLI's wish: (minimum level, "console" or "json"); None in library use.
_cli: tuple[int, str] | None = None
_cli_configured = False


def configure_cli(level: int, fmt: str) -> None:
    """Record the CLI's logging wish; structlog is set up on the first event that passes."""
    global _cli, _cli_configured
    _cli, _cli_configured = (level, fmt), False


def _host_configured_structlog() -> bool:
    structlog = sys.modules.get("structlog")
    return structlog is not None and bool(structlog.is_configured()) and not _cli_configured


def _enabled(level: int) -> bool:
    if _host_configured_structlog():
        return True  # the host's processors filter
    if _cli is not None:
        return level >= _cli[0]
    import logging

    return logging.getLogger("gpuscout").isEnabledFor(level)


def _configure_structlog_for_cli(level: int, fmt: str) -> None:
    global _cli_configured
    import structlog

    renderer: Any = (
        structlog.processors.JSONRenderer() if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso"),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(file=cast(TextIO, _CurrentStderr())),
        cache_logger_on_first_use=False,
    )
    _cli_configured = True


class _CurrentStderr:
    """Whatever sys.stderr is at the time of writing (it may be replaced after configuration)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def _real_logger(bound: dict[str, Any]) -> Any:
    import structlog

    if _cli is not None and not _host_configured_structlog():
        if not _cli_configured:
            _configure_structlog_for_cli(*_cli)
        return structlog.get_logger("gpuscout", **bound)
    if structlog.is_configured():
        return structlog.get_logger("gpuscout", **bound)
    import logging

    return structlog.wrap_logger(
        logging.getLogger("gpuscout"),
        processors=[structlog.processors.KeyValueRenderer(key_order=["event"])],
        wrapper_class=structlog.stdlib.BoundLogger,
        **bound,
    )


class LazyLogger:
    """A structlog-style logger (``debug`` … ``critical``, ``bind``) that imports nothing
    until an event passes the level filter."""

    __slots__ = ("_bound",)

    def __init__(self, **bound: Any) -> None:
        self._bound = bound

    def bind(self, **more: Any) -> LazyLogger:
        """A logger with ``more`` keys bound as well."""
        return LazyLogger(**{**self._bound, **more})

    def _emit(self, name: str, event: str, kw: dict[str, Any]) -> None:
        if _enabled(LEVELS[name]):
            getattr(_real_logger(self._bound), name)(event, **kw)

    def debug(self, event: str, **kw: Any) -> None:
        """Log ``event`` at debug level."""
        self._emit("debug", event, kw)

    def info(self, event: str, **kw: Any) -> None:
        """Log ``event`` at info level."""
        self._emit("info", event, kw)

    def warning(self, event: str, **kw: Any) -> None:
        """Log ``event`` at warning level."""
        self._emit("warning", event, kw)

    def error(self, event: str, **kw: Any) -> None:
        """Log ``event`` at error level."""
        self._emit("error", event, kw)

    def critical(self, event: str, **kw: Any) -> None:
        """Log ``event`` at critical level."""
        self._emit("critical", event, kw)


def get_logger(**initial: Any) -> LazyLogger:
    """A lazy logger for gpuscout with ``initial`` keys bound (see the module docstring)."""
    return LazyLogger(**initial)
