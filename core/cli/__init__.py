"""The ``gpuscout`` command.

One module per command (``gpuscout.cli._commands.list``, ``.plugins``, ``.env``, ``.exec``, ``.runner``,
``.fit``, ``.cluster``, ``.nfd``, ``.record``, ``.topology``),
each with ``add_parser(sub, help)`` and ``run(args, scout_factory)``; what they share is in
``gpuscout.cli._common``, the stdout guard in ``gpuscout.cli._output``. Only the command named on
the command line is imported and given a parser, so start-up costs argparse and that module.

Note: importing a submodule binds its name in this module's globals, so ``list`` and ``exec``
here may be the command modules, not the builtins; this module uses neither builtin.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING, NoReturn

from gpuscout.cli import _common as common
from gpuscout.cli import _output as output
from gpuscout.cli._scout import default_scout
from gpuscout.version import VERSION

if TYPE_CHECKING:
    from gpuscout.cli._common import ScoutFactory

#: Every command with its one-line help (``gpuscout --help``); its code is gpuscout.cli.<name>.
COMMANDS = {
    "list": "list devices, best first",
    "topology": "devices by NUMA node, their links, and how each pair connects",
    "plugins": "show each plugin and what it found",
    "env": "print the environment that shows only the selected devices",
    "exec": "run a command that sees only the selected devices",
    "runner": "serve GET /info on 127.0.0.1 (isolated discovery child)",
    "fit": "plan where a GGUF model's layers land on these devices",
    "cluster": "every node's devices in a Ray cluster, and where Ray disagrees",
    "nfd": "write this node's Kubernetes Node Feature Discovery labels",
    "record": "write a recording of this machine that --replay discovers on",
}


#: The end of ``gpuscout --help``: examples, then the exit codes.
EPILOG = """\
examples:
  gpuscout list                       the devices, best first
  gpuscout -v list --json             one JSON object; info events on stderr
  gpuscout exec --device fits:24GiB -- python train.py
                                      run a command that sees only devices that fit

