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

from gpuscout.cli import _common as common
from gpuscout.cli import _selection as selection
from gpuscout.cli._output import release_stdout

if TYPE_CHECKING:
    from gpuscout.cli._common import ScoutFactory, Subcommands


def add_parser(sub: Subcommands, help: str) -> None:
    """Add ``exec`` and its options to ``gpuscout``'s parser."""
    from gpuscout._selection.selectors import GRAMMAR

    p = common.command_parser(
        sub,
        "exec",
        help,
        "Run a command that sees only the devices --device selects (default: all).",
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
    p.add_argument(
        "--fit",
        metavar="MODEL.gguf",
        help="decide as llama.cpp's fit does for this model (the fit options below) and add the "
        "decision's llama.cpp arguments and environment to the command (a flag it already has wins)",
    )
    from gpuscout.cli._commands.fit import add_fit_options

    add_fit_options(p)
    # Shown as "-- CMD [ARG ...]": argparse would write REMAINDER's usage as a bare "...".
    p.usage = "gpuscout exec [OPTIONS] [--device SELECTOR ...] -- CMD [ARG ...]"
    # The details after the options, so that --device is on the first screen.
    p.epilog = (
        f"Selectors: {GRAMMAR}. The command runs without a shell, with stdio inherited and "
        "SIGINT/SIGTERM/SIGHUP forwarded; its exit status is passed through (128+N after "
        "signal N). Nothing runs when a selector matches no device (exit 1) or is malformed "
        "or empty (exit 2). Without devices (and without --device) the command runs as it "
        "would without gpuscout.\n\n"
        "example: gpuscout exec --device cuda:1 --isolate -- python train.py"
    )
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
    if args.fit is not None:
        return _run_fit(args, command, scout_factory)
    _, child_env, code, cpus = selection.prepare(
        args, args.device, scout_factory, cpu_affinity=args.cpu_affinity
    )
    if code:
        return code
    from gpuscout._selection.execute import CommandError
    from gpuscout._selection.execute import run as run_child

    release_stdout()  # the child inherits the real stdout, not the guard's stderr
    try:
        return run_child(command, child_env, cpus)
    except CommandError as exc:
        sys.stderr.write(f"gpuscout: error: {exc}\n")
        return exc.code


def _run_fit(args: argparse.Namespace, command: list[str], scout_factory: ScoutFactory) -> int:
    """``exec --fit MODEL``: fit the model on the selected devices, then run ``command`` with the
    decision's environment and arguments added (exit 1, nothing started, when it does not fit);
    ``--isolate``, ``--cpu-affinity`` and ``--verify`` apply to the devices the decision uses."""
    from gpuscout._fit.command import fit_devices, merge
    from gpuscout._selection.child import child_setup
    from gpuscout._selection.execute import CommandError
    from gpuscout._selection.execute import run as run_child
    from gpuscout.cli._commands.fit import INSTALL_HINT, fit_model
    from gpuscout.errors import GpuscoutError

    try:
        import gguf  # noqa: F401  (an optional extra)
    except ImportError:
        sys.stderr.write(INSTALL_HINT)
        return common.USAGE_ERROR
    try:
        from gpuscout._fit.model import read_model
        from gpuscout._selection.selectors import NoMatchError, select_devices

        model = read_model(args.fit)
        scout = common.open_scout(args, scout_factory)
        found = scout.discover(include_software=args.include_software, isolated=args.isolated)
        common.warn_failed_plugins(found.plugins)
        common.warn_budgets(found, args)
        devices = found.devices
        if args.device:
            devices = select_devices(scout, found.devices, args.device, found.numbering)
        result = fit_model(scout, model, devices, found.system, args)
    except GpuscoutError as exc:
        sys.stderr.write(f"gpuscout: error: {common.printable(exc)[:400]}\n")
        return common.NO_MATCH if isinstance(exc, NoMatchError) else common.USAGE_ERROR
    if not result.fits:
        for note in result.notes:
            sys.stderr.write(f"gpuscout: note: {common.printable(note)}\n")
        sys.stderr.write(f"gpuscout: error: {common.printable(args.fit)} does not fit; nothing started\n")
        return 1
    used = fit_devices(devices, result.usage) if result.env else devices
    setup = child_setup(
        scout, used, isolate=args.isolate, cpu_affinity=args.cpu_affinity, visible=dict(result.env)
    )
    code = selection.finish_setup(args, setup)
    if code:
        return code
    full, kept = merge(command, result.args)
    for option in kept:
        common.warn(f"the command's own {option} wins over the fit's")
    release_stdout()
    try:
        return run_child(full, dict(setup.env), setup.cpus)
    except CommandError as exc:
        sys.stderr.write(f"gpuscout: error: {exc}\n")
        return exc.code
