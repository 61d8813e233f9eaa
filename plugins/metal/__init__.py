"""Metal backend: Apple GPUs through pyobjc's Metal framework (macOS only), 512 MiB reserve.

Nothing Apple is imported off macOS, nor before enumerate runs. The modules: ``enumeration``
(what enumerate calls), ``replay`` (Metal's recorded answers), ``rules`` (the reserve and the
flash-attention pass). Metal has no visibility variable and nothing to diagnose beyond the notes
enumerate gives, so it has no ``visibility`` or ``diagnosis`` module (docs/plugins.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gpuscout.plugin import Context, DeviceInfo, EnvEntry, GgmlOrder, devices_of, for_library, hookimpl
from gpuscout.plugins.metal.names import LIBRARY

GPUSCOUT_API_VERSION = 1
#: Variables that change what this plugin finds, recorded by ``gpuscout record`` when set.
GPUSCOUT_RECORDED_ENV = ("GGML_METAL_*", "MTL_*")


@hookimpl
def gpuscout_enumerate(context: Context) -> list[DeviceInfo]:
    """Every Metal device on macOS; none elsewhere (without importing the Metal code at all)."""
    if context.platform != "darwin":
        context.note(f"Metal: only on macOS (platform {context.platform!r})")
        return []
    from gpuscout.plugins.metal.enumeration import enumerate_devices

    return enumerate_devices(context)


@for_library(LIBRARY)
def gpuscout_minimum_memory(device: DeviceInfo) -> int | None:
    """Metal holds back 512 MiB (the seed); other libraries are not ours to answer."""
    from gpuscout.plugins.metal.rules import MINIMUM_MEMORY

    return MINIMUM_MEMORY


@for_library(LIBRARY)
def gpuscout_ggml_supports_op(device: DeviceInfo, op: str, params: Mapping[str, int]) -> bool | None:
    """ggml-metal runs both recurrent operations on every GPU it supports (simdgroup reductions,
    ggml-metal-device.m) and has no split buffer (``-sm row``); other operations are not
    judged here."""
    if op == "SPLIT_BUFFER":
        return False
    return True if op in ("SSM_SCAN", "SSM_CONV") else None


@hookimpl(tryfirst=True)
def gpuscout_flash_attention(device: DeviceInfo) -> bool | None:
    """Metal devices pass, by library or by the name "Metal" (the seed checks both).

    tryfirst: the seed lets a device named "Metal" pass whatever its library says. This is the
    one hook not guarded by ``for_library``: the name match is the seed's quirk, kept explicit.
    """
    from gpuscout.plugins.metal.rules import flash_attention

    return flash_attention(device)


@hookimpl
def gpuscout_visible_env(selection: Sequence[DeviceInfo], context: Context) -> list[EnvEntry] | None:
    """Nothing to set: ggml-metal always uses the system default device
    (``MTLCreateSystemDefaultDevice``) and reads no variable that could choose another, so a
    child selects a Metal device by inheriting the parent's environment as it is."""
    return []


@hookimpl
def gpuscout_ggml_devices(devices: Sequence[DeviceInfo], context: Context) -> GgmlOrder | None:
    """ggml-metal's one device, ``MTL0`` (the system default device), after CUDA/HIP in ggml's
    registry; no variable to set."""
    mine = devices_of(devices, LIBRARY)
    if not mine:
        return None
    return GgmlOrder(10, ((mine[0][0], "MTL0"),), {})
