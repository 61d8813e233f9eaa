"""The ``gpuscout`` command. argparse keeps start-up cheap; rich is imported only for tables."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, NoReturn, TextIO

USAGE_ERROR = 2
INTERRUPTED = 130

# C0 and C1 control characters, DEL and the Unicode line breaks: shown escaped, never obeyed.
_CONTROLS = {c: ascii(chr(c))[1:-1] for c in (*range(0x20), *range(0x7F, 0xA0), 0x2028, 0x2029)}


def printable(text: object) -> str:
    """``text`` as one printable line: control characters and line breaks shown as escapes
    (``\\n``, ``\\x1b``), so text from plugins can neither break a line nor drive the terminal."""
    return str(text).translate(_CONTROLS)


class _Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one clear line and exit code 2."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"{self.prog}: error: {printable(message)} (see '{self.prog} --help')\n")
        raise SystemExit(USAGE_ERROR)


def configure_logging(verbosity: int, fmt: str) -> None:
    """Log to stderr (stdout stays clean for JSON); warnings by default, -v info, -vv debug.

    structlog itself is set up on the first event that passes, so a quiet run never imports it.
    """
    from gpuscout.log import configure_cli

    configure_cli(30 - 10 * min(verbosity, 2), fmt)


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("-v", "--verbose", action="count", default=0,
                   help="log more on stderr (-v info, -vv debug)")
    p.add_argument("--log-format", choices=("console", "json"), default="console",
                   help="log line format on stderr")


def plugin_names(text: str) -> list[str]:
    """A comma list of plugin names as the Scout compares them: stripped, lower case, no empties."""
    return [name for name in (part.strip().lower() for part in text.split(",")) if name]


def _allow_list(text: str) -> list[str]:
    names = plugin_names(text)
    if not names:
        # An empty allow list would block every plugin without a word.
        raise argparse.ArgumentTypeError(f"expected one or more plugin names, got {text!r}")
    return names


def _timeout(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds > 0):
        raise argparse.ArgumentTypeError(
            f"expected a finite number of seconds greater than 0, got {text!r}")
    return seconds


def _root(text: str) -> str:
    # Only the command line refuses: Scout(root=...) reads a missing tree as an empty machine.
    if not os.path.isdir(text):
        what = "not a directory" if os.path.exists(text) else "no such directory"
        raise argparse.ArgumentTypeError(f"{what}: {text!r}")
    return text


def _add_scout_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--plugins", metavar="NAMES", type=_allow_list,
                   help="comma list of plugins to use, overriding GPUSCOUT_PLUGINS (default: all)")
    p.add_argument("--disable", metavar="NAMES", type=plugin_names, default=[],
                   help="comma list of plugins to block (env GPUSCOUT_DISABLE_PLUGINS)")
    p.add_argument("--root", type=_root, default="/",
                   help="read /sys and /proc under this existing folder")
    p.add_argument("--timeout", type=_timeout, default=5.0, metavar="SECONDS",
                   help="each plugin's enumerate deadline, > 0 (default 5)")


def build_parser() -> argparse.ArgumentParser:
    """The full command-line parser."""
    common = _Parser(add_help=False)
    _add_common(common)
    parser = _Parser(prog="gpuscout", description="Find every accelerator on this machine.",
                     parents=[common])
    from gpuscout import __version__

    parser.add_argument("--version", action="version", version=f"gpuscout {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    p = sub.add_parser("list", parents=[common], help="list devices, best first")
    _add_scout_options(p)
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")
    p.add_argument("--include-software", action="store_true",
                   help="rank software devices (llvmpipe) instead of dropping them")
    p.add_argument("--validate", action="store_true",
                   help="initialise devices that need it in a child process first")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("plugins", parents=[common], help="show each plugin and what it found")
    _add_scout_options(p)
    p.add_argument("--json", action="store_true", help="a JSON list on stdout")
    p.set_defaults(func=cmd_plugins)

    p = sub.add_parser("runner", parents=[common],
                       help="serve GET /info on 127.0.0.1 (isolated discovery child)")
    _add_scout_options(p)
    p.add_argument("--port", type=int, required=True, help="port on 127.0.0.1")
    p.add_argument("--include-software", action="store_true")
    p.set_defaults(func=cmd_runner)

    try:
        from gpuscout import cli_select
    except ImportError:  # the selection commands ship in their own module
        pass
    else:
        getattr(cli_select, "add_parsers")(sub, common, _add_scout_options)  # noqa: B009
    return parser


def make_scout(args: argparse.Namespace) -> Any:
    """A Scout from the common options (raises GpuscoutError for an unknown allowed plugin)."""
    from gpuscout import Scout

    return Scout(plugins=args.plugins, disable=args.disable, root=args.root,
                 enumerate_timeout=args.timeout)


def open_scout(args: argparse.Namespace) -> Any:
    """``make_scout``, then each of the Scout's warnings as one line on stderr."""
    scout = make_scout(args)
    for warning in getattr(scout, "warnings", []):
        sys.stderr.write(f"gpuscout: warning: {printable(warning)}\n")
    return scout


