"""The environment a child needs for a selection: the plugins' visibility variables, optional
isolation of every other vendor, and the three output formats of ``gpuscout env``.

The "hide everything" values are vendor facts that the visibility hooks cannot express (they only
answer for devices that are selected), so they live in one table here, keyed by library name.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Protocol

import attrs

from gpuscout.records import DeviceInfo

#: Per library, the variables and values that make a child see none of its devices.
#: CUDA and ROCr treat a set-but-empty list as "no devices". HIP does not: an empty
#: HIP_VISIBLE_DEVICES (with CUDA_VISIBLE_DEVICES also empty) filters nothing, so "-1" is used,
#: an invalid entry that ends HIP's list before any device. ggml-vulkan reads set-but-empty as none.
HIDE_ALL: dict[str, dict[str, str]] = {
    "cuda": {"CUDA_VISIBLE_DEVICES": ""},
    "rocm": {"ROCR_VISIBLE_DEVICES": "", "HIP_VISIBLE_DEVICES": "-1"},
    "vulkan": {"GGML_VK_VISIBLE_DEVICES": ""},
}
#: Integer indices in CUDA_VISIBLE_DEVICES follow CUDA's order; this makes it PCI bus order, the
#: order NVML (and so discovery) numbers devices in.
INDEX_LIBRARY = "cuda"
INDEX_VARIABLE = "CUDA_VISIBLE_DEVICES"
ORDER_VARIABLE, ORDER_VALUE = "CUDA_DEVICE_ORDER", "PCI_BUS_ID"

FORMATS = ("sh", "json", "dotenv")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_DOTENV_PLAIN = re.compile(r"^[A-Za-z0-9_.,:/@%+=-]*$")


class EnvSource(Protocol):
    """What this module needs from a Scout."""

    def visible_env(self, devices: Sequence[DeviceInfo]) -> dict[str, str]:
        """The seed's GetDevicesEnv for ``devices``."""
        ...


@attrs.frozen
class SelectionEnv:
    """The variables to add to a child's environment, and notes about what could not be hidden."""

    env: dict[str, str]
    notes: tuple[str, ...] = ()


def emits_indices(devices: Sequence[DeviceInfo], env: Mapping[str, str]) -> bool:
    """Whether ``env`` selects a device of the index library by integer index."""
    return INDEX_VARIABLE in env and any(
        d.library.lower() == INDEX_LIBRARY and (d.filter_id or d.id).strip().isdigit()
        for d in devices)


def isolation_env(devices: Sequence[DeviceInfo], env: Mapping[str, str]) -> SelectionEnv:
    """``env`` plus the hide-all values of every library with no device in ``devices``.

    A variable the selection already sets is never overwritten (on AMD hosts the ROCm rule may
    put HIP ordinals into CUDA_VISIBLE_DEVICES); that library then stays visible, said in a note.
    """
    out = dict(env)
    notes: list[str] = []
    selected = {d.library.lower() for d in devices}
    for library, hide in HIDE_ALL.items():
        if library in selected:
            continue
        for name, value in hide.items():
            if name in env and env[name] != value:
                notes.append(f"cannot hide {library} devices: {name} already carries "
                             f"{env[name]!r} for the selection")
                continue
            out[name] = value
    if emits_indices(devices, out):
        out[ORDER_VARIABLE] = ORDER_VALUE
    return SelectionEnv(out, tuple(notes))


def selection_env(scout: EnvSource, devices: Sequence[DeviceInfo],
                  isolate: bool = False) -> SelectionEnv:
    """The variables a child needs to see ``devices``; with ``isolate`` every other vendor hidden."""
    env = scout.visible_env(devices)
    return isolation_env(devices, env) if isolate else SelectionEnv(env)


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


__all__ = ["FORMATS", "HIDE_ALL", "SelectionEnv", "isolation_env", "render", "selection_env",
           "sh_quote"]
