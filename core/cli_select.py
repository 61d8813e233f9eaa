"""``gpuscout env`` and ``gpuscout exec``: print, or run a command with, the environment that
makes a child see exactly the selected devices.

Exit codes: 0 success (``exec``: the command's own status, 128+N when it died of signal N);
2 usage error (bad selector, malformed size, no command), nothing started; 3 ``--verify`` found
that a child sees something else than the selection (or could not ask one); 126/127 the command
could not be started.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any

from gpuscout.errors import GpuscoutError


class UsageError(GpuscoutError):
    """A command line that names nothing to run or is otherwise unusable."""


def _add_selection_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--isolate", action="store_true",
                   help="also hide every other vendor's devices explicitly")
    p.add_argument("--include-software", action="store_true",
                   help="let software devices (llvmpipe) be selected")
    p.add_argument("--verify", action="store_true",
                   help="check in a child process that it sees exactly the selection "
                        "(exit 3 when it does not)")


def add_parsers(sub: Any, common: argparse.ArgumentParser,
                add_scout_options: Callable[[argparse.ArgumentParser], None]) -> None:
    """Add the ``env`` and ``exec`` subcommands to the ``gpuscout`` parser."""
    from gpuscout.select import GRAMMAR
    from gpuscout.visibility import FORMATS

    p = sub.add_parser(
        "env", parents=[common], help="print the environment that shows only the selected devices",
        description=f"Selectors: {GRAMMAR}. None means all. Exit 2 on a bad selector, "
                    "3 when --verify finds a mismatch.")
    add_scout_options(p)
    p.add_argument("selectors", nargs="*", metavar="SELECTOR", help="devices to select")
    p.add_argument("--format", choices=FORMATS, default="sh",
                   help="sh: export lines for eval (default); json: one object; dotenv: K=V lines")
    _add_selection_options(p)
    p.set_defaults(func=cmd_env)

    p = sub.add_parser(
        "exec", parents=[common], help="run a command that sees only the selected devices",
        description=f"Selectors: {GRAMMAR}. Without --device: all. The command runs without a "
                    "shell, with stdio inherited and SIGINT/SIGTERM/SIGHUP forwarded; its exit "
                    "status is passed through (128+N after signal N).")
    add_scout_options(p)
    p.add_argument("--device", action="append", default=[], metavar="SELECTOR",
                   help="a device to select (repeatable; default: all)")
    _add_selection_options(p)
    p.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- CMD ARGS",
                   help="the command to run, after --")
    p.set_defaults(func=cmd_exec)


def _scout_args(args: argparse.Namespace) -> list[str]:
    """The scout options of this command line, for the verification child."""
    out: list[str] = []
    if getattr(args, "plugins", None):
        out += ["--plugins", ",".join(args.plugins)]
    if getattr(args, "disable", None):
        out += ["--disable", ",".join(args.disable)]
    if getattr(args, "root", "/") != "/":
        out += ["--root", args.root]
    if getattr(args, "timeout", 5.0) != 5.0:
        out += ["--timeout", repr(args.timeout)]
    return out


def _prepare(
    args: argparse.Namespace, selectors: Sequence[str]
) -> tuple[dict[str, str], dict[str, str], int]:
    """Select, compute the child's environment, verify when asked.

    Returns the added variables and the child's whole environment (the one gpuscout's plugins
    saw, plus the added variables) and 0, or empty mappings and the exit status to stop with.
    """
    from gpuscout import cli
    from gpuscout.execute import child_environment
    from gpuscout.visibility import selection_env

    scout = cli.open_scout(args)
    devices = scout.select(list(selectors), include_software=args.include_software)
    chosen = selection_env(scout, devices, isolate=args.isolate)
    for note in chosen.notes:
        sys.stderr.write(f"gpuscout: warning: {cli.printable(note)}\n")
    child_env = child_environment(chosen.env, scout.env)
    if args.verify:
        from gpuscout.verify import (
            VERIFY_FAILED,
            VerifyError,
            child_command,
            report,
            verify,
        )

        command = child_command(args.include_software, _scout_args(args))
        try:
            verdict = verify(devices, child_env, command)
        except VerifyError as exc:
            sys.stderr.write(f"gpuscout: verify: {exc}\n")
            return {}, {}, VERIFY_FAILED
        sys.stderr.write(report(verdict))
        if not verdict.ok:
            return {}, {}, VERIFY_FAILED
    return chosen.env, child_env, 0


def cmd_env(args: argparse.Namespace) -> int:
    """``gpuscout env``: print the selection's environment (after verifying it, if asked)."""
    from gpuscout import cli
    from gpuscout.visibility import render

    env, _, code = _prepare(args, args.selectors)
    if code:
        return code
    cli.output().write(render(env, args.format))
    return 0


def cmd_exec(args: argparse.Namespace) -> int:
    """``gpuscout exec``: run the command with the selection's environment added."""
    command = list(args.argv)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        raise UsageError("exec needs a command after '--', e.g. gpuscout exec -- python app.py")
    _, child_env, code = _prepare(args, args.device)
    if code:
        return code
    from gpuscout import cli
    from gpuscout.execute import CommandError, run

    cli.release_stdout()  # the child inherits the real stdout, not the guard's stderr
    try:
        return run(command, child_env)
    except CommandError as exc:
        sys.stderr.write(f"gpuscout: error: {exc}\n")
        return exc.code