def _print_json(data: Any) -> None:
    output().write(json.dumps(data, indent=2) + "\n")


def _warn_problems(reports: Sequence[Any]) -> None:
    for r in reports:
        if r.status in ("failed", "timeout"):
            sys.stderr.write(printable(f"gpuscout: plugin {r.name} {r.status}: {r.error}") + "\n")


def _prefetch_wire() -> None:
    """Build the wire converter in the background while plugins enumerate.

    Enumeration waits mostly on vendor libraries (which release the GIL), so the ~15 ms of
    importing cattrs and generating the converter costs no wall time this way.
    """
    import threading

    def build() -> None:
        from gpuscout.wire import converter

        converter()

    threading.Thread(target=build, name="gpuscout-wire-prefetch", daemon=True).start()


def cmd_list(args: argparse.Namespace) -> int:
    """``gpuscout list``."""
    if args.json:
        _prefetch_wire()
    found = open_scout(args).discover(include_software=args.include_software,
                                      validate=args.validate)
    _warn_problems(found.plugins)
    if args.json:
        from gpuscout.wire import unstructure

        _print_json(unstructure(found))
    else:
        from gpuscout.table import print_discovery

        print_discovery(found)
    return 0


def cmd_plugins(args: argparse.Namespace) -> int:
    """``gpuscout plugins``."""
    found = open_scout(args).discover()
    if args.json:
        from gpuscout.wire import unstructure

        _print_json(unstructure(found.plugins))
    else:
        from gpuscout.table import print_plugins

        print_plugins(found.plugins)
    return 0


def cmd_runner(args: argparse.Namespace) -> int:
    """``gpuscout runner``: the isolated-discovery child.

    It writes nothing on stdout itself; a line meant for the parent (say, the port it bound)
    must be written to ``output()``, since ``sys.stdout`` leads to stderr while it runs.
    """
    from gpuscout.runner import serve

    scout = open_scout(args)
    return serve(lambda: scout.discover(include_software=args.include_software).devices,
                 port=args.port)


class _StdoutGuard:
    """Stdout kept for gpuscout alone: while held, ``sys.stdout`` and (when it is descriptor 1)
    descriptor 1 itself lead to stderr, so neither a plugin's ``print`` nor a C library's
    ``printf`` or ``os.write(1, ...)`` lands in output that users parse or ``eval``;
    ``stream`` leads to the real stdout."""

    def __init__(self) -> None:
        self.original = self.stream = sys.stdout
        self.saved = -1  # a duplicate of the real descriptor 1 while 1 leads to stderr
        try:
            redirect = sys.stdout.fileno() == 1 and sys.stderr.fileno() >= 0
        except (AttributeError, OSError, ValueError):  # capsys and other streams without one
            redirect = False
        if redirect:
            self._redirect_descriptor()
        sys.stdout = sys.stderr

    def _redirect_descriptor(self) -> None:
        real = self.original
        real.flush()
        self.saved = os.dup(1)
        try:
            self.stream = open(self.saved, "w", encoding=getattr(real, "encoding", None),
                               errors=getattr(real, "errors", None), closefd=False)
            self.stream.reconfigure(line_buffering=getattr(real, "line_buffering", False),
                                    write_through=getattr(real, "write_through", False))
            os.dup2(sys.stderr.fileno(), 1)
        except (OSError, ValueError):  # keep the Python-level guard only
            os.close(self.saved)
            self.saved, self.stream = -1, real

    def release(self) -> None:
        """Put stdout back as it was; what could not be flushed is dropped (a closed pipe)."""
        sys.stdout = self.original
        if self.saved < 0:
            return
        try:
            _flush_c_streams()  # what a C library buffered for descriptor 1 belongs on stderr
            self.stream.close()
        except (OSError, ValueError):
            pass
        finally:
            os.dup2(self.saved, 1)
            os.close(self.saved)


