"""The pluggy markers. ``hookimpl`` is the one marker plugins use, built-in or third-party."""

from __future__ import annotations

import pluggy

PROJECT = "gpuscout"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)

#: The distribution's version (here, not in the package ``__init__``, so that modules the
#: package imports can read it without an import cycle).
VERSION = "0.1.0"