exit codes:
  0    success (also when no accelerator is found by plugins that ran fine)
  1    a selector matched no device (fits:1TiB, an index past the end); env without
       any device; fit: the model does not fit
  2    usage or input error, such as a malformed or empty selector (one line on stderr)
  3    --verify found that a child sees something else than the selection
  4    cluster: Ray disagrees on a node (0 with --exit-zero)
  5    every plugin that ran failed or timed out (list, plugins)
  130  interrupted (Ctrl-C); list --watch and runner end with 0 on Ctrl-C instead
  (exec passes its command's own exit status through)
"""

#: What a bare ``gpuscout`` prints on stderr (exit 2).
SHORT_USAGE = "usage: gpuscout [OPTIONS] COMMAND [ARGS] (commands: {}; see 'gpuscout --help')\n".format(
    ", ".join(COMMANDS)
)


class _NotFound(Exception):
    """The command line cannot be read far enough to find a command name."""


class _Locator(common.QuickParser):
    """Reads only as far as the command name; a problem is left to the full parser to report."""

    def error(self, message: str) -> NoReturn:
        raise _NotFound(message)


def command_name(argv: Sequence[str]) -> str | None:
    """The command ``argv`` names, found the way the full parser finds it (global options and
    their values may come first), or None when it names none or cannot be read."""
    locator = _Locator(add_help=False, parents=[common.global_options(check=False)])
    locator.add_argument("command", nargs="?")
    try:
        found, _ = locator.parse_known_args(argv)
    except _NotFound:
        return None
    name = found.command
    return name if name in COMMANDS else None


def build_parser(command: str | None) -> tuple[argparse.ArgumentParser, ModuleType | None]:
    """The ``gpuscout`` parser with the full parser of ``command`` and its module, or (None)
    with an empty entry for every command, enough for ``--help`` and for naming a bad one."""
    parser = common.Parser(
        prog="gpuscout",
        description="Find every accelerator on this machine.",
        parents=[common.global_options()],
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--version", action="version", version=f"gpuscout {VERSION}", help="print the version and exit"
    )
    sub = parser.add_subparsers(
        dest="command",
        metavar="COMMAND",
        parser_class=common.Parser,
        help="the command to run (global options may come before or after it)",
    )
    if command is None:
        for name, line in COMMANDS.items():
            sub.add_parser(name, help=line, add_help=False)
        return parser, None
    module = command_module(command)
    module.add_parser(sub, COMMANDS[command])
    return parser, module


def command_module(command: str) -> ModuleType:
    """The module of ``command``, imported now. The imports are spelled out (not importlib) so
    that import tools (``-X importtime``, import graphs) see them."""
    if command == "list":
        import gpuscout.cli._commands.list as list_command

        return list_command
    if command == "plugins":
        import gpuscout.cli._commands.plugins as plugins_command

        return plugins_command
    if command == "env":
        import gpuscout.cli._commands.env as env_command

        return env_command
    if command == "exec":
        import gpuscout.cli._commands.exec as exec_command

        return exec_command
    if command == "runner":
        import gpuscout.cli._commands.runner as runner_command

        return runner_command
    if command == "fit":
        import gpuscout.cli._commands.fit as fit_command

        return fit_command
    if command == "cluster":
        import gpuscout.cli._commands.cluster as cluster_command

        return cluster_command
    if command == "nfd":
        import gpuscout.cli._commands.nfd as nfd_command

        return nfd_command
    if command == "record":
        import gpuscout.cli._commands.record as record_command

        return record_command
    if command == "topology":
        import gpuscout.cli._commands.topology as topology_command

        return topology_command
    raise KeyError(f"no command {command!r}")


def main(argv: Sequence[str] | None = None, scout_factory: ScoutFactory | None = None) -> int:
    """Entry point of the ``gpuscout`` command; returns the exit code.

    ``scout_factory`` builds the Scout from the parsed arguments (default: the one the scout
    options describe); hosts and tests pass their own. Ctrl-C ends it with 130, a reader that
    goes away (``| head``) quietly; a usage or input error is one line on stderr and 2; a
    selector that matches no device 1 (``EPILOG`` lists every exit code). While a
    command runs, stdout is gpuscout's alone (see ``gpuscout.cli._output``): what anything else
    prints there goes to stderr.
    """
    if argv is None:
        _exit_without_a_last_collection()
    for name in ("stdout", "stderr"):
        if getattr(sys, name) is None:  # started with the descriptor closed (``>&-``)
            setattr(sys, name, open(os.devnull, "w"))
    try:
        code = _run(sys.argv[1:] if argv is None else [*argv], scout_factory or default_scout)
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's last flush
    except KeyboardInterrupt:
        return common.INTERRUPTED
    except BrokenPipeError:
        output.quiet_stdout()
        return common.SUCCESS
    return code


def _exit_without_a_last_collection() -> None:
    """When this process is the ``gpuscout`` command (``main`` reads ``sys.argv``: the console
    script, ``python -m gpuscout``), freeze the collector at exit: everything still alive then
    dies with the process, and the interpreter's last collections over every module, class
    and record cost ``list --json`` about 9 ms, a twelfth of its run. The atexit handlers
    still run (a frozen object's ``__del__`` may not, which Python never promises at exit);
    a host that calls ``main`` with arguments is left as it is."""
    import atexit
    import gc

    atexit.register(gc.freeze)


def _run(argv: Sequence[str], scout_factory: ScoutFactory) -> int:
    parser, module = build_parser(command_name(argv))
    args = parser.parse_args(argv)
    if module is None and args.command is not None:
        # Named in a way only the full parser reads: parse again with that command's parser.
        parser, module = build_parser(args.command)
        args = parser.parse_args(argv)
    if module is None:
        sys.stderr.write(SHORT_USAGE)
        return common.USAGE_ERROR
    common.merge_global_options(args)
    common.configure_logging(args)
    with output.stdout_for_gpuscout():
        code = _dispatch(module, args, scout_factory)
        output.output().flush()  # a closed pipe shows here, while the guard still holds the stream
    return code


def _dispatch(module: ModuleType, args: argparse.Namespace, scout_factory: ScoutFactory) -> int:
    from gpuscout.errors import GpuscoutError

    try:
        code: int = module.run(args, scout_factory)
    except GpuscoutError as exc:
        sys.stderr.write(f"gpuscout: error: {common.printable(exc)}\n")
        return common.USAGE_ERROR
    except UnicodeEncodeError as exc:
        sys.stderr.write(
            f"gpuscout: error: this terminal cannot show {exc.object[exc.start : exc.end]!a}"
            f" ({exc.encoding}); set PYTHONIOENCODING=utf-8\n"
        )
        return common.USAGE_ERROR
    return code


__all__ = ["COMMANDS", "EPILOG", "SHORT_USAGE", "build_parser", "command_module", "command_name", "main"]
