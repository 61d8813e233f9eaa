"""The ``gpuscout`` command. argparse keeps start-up cheap; rich is imported only for tables."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

USAGE_ERROR = 2


class _Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one clear line and exit code 2."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"{self.prog}: error: {message} (see '{self.prog} --help')\n")
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


def _add_scout_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--plugins", metavar="NAMES",
                   help="comma list of plugins to use (default: all; env GPUSCOUT_PLUGINS)")
    p.add_argument("--disable", metavar="NAMES", default="",
                   help="comma list of plugins to block (env GPUSCOUT_DISABLE_PLUGINS)")
    p.add_argument("--root", default="/", help="read /sys and /proc under this folder")
    p.add_argument("--timeout", type=float, default=5.0, metavar="SECONDS",
                   help="each plugin's enumerate deadline (default 5)")


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
    """A Scout from the common options."""
    from gpuscout import Scout

    plugins = [p for p in args.plugins.split(",") if p] if args.plugins else None
    disable = [p for p in args.disable.split(",") if p]
    return Scout(plugins=plugins, disable=disable, root=args.root,
                 enumerate_timeout=args.timeout)


def _print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2) + "\n")


def _warn_problems(reports: Sequence[Any]) -> None:
    for r in reports:
        if r.status in ("failed", "timeout"):
            sys.stderr.write(f"gpuscout: plugin {r.name} {r.status}: {r.error}\n")


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
    found = make_scout(args).discover(include_software=args.include_software,
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
    found = make_scout(args).discover()
    if args.json:
        from gpuscout.wire import unstructure

        _print_json(unstructure(found.plugins))
    else:
        from gpuscout.table import print_plugins

        print_plugins(found.plugins)
    return 0


def cmd_runner(args: argparse.Namespace) -> int:
    """``gpuscout runner``: the isolated-discovery child."""
    from gpuscout.runner import serve

    return serve(make_scout(args), port=args.port, include_software=args.include_software)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``gpuscout`` command; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help(sys.stderr)
        return USAGE_ERROR
    configure_logging(args.verbose, args.log_format)
    from gpuscout.errors import GpuscoutError

    try:
        code: int = args.func(args)
    except GpuscoutError as exc:
        sys.stderr.write(f"gpuscout: error: {exc}\n")
        return USAGE_ERROR
    except BrokenPipeError:
        return 0
    return code