def _flush_c_streams() -> None:
    # fflush takes each C stream's lock; a runaway plugin thread blocked inside a C write could
    # hold one forever, so the flush runs on a daemon thread that is waited for briefly.
    def flush() -> None:
        try:
            import ctypes

            ctypes.CDLL(None).fflush(None)
        except (AttributeError, OSError, TypeError):  # no C library to ask (Windows)
            pass

    import threading

    worker = threading.Thread(target=flush, name="gpuscout-fflush", daemon=True)
    worker.start()
    worker.join(0.5)


_guard: _StdoutGuard | None = None


def output() -> TextIO:
    """The stream for gpuscout's own output (JSON, tables, ``env`` lines): the real stdout.

    While a command runs, ``sys.stdout`` and descriptor 1 lead to stderr, so that what a plugin
    or a vendor library prints cannot corrupt that output; everything gpuscout means to put on
    stdout (a result, a line for a parent process) is written here.
    """
    return _guard.stream if _guard is not None else sys.stdout


def release_stdout() -> None:
    """Give the real stdout back to ``sys.stdout`` and descriptor 1 early, for a child that must
    inherit it (``exec``); a no-op when it is not held."""
    global _guard
    guard, _guard = _guard, None
    if guard is not None:
        guard.release()


@contextmanager
def _stdout_for_gpuscout() -> Iterator[None]:
    global _guard
    _guard = _StdoutGuard()
    try:
        yield
    finally:
        release_stdout()


def _quiet_stdout() -> None:
    """Point stdout at the null device, so nothing written later (not even the interpreter's
    last flush) meets the closed pipe again."""
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        pass
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``gpuscout`` command; returns the exit code.

    Ctrl-C ends it with 130, a reader that goes away (``| head``) quietly; a usage or input
    error is one line on stderr and 2. While a command runs, stdout is gpuscout's alone (see
    ``output()``): what anything else prints there goes to stderr.
    """
    for name in ("stdout", "stderr"):
        if getattr(sys, name) is None:  # started with the descriptor closed (``>&-``)
            setattr(sys, name, open(os.devnull, "w"))
    try:
        code = _run(argv)
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's last flush
    except KeyboardInterrupt:
        return INTERRUPTED
    except BrokenPipeError:
        _quiet_stdout()
        return 0
    return code


def _run(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help(sys.stderr)
        return USAGE_ERROR
    configure_logging(args.verbose, args.log_format)
    with _stdout_for_gpuscout():
        code = _dispatch(args)
        output().flush()  # a closed pipe shows here, while the guard still holds the stream
    return code


def _dispatch(args: argparse.Namespace) -> int:
    from gpuscout.errors import GpuscoutError

    try:
        code: int = args.func(args)
    except GpuscoutError as exc:
        sys.stderr.write(f"gpuscout: error: {printable(exc)}\n")
        return USAGE_ERROR
    except UnicodeEncodeError as exc:
        sys.stderr.write(f"gpuscout: error: this terminal cannot show {exc.object[exc.start:exc.end]!a}"
                         f" ({exc.encoding}); set PYTHONIOENCODING=utf-8\n")
        return USAGE_ERROR
    return code
