"""The budget options every command takes (``--reserve``, ``--cap``, ``--prefer``; see
docs/budgets.md): how they are declared and checked, the Scout keywords they make, how a child
``gpuscout`` is given the same (``gpuscout.cli._common.warn_budgets`` warns of an entry that
matched no device).

Imported with ``gpuscout.cli._common`` (argparse only); the parsing itself is
``gpuscout._discovery.budgets``, imported when a value is checked.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any


def add_budget_options(
    p: argparse._ActionsContainer,
    default: Callable[[object], object],
    typed: Callable[[Callable[[str], Any]], Callable[[str], Any]],
) -> None:
    """``--reserve``, ``--cap`` and ``--prefer`` on ``p``, repeatable; ``default`` and
    ``typed`` as the other scout options use them (before or after the command name)."""
    p.add_argument(
        "--reserve",
        metavar="SEL=SIZE",
        action="append",
        type=typed(_entries("--reserve")),
        default=default(None),
        help="hold SIZE back on the devices SEL names (repeatable or comma list, e.g. "
        "cuda:0=2GiB,all=512MiB; the largest matching reserve holds), overriding "
        "GPUSCOUT_RESERVE (docs/budgets.md)",
    )
    p.add_argument(
        "--cap",
        metavar="SEL=SIZE",
        action="append",
        type=typed(_entries("--cap")),
        default=default(None),
        help="plan at most SIZE of each device SEL names, what is already used counting "
        "(e.g. all=20GiB; the smallest matching cap holds), overriding GPUSCOUT_CAP",
    )
    p.add_argument(
        "--prefer",
        metavar="SEL,...",
        action="append",
        type=typed(_prefer),
        default=default(None),
        help="rank the devices these selectors name first, in this order, before free "
        "memory (e.g. cuda:1,cuda:0), overriding GPUSCOUT_PREFER",
    )


def _entries(name: str) -> Callable[[str], str]:
    """The converter of ``--reserve``/``--cap``: the text checked (``SEL=SIZE,...``), else a
    usage error naming the entry and what is wrong."""

    def convert(text: str) -> str:
        from gpuscout._discovery.budgets import parse_entries
        from gpuscout.errors import GpuscoutError

        try:
            found = parse_entries(text, name)
        except GpuscoutError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        if not found:
            raise argparse.ArgumentTypeError(
                f"{name}: expected SEL=SIZE entries, e.g. all=20GiB, got {text!r}"
            )
        return text

    return convert


def _prefer(text: str) -> str:
    from gpuscout._discovery.budgets import prefer_text
    from gpuscout.errors import GpuscoutError

    try:
        found = prefer_text(text, "--prefer")
    except GpuscoutError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if not found:
        raise argparse.ArgumentTypeError(f"--prefer: expected selectors, e.g. cuda:1,cuda:0, got {text!r}")
    return text


def budget_options(args: argparse.Namespace) -> dict[str, Any]:
    """The Scout keywords of ``--reserve``, ``--cap`` and ``--prefer``: the repeated options
    joined into one list each; one not given is None, so its variable counts."""

    def joined(name: str) -> str | None:
        texts = getattr(args, name, None)
        return None if texts is None else ",".join(texts)

    prefer = getattr(args, "prefer", None)
    return {
        "reserve": joined("reserve"),
        "cap": joined("cap"),
        "prefer": None if prefer is None else list(prefer),
    }


def budget_argv(args: argparse.Namespace) -> list[str]:
    """The budget options of ``args`` as arguments, so that a child ``gpuscout`` (``--verify``)
    applies the same budgets."""
    out: list[str] = []
    for name in ("reserve", "cap", "prefer"):
        for text in getattr(args, name, None) or ():
            out += [f"--{name}", text]
    return out


__all__ = ["add_budget_options", "budget_argv", "budget_options"]
