"""What the ``gpuscout`` commands share, each defined once: exit codes, the parser class, the
global and scout options (with their defaults), how a Scout is opened, and how text from plugins
is printed.

It imports no command module and nothing heavier than argparse at import time.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NoReturn, TypeAlias

from gpuscout.cli._budget_options import add_budget_options, budget_argv
from gpuscout.cli._output import output
from gpuscout.errors import GpuscoutError

if TYPE_CHECKING:
    from gpuscout._records.results import Discovery, PluginReport
    from gpuscout.scout import Scout

    #: Builds the Scout a command uses from its parsed arguments (tests pass their own).
    ScoutFactory: TypeAlias = Callable[[argparse.Namespace], Scout]
    Subcommands: TypeAlias = argparse._SubParsersAction[argparse.ArgumentParser]

# Exit codes shared by every command (``--verify`` mismatches: gpuscout._selection.verify.VERIFY_FAILED).
SUCCESS = 0
NO_MATCH = 1  # a well-formed selector matched no device
USAGE_ERROR = 2
PLUGINS_FAILED = 5  # every plugin that ran failed or timed out (list, plugins)
INTERRUPTED = 130

# Option defaults, also read when a command line is rebuilt for a child (``scout_argv``).
DEFAULT_ROOT = "/"
DEFAULT_TIMEOUT = 15.0
DEFAULT_REPLAY_ENV = "recorded"
REPLAY_ENVS = ("recorded", "process")
DEFAULT_LOG_FORMAT = "console"
LOG_FORMATS = ("console", "json")
DEFAULT_COLOR = "auto"
COLOR_CHOICES = ("never", "auto", "always")
#: Lowest level of structlog event shown for each -v count: none by default (the CLI's own
#: ``gpuscout:`` lines say what went wrong), warnings and info with -v, debug with -vv.
LOG_LEVELS = (100, 20, 10)

# C0 and C1 control characters, DEL and the Unicode line breaks: shown escaped, never obeyed.
_CONTROLS = {c: ascii(chr(c))[1:-1] for c in (*range(0x20), *range(0x7F, 0xA0), 0x2028, 0x2029)}


def printable(text: object) -> str:
    """``text`` as one printable line: control characters and line breaks shown as escapes
    (``\\n``, ``\\x1b``), so text from plugins can neither break a line nor drive the terminal."""
    return str(text).translate(_CONTROLS)


class UsageError(GpuscoutError):
    """A command line that names nothing to run or is otherwise unusable."""


class QuickParser(argparse.ArgumentParser):
    """A parser whose formatter takes the width without ``shutil``, which argparse's imports on
    the first ``add_argument`` (about 2 ms of every command; the width matters only for help)."""

    def _get_formatter(self) -> argparse.HelpFormatter:
        from gpuscout.cli._render.wrap import terminal_columns

        make: Any = self.formatter_class  # every HelpFormatter takes width (typeshed: prog only)
        return make(prog=self.prog, width=terminal_columns() - 2)  # type: ignore[no-any-return]


class Parser(QuickParser):
    """An argument parser whose usage errors are one clear line and exit code 2."""

    def error(self, message: str) -> NoReturn:
        """Write one line naming the problem on stderr and exit with ``USAGE_ERROR``; a
        misspelled command, option or choice gets "did you mean" its closest known spelling."""
        hint = self._did_you_mean(message)
        sys.stderr.write(
            f"{self.prog}: error: {printable(message)}{printable(hint)} (see '{self.prog} --help')\n"
        )
        raise SystemExit(USAGE_ERROR)

    def format_help(self) -> str:
        """The help text; a command's own options first, its global options one paragraph
        that points to ``gpuscout --help`` (``gpuscout.cli._help``, imported only for help)."""
        from gpuscout.cli._help import format_command_help

        return format_command_help(self, super().format_help, GLOBAL_OPTIONS)

    def option_strings(self) -> list[str]:
        """Every long option of this parser and of the command parsers under it."""
        found: list[str] = []
        for action in self._actions:
            found += [o for o in action.option_strings if o.startswith("--")]
            if isinstance(action, argparse._SubParsersAction):
                for parser in action.choices.values():
                    found += [o for a in parser._actions for o in a.option_strings if o.startswith("--")]
        return found

    def _did_you_mean(self, message: str) -> str:
        from gpuscout._suggest import did_you_mean

        choice = _INVALID_CHOICE.search(message)
        if choice is not None:
            quoted = _QUOTED.findall(choice.group("choices"))
            word = _QUOTED.fullmatch(choice.group("value"))
            if word is not None:
                return did_you_mean(_unquote(word.group(0)), [_unquote(q) for q in quoted])
        unknown = _UNRECOGNIZED.match(message)
        if unknown is not None:
            first = unknown.group(1).split()[0] if unknown.group(1).split() else ""
            if first.startswith("--"):
                return did_you_mean(first.split("=", 1)[0], self.option_strings())
        return ""


# What argparse (3.10-3.13) writes for a word outside ``choices`` and for unknown arguments.
_INVALID_CHOICE = re.compile(
    r"invalid choice: (?P<value>'[^']*'|\"[^\"]*\") "
    r"\(choose from (?P<choices>.*)\)$"
)
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")
_UNRECOGNIZED = re.compile(r"unrecognized arguments: (.*)$")


def _unquote(text: str) -> str:
    return text[1:-1]


# -- options --------------------------------------------------------------------------------------

#: The group of a command's parser that holds its copy of the global options.
GLOBAL_OPTIONS = "global options"


def global_options(after_command: bool = False, check: bool = True) -> argparse.ArgumentParser:
    """A parent parser with the options every command takes before or after its name.

    Before the command (``gpuscout``'s own parser) they carry the defaults; the copy in a
    command's parser (``after_command``) has none, so it keeps what was given before the command
    and overrides it only when given again, and counts its ``-v`` apart (``more_verbose``, added
    up by ``merge_global_options``). The scout options' copy after the command is added by the
    command itself (``add_scout_options``). ``check=False`` leaves values unconverted, for a
    parser that only looks for the command name.
    """

    def default(value: object) -> object:
        return argparse.SUPPRESS if after_command else value

    p = Parser(add_help=False)
    group = p.add_argument_group(GLOBAL_OPTIONS) if after_command else p
    group.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=default(0),
        dest="more_verbose" if after_command else "verbose",
        help="log on stderr: -v warnings and info, -vv debug too (default: no log events)",
    )
    group.add_argument(
        "--log-format",
        choices=LOG_FORMATS if check else None,
        default=default(DEFAULT_LOG_FORMAT),
        help="log line format on stderr",
    )
    group.add_argument(
        "--color",
        choices=COLOR_CHOICES if check else None,
        default=default(DEFAULT_COLOR),
        help="colour in tables (list, plugins, fit, cluster; other commands accept "
        "and ignore it): auto (a terminal, unless NO_COLOR is set), always or "
        "never",
    )
    if not after_command:
        _add_scout_options(p, after_command=False, check=check)
    return p


def merge_global_options(args: argparse.Namespace) -> argparse.Namespace:
    """``args`` with the ``-v`` given after the command added to those given before it."""
    more: int = vars(args).pop("more_verbose", 0)
    args.verbose = getattr(args, "verbose", 0) + more
    return args


def command_parser(
    sub: Subcommands, name: str, help: str, description: str, color: bool = True
) -> argparse.ArgumentParser:
    """The parser of command ``name``, with the global options, under ``gpuscout``'s parser.

    ``color=False`` for a command that draws no table: ``--color`` is still accepted there (it
    is a global option, and scripts pass global options to every command) but not offered in
    its ``--help``, since it changes nothing."""
    p = sub.add_parser(name, parents=[global_options(after_command=True)], help=help, description=description)
    if not color:
        for action in p._actions:
            if action.dest == "color":
                action.help = argparse.SUPPRESS
    return p


def check_selectors(selectors: Sequence[str], where: str) -> None:
    """Refuse an empty selector (``env ""``, ``--device ""``, ``--device ,``) with a UsageError
    naming it: dropped silently, it would leave no selector, and no selector means all."""
    for position, text in enumerate(selectors, 1):
        if not any(part.strip() for part in text.split(",")):
            from gpuscout._selection.selectors import GRAMMAR

            raise UsageError(
                f"empty selector {printable(repr(text))[:80]} ({where} {position}): "
                f"name a device, or all; expected one of: {GRAMMAR}"
            )


def plugin_names(text: str) -> list[str]:
    """A comma list of plugin names as the Scout compares them: stripped, lower case, no empties."""
    return [name for name in (part.strip().lower() for part in text.split(",")) if name]


def _allow_list(text: str) -> list[str]:
    names = plugin_names(text)
    if not names:
        # An empty allow list would block every plugin without a word.
        raise argparse.ArgumentTypeError(f"expected one or more plugin names, got {text!r}")
    return names


def seconds(text: str) -> float:
    """An option's number of seconds: finite and greater than 0, else a usage error."""
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds > 0):
        raise argparse.ArgumentTypeError(f"expected a finite number of seconds greater than 0, got {text!r}")
    return seconds


