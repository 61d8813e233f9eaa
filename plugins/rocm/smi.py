"""Reading AMD GPUs through amdsmi (the optional ``gpuscout[rocm]`` extra).

amdsmi is imported here, lazily, and only on a live root. Without ROCm ``import amdsmi`` raises
KeyError (its library lookup), not ImportError, so every failure is caught and reported as a
reason; the caller then reads sysfs.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import attrs

from gpuscout.plugins.rocm import gfx

MIB = 1024 * 1024


@attrs.frozen
class SmiGpu:
    """One amdsmi GPU handle's answers; None or '' where a call failed or is missing."""

    bdf: str = ""
    kfd_node: int | None = None
    market_name: str = ""
    gfx_version: int = 0
    device_id: int = 0
    unique_id: int = 0
    vram_total: int | None = None
    vram_used: int | None = None
    gtt_total: int | None = None
    gtt_used: int | None = None


def import_amdsmi() -> tuple[Any, str]:
    """(module, '') when amdsmi imports, else (None, why)."""
    try:
        return importlib.import_module("amdsmi"), ""
    except Exception as exc:  # KeyError without ROCm; anything from a bad install
        return None, f"amdsmi unavailable ({type(exc).__name__}: {exc})"


def _try(call: Callable[..., Any], *args: Any) -> Any:
    try:
        return call(*args)
    except Exception:  # one unsupported query must not lose the GPU
        return None


def _int(value: Any, base: int = 10) -> int:
    if isinstance(value, int):
        return value
    try:
        return int(str(value), base)
    except ValueError:
        return 0


def _hex(value: Any) -> int:
    """amdsmi's hex strings (``0x74a1``); ints pass through."""
    if isinstance(value, int):
        return value
    text = str(value or "").strip().lower().removeprefix("0x")
    return _int(text, 16) if text else 0


def _uuid_value(text: Any) -> int:
    """unique_id from a ROCr-style ``GPU-<16 hex>`` string, 0 for anything else."""
    if not isinstance(text, str) or not text.upper().startswith("GPU-"):
        return 0
    return _int(text[4:], 16)


def _memory(smi: Any, handle: Any, kind: str) -> tuple[int | None, int | None]:
    mem_type = getattr(smi.AmdSmiMemoryType, kind)
    total = _try(smi.amdsmi_get_gpu_memory_total, handle, mem_type)
    used = _try(smi.amdsmi_get_gpu_memory_usage, handle, mem_type)
    return (total if isinstance(total, int) else None, used if isinstance(used, int) else None)


def read_gpu(smi: Any, handle: Any) -> SmiGpu:
    """What amdsmi says about one processor handle (each query may fail on its own)."""
    asic = _try(smi.amdsmi_get_gpu_asic_info, handle) or {}
    kfd = _try(smi.amdsmi_get_gpu_kfd_info, handle) or {}
    enum_info = _try(getattr(smi, "amdsmi_get_gpu_enumeration_info", _missing), handle) or {}
    vram_total, vram_used = _memory(smi, handle, "VRAM")
    if vram_total is None:
        usage = _try(smi.amdsmi_get_gpu_vram_usage, handle) or {}
        if isinstance(usage.get("vram_total"), int):
            vram_total, vram_used = usage["vram_total"] * MIB, _int(usage.get("vram_used")) * MIB
    gtt_total, gtt_used = _memory(smi, handle, "GTT")
    node = kfd.get("node_id")
    return SmiGpu(
        bdf=str(_try(smi.amdsmi_get_gpu_device_bdf, handle) or "").lower(),
        kfd_node=node if isinstance(node, int) else None,
        market_name=str(asic.get("market_name") or "").strip(),
        gfx_version=gfx.parse_target_name(str(asic.get("target_graphics_version") or "")),
        device_id=_hex(asic.get("device_id")),
        unique_id=_uuid_value(enum_info.get("hip_uuid")),
        vram_total=vram_total,
        vram_used=vram_used,
        gtt_total=gtt_total,
        gtt_used=gtt_used,
    )


def _missing(handle: Any) -> None:
    raise AttributeError("not in this amdsmi")


def read_all(smi: Any) -> list[SmiGpu]:
    """Every GPU amdsmi reports. Raises whatever amdsmi raises when it cannot start at all."""
    smi.amdsmi_init(smi.AmdSmiInitFlags.INIT_AMD_GPUS)
    try:
        return [read_gpu(smi, h) for h in smi.amdsmi_get_processor_handles()]
    finally:
        _try(smi.amdsmi_shut_down)
