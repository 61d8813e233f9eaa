"""CUDA_VISIBLE_DEVICES as the CUDA driver reads it, as pure functions.

NVML ignores the variable, so gpuscout applies it itself to NVML's devices. The rules (CUDA
Programming Guide, "CUDA Environment Variables"):

- unset: every GPU; set to the empty string: none;
- a comma list of integer indices (in CUDA's device order), GPU UUIDs or any unique prefix of one
  (``GPU-8932f937``), MIG instances as ``MIG-<uuid>`` (or the older
  ``MIG-GPU-<uuid>/<gpu instance>/<compute instance>``);
- devices come in list order; the first invalid entry ends the list (``0,2,-1,1`` is ``0,2``, so
  ``-1`` alone hides everything);
- indices are read like ``strtoul``: leading digits count, the rest of the entry is ignored
  (``1gpu2,2ampere`` is ``1,2``);
- a device named twice makes the whole list select nothing (PyTorch's model of the driver).

Choices where the guide is silent: each entry is judged on its own (a list may mix indices and
UUIDs); UUID prefixes are matched case-sensitively, as ``nvidia-smi -L`` prints them; an index or
GPU UUID naming a GPU in MIG mode selects all of its MIG instances.

``one_process`` then applies the runtime's MIG rule (NVIDIA MIG user guide, "Device
Enumeration": with CUDA 11/R450 and CUDA 12/R525 a process "can only enumerate a single MIG
instance", whatever CUDA_VISIBLE_DEVICES names; pytorch#92315 shows ``device_count() == 1`` for
two MIG UUIDs). Assumption where the guide is silent: once a MIG instance is visible the process
sees that instance alone, no other MIG instance and no whole GPU either.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence

import attrs

from gpuscout.plugin import visibility_setting
from gpuscout.plugins.cuda.names import VISIBLE_ENV


@attrs.frozen
class MigSlot:
    """One MIG instance as CUDA_VISIBLE_DEVICES can name it."""

    uuid: str
    gpu_instance_id: int | None = None
    compute_instance_id: int | None = None


@attrs.frozen
class GpuSlot:
    """One physical GPU in CUDA's enumeration order, and its MIG instances when in MIG mode."""

    uuid: str
    mig_enabled: bool = False
    mig: tuple[MigSlot, ...] = ()

    def units(self) -> list[str]:
        """The UUIDs of the devices CUDA makes of this GPU (its MIG instances in MIG mode)."""
        return [m.uuid for m in self.mig] if self.mig_enabled else [self.uuid]


# ASCII only, like strtoul in the C locale: "\d" would take "²" and "\s" a no-break space.
_LEADING_NUMBER = re.compile(r"\s*([+-]?)([0-9]+)", re.ASCII)
_LEGACY_MIG = re.compile(r"MIG-(GPU-[^/]+)/([0-9]+)/([0-9]+)", re.ASCII)
_ULONG_MAX = 2**64 - 1
# More digits than ULONG_MAX has is out of range whatever they are (and int() refuses over 4300).
_ULONG_DIGITS = len(str(_ULONG_MAX))


def parse_index(entry: str) -> int | None:
    """An index entry read like C's ``strtoul``: leading digits count, the rest is ignored.

    None when the entry has no leading digits. A minus sign wraps around to a huge value as in C
    (so ``-1`` names no device) except for ``-0``, which is 0. A number beyond unsigned long,
    with or without a sign, is ULONG_MAX, as strtoul returns on overflow.
    """
    match = _LEADING_NUMBER.match(entry)
    if match is None:
        return None
    digits = match.group(2).lstrip("0") or "0"
    if len(digits) > _ULONG_DIGITS:
        return _ULONG_MAX
    number = int(digits)
    if number > _ULONG_MAX:
        return _ULONG_MAX
    if match.group(1) == "-" and number != 0:
        return 2**64 - number
    return number


