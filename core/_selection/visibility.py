"""The environment a child needs for a selection: the plugins' visibility variables (the
seed's GetDevicesEnv, ``Scout.visible_env``), optional isolation of every other vendor, and the
three output formats of ``gpuscout env``.

The "hide everything" values are vendor facts, so each vendor plugin answers them through its
``gpuscout_isolate_env`` hook; this module only combines the answers.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from gpuscout._host.border import visibility_id_problem
from gpuscout._machine.context import EnvEntry
from gpuscout._records.device import DeviceInfo
from gpuscout.errors import GpuscoutError

if TYPE_CHECKING:
    from gpuscout._host.calls import PluginHost

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


def visible_env(host: PluginHost, devices: list[DeviceInfo], log: Any) -> dict[str, str]:
    """``Scout.visible_env``'s work for a non-empty, checked list of ``devices``: each plugin's
    entries in selection order, then each device's ``runner_env_overrides`` (a conflict logged
    on ``log``)."""
    for i, d in enumerate(devices):
        # A hand-built record can hold what no plugin may return: an id that hides every
        # device or stands for two.
        problem = visibility_id_problem(d)
        if problem:
            raise GpuscoutError(
                f"visible_env: device [{i}] ({d.library} {d.id!r:.80}) cannot be made visible: {problem}"
            )
    per_device: list[list[EnvEntry]] = [[] for _ in devices]
    for plugin, answer in host.each("gpuscout_visible_env", selection=tuple(devices)):
        bad = [e for e in answer if not 0 <= e[0] < len(devices)]
        if bad:
            host.record_failure(plugin, "gpuscout_visible_env", f"entry index out of range: {bad[0]!r}")
            continue
        for index, name, value in answer:
            per_device[index].append(EnvEntry(index, name, value))
    env: dict[str, str] = {}
    for device, entries in zip(devices, per_device, strict=True):
        for _, name, value in entries:
            env[name] = f"{env[name]},{value}" if name in env else value
        for key, value in device.runner_env_overrides.items():
            if key in env and env[key] != value:
                log.warning(
                    "env.override_conflict",
                    key=key,
                    existing=env[key],
                    new=value,
                    library=device.library,
                    id=device.id,
                )
            env[key] = value
    for key, value in env.items():
        # What no child environment can hold: refuse it here rather than in the host's exec.
        if not key or "=" in key or "\x00" in key or "\x00" in value:
            raise GpuscoutError(
                f"visible_env: variable {key!r:.80} = {value!r:.80} cannot be put into an "
                "environment (an empty name, '=' in the name, or a NUL character)"
            )
    return env


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
    "visible_env",
]
