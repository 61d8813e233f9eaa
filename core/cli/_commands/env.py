"""``gpuscout env``: print the environment that makes a child see exactly the selected devices."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from gpuscout.cli import _common as common
from gpuscout.cli import _selection as selection
from gpuscout.cli._output import output

if TYPE_CHECKING:
    from gpuscout._records.results import Discovery
    from gpuscout.cli._common import ScoutFactory, Subcommands
    from gpuscout.scout import Scout


def add_parser(sub: Subcommands, help: str) -> None:
    """Add ``env`` and its options to ``gpuscout``'s parser."""
    from gpuscout._selection.selectors import GRAMMAR
    from gpuscout._selection.visibility import FORMATS

    p = common.command_parser(
        sub,
        "env",
        help,
        f"Selectors: {GRAMMAR}. LIBRARY:INDEX is the runtime's own number (cuda:0 is "
        "what CUDA_VISIBLE_DEVICES=0 and llama.cpp's CUDA0 name); gpuscout list -q prints "
        "each device's. None means all. Exit 1 when a selector matches "
        "no device, and when no device was found at all; 2 on a malformed or "
        "empty selector; 3 when --verify finds a mismatch.",
        color=False,
    )
    common.add_scout_options(p)
    p.add_argument(
        "selectors", nargs="*", metavar="SELECTOR", help="a device to select, or several (default: all)"
    )
    p.add_argument(
        "--format",
        choices=FORMATS,
        default="sh",
        help="sh: export lines for eval (default); json: one object on one line; dotenv: K=V lines",
    )
    selection.add_selection_options(p)


def run(args: argparse.Namespace, scout_factory: ScoutFactory) -> int:
    """Print the selection's environment (after verifying it, if asked).

    A machine without devices is exit 1 with a line on stderr, as a selector that matches
    nothing: printing nothing would leave ``eval "$(gpuscout env)"`` restricting nothing, and a
    script that goes on should hear that there was nothing to choose from."""
    from gpuscout._selection.visibility import check_env, render

    common.check_selectors(args.selectors, "SELECTOR")
    seen: list[tuple[Scout, Discovery]] = []
    env, _, code, _ = selection.prepare(args, args.selectors, _keeping(scout_factory, seen))
    if code:
        return code
    if seen and not seen[-1][1].devices:
        from gpuscout.cli._render.hints import again_for, print_for

        sys.stderr.write("gpuscout: error: no device was found, so there is nothing to select\n")
        print_for(seen[-1][1], seen[-1][0].env, again=again_for(seen[-1][0]))
        return common.NO_MATCH
    if args.format == "json":
        import json

        check_env(env)
        # One line per object, as `list --watch --json` lines are: `jq -c`, `read` and logs take it.
        output().write(json.dumps(dict(env)) + "\n")
    else:
        output().write(render(env, args.format))
    return common.SUCCESS


def _keeping(scout_factory: ScoutFactory, seen: list[tuple[Scout, Discovery]]) -> ScoutFactory:
    """``scout_factory``, whose Scouts also append each discovery they make to ``seen``: the
    selection shared with ``exec`` does not say whether the machine had devices at all."""

    def factory(args: argparse.Namespace) -> Scout:
        scout = scout_factory(args)
        discover = scout.discover

        def keep(*a: Any, **kw: Any) -> Discovery:
            found = discover(*a, **kw)
            seen.append((scout, found))
            return found

        setattr(scout, "discover", keep)  # noqa: B010  (this Scout only, for this command)
        return scout

    return factory