def _root(text: str) -> str:
    # Only the command line refuses: Scout(root=...) reads a missing tree as an empty machine.
    if not os.path.isdir(text):
        what = "not a directory" if os.path.exists(text) else "no such directory"
        raise argparse.ArgumentTypeError(f"{what}: {text!r}")
    return text


def _assignment(text: str) -> str:
    name, equals, _ = text.partition("=")
    if not equals or not name or "\x00" in text:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r:.80}")
    return text


def add_scout_options(p: argparse.ArgumentParser) -> None:
    """The options that say how to build the Scout (plugins allowed and blocked, root, timeout,
    isolation), as a command's parser takes them after its name: every command adds them."""
    _add_scout_options(p, after_command=True, check=True)


def _add_scout_options(parser: argparse.ArgumentParser, after_command: bool, check: bool) -> None:
    # After the command, into the group global_options made (its --help summarises them).
    groups = [g for g in parser._action_groups if after_command and g.title == GLOBAL_OPTIONS]
    p = groups[0] if groups else parser

    def default(value: object) -> object:
        return argparse.SUPPRESS if after_command else value

    def typed(convert: Callable[[str], Any]) -> Callable[[str], Any]:
        return convert if check else str

    p.add_argument(
        "--plugins",
        metavar="NAMES",
        type=typed(_allow_list),
        default=default(None),
        help="comma list of plugins to use, overriding GPUSCOUT_PLUGINS (default: all)",
    )
    p.add_argument(
        "--disable",
        metavar="NAMES",
        type=typed(plugin_names),
        default=default([]),
        help="comma list of plugins to block (env GPUSCOUT_DISABLE_PLUGINS)",
    )
    p.add_argument(
        "--root",
        type=typed(_root),
        default=default(DEFAULT_ROOT),
        help="read /sys and /proc under this existing folder",
    )
    p.add_argument(
        "--timeout",
        type=typed(seconds),
        default=default(DEFAULT_TIMEOUT),
        metavar="SECONDS",
        help=f"each plugin's enumerate deadline, > 0 (default {DEFAULT_TIMEOUT:g} s)",
    )
    p.add_argument(
        "--replay",
        metavar="DIR",
        type=typed(_root),
        default=default(None),
        help="discover on a recording (gpuscout record DIR) instead of this machine: "
        "its files, driver answers and environment",
    )
    p.add_argument(
        "--replay-env",
        choices=REPLAY_ENVS if check else None,
        default=default(DEFAULT_REPLAY_ENV),
        help="with --replay: discover with the recording's environment (default) or "
        "with this process's; either way a child gpuscout starts (--verify, exec) runs "
        "with this process's environment plus the selection's variables",
    )
    p.add_argument(
        "--replay-set",
        metavar="NAME=VALUE",
        action="append",
        type=typed(_assignment),
        default=default(None),
        help="with --replay: set NAME to VALUE in the environment discovery sees (what a "
        "--verify child of a replay is given: the selection's variables)",
    )
    add_budget_options(p, default, typed)
    p.add_argument(
        "--isolated",
        action="store_true",
        default=default(False),
        help="import each plugin in a child first, and run each plugin's enumeration "
        "in a child process of its own: a plugin or driver that crashes or "
        "hangs costs only its plugin",
    )


