"""Plugin names: the built-ins, the entry-point group, and the allow and deny lists as the host
reads them (the arguments, ``GPUSCOUT_PLUGINS``, ``GPUSCOUT_DISABLE_PLUGINS``)."""

from __future__ import annotations

from collections.abc import Iterable

from gpuscout._host.markers import PROJECT
from gpuscout.errors import GpuscoutError

#: Built-in backends: short name and module. Registered with the same ``hookimpl`` a third party
#: uses, so they can be allowed or blocked by name like any other plugin.
BUILTINS: tuple[tuple[str, str], ...] = (
    ("cuda", "gpuscout.plugins.cuda"),
    ("rocm", "gpuscout.plugins.rocm"),
    ("metal", "gpuscout.plugins.metal"),
    ("vulkan", "gpuscout.plugins.vulkan"),
)

ENTRY_POINT_GROUP = PROJECT
ALLOW_ENV = "GPUSCOUT_PLUGINS"
DENY_ENV = "GPUSCOUT_DISABLE_PLUGINS"


def normal_name(name: str) -> str:
    """A plugin name as allow and deny lists compare it: spaces stripped, lower case."""
    return name.strip().lower()


def name_list(value: Iterable[str] | None, what: str) -> list[str] | None:
    """``value`` (a list of plugin names) normalized; a bare string is refused."""
    if value is None:
        return None
    if isinstance(value, (str, bytes)):
        raise GpuscoutError(
            f"{what} must be a list of plugin names, not the string {value!r:.80} "
            f"(pass [{value!r:.40}] for one name)"
        )
    try:
        items = list(value)
    except TypeError:
        raise GpuscoutError(f"{what} must be a list of plugin names, got {type(value).__name__}") from None
    bad = [v for v in items if not isinstance(v, str)]
    if bad:
        raise GpuscoutError(f"{what}: plugin names must be str, got {bad[0]!r:.80}")
    return [n for n in (normal_name(v) for v in items) if n]


def comma_list(value: str | None) -> list[str] | None:
    """A comma list of plugin names from the environment, normalized; None when unset or blank."""
    if value is None or not value.strip():
        return None
    return [n for n in (normal_name(p) for p in value.split(",")) if n]
