"""The pluggy markers. ``hookimpl`` is the one marker plugins use, built-in or third-party."""

from __future__ import annotations

import pluggy

from gpuscout.version import VERSION

PROJECT = "gpuscout"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)

__all__ = ["PROJECT", "VERSION", "hookimpl", "hookspec"]
