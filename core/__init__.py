"""gpuscout: find every accelerator on a machine and tell the programs that use them the truth.

The public API (binding for host applications, see the project's DESIGN contract)::

    from gpuscout import Scout
    scout = Scout()
    found = scout.discover()
    env = scout.visible_env(found.devices[:1])
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if __name__ != "gpuscout":
    # The folder "core" is only ever the package "gpuscout" (from the repository root, Python
    # would otherwise find it as a top-level package of its own).
    raise ImportError(f"'{__name__}' is not importable: this folder is the package 'gpuscout'")

from gpuscout.context import Context, EnvEntry
from gpuscout.errors import GpuscoutError
from gpuscout.layers import GPULayers, GPULayersList
from gpuscout.markers import VERSION, hookimpl
from gpuscout.memory import BackendMemory, DeviceMemory, InsufficientMemoryError
from gpuscout.rank import by_library, by_performance, library_paths, rank
from gpuscout.records import (
    DeviceComparison,
    DeviceID,
    DeviceInfo,
    FlashAttention,
    SystemInfo,
)
from gpuscout.results import Discovery, Dropped, PluginReport, PluginStatus
from gpuscout.scout import Scout

if TYPE_CHECKING:
    from gpuscout.wire import from_json, to_json

__version__ = VERSION

# The wire format needs cattrs, which costs start-up time; load it on first use.
_LAZY = {"to_json": "gpuscout.wire", "from_json": "gpuscout.wire"}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'gpuscout' has no attribute {name!r}")

__all__ = [
    "BackendMemory",
    "Context",
    "DeviceComparison",
    "DeviceID",
    "DeviceInfo",
    "DeviceMemory",
    "Discovery",
    "Dropped",
    "EnvEntry",
    "FlashAttention",
    "GPULayers",
    "GPULayersList",
    "GpuscoutError",
    "InsufficientMemoryError",
    "PluginReport",
    "PluginStatus",
    "Scout",
    "SystemInfo",
    "__version__",
    "by_library",
    "by_performance",
    "from_json",
    "hookimpl",
    "library_paths",
    "rank",
    "to_json",
]
