"""Why nothing was found: hints for stderr after ``list`` ranks no device, or after ``env`` and
``exec`` find that a selection matches nothing.

Everything comes from the discovery itself, never from a list of vendors: the devices dropped
(software ones, and the option that keeps them), the plugins' notes (a missing driver library,
devices hidden by a visibility variable) and, for each environment variable a note names, the
value it has here (set but empty shows as ``''``).

What is printed is the reason that matters most, by the weights of
``gpuscout._discovery.reasons`` (a variable hiding devices, then hardware nothing serves, then
a dropped software device), with one line saying how many more there are and where to read
them (``gpuscout plugins``, ``gpuscout list --explain``); when every reason is only that a
plugin's kind of device is not here, one line says so (``brief_hints``). ``hints`` gives every
one, weightiest first.

A hint says only what the lines before it do not: a plugin's error is not repeated (every
command has already written it as ``gpuscout: plugin NAME failed|timeout: ...``), after a
listing (``listed=True``) the dropped devices are not described again, a note does not repeat
its plugin's name, and no hint is given twice. On a terminal each hint is wrapped between words
to its width (``COLUMNS`` first), continuation lines indented; in a pipe each is one line, so
``grep 'hint:'`` finds it whole.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, TextIO

from gpuscout.cli._common import printable

if TYPE_CHECKING:
    from gpuscout._records.results import Discovery, Dropped, PluginReport
    from gpuscout.scout import Scout

#: What starts every hint line on stderr.
PREFIX = "gpuscout: hint: "

#: Where the reasons a brief hint leaves out are told in full (``{again}``: the command that
#: repeats this run's machine, ``again_for``).
ELSEWHERE = "each plugin's note in '{again} plugins', what was dropped and why in '{again} list --explain'"


def again_for(scout: Scout) -> str:
    """``gpuscout``, or ``gpuscout --replay DIR`` for a Scout replaying a recording: the command
    a hint names must look at the same machine."""
    import shlex

    replay = getattr(scout, "replay", None)
    path = getattr(replay, "path", "") if replay is not None else ""
    return f"gpuscout --replay {shlex.quote(str(path))}" if path else "gpuscout"


def hints(found: Discovery, env: Mapping[str, str], *, listed: bool = False) -> list[str]:
    """One line per reason that may explain why ``found`` ranks no device, the weightiest first
    (``gpuscout._discovery.reasons``): dropped devices (with ``--include-software`` for
    software ones), each plugin's note, and the value in ``env`` of every variable those notes
    name; each once. ``listed``: ``found`` was just printed (its dropped devices with their
    reasons), so they are not described again."""
    return [line for _, line in _weighed(found.dropped, found.plugins, env, listed)]


def brief_hints(
    found: Discovery, env: Mapping[str, str], *, listed: bool = False, again: str = "gpuscout"
) -> list[str]:
    """What is printed of ``hints``: the reasons of the greatest weight, and a line saying how
    many more there are and where to read them; when no reason weighs more than a plugin
    finding nothing of its kind, that reason when it is the only one, else one line naming
    those plugins and where each says why. ``again`` starts the commands named (``again_for``)."""
    return _brief(_weighed(found.dropped, found.plugins, env, listed), again)


def _brief(weighed: Sequence[tuple[int, str]], again: str = "gpuscout") -> list[str]:
    from gpuscout._discovery.reasons import lead

    if not weighed:
        return []
    first = lead([weight for weight, _ in weighed])
    if first is None and len(weighed) == 1:
        return [weighed[0][1]]
    if first is None:
        names = [line.split(":", 1)[0].removeprefix("plugin ") for _, line in weighed]
        return [f"no plugin found a device here ({', '.join(names)}); each says why in '{again} plugins'"]
    rest = len(weighed) - 1
    more = f"{rest} more reason{'' if rest == 1 else 's'}: {ELSEWHERE.format(again=again)}"
    return [weighed[first][1]] + ([more] if rest else [])


def _weighed(
    dropped: Sequence[Dropped], reports: Sequence[PluginReport], env: Mapping[str, str], listed: bool = False
) -> list[tuple[int, str]]:
    """Each hint with its weight, the weightiest first; within a weight a plugin's note comes
    before the devices dropped (it sums them up), then in the order found."""
    from gpuscout._discovery.reasons import HIDDEN, SOFTWARE, drop_weight
    from gpuscout._records.results import SOFTWARE_REASON, PluginStatus

    lines: list[tuple[int, str]] = []
    if not any(r.status is not PluginStatus.DISABLED for r in reports):
        lines.append(
            (HIDDEN, "no plugin ran: every plugin is disabled or none is installed (see 'gpuscout plugins')")
        )
    lines.extend(_plugin_hints(reports, env))
    software = [drop.device for drop in dropped if drop.reason == SOFTWARE_REASON]
    if software:
        n = len(software)
        which = "it" if n == 1 else "them"
        if listed:
            what = "(listed above)"
        else:
            what = ": " + ", ".join(
                f"{d.library} {d.id} ({d.description or d.name or 'unnamed'})" for d in software
            )
        lines.append(
            (
                SOFTWARE,
                f"dropped {n} software device{'' if n == 1 else 's'}{' ' if listed else ''}{what}; "
                f"--include-software ranks {which}",
            )
        )
    if not listed:
        for drop in dropped:
            if drop.reason != SOFTWARE_REASON and drop.duplicate_of is None:
                weight = drop_weight(drop.reason, False, env)
                lines.append((weight, f"dropped {drop.device.library} {drop.device.id}: {drop.reason}"))
    unique = dict.fromkeys((weight, printable(line)) for weight, line in lines)
    return sorted(unique, key=lambda item: item[0])


def _plugin_hints(reports: Sequence[PluginReport], env: Mapping[str, str]) -> list[tuple[int, str]]:
    from gpuscout._discovery.reasons import note_weight
    from gpuscout._records.results import PluginStatus

    lines: list[tuple[int, str]] = []
    for r in reports:
        # A failed plugin's error is on stderr already (``gpuscout: plugin NAME failed: ...``).
        if r.status is PluginStatus.DISABLED or not r.note:
            continue
        note = _without_name(r.note, r.name)
        lines.append((note_weight(r.note, env), f"plugin {r.name}: {note}{_values(note, env)}"))
    return lines


def _without_name(note: str, name: str) -> str:
    """``note`` without a leading ``Name: `` that repeats the plugin's name (``Metal: ...``)."""
    head, sep, rest = note.partition(": ")
    return rest if sep and rest and head.strip().lower() == name.lower() else note