def _small(digits: str) -> int:
    """ASCII ``digits`` as an int, or -1 (no instance has that id) past 18 digits."""
    digits = digits.lstrip("0") or "0"
    return int(digits) if len(digits) <= 18 else -1


def _unique_prefix(prefix: str, uuids: Sequence[str]) -> int | None:
    hits = [i for i, uuid in enumerate(uuids) if uuid.startswith(prefix)]
    return hits[0] if len(hits) == 1 else None


def _resolve_mig(entry: str, gpus: Sequence[GpuSlot]) -> str | None:
    """The MIG UUID ``entry`` names, or None when it names none or more than one."""
    legacy = _LEGACY_MIG.fullmatch(entry)
    if legacy is not None:
        gpu_prefix, gi, ci = legacy.group(1), _small(legacy.group(2)), _small(legacy.group(3))
        index = _unique_prefix(gpu_prefix, [g.uuid for g in gpus])
        if index is None:
            return None
        found = [m.uuid for m in gpus[index].mig if m.gpu_instance_id == gi and m.compute_instance_id == ci]
        return found[0] if len(found) == 1 else None
    instances = [m.uuid for g in gpus if g.mig_enabled for m in g.mig]
    index = _unique_prefix(entry, instances)
    return None if index is None else instances[index]


def _resolve(entry: str, gpus: Sequence[GpuSlot]) -> list[str] | None:
    """The device UUIDs one entry selects, or None when the entry is invalid."""
    if entry.startswith("GPU-"):
        index = _unique_prefix(entry, [g.uuid for g in gpus])
        return None if index is None else gpus[index].units()
    if entry.startswith("MIG-"):
        uuid = _resolve_mig(entry, gpus)
        return None if uuid is None else [uuid]
    number = parse_index(entry)
    if number is None or number >= len(gpus):
        return None
    return gpus[number].units()


def visible_uuids(value: str | None, gpus: Sequence[GpuSlot]) -> list[str]:
    """The UUIDs of the devices CUDA would expose, in the order it would number them.

    ``value`` is CUDA_VISIBLE_DEVICES (None when unset); ``gpus`` are the physical GPUs in
    CUDA's enumeration order (see ``order.py``).
    """
    if value is None:
        return [uuid for g in gpus for uuid in g.units()]
    chosen: list[str] = []
    for raw in value.split(","):
        selected = _resolve(raw.strip(), gpus)
        if selected is None:
            break
        if any(uuid in chosen for uuid in selected):
            return []
        chosen.extend(selected)
    return chosen


def mig_uuids(gpus: Sequence[GpuSlot]) -> set[str]:
    """The UUIDs of every MIG instance of ``gpus``."""
    return {m.uuid for g in gpus if g.mig_enabled for m in g.mig}


def one_process(uuids: Sequence[str], gpus: Sequence[GpuSlot]) -> list[str]:
    """What one CUDA process can use of ``uuids`` (``visible_uuids``' answer, in CUDA order).

    The runtime's MIG rule (module docstring): when any MIG instance is among them, only the
    first one in enumeration order remains, alone; without MIG instances nothing changes.
    """
    migs = mig_uuids(gpus)
    first = next((u for u in uuids if u in migs), None)
    return list(uuids) if first is None else [first]


def hidden_units(
    value: str | None, units: Sequence[str], named: Collection[str], visible: Collection[str]
) -> dict[str, str]:
    """The ``hidden_by`` of each of ``units`` (every device UUID, in CUDA order) that a process
    started with CUDA_VISIBLE_DEVICES=``value`` does not see, in that order.

    ``named`` is ``visible_uuids``' answer and ``visible`` ``one_process``' one. A device the
    list does not select is hidden by the variable; one it names but the one-MIG-instance rule
    leaves out says so too. Unset hides nothing.
    """
    if value is None:
        return {}
    setting = visibility_setting(VISIBLE_ENV, value)
    one_mig = f"{setting} (a CUDA process enumerates one MIG instance)"
    return {u: setting if u not in named else one_mig for u in units if u not in visible}