def add_include_software(p: argparse.ArgumentParser, help: str) -> None:
    """``--include-software``: keep software devices (llvmpipe), which discovery drops; ``help``
    says what that means for the command."""
    p.add_argument("--include-software", action="store_true", help=help)


def scout_argv(args: argparse.Namespace, selected_env: Mapping[str, str] | None = None) -> list[str]:
    """The scout options of ``args`` as command-line arguments (defaults left out), so that a
    child ``gpuscout`` builds the same Scout; on a replay, one whose discovery also sees
    ``selected_env`` (the selection's variables).

    A child of a replay runs with this process's environment, never the recording's (which
    could name a ``PYTHONPATH`` or an ``LD_PRELOAD`` inside the recording): with the recorded
    environment it is told to replay that one again, plus ``selected_env`` (``--replay-set``);
    with ``--replay-env process`` its own environment is already this one plus the selection.
    """
    out: list[str] = []
    if getattr(args, "plugins", None):
        out += ["--plugins", ",".join(args.plugins)]
    if getattr(args, "disable", None):
        out += ["--disable", ",".join(args.disable)]
    if getattr(args, "root", DEFAULT_ROOT) != DEFAULT_ROOT:
        out += ["--root", args.root]
    if getattr(args, "timeout", DEFAULT_TIMEOUT) != DEFAULT_TIMEOUT:
        out += ["--timeout", repr(args.timeout)]
    if getattr(args, "replay", None):
        out += ["--replay", args.replay]
        settings = list(getattr(args, "replay_set", None) or ())
        if getattr(args, "replay_env", DEFAULT_REPLAY_ENV) == "process":
            out += ["--replay-env", "process"]
        else:
            settings += [f"{name}={value}" for name, value in (selected_env or {}).items()]
        for setting in settings:
            out += ["--replay-set", setting]
    if getattr(args, "isolated", False):
        out.append("--isolated")
    return out + budget_argv(args)


