"""``gpuscout exec``: run a command that sees exactly the selected devices.

Exit codes: the command's own status (128+N when it died of signal N); 1 a selector matched no
device and 2 usage error (malformed selector, no command), nothing started either way; 3
``--verify`` mismatch (devices, or with ``--cpu-affinity`` the CPUs), nothing started; 126/127
the command could not be started (126 also when its CPUs could not be set).
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from gpuscout.cli import common, selection
from gpuscout.cli.output import release_stdout

if TYPE_CHECKING:
    from gpuscout.cli.common import ScoutFactory, Subcommands


def add_parser(sub: Subcommands, help: str) -> None:
    """Add ``exec`` and its options to ``gpuscout``'s parser."""
    from gpuscout.select import GRAMMAR

    p = common.command_parser(
        sub,
        "exec",
        help,
        f"Selectors: {GRAMMAR}. Without --device: all. The command runs "
        "without a shell, with stdio inherited and SIGINT/SIGTERM/SIGHUP "
        "forwarded; its exit status is passed through (128+N after signal N). "
        "Nothing runs when a selector matches no device (exit 1) or is "
        "malformed or empty (exit 2). Without devices (and without "
        "--device) the command runs as it would without gpuscout.",
        color=False,
    )
    common.add_scout_options(p)
    p.add_argument(
        "--device",
        action="append",
        default=[],
        metavar="SELECTOR",
        help="a device to select (repeatable; default: all)",
    )
    selection.add_selection_options(p)
    p.add_argument(
        "--cpu-affinity",
        action="store_true",
        help="run the command on the CPUs local to the selected devices (their NUMA nodes' "
        "CPUs, the union for several; unchanged, with a note, where the kernel gives no "
        "locality); --verify checks it in a child",
    )
    # Shown as "-- CMD [ARG ...]": argparse would write REMAINDER's usage as a bare "...".
    p.usage = "gpuscout exec [OPTIONS] [--device SELECTOR ...] -- CMD [ARG ...]"
    p.epilog = "example: gpuscout exec --device cuda:1 --isolate -- python train.py"
    p.add_argument(
        "argv",
        nargs=argparse.REMAINDER,
        metavar="CMD [ARG ...]",
        help="the command to run and its arguments, after --",
    )


def run(args: argparse.Namespace, scout_factory: ScoutFactory) -> int:
    """Run the command with the selection's environment added; nothing is discovered when
    there is no command."""
    command = [*args.argv]
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        raise common.UsageError("exec needs a command after '--', e.g. gpuscout exec -- python app.py")
    common.check_selectors(args.device, "--device")
    _, child_env, code, cpus = selection.prepare(
        args, args.device, scout_factory, cpu_affinity=args.cpu_affinity
    )
    if code:
        return code
    from gpuscout.execute import CommandError
    from gpuscout.execute import run as run_child

    release_stdout()  # the child inherits the real stdout, not the guard's stderr
    try:
        return run_child(command, child_env, cpus)
    except CommandError as exc:
        sys.stderr.write(f"gpuscout: error: {exc}\n")
        return exc.code
