"""The environment a child needs for a selection: the plugins' visibility variables, optional
isolation of every other vendor, and the three output formats of ``gpuscout env``.

The "hide everything" values are vendor facts, so each vendor plugin answers them through its
``gpuscout_isolate_env`` hook; this module only combines the answers.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Protocol

import attrs

from gpuscout.records import DeviceInfo

FORMATS = ("sh", "json", "dotenv")

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_DOTENV_PLAIN = re.compile(r"^[A-Za-z0-9_.,:/@%+=-]*$")


class EnvSource(Protocol):
    """What this module needs from a Scout."""

    def visible_env(self, devices: Sequence[DeviceInfo]) -> dict[str, str]:
        """The seed's GetDevicesEnv for ``devices``."""
        ...

    def isolate_env(self, devices: Sequence[DeviceInfo],
                    env: Mapping[str, str]) -> list[tuple[str, dict[str, str]]]:
        """Each plugin's hide values for its unselected devices."""
        ...


@attrs.frozen
class SelectionEnv:
    """The variables to add to a child's environment, and notes about what could not be hidden."""

    env: dict[str, str]
    notes: tuple[str, ...] = ()


def isolation_env(scout: EnvSource, devices: Sequence[DeviceInfo],
                  env: Mapping[str, str]) -> SelectionEnv:
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
                notes.append(f"cannot hide {plugin} devices: {name} already carries "
                             f"{env[name]!r} for the selection")
                continue
            out[name] = value
    return SelectionEnv(out, tuple(notes))


def selection_env(scout: EnvSource, devices: Sequence[DeviceInfo],
                  isolate: bool = False) -> SelectionEnv:
    """The variables a child needs to see ``devices``; with ``isolate`` every other vendor hidden."""
    env = scout.visible_env(devices)
    return isolation_env(scout, devices, env) if isolate else SelectionEnv(env)


def sh_quote(value: str) -> str:
    """``value`` in single quotes the way shlex quotes unsafe text, even when it is safe."""
    quoted = shlex.quote(value)
    return quoted if quoted.startswith("'") else f"'{value}'"


def _dotenv_value(value: str) -> str:
    if _DOTENV_PLAIN.match(value):
        return value
    escaped = (value.replace("\\", "\\\\").replace('"', '\\"')
               .replace("\n", "\\n").replace("$", "\\$"))
    return f'"{escaped}"'


def render(env: Mapping[str, str], fmt: str) -> str:
    """``env`` as ``sh`` (``export K='V'`` lines), ``json`` (one object) or ``dotenv`` text."""
    bad = [k for k in env if not _NAME.match(k)]
    if bad:
        raise ValueError(f"not a valid environment variable name: {bad[0]!r}")
    if fmt == "json":
        return json.dumps(dict(env), indent=2) + "\n"
    if fmt == "sh":
        return "".join(f"export {k}={sh_quote(v)}\n" for k, v in env.items())
    if fmt == "dotenv":
        return "".join(f"{k}={_dotenv_value(v)}\n" for k, v in env.items())
    raise ValueError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")


__all__ = ["FORMATS", "SelectionEnv", "isolation_env", "render", "selection_env",
           "sh_quote"]
