"""What ``gpuscout env`` and ``gpuscout exec`` share: the selection options, and turning
selectors into the environment a child needs (verified in a child when asked).

Exit codes: 0 success; 1 a well-formed selector matched no device (``NoMatchError``), 2 usage
error (malformed selector or size, ambiguous prefix), nothing started either way; 3 ``--verify``
found that a child sees something else than the selection (or could not ask one).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from gpuscout.cli import common

if TYPE_CHECKING:
    from gpuscout.cli.common import ScoutFactory


def add_selection_options(p: argparse.ArgumentParser) -> None:
    """``--isolate``, ``--include-software`` and ``--verify``."""
    p.add_argument("--isolate", action="store_true", help="also hide every other vendor's devices explicitly")
    common.add_include_software(p, "let software devices (llvmpipe) be selected")
    p.add_argument(
        "--verify",
        action="store_true",
        help="check in a child process that it sees exactly the selection (exit 3 when it does not)",
    )


def prepare(
    args: argparse.Namespace, selectors: Sequence[str], scout_factory: ScoutFactory
) -> tuple[dict[str, str], dict[str, str], int]:
    """Select, compute the child's environment, verify when asked.

    Returns the added variables and the child's whole environment (the one gpuscout's plugins
    saw, plus the added variables) and 0, or empty mappings and the exit status to stop with.
    """
    from gpuscout.cli import hints
    from gpuscout.execute import child_environment
    from gpuscout.select import NoMatchError, select_devices
    from gpuscout.visibility import selection_env

    scout = common.open_scout(args, scout_factory)
    # Scout.select, with the discovery kept for the hints that follow a selection of nothing.
    found = scout.discover(include_software=args.include_software, isolated=args.isolated)
    common.warn_failed_plugins(found.plugins)  # one line each, as `list` writes them
    common.warn_budgets(found, args)
    try:
        devices = select_devices(scout, found.devices, list(selectors))
    except NoMatchError as exc:
        sys.stderr.write(f"gpuscout: error: {common.printable(exc)}\n")
        hints.print_for(found, scout.env)
        return {}, {}, common.NO_MATCH
    chosen = selection_env(scout, devices, isolate=args.isolate)
    for note in chosen.notes:
        common.warn(note)
    child_env = child_environment(chosen.env, scout.env)
    if args.verify:
        from gpuscout.verify import VERIFY_FAILED, VerifyError, child_command, report, verify

        command = child_command(args.include_software, common.scout_argv(args))
        try:
            verdict = verify(devices, child_env, command)
        except VerifyError as exc:
            sys.stderr.write(f"gpuscout: verify: {exc}\n")
            return {}, {}, VERIFY_FAILED
        sys.stderr.write(report(verdict))
        if not verdict.ok:
            return {}, {}, VERIFY_FAILED
    return chosen.env, child_env, common.SUCCESS
