"""The plugin border's device-list check: what a plugin's list of records must be to enter the
host (each record checked by ``check_device``), and the rule that each device's visible token
can stand in a visibility variable."""

from __future__ import annotations

from typing import Any

from gpuscout._host.hookspecs import HOOKS
from gpuscout._records.device import DeviceInfo, check_device
from gpuscout._records.fields import RecordError

#: The hook whose answer is a list of devices (its ``expected`` names that list).
_ENUMERATE = HOOKS["gpuscout_enumerate"]


def checked_devices(value: Any) -> list[DeviceInfo]:
    """``value`` as a list of plain, valid DeviceInfo records; RecordError names the first
    problem (``[3].pci_id: expected str, got 1234``, ``[0].id: empty ...``).

    Beyond the record's own checks, a device's ``id`` (and ``filter_id`` when set) must be a
    usable visibility token: see ``visibility_id_problem``.
    """
    if not isinstance(value, (list, tuple)):
        raise RecordError(f"returned {type(value).__name__}, expected {_ENUMERATE.expected}")
    devices = [check_device(d, f"[{i}]") for i, d in enumerate(value)]
    for i, d in enumerate(devices):
        problem = visibility_id_problem(d)
        if problem:
            raise RecordError(f"[{i}].{problem}")
    return devices


#: What separates the tokens of every library's visibility variable (CUDA_VISIBLE_DEVICES,
#: HIP/ROCR_VISIBLE_DEVICES, GGML_VK_VISIBLE_DEVICES and a plugin's own).
VISIBILITY_SEPARATOR = ","


def visibility_id_problem(device: DeviceInfo) -> str:
    """Why ``device``'s ``id`` or ``filter_id`` cannot stand in a visibility list, as
    ``"<field>: <why>"``; ``""`` when both can.

    The visible token is ``filter_id or id``: an empty (or blank) token makes the libraries see no
    device at all, and one holding the separator is read as two devices. Anything else (quotes,
    ``$()``, spaces inside) is only text and is quoted where it is written.
    """
    fields = [("id", device.id)] + ([("filter_id", device.filter_id)] if device.filter_id else [])
    for field, token in fields:
        if not token.strip():
            return (
                f"{field}: {'empty' if not token else f'blank ({token!r:.40})'}, which in "
                "a visibility variable would hide every device"
            )
        if VISIBILITY_SEPARATOR in token:
            count = token.count(VISIBILITY_SEPARATOR) + 1
            return (
                f"{field}: {token!r:.80} holds the visibility separator "
                f"{VISIBILITY_SEPARATOR!r}, so a visibility variable would read it as "
                f"{count} devices"
            )
    return ""


__all__ = ["VISIBILITY_SEPARATOR", "checked_devices", "visibility_id_problem"]
