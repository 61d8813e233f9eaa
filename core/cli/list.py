"""``gpuscout list``: the devices, best first; with ``--explain``, why that order."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, TextIO

from gpuscout.cli import common
from gpuscout.cli.output import output

if TYPE_CHECKING:
    from gpuscout.cli.common import ScoutFactory, Subcommands
    from gpuscout.records import DeviceInfo

DESCRIPTION = ("Discover the accelerators of this machine and list them best first: discrete "
               "before integrated, then free memory descending, then library and id. Devices "
               "dropped as duplicates or software renderers are listed with the reason, and "
               "plugins that failed are named on stderr. Exit 0 also when nothing is found.")


def add_parser(sub: Subcommands, help: str) -> None:
    """Add ``list`` and its options to ``gpuscout``'s parser."""
    p = common.command_parser(sub, "list", help, DESCRIPTION)
    common.add_scout_options(p)
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")
    p.add_argument("--include-software", action="store_true",
                   help="rank software devices (llvmpipe) instead of dropping them")
    p.add_argument("--validate", action="store_true",
                   help="initialise devices that need it in a child process first")
    p.add_argument("--explain", action="store_true",
                   help="then say why each device ranks where it does, why each dropped one was "
                        "dropped and what each plugin did (with --json: an \"explain\" key)")


def run(args: argparse.Namespace, scout_factory: ScoutFactory) -> int:
    """Discover, then print the table (or the JSON document) and, if asked, the explanation.
    With ``--validate`` and stderr on a terminal, each validated device gets a progress line
    there (``gpuscout.runner.validation_progress``); nothing extra otherwise."""
    if args.validate and _on_terminal(sys.stderr):
        from gpuscout.runner import validation_progress

        with validation_progress(_ValidationLines(sys.stderr)):
            return _list(args, scout_factory)
    return _list(args, scout_factory)


def _on_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, OSError, ValueError):  # closed, or not a file at all
        return False


class _ValidationLines:
    """One line per validated device, ``validating CUDA GPU-x ...``, completed in place with
    ``ok (1.2 s)`` or ``failed (30.0 s)`` when its child answers (cursor moves: a terminal)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.rows: list[int] = []  # id() of each device, in the order of the lines

    def __call__(self, device: DeviceInfo, state: str, elapsed: float) -> None:
        label = common.printable(f"validating {device.library} {device.id} ...")
        if state == "started":
            self.rows.append(id(device))
            self.stream.write(f"{label}\n")
        elif id(device) in self.rows:
            up = len(self.rows) - self.rows.index(id(device))
            self.stream.write(f"\x1b[{up}A\r{label} {state} ({elapsed:.1f} s)\x1b[K\x1b[{up}B\r")
        self.stream.flush()


def _list(args: argparse.Namespace, scout_factory: ScoutFactory) -> int:
    found = common.open_scout(args, scout_factory).discover(
        include_software=args.include_software, validate=args.validate, isolated=args.isolated)
    common.warn_failed_plugins(found.plugins)
    if args.json:
        from gpuscout.wire_encode import unstructure  # no cattrs: writing needs no converter

        document = unstructure(found)
        if args.explain:
            from gpuscout.cli.explain import explain

            document["explain"] = explain(found)
        common.print_json(document)
        return common.SUCCESS
    from gpuscout.cli.table import print_discovery

    print_discovery(found)
    if args.explain:
        from gpuscout.cli.explain import explain, explain_lines

        output().write("".join(f"{line}\n" for line in explain_lines(explain(found))))
    return common.SUCCESS
