"""The one exception family of gpuscout, and the one line that describes any exception a plugin
raises."""

from __future__ import annotations


class GpuscoutError(Exception):
    """Base of every error gpuscout raises on purpose.

    Messages say what was expected, what was found, and where (a JSON path, a file, an env var,
    a plugin name).
    """


class UnknownPluginError(GpuscoutError):
    """An allow list names a plugin that is not installed."""


class UnknownReportError(GpuscoutError):
    """``Discovery.report`` was asked for a plugin that has no report in that discovery."""


class SelectionRefused(GpuscoutError):
    """No environment can make one child see the selection (a plugin raises it from
    ``gpuscout_visible_env``; its message says what to do instead)."""


class RecordingError(GpuscoutError):
    """A recording (``gpuscout record``) that cannot be replayed; the message names the file
    and what is wrong. Plugins raise it for driver answers they cannot use."""


def describe_exception(exc: BaseException) -> str:
    """What a plugin's exception says, in one line (``called sys.exit(3)`` for SystemExit)."""
    if isinstance(exc, SystemExit):
        return f"called sys.exit({exc.code!r})"
    text = str(exc)
    return f"{type(exc).__name__}: {text:.300}" if text else type(exc).__name__
