"""gpuscout: find every accelerator on a machine and tell the programs that use them the truth.

The public API (binding for host applications, see the project's DESIGN contract)::

    from gpuscout import Scout
    scout = Scout()
    found = scout.discover()
    env = scout.visible_env(found.devices[:1])
"""

from __future__ import annotations

from gpuscout.context import Context, EnvEntry
from gpuscout.errors import GpuscoutError
from gpuscout.host import PluginReport
from gpuscout.layers import GPULayers, GPULayersList
from gpuscout.markers import hookimpl
from gpuscout.memory import BackendMemory, DeviceMemory, InsufficientMemoryError
from gpuscout.merge import Dropped
from gpuscout.rank import by_library, by_performance, library_paths, rank
from gpuscout.records import (
    DeviceComparison,
    DeviceID,
    DeviceInfo,
    FlashAttention,
    SystemInfo,
)
from gpuscout.scout import Discovery, Scout
from gpuscout.wire import from_json, to_json

__version__ = "0.1.0"

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
