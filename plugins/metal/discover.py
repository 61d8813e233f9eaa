"""Enumeration for this backend (placeholder until the vendor issue lands: finds nothing)."""

from __future__ import annotations

from gpuscout.context import Context
from gpuscout.records import DeviceInfo


def enumerate_devices(context: Context) -> list[DeviceInfo]:
    """No devices yet: enumeration for this backend is not written."""
    context.note("enumeration not implemented yet")
    return []
