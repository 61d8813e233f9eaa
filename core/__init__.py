"""gpuscout: find every accelerator on a machine and tell the programs that use them the truth.

The public API (binding for host applications, see the project's DESIGN contract)::

    from gpuscout import Scout
    scout = Scout()
    found = scout.discover()
    env = scout.visible_env(found.devices[:1])
"""

# Not typing.TYPE_CHECKING: importing typing is most of what ``import gpuscout`` would cost.
TYPE_CHECKING = False

if __name__ != "gpuscout":
    # The folder "core" is only ever the package "gpuscout" (from the repository root, Python
    # would otherwise find it as a top-level package of its own).
    raise ImportError(f"'{__name__}' is not importable: this folder is the package 'gpuscout'")

if TYPE_CHECKING:
    from gpuscout._discovery.ranking import by_library, by_performance, library_paths, rank
    from gpuscout._fit.errors import ModelError
    from gpuscout._fit.placement import FitResult
    from gpuscout._host.markers import hookimpl
    from gpuscout._machine.context import Context, EnvEntry
    from gpuscout._records.decode import from_json
    from gpuscout._records.device import DeviceComparison, DeviceID, DeviceInfo, FlashAttention, SystemInfo
    from gpuscout._records.encode import to_json
    from gpuscout._records.fields import PcieLink, PeerLink
    from gpuscout._records.layers import GPULayers, GPULayersList
    from gpuscout._records.memory import BackendMemory, DeviceMemory, InsufficientMemoryError
    from gpuscout._records.results import Discovery, Dropped, PluginReport, PluginStatus
    from gpuscout.errors import GpuscoutError, RecordingError
    from gpuscout.load import Allocation, LoadOperation, LoadResult
    from gpuscout.scout import Scout

from gpuscout.version import VERSION  # noqa: E402 (after the folder-name guard)

del TYPE_CHECKING  # read only above; kept out of the package namespace

__version__ = VERSION

# Every name is imported on first use: ``import gpuscout`` (which the pytest kit, the CLI and
# every submodule import pay for) loads nothing, and ``from gpuscout import Scout`` only what
# the Scout needs (the wire format's cattrs, for one, waits for to_json/from_json).
_LAZY = {
    "Context": "gpuscout._machine.context",
    "EnvEntry": "gpuscout._machine.context",
    "GpuscoutError": "gpuscout.errors",
    "RecordingError": "gpuscout.errors",
    "FitResult": "gpuscout._fit.placement",
    "ModelError": "gpuscout._fit.reader",
    "Allocation": "gpuscout.load",
    "LoadOperation": "gpuscout.load",
    "LoadResult": "gpuscout.load",
    "GPULayers": "gpuscout._records.layers",
    "GPULayersList": "gpuscout._records.layers",
    "hookimpl": "gpuscout._host.markers",
    "BackendMemory": "gpuscout._records.memory",
    "DeviceMemory": "gpuscout._records.memory",
    "InsufficientMemoryError": "gpuscout._records.memory",
    "by_library": "gpuscout._discovery.ranking",
    "by_performance": "gpuscout._discovery.ranking",
    "library_paths": "gpuscout._discovery.ranking",
    "rank": "gpuscout._discovery.ranking",
    "DeviceComparison": "gpuscout._records.device",
    "DeviceID": "gpuscout._records.device",
    "DeviceInfo": "gpuscout._records.device",
    "PcieLink": "gpuscout._records.device",
    "PeerLink": "gpuscout._records.device",
    "FlashAttention": "gpuscout._records.device",
    "SystemInfo": "gpuscout._records.device",
    "Discovery": "gpuscout._records.results",
    "Dropped": "gpuscout._records.results",
    "PluginReport": "gpuscout._records.results",
    "PluginStatus": "gpuscout._records.results",
    "Scout": "gpuscout.scout",
    "to_json": "gpuscout._records.encode",
    "from_json": "gpuscout._records.decode",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'gpuscout' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The public names only: no import machinery (``TYPE_CHECKING``), no submodule that an
    import happened to bind (``version``), no private helper."""
    return sorted(__all__)


__all__ = [
    "Allocation",
    "BackendMemory",
    "Context",
    "DeviceComparison",
    "DeviceID",
    "DeviceInfo",
    "DeviceMemory",
    "Discovery",
    "Dropped",
    "EnvEntry",
    "FitResult",
    "FlashAttention",
    "GPULayers",
    "GPULayersList",
    "GpuscoutError",
    "InsufficientMemoryError",
    "LoadOperation",
    "LoadResult",
    "ModelError",
    "PcieLink",
    "PeerLink",
    "PluginReport",
    "PluginStatus",
    "RecordingError",
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
