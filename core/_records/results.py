"""What a discovery produces: the ranked devices, what was dropped and why, one report per
plugin. A module of plain records that the host, the merge, the Scout and the wire format all
use, so that none of them imports another for its result types."""

from __future__ import annotations

import enum
from collections.abc import Mapping

import attrs

from gpuscout._records.device import DeviceID, DeviceInfo, SystemInfo
from gpuscout.errors import UnknownReportError
from gpuscout.sizes import sizes_apart

#: Why a device left the ranked list.
DUPLICATE_REASON = "duplicate"
SOFTWARE_REASON = "software device"
#: How the reason of a device hidden by a visibility variable starts (then ``NAME=value``).
HIDDEN_PREFIX = "hidden by "


def hidden_reason(device: DeviceInfo) -> str:
    """``hidden by CUDA_VISIBLE_DEVICES=0``: why a hidden device (and each twin of it in another
    library) left the ranked list, from the device's ``hidden_by``."""
    return f"{HIDDEN_PREFIX}{device.hidden_by}"


class PluginStatus(enum.StrEnum):
    """What became of a plugin; the values are the strings reports and JSON carry."""

    OK = "ok"
    FAILED = "failed"
    TIMEOUT = "timeout"
    DISABLED = "disabled"


@attrs.frozen
class Entry:
    """One ``SEL=SIZE`` entry: the selector, the size in bytes, and the entry as written."""

    selector: str
    size: int
    text: str


@attrs.frozen
class Applied:
    """What the budget did to one device: the deciding cap and reserve entries (None where none
    matched), the device's total and its usable total under the budget."""

    cap: Entry | None
    reserve: Entry | None
    total: int
    usable: int

    def entries(self) -> str:
        """``cap all=20GiB, reserve cuda:0=2GiB``: the entries that decided."""
        parts = [f"{kind} {e.text}" for kind, e in (("cap", self.cap), ("reserve", self.reserve)) if e]
        return ", ".join(parts)

    def sentence(self) -> str:
        """``cap all=20GiB, reserve cuda:0=2GiB: usable 18.0 GiB of 80.0 GiB`` (as many decimals
        as tell the two apart, ``gpuscout.sizes.sizes_apart``)."""
        usable, total = sizes_apart(self.usable, self.total)
        return f"{self.entries()}: usable {usable} of {total}"


@attrs.frozen
class Outcome:
    """What the budgets did in one discovery: the prefer selectors, each device's place in that
    order (``preference``: the index of the first selector that matches it; a device that matches
    none is absent), each budgeted device's ``Applied``, and a sentence per entry that matched no
    device (``unmatched``)."""

    prefer: tuple[str, ...] = ()
    preference: Mapping[DeviceID, int] = attrs.field(factory=dict)
    applied: Mapping[DeviceID, Applied] = attrs.field(factory=dict)
    unmatched: tuple[str, ...] = ()


@attrs.define
class PluginReport:
    """What one plugin did: whether it loaded, which hooks it answers, what it found and how fast.

    ``error`` says why a plugin failed or timed out; ``note`` why an ``ok`` plugin found what it
    found (no driver, no device). ``elapsed`` is its enumerate's wall time in seconds.
    """

    name: str
    version: str = ""
    distribution: str = ""
    hooks: list[str] = attrs.field(factory=list)
    status: PluginStatus = PluginStatus.OK
    error: str = ""
    devices: int = 0
    elapsed: float = 0.0
    note: str = ""

    def fail(self, status: PluginStatus, error: str) -> None:
        """Mark the plugin failed or timed out; a timeout is never downgraded, reasons add up."""
        if self.status is not PluginStatus.TIMEOUT:
            self.status = status
        if error not in self.error:
            self.error = f"{self.error}; {error}" if self.error else error


@attrs.frozen
class Dropped:
    """A device left out of the ranked list, and why (``duplicate_of``: the survivor)."""

    device: DeviceInfo
    reason: str
    duplicate_of: DeviceID | None = None


@attrs.frozen
class Discovery:
    """The result of one discovery: ranked devices, what was dropped and why, system memory,
    one report per plugin, the wall time it took in seconds, and what the Scout's budgets did
    (``budgets``: each device's cap and reserve, the prefer order; docs/budgets.md), and each
    device's number in its library's runtime (``numbering``, what ``LIBRARY:INDEX`` selects by:
    ``gpuscout._selection.numbering``). The ``list --json`` document carries the budgets only as
    the devices' ``usable_memory`` and notes, and the numbering only in ``--explain``'s
    ``selector`` of each ranked device, so a Discovery read back from it has an empty
    ``budgets`` and ``numbering``."""

    devices: list[DeviceInfo]
    dropped: list[Dropped]
    system: SystemInfo
    plugins: list[PluginReport]
    elapsed: float = 0.0
    budgets: Outcome = attrs.field(factory=Outcome)
    numbering: Mapping[DeviceID, int] = attrs.field(factory=dict, eq=False)

    def report(self, name: str) -> PluginReport:
        """The report of the plugin named ``name``, compared as allow lists compare names
        (without case or surrounding spaces): ``found.report("cuda").status``.

        Raises ``UnknownReportError`` (a GpuscoutError) naming the plugins that have one.
        """
        if not isinstance(name, str):
            raise UnknownReportError(f"a plugin name must be a str, got {name!r:.60}")
        wanted = name.strip().lower()
        for report in self.plugins:
            if report.name.strip().lower() == wanted:
                return report
        there = ", ".join(repr(r.name) for r in self.plugins) or "none"
        raise UnknownReportError(f"no plugin named {name!r} in this discovery; reports: {there}")


__all__ = [
    "DUPLICATE_REASON",
    "HIDDEN_PREFIX",
    "SOFTWARE_REASON",
    "Discovery",
    "Dropped",
    "PluginReport",
    "PluginStatus",
    "hidden_reason",
]
