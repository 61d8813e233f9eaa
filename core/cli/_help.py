"""A command's ``--help``, its own options first.

Every command takes the global options after its name as well as before it, so each command's
parser has them (in the ``gpuscout.cli._common.GLOBAL_OPTIONS`` group); printed in full they
were 35 lines ahead of the command's own. Its help names them in one paragraph after its own
options and points to ``gpuscout --help``, which describes each. Imported only for help.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable


def format_command_help(parser: argparse.ArgumentParser, format_help: Callable[[], str], title: str) -> str:
    """``format_help()`` of ``parser`` with the actions of its group ``title`` (the global
    options) shown as one paragraph that names them (an option whose help is suppressed stays
    unnamed) and points to ``gpuscout --help``; a parser without that group (``gpuscout``
    itself) as it is."""
    groups = [g for g in parser._action_groups if g.title == title]
    if not groups:
        return format_help()
    group = groups[0]
    actions = group._group_actions
    shown = [a for a in actions if a.help is not argparse.SUPPRESS]
    names = ", ".join(_name(a) for a in shown)
    saved = [(a, a.help) for a in actions]
    formatter_class = parser.formatter_class
    if formatter_class is argparse.HelpFormatter:
        parser.formatter_class = _WordsWhole
    group.description = (
        f"accepted here as before the command (described in 'gpuscout --help'): {names}" if shown else None
    )
    try:
        for action in actions:
            action.help = argparse.SUPPRESS
        return format_help()
    finally:
        for action, help in saved:
            action.help = help
        group.description = None
        parser.formatter_class = formatter_class


class _WordsWhole(argparse.HelpFormatter):
    """argparse's formatter, wrapping text between words only (``--replay-env`` stays whole)
    and keeping the paragraphs a blank line separates."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        import textwrap

        return "\n\n".join(
            textwrap.fill(
                " ".join(paragraph.split()),
                width,
                initial_indent=indent,
                subsequent_indent=indent,
                break_long_words=False,
                break_on_hyphens=False,
            )
            for paragraph in text.split("\n\n")
        )


def _name(action: argparse.Action) -> str:
    """The option's long spelling (``--plugins``); ``-v`` for the count that is typed short."""
    if action.dest in ("verbose", "more_verbose"):
        return "-v"
    return next((o for o in action.option_strings if o.startswith("--")), action.option_strings[0])


__all__ = ["format_command_help"]
