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

from gpuscout.cli import _common as common

if TYPE_CHECKING:
    from gpuscout._selection.child import ChildSetup
    from gpuscout.cli._common import ScoutFactory


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
    args: argparse.Namespace,
    selectors: Sequence[str],
    scout_factory: ScoutFactory,
    *,
    cpu_affinity: bool = False,
) -> tuple[dict[str, str], dict[str, str], int, frozenset[int] | None]:
    """Select, compute the child's environment (and with ``cpu_affinity`` its CPUs, see
    ``gpuscout._selection.affinity``), verify when asked.

    Returns the added variables, the child's whole environment (the one gpuscout's plugins
    saw, plus the added variables; on a replay this process's own, plus the added ones), 0
    and the child's CPUs (None: unchanged), or empty mappings, the exit status to stop with
    and None.
    """
    from gpuscout._selection.child import child_setup
    from gpuscout._selection.selectors import NoMatchError, select_devices
    from gpuscout.cli._render import hints

    scout = common.open_scout(args, scout_factory)
    # Scout.select, with the discovery kept for the hints that follow a selection of nothing.
    found = scout.discover(include_software=args.include_software, isolated=args.isolated)
    common.warn_failed_plugins(found.plugins)  # one line each, as `list` writes them
    common.warn_budgets(found, args)
    try:
        devices = select_devices(scout, found.devices, list(selectors), found.numbering)
    except NoMatchError as exc:
        sys.stderr.write(f"gpuscout: error: {common.printable(exc)}\n")
        hints.print_for(found, scout.env, again=hints.again_for(scout))
        return {}, {}, common.NO_MATCH, None
    setup = child_setup(scout, devices, isolate=args.isolate, cpu_affinity=cpu_affinity)
    code = finish_setup(args, setup)
    if code:
        return {}, {}, code, None
    return dict(setup.added), dict(setup.env), common.SUCCESS, setup.cpus


def finish_setup(args: argparse.Namespace, setup: ChildSetup) -> int:
    """Write ``setup``'s notes, and with ``--verify`` check in a child that it sees exactly
    ``setup.devices`` (and with an affinity its CPUs); 0, or the exit status to stop with."""
    for note in setup.notes:
        common.warn(note)
    if setup.affinity is not None:
        if setup.affinity.cpus is None:
            common.warn(setup.affinity.note)
        else:
            sys.stderr.write(common.printable(f"gpuscout: {setup.affinity.note}") + "\n")
    if not args.verify:
        return common.SUCCESS
    from gpuscout._selection.verify import VERIFY_FAILED, VerifyError, child_command, report, verify

    env = dict(setup.env)
    command = child_command(args.include_software, common.scout_argv(args, dict(setup.added)))
    try:
        verdict = verify(setup.devices, env, command)
    except VerifyError as exc:
        sys.stderr.write(f"gpuscout: verify: {exc}\n")
        return VERIFY_FAILED
    sys.stderr.write(report(verdict))
    if not verdict.ok:
        return VERIFY_FAILED
    if setup.affinity is not None and not _verify_cpus(setup.cpus, env):
        return VERIFY_FAILED
    return common.SUCCESS


def _verify_cpus(cpus: frozenset[int] | None, env: dict[str, str]) -> bool:
    """Whether a child started on ``cpus`` runs there (a line on stderr says either way);
    with ``cpus`` None the check is that nothing was changed."""
    from gpuscout._selection.affinity import allowed_cpus
    from gpuscout._selection.verify import VerifyError, child_cpus, cpus_report

    expected = cpus if cpus is not None else allowed_cpus()
    if expected is None:
        sys.stderr.write("gpuscout: verify: CPU affinity not checked: this platform cannot report it\n")
        return True
    try:
        ok, line = cpus_report(expected, child_cpus(env, cpus), unchanged=cpus is None)
    except VerifyError as exc:
        sys.stderr.write(f"gpuscout: verify: {exc}\n")
        return False
    sys.stderr.write(line)
    return ok