def _values(text: str, env: Mapping[str, str]) -> str:
    """`` (NAME='value', ...)`` for each variable ``text`` names that ``env`` sets, else ``''``."""
    from gpuscout._discovery.reasons import VARIABLE

    names = dict.fromkeys(m.group(0) for m in VARIABLE.finditer(text))
    shown = [f"{name}={env[name]!r}" for name in names if name in env]
    return f" ({', '.join(shown)})" if shown else ""


def format_hints(lines: Sequence[str], width: int | None = None) -> str:
    """``lines`` as stderr text, ``gpuscout: hint: `` before each; with a ``width``, each
    wrapped between words to it (a word longer than the width stays whole), continuation
    lines indented under the hint's text."""
    if width is None:
        return "".join(f"{PREFIX}{line}\n" for line in lines)
    from gpuscout.cli._render.wrap import wrap_words

    indent = " " * len(PREFIX)
    return "".join("\n".join(wrap_words(line, width, indent, initial=PREFIX)) + "\n" for line in lines)


def terminal_width(stream: TextIO) -> int | None:
    """The width to wrap hints to on ``stream``: None unless it is a terminal; ``COLUMNS``
    when set, else the terminal's own width."""
    from gpuscout.cli._render.wrap import terminal_columns

    try:
        if not stream.isatty():
            return None
    except (AttributeError, OSError, ValueError):  # closed, or not a file at all
        return None
    return terminal_columns() if os.environ.get("COLUMNS") else _size(stream)


def _size(stream: TextIO) -> int:
    from gpuscout.cli._render.wrap import terminal_columns

    try:
        return os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, OSError, ValueError):
        return terminal_columns()


def write_hints(lines: Sequence[str], stream: TextIO | None = None) -> None:
    """Write ``lines`` as hints on ``stream`` (default stderr), wrapped on a terminal."""
    out = sys.stderr if stream is None else stream
    if lines:
        out.write(format_hints(lines, terminal_width(out)))


def print_for(
    target: Scout | Discovery,
    env: Mapping[str, str] | None = None,
    *,
    listed: bool = False,
    again: str = "gpuscout",
) -> None:
    """Write the hints for ``target`` on stderr (``write_hints``); ``env`` is the environment
    the plugins saw (default: a Scout's own, else this process's); ``listed`` as for
    ``hints``: ``list`` passes True, having just printed the discovery.

    A Discovery gives every hint, and none when it ranks a device (the hints explain an empty
    list, not a selector that missed the devices there are); a Scout gives its plugins' notes
    as its last discovery left them (not the devices it dropped), without running another one.
    """
    from gpuscout._records.results import Discovery

    if isinstance(target, Discovery):
        if target.devices:
            return
        lines = brief_hints(target, os.environ if env is None else env, listed=listed, again=again)
    else:
        lines = _brief(_weighed([], target.reports, target.env if env is None else env), again_for(target))
    write_hints(lines)


__all__ = [
    "ELSEWHERE",
    "PREFIX",
    "again_for",
    "brief_hints",
    "format_hints",
    "hints",
    "print_for",
    "terminal_width",
    "write_hints",
]
