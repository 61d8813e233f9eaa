"""The facts of each hook (``HookFacts``: how the core calls it and what it accepts back) and
the checks an answer passes, which ``gpuscout._host.hookspecs`` writes above each spec."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal

import attrs

from gpuscout._records.device import DeviceInfo

# -- The facts of each hook: how the core calls it and what it accepts back ---------------------


@attrs.frozen
class HookFacts:
    """What the core knows about one hook, written once next to its spec (``HOOKS``): the host,
    the Scout's answer checks, ``for_library``, ``check_plugin`` and the README read it here."""

    #: The hook's name (``gpuscout_enumerate``).
    name: str
    #: The spec's arguments, in order.
    args: tuple[str, ...]
    #: What a plugin returns, in a phrase (the README's hook table).
    returns: str
    #: Whether an answer passes the border check (None is always let through: no answer).
    check: Callable[[Any], bool] = attrs.field(eq=False)
    #: The check in words, as a failed plugin's report says what was expected.
    expected: str
    #: Stops at the first non-None answer (pluggy's ``firstresult``).
    firstresult: bool = False
    #: Cheap and a function of its arguments alone (no file, driver or clock): the built-ins'
    #: answers are called inline instead of on a worker thread.
    pure: bool = True
    #: Which of the Scout's timeouts bounds each call.
    timeout: Literal["hook_timeout", "enumerate_timeout"] = "hook_timeout"
    #: Called in registration order, not pluggy's call order (last registered first).
    registration_order: bool = False
    #: The argument ``for_library`` guards: ``device`` (called only for a device of the
    #: library), ``devices`` (only when one of them is), ``""`` (it cannot guard this hook).
    guard: Literal["device", "devices", ""] = ""
    #: Must answer None about another library's device (``check_plugin`` asks it about one).
    declines_foreign: bool = False
    #: May raise ``SelectionRefused``, which reaches the caller instead of failing the plugin.
    may_refuse: bool = False
    #: What a report calls the hook's call, and the run it belongs to, when it overran.
    label: str = ""
    run: str = "call"

    @property
    def signature(self) -> str:
        """``gpuscout_visible_env(selection, context)``: the hook as the docs name it."""
        return f"{self.name}({', '.join(self.args)})"


def is_bool(value: Any) -> bool:
    return isinstance(value, bool)


def is_hashable(value: Any) -> bool:
    try:
        hash(value)
    except Exception:
        return False
    return True


def is_str_map(value: Any) -> bool:
    return isinstance(value, Mapping) and all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    )


def is_device_list(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and all(isinstance(d, DeviceInfo) for d in value)


def is_entry_list(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and all(
        isinstance(e, tuple)
        and len(e) == 3
        and type(e[0]) is int
        and isinstance(e[1], str)
        and isinstance(e[2], str)
        for e in value
    )


def is_ggml_order(value: Any) -> bool:
    from gpuscout._machine.context import GgmlOrder

    return (
        isinstance(value, GgmlOrder)
        and type(value.rank) is int
        and isinstance(value.devices, tuple)
        and all(
            isinstance(e, tuple) and len(e) == 2 and type(e[0]) is int and isinstance(e[1], str)
            for e in value.devices
        )
        and is_str_map(value.env)
    )


BOOL = "bool or None"
STR_MAP = "a str->str mapping or None"
