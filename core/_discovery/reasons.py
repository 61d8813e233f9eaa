"""Why a discovery ranks no device: which of its reasons matters most.

A machine without a usable device has many true reasons: every plugin says why it found
nothing, most of them about what this machine is not (no macOS, no AMD library, no NVIDIA card
on the bus). Only a few explain it. Each reason gets a weight, from what matters most, and the
command line says the first of the lowest weight (``lead``), a plugin's note before a
dropped device (it sums up the devices it dropped), and points to ``gpuscout plugins`` for
the rest. The weights come from what the reason says, never from a vendor's name:

- ``HIDDEN``: a plugin note naming an environment variable that is set here (a visibility
  variable hiding devices, ``CUDA_VISIBLE_DEVICES=''``): the user's own setting;
- ``PRESENT``: a plugin note naming a PCI address (a GPU on the bus that no driver or runtime
  serves), or a device dropped for a reason other than being software or a duplicate: there is
  hardware, and this is why it is not used (a dropped device whose reason names a variable set
  here is ``HIDDEN``);
- ``SOFTWARE``: a software device (llvmpipe) dropped: the only device there is;
- ``ABSENT``: any other note: nothing of the plugin's kind here (a library missing, another
  platform), true and rarely the point.

A plugin that failed or timed out is not weighed: the command line has already printed each.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

HIDDEN = 0
PRESENT = 1
SOFTWARE = 2
ABSENT = 3

# An environment variable's name as notes spell it: upper case, digits, underscores.
VARIABLE = re.compile(r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b")
# A PCI address as the kernel writes it (domain optional): a device on the bus.
_PCI_ADDRESS = re.compile(r"\b(?:[0-9a-f]{4,8}:)?[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]\b", re.ASCII | re.IGNORECASE)


def note_weight(note: str, env: Mapping[str, str]) -> int:
    """The weight of a plugin's ``note``, given the environment ``env`` the plugin saw."""
    if any(m.group(0) in env for m in VARIABLE.finditer(note)):
        return HIDDEN
    if _PCI_ADDRESS.search(note):
        return PRESENT
    return ABSENT


def drop_weight(reason: str, software: bool, env: Mapping[str, str]) -> int:
    """The weight of a device dropped for ``reason``: ``SOFTWARE`` for a software device,
    ``HIDDEN`` for a reason naming a variable ``env`` sets, else ``PRESENT``."""
    if software:
        return SOFTWARE
    return HIDDEN if note_weight(reason, env) == HIDDEN else PRESENT


def lead(weights: list[int]) -> int | None:
    """The position of the reason that matters most among ``weights`` (the first of the
    lowest weight), None when none weighs more than ``ABSENT`` or there is none."""
    if not weights or min(weights) >= ABSENT:
        return None
    return weights.index(min(weights))


__all__ = ["ABSENT", "HIDDEN", "PRESENT", "SOFTWARE", "VARIABLE", "drop_weight", "lead", "note_weight"]
