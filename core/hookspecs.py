"""Hook specifications: what a backend plugin may answer.

The core calls every implementation on its own (never one hook call over all of them), so one
plugin that raises, hangs or returns the wrong type costs only that plugin. For ``firstresult``
hooks the first implementation that answers something other than None wins, in pluggy's order
(last registered first, ``tryfirst``/``trylast`` respected).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import TYPE_CHECKING

from gpuscout.markers import hookspec

if TYPE_CHECKING:
    from gpuscout.context import Context, EnvEntry
    from gpuscout.records import DeviceInfo


@hookspec
def gpuscout_enumerate(context: Context) -> list[DeviceInfo]:
    """Return every device this backend finds (an empty list when it finds none).

    Runs under its own deadline (``context.deadline``, a ``time.monotonic()`` value). Read files
    through ``context.path()`` and the environment through ``context.env``. A missing SDK or driver
    is not an error: return ``[]`` and say why with ``context.note(...)``.
    """
    raise NotImplementedError


@hookspec
def gpuscout_validate_init(device: DeviceInfo, context: Context) -> Mapping[str, str] | None:
    """Return extra environment for a deep-initialisation check of ``device`` in a child process.

    None means the device needs no such check. (The seed's NeedsInitValidation/AddInitValidation.)
    """
    raise NotImplementedError


@hookspec
def gpuscout_visible_env(
    selection: Sequence[DeviceInfo], context: Context
) -> Sequence[EnvEntry] | None:
    """Return the visibility entries for this backend's devices in ``selection``.

    Each entry is ``EnvEntry(position, name, value)``: the device at ``selection[position]``
    appends
    ``value`` to variable ``name``. The core joins the values of one variable with commas in
    selection order, then applies each device's runner_env_overrides after its own entries. The
    whole selection is passed because the filtering rule depends on it (the seed's mustFilter).
    """
    raise NotImplementedError


@hookspec
def gpuscout_isolate_env(
    selection: Sequence[DeviceInfo], env: Mapping[str, str], context: Context
) -> Mapping[str, str] | None:
    """Return variables that keep this backend's unselected devices from a child.

    ``env`` is what ``gpuscout_visible_env`` produced for ``selection``. Typically: the backend's
    "hide everything" values when none of its devices is selected, and whatever makes the
    selected ones unambiguous (an index order). The core never lets these overwrite a variable
    ``env`` already sets. None: nothing to add.
    """
    raise NotImplementedError


@hookspec(firstresult=True)
def gpuscout_preferred_library(device: DeviceInfo, other: DeviceInfo) -> bool | None:
    """Return True if ``device``'s library is preferred over ``other``'s for the same card.

    firstresult. None means no opinion; the core then answers False.
    """
    raise NotImplementedError


@hookspec
def gpuscout_is_duplicate(a: DeviceInfo, b: DeviceInfo) -> bool | None:
    """Return True if ``a`` and ``b`` are likely the same card seen through different libraries.

    Only asked when the PCI ids cannot decide. Any True makes them duplicates.
    """
    raise NotImplementedError


@hookspec(firstresult=True)
def gpuscout_duplicate_key(device: DeviceInfo) -> Hashable | None:
    """Return a key that every likely twin of ``device`` shares, so the merge need not ask
    ``gpuscout_is_duplicate`` about every pair. Stops at the first non-None result.

    Two devices whose PCI ids cannot decide are asked ``gpuscout_is_duplicate`` only when they
    are of different libraries and their keys match. A ``frozenset`` answer is a set of keys:
    the device matches every device that shares at least one of them (an empty set matches
    nothing). A device no plugin keys (None everywhere) is asked about every pair, as before.
    """
    raise NotImplementedError


@hookspec(firstresult=True)
def gpuscout_flash_attention(device: DeviceInfo) -> bool | None:
    """Return whether flash attention is safe on ``device``; None when not this backend's device.

    firstresult. When no plugin answers, library ``cpu`` passes and anything else fails.
    """
    raise NotImplementedError


@hookspec(firstresult=True)
def gpuscout_minimum_memory(device: DeviceInfo) -> int | None:
    """Return the bytes to hold back on ``device``, or None for the core default (457 MiB).

    firstresult.
    """
    raise NotImplementedError


@hookspec
def gpuscout_refresh(
    devices: Sequence[DeviceInfo], context: Context
) -> Sequence[DeviceInfo] | None:
    """Return this backend's ``devices`` with free memory brought up to date, or None.

    Devices of other libraries are passed too and must be left out of the answer.
    """
    raise NotImplementedError
