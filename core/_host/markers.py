"""The pluggy markers (``hookimpl`` is the one marker plugins use, built-in or third-party) and
the version of the hook API they mark, with the check a plugin passes before it is registered.
``gpuscout.plugin`` gives plugin authors these names."""

from __future__ import annotations

from typing import Any

import pluggy

from gpuscout.errors import GpuscoutError

PROJECT = "gpuscout"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)

#: The version of the hook API (hook names, arguments, answers, the names in this module).
#: It grows by one when something here changes in a way an existing plugin would notice. A
#: plugin may declare the version it was written for as a module (or object) attribute
#: ``GPUSCOUT_API_VERSION``; one written for a later version than this gpuscout's is refused
#: with a report that says so, instead of being called with arguments it does not expect.
API_VERSION = 1

#: The attribute a plugin declares its API version with.
API_VERSION_ATTRIBUTE = "GPUSCOUT_API_VERSION"


def declared_api_version(plugin: Any) -> int | None:
    """The API version ``plugin`` declares (None: it declares none); GpuscoutError when the
    declaration is not a whole number of at least 1."""
    value = getattr(plugin, API_VERSION_ATTRIBUTE, None)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise GpuscoutError(
            f"{API_VERSION_ATTRIBUTE} must be a whole number of at least 1, got {value!r:.40}"
        )
    return value


def check_api_version(plugin: Any) -> str:
    """Why ``plugin`` cannot be used with this gpuscout's hook API, or "" when it can."""
    try:
        wanted = declared_api_version(plugin)
    except GpuscoutError as exc:
        return str(exc)
    if wanted is not None and wanted > API_VERSION:
        return (
            f"written for gpuscout hook API {wanted}, but this gpuscout speaks API "
            f"{API_VERSION}; upgrade gpuscout or use a release of the plugin for API "
            f"{API_VERSION}"
        )
    return ""


__all__ = [
    "API_VERSION",
    "API_VERSION_ATTRIBUTE",
    "PROJECT",
    "check_api_version",
    "declared_api_version",
    "hookimpl",
    "hookspec",
]
