"""``gpuscout env``: print the environment that makes a child see exactly the selected devices."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from gpuscout.cli import common, selection
from gpuscout.cli.output import output

if TYPE_CHECKING:
    from gpuscout.cli.common import ScoutFactory, Subcommands


def add_parser(sub: Subcommands, help: str) -> None:
    """Add ``env`` and its options to ``gpuscout``'s parser."""
    from gpuscout.select import GRAMMAR
    from gpuscout.visibility import FORMATS

    p = common.command_parser(
        sub, "env", help, f"Selectors: {GRAMMAR}. None means all. Exit 1 when a selector matches "
                          "no device, 2 on a malformed one, 3 when --verify finds a mismatch.")
    common.add_scout_options(p)
    p.add_argument("selectors", nargs="*", metavar="SELECTOR",
                   help="a device to select, or several (default: all)")
    p.add_argument("--format", choices=FORMATS, default="sh",
                   help="sh: export lines for eval (default); json: one object; dotenv: K=V lines")
    selection.add_selection_options(p)


def run(args: argparse.Namespace, scout_factory: ScoutFactory) -> int:
    """Print the selection's environment (after verifying it, if asked)."""
    from gpuscout.visibility import render

    env, _, code = selection.prepare(args, args.selectors, scout_factory)
    if code:
        return code
    output().write(render(env, args.format))
    return common.SUCCESS
