"""Which devices ggml-vulkan uses when GGML_VK_VISIBLE_DEVICES is unset (pure functions).

Followed from ggml-org/ggml ``src/ggml-vulkan/ggml-vulkan.cpp`` (commit d99724f2,
``ggml_vk_instance_init``, lines 7457-7587): every DISCRETE_GPU and INTEGRATED_GPU device whose
``storageBuffer16BitAccess`` feature is on (``ggml_vk_device_is_supported``, line 18901), in the
loader's order; a device whose deviceUUID (or LUID) equals one already taken is the same GPU
through a second driver and only one of the two is kept, by ggml's per-vendor driver priority
(RADV over AMDVLK over AMD's proprietary driver, ...; lines 7514-7548), except when both are
MoltenVK (MoltenVK#2683: distinct GPUs of one card can share a UUID). A better-ranked twin
replaces the kept one and moves to the *end* of the list, as ggml's remove-and-push_back does, so
ggml's ``Vulkan<n>`` numbering follows this order. With no such device ggml falls back to the
first device that is not CPU-type; with only CPU-type devices it uses none.

On top of ggml, llama.cpp's model loader (``src/llama.cpp``, ``llama_model_load_from_file_impl``:
"add integrated GPUs only if no other devices were found") puts an integrated GPU to work only
when no other GPU is present. That is reported as a note, not applied: the other GPU may come
from another library (CUDA, ROCm), which only the core sees.

gpuscout does not read deviceLUID (Windows); two drivers of one GPU show the same UUID anyway.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from gpuscout.plugin import visibility_setting
from gpuscout.plugins.vulkan.devices import (
    DRIVER_ID_MOLTENVK,
    TYPE_CPU,
    TYPE_DISCRETE_GPU,
    TYPE_INTEGRATED_GPU,
    VENDOR_AMD,
    VENDOR_INTEL,
    VENDOR_NVIDIA,
    VENDOR_QUALCOMM,
)
from gpuscout.plugins.vulkan.loader import RawDevice
from gpuscout.plugins.vulkan.names import VISIBLE_ENV
from gpuscout.plugins.vulkan.visibility import select_indices

#: VkDriverId values ggml ranks.
(
    DRIVER_AMD_PROPRIETARY,
    DRIVER_AMD_OPEN_SOURCE,
    DRIVER_MESA_RADV,
    DRIVER_NVIDIA_PROPRIETARY,
    DRIVER_INTEL_PROPRIETARY_WINDOWS,
    DRIVER_INTEL_OPEN_SOURCE_MESA,
) = range(1, 7)
DRIVER_QUALCOMM_PROPRIETARY, DRIVER_MESA_TURNIP = 8, 17
DRIVER_MESA_DOZEN, DRIVER_MESA_NVK = 22, 23

#: ggml's driver priorities per vendor (smaller wins); a driver not listed ranks last.
DRIVER_PRIORITIES: dict[int, dict[int, int]] = {
    VENDOR_AMD: {DRIVER_MESA_RADV: 1, DRIVER_AMD_OPEN_SOURCE: 2, DRIVER_AMD_PROPRIETARY: 3},
    VENDOR_INTEL: {DRIVER_INTEL_OPEN_SOURCE_MESA: 1, DRIVER_INTEL_PROPRIETARY_WINDOWS: 2},
    VENDOR_NVIDIA: {DRIVER_NVIDIA_PROPRIETARY: 1, DRIVER_MESA_NVK: 2},
    VENDOR_QUALCOMM: {DRIVER_QUALCOMM_PROPRIETARY: 1, DRIVER_MESA_TURNIP: 2},
}
_LAST = 2**31 - 1
_TYPE_NAMES = {0: "OTHER", 1: "INTEGRATED_GPU", 2: "DISCRETE_GPU", 3: "VIRTUAL_GPU", 4: "CPU"}


def driver_priority(vendor_id: int, driver_id: int) -> int:
    """ggml's rank of ``driver_id`` for a GPU of ``vendor_id`` (Dozen 100, unknown last).

    ggml picks the table by the vendor of the device kept so far; both twins are one GPU, so
    they share the vendor.
    """
    table = {**DRIVER_PRIORITIES.get(vendor_id, {}), DRIVER_MESA_DOZEN: 100}
    return table.get(driver_id, _LAST)


@dataclass
class DefaultSet:
    """``used``: raw indices in ggml's order (``Vulkan0`` first); ``left_out``: why each other
    raw index is not used."""

    used: list[int] = field(default_factory=list)
    left_out: dict[int, str] = field(default_factory=dict)


def _same_gpu(a: RawDevice, b: RawDevice) -> bool:
    both_molten = a.driver_id == DRIVER_ID_MOLTENVK and b.driver_id == DRIVER_ID_MOLTENVK
    return a.uuid != "" and a.uuid.lower() == b.uuid.lower() and not both_molten


def ggml_default_set(raws: Sequence[RawDevice]) -> DefaultSet:
    """The devices ggml-vulkan opens with GGML_VK_VISIBLE_DEVICES unset (see the module doc)."""
    out = DefaultSet()
    for raw in raws:
        if raw.device_type not in (TYPE_DISCRETE_GPU, TYPE_INTEGRATED_GPU):
            kind = _TYPE_NAMES.get(raw.device_type, str(raw.device_type))
            out.left_out[raw.index] = f"a {kind} device, not a discrete or integrated GPU"
            continue
        if not raw.storage_16bit:
            out.left_out[raw.index] = "no storageBuffer16BitAccess"
            continue
        old = next((k for k in out.used if _same_gpu(raws[k], raw)), None)
        if old is None:
            out.used.append(raw.index)
            continue
        kept = raws[old]
        if driver_priority(kept.vendor_id, raw.driver_id) < driver_priority(kept.vendor_id, kept.driver_id):
            out.used.remove(old)
            out.used.append(raw.index)
            out.left_out[old] = _twin_reason(raw, kept)
        else:
            out.left_out[raw.index] = _twin_reason(kept, raw)
    if not out.used:
        first = next((r.index for r in raws if r.device_type != TYPE_CPU), None)
        if first is not None:
            out.used.append(first)
            del out.left_out[first]
    return out


def _twin_reason(kept: RawDevice, dropped: RawDevice) -> str:
    return (
        f"the same GPU (deviceUUID) as device {kept.index}, whose driver "
        f"{kept.driver_name or kept.driver_id!s} ggml prefers to "
        f"{dropped.driver_name or dropped.driver_id!s}"
    )


def integrated_beside_discrete(raws: Sequence[RawDevice], used: Sequence[int]) -> list[int]:
    """Integrated GPUs in ``used`` while a discrete one is there too: llama.cpp's model loader
    leaves them idle ("add integrated GPUs only if no other devices were found")."""
    if not any(raws[i].device_type == TYPE_DISCRETE_GPU for i in used):
        return []
    return [i for i in used if raws[i].device_type == TYPE_INTEGRATED_GPU]


def reported_indices(
    raws: Sequence[RawDevice],
    visible: str | None,
) -> tuple[list[int], list[str], dict[int, str]]:
    """(raw indices in reported order, notes, why ggml would not use a device by raw index)
    for GGML_VK_VISIBLE_DEVICES' ``visible`` value.

    Set: the indices it names (``visibility.select_indices``). Unset: every device, ggml's default
    set first in ggml's order (so ``id`` n is ggml's ``Vulkan<n>``), then the others in the
    loader's order, with a note naming each of those and why ggml does not use it, and a note
    for integrated GPUs that llama.cpp leaves idle beside a discrete one.
    """
    if visible is not None:
        indices, note = select_indices(visible, len(raws))
        return indices, [note] if note else [], {}
    chosen = ggml_default_set(raws)
    rest = [r.index for r in raws if r.index not in chosen.used]
    order = chosen.used + rest
    notes: list[str] = []
    if rest:
        named = "; ".join(
            f"id {order.index(i)} {raws[i].name!r} (raw index {i}): {chosen.left_out[i]}" for i in rest
        )
        notes.append(
            f"Vulkan: not in ggml-vulkan's default device set ({VISIBLE_ENV} unset), "
            f"so a child does not use them unless selected: {named}"
        )
    idle = integrated_beside_discrete(raws, chosen.used)
    if idle:
        named = ", ".join(f"id {order.index(i)} {raws[i].name!r}" for i in idle)
        notes.append(
            f"Vulkan: integrated GPU {named} is in ggml-vulkan's default set, but "
            "llama.cpp's model loader uses integrated GPUs only when no other GPU "
            "is found, and a discrete one is"
        )
    unused = {i: f"not in ggml-vulkan's default device set: {chosen.left_out[i]}" for i in rest}
    return order, notes, unused


def hidden_indices(
    raws: Sequence[RawDevice],
    visible: str | None,
    reported: Sequence[int],
) -> dict[int, str]:
    """The ``hidden_by`` of each raw index, in the loader's order, that GGML_VK_VISIBLE_DEVICES'
    ``visible`` value leaves out of ``reported`` (``reported_indices``' answer); unset hides
    nothing (the devices outside ggml's default set are reported, with ``unused_reason``)."""
    if visible is None:
        return {}
    setting = visibility_setting(VISIBLE_ENV, visible)
    return {r.index: setting for r in raws if r.index not in reported}
