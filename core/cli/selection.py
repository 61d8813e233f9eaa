"""What ``gpuscout env`` and ``gpuscout exec`` share: the selection options, and turning
selectors into the environment a child needs (verified in a child when asked).

Exit codes: 0 success; 2 usage error (bad selector, malformed size), nothing started; 3
``--verify`` found that a child sees something else than the selection (or could not ask one).
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
    p.add_argument("--isolate", action="store_true",
                   help="also hide every other vendor's devices explicitly")
    p.add_argument("--include-software", action="store_true",
                   help="let software devices (llvmpipe) be selected")
    p.add_argument("--verify", action="store_true",
                   help="check in a child process that it sees exactly the selection "
                        "(exit 3 when it does not)")


def prepare(args: argparse.Namespace, selectors: Sequence[str],
            scout_factory: ScoutFactory) -> tuple[dict[str, str], dict[str, str], int]:
    """Select, compute the child's environment, verify when asked.

    Returns the added variables and the child's whole environment (the one gpuscout's plugins
    saw, plus the added variables) and 0, or empty mappings and the exit status to stop with.
    """
    from gpuscout.execute import child_environment
    from gpuscout.visibility import selection_env

    scout = common.open_scout(args, scout_factory)
    devices = scout.select(list(selectors), include_software=args.include_software,
                           isolated=args.isolated)
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
