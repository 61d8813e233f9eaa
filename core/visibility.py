"""The environment a child needs for a selection: the plugins' visibility variables, optional
isolation of every other vendor, and the three output formats of ``gpuscout env``.

The "hide everything" values are vendor facts, so each vendor plugin answers them through its
``gpuscout_isolate_env`` hook; this module only combines the answers.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Protocol

import attrs

from gpuscout.errors import GpuscoutError
from gpuscout.records import DeviceInfo

FORMATS = ("sh", "json", "dotenv")

# Used with fullmatch: "$" would also match before a trailing newline.
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*", re.ASCII)
# Characters no shell treats specially in the value of an assignment (no "~", which expands
# after "=" and ":"), so such values can be written bare.
_DOTENV_PLAIN = re.compile(r"[A-Za-z0-9_.,:/@%+=-]*", re.ASCII)


class EnvFormatError(GpuscoutError):
    """An environment that cannot be written: a bad variable name, a NUL byte in a value, or an
    unknown output format."""


class EnvSource(Protocol):
    """What this module needs from a Scout."""

    def visible_env(self, devices: Sequence[DeviceInfo]) -> dict[str, str]:
        """The seed's GetDevicesEnv for ``devices``."""
        ...

    def isolate_env(
        self, devices: Sequence[DeviceInfo], env: Mapping[str, str]
    ) -> list[tuple[str, dict[str, str]]]:
        """Each plugin's hide values for its unselected devices."""
        ...


@attrs.frozen
class SelectionEnv:
    """The variables to add to a child's environment, and notes about what could not be hidden."""

    env: dict[str, str]
    notes: tuple[str, ...] = ()


def isolation_env(scout: EnvSource, devices: Sequence[DeviceInfo], env: Mapping[str, str]) -> SelectionEnv:
    """``env`` plus each plugin's values that hide its unselected devices (its own
    ``gpuscout_isolate_env``: the vendors' "hide all" values live in their plugins).

    A variable the selection already sets is never overwritten (on AMD hosts the ROCm rule may
    put HIP ordinals into CUDA_VISIBLE_DEVICES); that backend then stays visible, said in a note.
    """
    out = dict(env)
    notes: list[str] = []
    for plugin, additions in scout.isolate_env(devices, env):
        for name, value in additions.items():
            if name in env and env[name] != value:
                notes.append(
                    f"cannot hide {plugin} devices: {name} already carries {env[name]!r} for the selection"
                )
                continue
            out[name] = value
    return SelectionEnv(out, tuple(notes))


def selection_env(scout: EnvSource, devices: Sequence[DeviceInfo], isolate: bool = False) -> SelectionEnv:
    """The variables a child needs to see ``devices``; with ``isolate`` every other vendor hidden."""
    env = scout.visible_env(devices)
    return isolation_env(scout, devices, env) if isolate else SelectionEnv(env)


def sh_quote(value: str) -> str:
    """``value`` in single quotes, each ``'`` written as ``'\\''``.

    Inside single quotes no POSIX shell (bash, dash, zsh, busybox) expands anything, and a newline
    is literal, so the result is safe to ``eval`` or source whatever ``value`` holds.
    """
    return "'" + value.replace("'", "'\\''") + "'"


def _dotenv_value(value: str) -> str:
    # A sourced dotenv file (``set -a; . ./file``) is shell syntax, so anything beyond plain
    # characters is single-quoted as in sh output; docker-style readers accept single quotes too.
    return value if _DOTENV_PLAIN.fullmatch(value) else sh_quote(value)


def check_env(env: Mapping[str, str]) -> None:
    """Raise EnvFormatError unless every name is a valid variable name and every value a str
    without a NUL byte (which no process environment can carry)."""
    for name, value in env.items():
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise EnvFormatError(
                f"not a valid environment variable name: {name!r} (expected ASCII letters, "
                "digits and '_', not starting with a digit)"
            )
        if not isinstance(value, str):
            raise EnvFormatError(f"the value of variable {name!r} is {type(value).__name__}, expected str")
        if "\0" in value:
            raise EnvFormatError(
                f"the value of variable {name!r} holds a NUL byte, which no environment variable can carry"
            )


def render(env: Mapping[str, str], fmt: str) -> str:
    """``env`` as ``sh`` (``export K='V'`` lines), ``json`` (one object) or ``dotenv`` text.

    ``sh`` and ``dotenv`` output is safe to ``eval`` or source in any POSIX shell whatever the
    values hold. Raises EnvFormatError for a bad name, a NUL byte or an unknown format.
    """
    check_env(env)
    if fmt == "json":
        return json.dumps(dict(env), indent=2) + "\n"
    if fmt == "sh":
        return "".join(f"export {k}={sh_quote(v)}\n" for k, v in env.items())
    if fmt == "dotenv":
        return "".join(f"{k}={_dotenv_value(v)}\n" for k, v in env.items())
    raise EnvFormatError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")


__all__ = [
    "FORMATS",
    "EnvFormatError",
    "SelectionEnv",
    "check_env",
    "isolation_env",
    "render",
    "selection_env",
    "sh_quote",
]
