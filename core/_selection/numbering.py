"""What ``LIBRARY:INDEX`` counts: each library runtime's own device numbers.

``cuda:1`` is the device a CUDA process started in this environment calls device 1: what
``CUDA_VISIBLE_DEVICES=1`` names there and what llama.cpp calls ``CUDA1``; ``rocm:N``, ``vulkan:N``
and any plugin's library alike (``ROCm<N>``, ``Vulkan<N>``). gpuscout does not number devices
itself: each plugin reports its devices in its runtime's order (``gpuscout_enumerate``; CUDA's
``CUDA_DEVICE_ORDER`` order, HIP's, ggml-vulkan's), so the n-th device of a library in that answer
that no visibility variable hides (``hidden_by``) is number n, counted before duplicates are
merged and software devices set aside (the runtime sees those too). A library number therefore
can name a device gpuscout drops (the Vulkan view of a CUDA card): such a number selects nothing.

Devices without a numbering (a list built by hand or read back from ``list --json``, which does
not carry it) are counted in PCI bus order instead, as ``nvidia-smi`` and
``CUDA_DEVICE_ORDER=PCI_BUS_ID`` count; devices without a PCI id after those with one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from gpuscout._records.device import DeviceID, DeviceInfo

#: Each device's number in its library's runtime (``runtime_numbering``).
Numbering = Mapping[DeviceID, int]
#: The ``LIBRARY:INDEX`` selector: ASCII only, used with fullmatch (see ``selectors``).
LIBRARY_INDEX = re.compile(r"([a-z][a-z0-9_]*):([0-9]+)", re.ASCII | re.IGNORECASE)


def runtime_numbering(answers: Iterable[tuple[str, DeviceInfo]]) -> dict[DeviceID, int]:
    """Each device's runtime number from the plugins' enumerate answers, in the order they
    answered: the n-th device of a library that is not ``hidden_by`` a visibility variable is n
    (hidden devices get none; the runtime does not enumerate them)."""
    counts: dict[str, int] = {}
    numbers: dict[DeviceID, int] = {}
    for _plugin, d in answers:
        if d.hidden_by:
            continue
        key = d.library.lower()
        if d.device_id not in numbers:
            numbers[d.device_id] = counts.get(key, 0)
            counts[key] = counts.get(key, 0) + 1
    return numbers


def pci_order(devices: Sequence[DeviceInfo], library: str) -> list[int]:
    """Rank positions of ``library``'s devices in PCI bus order (the order nvidia-smi and
    CUDA_DEVICE_ORDER=PCI_BUS_ID use); devices without a PCI id follow, by filter id."""

    def key(i: int) -> tuple[int, str, tuple[int, str], str]:
        d = devices[i]
        token = d.filter_id or d.id
        return (0 if d.pci_id else 1, d.pci_id.lower(), _numeric_key(token), token)

    return sorted((i for i, d in enumerate(devices) if d.library.lower() == library.lower()), key=key)


def _numeric_key(token: str) -> tuple[int, str]:
    """Orders ASCII digit strings as numbers without int() (unbounded length, no "²"); anything
    else sorts first, as -1 did."""
    if not (token.isascii() and token.isdigit()):
        return (-1, "")
    digits = token.lstrip("0")
    return (len(digits), digits)


def library_numbers(
    devices: Sequence[DeviceInfo], library: str, numbering: Numbering | None = None
) -> list[tuple[int, int]]:
    """``(number, rank position)`` of each of ``library``'s devices, by number: the runtime's
    numbers where ``numbering`` has one for every such device, else their PCI order's."""
    mine = [i for i, d in enumerate(devices) if d.library.lower() == library.lower()]
    if numbering and mine and all(devices[i].device_id in numbering for i in mine):
        return sorted((numbering[devices[i].device_id], i) for i in mine)
    return list(enumerate(pci_order(devices, library)))


def selector_names(devices: Sequence[DeviceInfo], numbering: Numbering | None = None) -> list[str]:
    """``cuda:0``: the ``LIBRARY:INDEX`` selector each of ``devices`` answers to, in their order;
    a device whose library name cannot be written so (``level zero``) answers to its id."""
    names = [d.id for d in devices]
    for library in dict.fromkeys(d.library.lower() for d in devices):
        for number, i in library_numbers(devices, library, numbering):
            name = f"{library}:{number}"
            if LIBRARY_INDEX.fullmatch(name):
                names[i] = name
    return names


# A library name and a number written another way: llama.cpp's ``CUDA0``, ``cuda1``, ``cuda-1``.
_LIBRARY_NUMBER = re.compile(r"([a-z][a-z0-9_]*?)[-_# ]?([0-9]+)", re.ASCII | re.IGNORECASE)


def did_you_mean_device(text: str, devices: Sequence[DeviceInfo], numbering: Numbering | None = None) -> str:
    """``"; did you mean 'cuda:1'?"`` for a selector that names a library's device another way
    (``cuda1``, llama.cpp's ``CUDA1``, ``cdua:1``) or a library without ``library=`` (``cuda``),
    answered from the selectors ``devices`` answer to; ``""`` when nothing there is close."""
    from gpuscout._suggest import suggest

    names = selector_names(devices, numbering)
    libraries = {d.library.lower() for d in devices}
    word = text.strip()
    if word.lower() in libraries:
        return f"; did you mean {'library=' + word.lower()!r}?"
    head, colon, number = word.partition(":")
    match = None if colon else _LIBRARY_NUMBER.fullmatch(word)
    if match:
        head, number = match.group(1), match.group(2)
    digits = number.lstrip("0") or "0"
    if not (colon or match) or not number.isascii() or not number.isdigit() or len(digits) > 18:
        return ""
    library = head.lower() if head.lower() in libraries else suggest(head, sorted(libraries))
    wanted = f"{library}:{digits}" if library else ""
    return f"; did you mean {wanted!r}?" if wanted in names and wanted != word.lower() else ""


__all__ = [
    "LIBRARY_INDEX",
    "Numbering",
    "did_you_mean_device",
    "library_numbers",
    "pci_order",
    "runtime_numbering",
    "selector_names",
]
