"""``gpuscout plugins``: each plugin, what it found and how long it took."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from gpuscout.cli import _common as common

if TYPE_CHECKING:
    from gpuscout.cli._common import ScoutFactory, Subcommands

DESCRIPTION = (
    "Run one discovery and show each plugin: status (ok, failed, timeout, disabled), "
    "devices found, enumerate time, version and distribution, and the error of one "
    "that failed or the note of one that found nothing. Exit 5 when every plugin "
    "that ran failed or timed out."
)


def add_parser(sub: Subcommands, help: str) -> None:
    """Add ``plugins`` and its options to ``gpuscout``'s parser."""
    p = common.command_parser(sub, "plugins", help, DESCRIPTION)
    common.add_scout_options(p)
    p.add_argument("--json", action="store_true", help="a JSON list on stdout")


def run(args: argparse.Namespace, scout_factory: ScoutFactory) -> int:
    """Discover, then print one report per plugin."""
    found = common.open_scout(args, scout_factory).discover(isolated=args.isolated)
    if args.json:
        from gpuscout._records.encode import unstructure

        common.print_json(unstructure(found.plugins))
    else:
        from gpuscout.cli._render.table import print_plugins

        print_plugins(found.plugins, color=getattr(args, "color", "auto"))
    return common.PLUGINS_FAILED if common.every_plugin_failed(found.plugins) else common.SUCCESS