def configure_logging(args: argparse.Namespace) -> None:
    """Log to stderr (stdout stays clean for JSON): no events by default, -v warnings and info,
    -vv debug too.

    gpuscout.log builds its structlog logger for the CLI on the first event that passes (it never
    calls ``structlog.configure``, so a host's own setup wins), and a quiet run never imports it.
    """
    from gpuscout.log import configure_cli

    verbosity = max(0, min(getattr(args, "verbose", 0), len(LOG_LEVELS) - 1))
    configure_cli(LOG_LEVELS[verbosity], getattr(args, "log_format", DEFAULT_LOG_FORMAT))


# -- the Scout ------------------------------------------------------------------------------------


def open_scout(args: argparse.Namespace, scout_factory: ScoutFactory) -> Scout:
    """``scout_factory(args)``, then each of the Scout's warnings as one line on stderr."""
    scout = scout_factory(args)
    for warning in scout.warnings:
        warn(warning)
    return scout


# -- printing -------------------------------------------------------------------------------------


def warn(text: object) -> None:
    """One ``gpuscout: warning:`` line on stderr."""
    sys.stderr.write(f"gpuscout: warning: {printable(text)}\n")


def warn_failed_plugins(reports: Sequence[PluginReport]) -> None:
    """One line on stderr for each plugin that failed or timed out, with its reason."""
    from gpuscout._records.results import PluginStatus

    for r in reports:
        if r.status in (PluginStatus.FAILED, PluginStatus.TIMEOUT):
            sys.stderr.write(printable(f"gpuscout: plugin {r.name} {r.status}: {r.error}") + "\n")


def warn_budgets(found: Discovery, args: argparse.Namespace) -> None:
    """One ``gpuscout: warning:`` line per budget entry that matched no device, once per run
    (``args`` remembers it, so a ``--watch`` does not repeat them)."""
    if getattr(args, "budgets_warned", False):
        return
    args.budgets_warned = True
    for sentence in found.budgets.unmatched:
        warn(f"budget {sentence} (docs/budgets.md)")


def every_plugin_failed(reports: Sequence[PluginReport]) -> bool:
    """Whether at least one plugin ran and every one that ran failed or timed out without
    reporting a device (a disabled plugin did not run; one whose enumerate answered and whose
    rule hook then timed out did report): then no device list can be trusted, not even an
    empty one."""
    from gpuscout._records.results import PluginStatus

    ran = [r for r in reports if r.status != PluginStatus.DISABLED]
    return bool(ran) and all(
        r.status in (PluginStatus.FAILED, PluginStatus.TIMEOUT) and not r.devices for r in ran
    )


def print_json(data: Any) -> None:
    """``data`` as indented JSON on gpuscout's stdout; GpuscoutError, with nothing written, for a
    NaN or infinite float (Python would write the non-JSON token ``NaN``)."""
    try:
        text = json.dumps(data, indent=2, allow_nan=False)
    except ValueError as exc:
        raise GpuscoutError(f"cannot write JSON: {exc}") from None
    output().write(text + "\n")
