"""``GPUSCOUT_INVENTORY_VISIBLE_DEVICES``: which of the file's devices a process sees.

The variable follows the shape of ``CUDA_VISIBLE_DEVICES``: unset shows every device, the empty
string none, otherwise a comma list of tokens. A token is a device's ``id`` or ``filter_id`` (what
``gpuscout env`` writes), or a 0-based index in file order. Names win over indices, so a file
whose ids are numbers in another order still means what ``gpuscout env`` wrote.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpuscout.plugin import DeviceInfo

# More digits than this is an index beyond any file (and int() refuses over 4300 digits).
_MAX_DIGITS = 18


def visible_indices(value: str | None, devices: Sequence[DeviceInfo]) -> tuple[list[int], list[str]]:
    """The file positions that ``value`` (the variable, None when unset) makes visible, in file
    order, and the tokens that named no device (in the order given, each once)."""
    if value is None:
        return list(range(len(devices))), []
    names: dict[str, int] = {}
    for index, device in enumerate(devices):
        for name in (device.id, device.filter_id):
            if name:
                names.setdefault(name, index)
    chosen: set[int] = set()
    unknown: list[str] = []
    for part in value.split(","):
        token = part.strip()
        if not token:
            continue
        position = names.get(token)
        if position is None:
            position = _index(token, len(devices))
        if position is None:
            if token not in unknown:
                unknown.append(token)
        else:
            chosen.add(position)
    return sorted(chosen), unknown


def _index(token: str, count: int) -> int | None:
    """``token`` as a position below ``count`` (ASCII digits only), else None."""
    if not (token.isascii() and token.isdigit()):
        return None
    digits = token.lstrip("0") or "0"
    if len(digits) > _MAX_DIGITS:
        return None
    position = int(digits)
    return position if position < count else None


__all__ = ["visible_indices"]
