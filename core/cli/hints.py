"""Why nothing was found: hints for stderr after ``list`` ranks no device, or after ``env`` and
``exec`` find that a selection matches nothing.

Everything comes from the discovery itself, never from a list of vendors: the devices dropped
(software ones, and the option that keeps them), the plugins' notes (a missing driver library,
devices hidden by a visibility variable) and, for each environment variable a note names, the
value it has here (set but empty shows as ``''``).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from gpuscout.cli.common import printable

if TYPE_CHECKING:
    from gpuscout.results import Discovery, Dropped, PluginReport
    from gpuscout.scout import Scout

# An environment variable's name as notes spell it: upper case, digits, underscores.
_VARIABLE = re.compile(r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b")


def hints(found: Discovery, env: Mapping[str, str]) -> list[str]:
    """One line per reason that may explain why ``found`` ranks no device: dropped devices (with
    ``--include-software`` for software ones), each plugin's note or error, and the value in
    ``env`` of every variable those notes name."""
    return _lines(found.dropped, found.plugins, env)


def _lines(dropped: Sequence[Dropped], reports: Sequence[PluginReport],
           env: Mapping[str, str]) -> list[str]:
    from gpuscout.results import SOFTWARE_REASON

    lines: list[str] = []
    software = [drop.device for drop in dropped if drop.reason == SOFTWARE_REASON]
    if software:
        named = ", ".join(f"{d.library} {d.id} ({d.description or d.name or 'unnamed'})"
                          for d in software)
        lines.append(f"dropped {len(software)} software device(s): {named}; "
                     "--include-software keeps them")
    for drop in dropped:
        if drop.reason != SOFTWARE_REASON and drop.duplicate_of is None:
            lines.append(f"dropped {drop.device.library} {drop.device.id}: {drop.reason}")
    lines.extend(_plugin_hints(reports, env))
    return [printable(line) for line in lines]


def _plugin_hints(reports: Sequence[PluginReport], env: Mapping[str, str]) -> list[str]:
    from gpuscout.results import PluginStatus

    lines: list[str] = []
    if not any(r.status is not PluginStatus.DISABLED for r in reports):
        lines.append("no plugin ran: every plugin is disabled or none is installed "
                     "(see 'gpuscout plugins')")
    for r in reports:
        said = [text for text in (r.error, r.note) if text]
        if r.status is PluginStatus.DISABLED or not said:
            continue
        text = "; ".join(said)
        lines.append(f"plugin {r.name}: {text}{_values(text, env)}")
    return lines


def _values(text: str, env: Mapping[str, str]) -> str:
    """`` (NAME='value', ...)`` for each variable ``text`` names that ``env`` sets, else ``''``."""
    names = dict.fromkeys(m.group(0) for m in _VARIABLE.finditer(text))
    shown = [f"{name}={env[name]!r}" for name in names if name in env]
    return f" ({', '.join(shown)})" if shown else ""


def print_for(target: Scout | Discovery, env: Mapping[str, str] | None = None) -> None:
    """Write the hints for ``target`` on stderr, one ``gpuscout: hint:`` line each; ``env`` is
    the environment the plugins saw (default: a Scout's own, else this process's).

    A Discovery gives every hint, and none when it ranks a device (the hints explain an empty
    list, not a selector that missed the devices there are); a Scout gives its plugins' notes
    and errors as its last discovery left them (not the devices it dropped), without running
    another one.
    """
    from gpuscout.results import Discovery

    if isinstance(target, Discovery):
        if target.devices:
            return
        lines = hints(target, os.environ if env is None else env)
    else:
        lines = _lines([], target.reports, target.env if env is None else env)
    for line in lines:
        sys.stderr.write(f"gpuscout: hint: {line}\n")


__all__ = ["hints", "print_for"]
