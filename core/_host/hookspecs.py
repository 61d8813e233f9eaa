"""Hook specifications: the reference of every question gpuscout asks a backend plugin.

A plugin answers a hook by defining a function of the same name decorated with
``gpuscout.plugin.hookimpl`` (or ``gpuscout.plugin.for_library`` for the per-device hooks); the
guide is docs/plugins.md. How the core calls these hooks:

- **One implementation at a time.** The core never makes one pluggy hook call over all plugins
  (there, one exception aborts the call for everyone). It calls each implementation on its own,
  on a worker thread it waits for with a deadline: ``gpuscout_enumerate`` (and a plugin's
  import) and ``gpuscout_refresh`` under ``enumerate_timeout`` (default 15 s), every other
  hook under ``hook_timeout`` (default 1 s) per call.
- **Misbehaviour is contained.** An implementation that raises (``SystemExit`` included),
  answers the wrong type or returns a record with a bad field is reported ``failed`` and its
  answer is treated as None (no answer). One that overruns its deadline is reported
  ``timeout``, treated as not answering, and not called again for the rest of that discovery
  (or refresh); the next one asks it again, its report's note saying so, but never starts a
  second call into it while the overrun one still runs (it waits for that one, within its own
  deadline, and an enumerate uses its answer if it comes). The other plugins are unaffected.
- **Order.** pluggy's call order: the last registered plugin first (built-ins are registered
  before entry points and ``Scout(extra=...)``), ``tryfirst``/``trylast`` respected. A
  ``firstresult`` hook stops at the first non-None answer in that order; the other hooks collect
  every non-None answer. ``gpuscout_enumerate`` and ``gpuscout_isolate_env`` are called in
  registration order instead.
- **Arguments.** An implementation may accept fewer arguments than its spec: like pluggy, the
  core passes only the ones it names (``def gpuscout_preferred_library(device): ...`` is
  fine). An argument name that the spec lacks is refused when the plugin is registered.
- **Refused at load.** Hook wrappers (``hookwrapper=True`` or ``wrapper=True``), since the core
  calls implementations one by one, and any ``hookimpl``-decorated ``gpuscout_*`` function that
  names no hook below (a misspelling must not pass silently). The plugin is reported ``failed``.

**The facts of each hook** (firstresult, pure, the timeout that bounds it, the argument
``for_library`` guards, whether it must decline another library's device, the check its answer
passes and the words a refusal uses) are written once, in the ``_spec(...)`` line above its spec,
and gathered in ``HOOKS``: the host, the Scout, ``gpuscout.plugin`` and ``check_plugin`` read
them there, and tests/test_hook_facts.py checks the README's hook table against them.

Treat every argument as read-only (records are frozen, mappings are read-only copies).
``context`` (``gpuscout.plugin.Context``) is a plugin's only window onto the process environment
and the filesystem.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import attrs

from gpuscout._host.hookfacts import (
    BOOL,
    STR_MAP,
    HookFacts,
    is_bool,
    is_device_list,
    is_entry_list,
    is_ggml_order,
    is_hashable,
    is_str_map,
)
from gpuscout._host.markers import PROJECT, hookspec
from gpuscout._records.device import DeviceInfo, is_size

if TYPE_CHECKING:
    from gpuscout._machine.context import Context, EnvEntry, GgmlOrder


_HOOKS: dict[str, HookFacts] = {}
#: Every hook's facts, by name, in the order of this module (discovery, rules, child processes).
HOOKS: Mapping[str, HookFacts] = types.MappingProxyType(_HOOKS)

F = TypeVar("F", bound=Callable[..., Any])


def _spec(returns: str, check: Callable[[Any], bool], expected: str, **facts: Any) -> Callable[[F], F]:
    """``hookspec`` (``firstresult`` taken from ``facts``) that records the hook's facts."""

    def register(function: F) -> F:
        code = function.__code__
        hook = HookFacts(
            name=function.__name__,
            args=code.co_varnames[: code.co_argcount],
            returns=returns,
            check=check,
            expected=expected,
            **facts,
        )
        if not hook.name.startswith(f"{PROJECT}_") or hook.name in _HOOKS:
            raise TypeError(f"hook spec {hook.name!r}: not a new {PROJECT}_* name")
        _HOOKS[hook.name] = attrs.evolve(hook, label=hook.label or hook.name)
        marked: F = hookspec(firstresult=hook.firstresult)(function)
        return marked

    return register


# -- Discovery: what is on this machine ----------------------------------------------------------


@_spec(
    "list of DeviceInfo",
    is_device_list,
    "a list of DeviceInfo",
    pure=False,
    timeout="enumerate_timeout",
    registration_order=True,
    label="enumerate",
    run="discovery",
)
def gpuscout_enumerate(context: Context) -> list[DeviceInfo]:
    """Report every device this backend finds.

    Called once per discovery, for every plugin at once, each on its own thread under
    ``enumerate_timeout`` (``context.deadline`` is that moment as a ``time.monotonic()`` value).
    May be slow and may touch drivers: this is where vendor SDKs are imported (lazily, inside
    the function) and files are read (through ``context.read_text``/``list_dir``, which respect
    ``context.root``). Honour the backend's own visibility variable in ``context.env``, so that
    a child given ``gpuscout_visible_env``'s answer finds exactly the selected devices
    (``gpuscout env --verify`` checks that). A missing SDK or driver is not an error: return
    ``[]`` and say why with ``context.note(...)``.

    Every record is checked (field types, memory >= 0, ``pci_id`` empty or like
    ``0000:c4:00.0``); the first bad field fails the plugin and none of its devices is used.
    The core then merges the devices of all plugins, drops software devices and ranks them.
    Report the devices in the order the backend's runtime numbers them: ``LIBRARY:INDEX``
    counts in that order (the n-th device not ``hidden_by`` anything is number n).

    :param context: the environment, platform, filesystem root, deadline, notes and logger.
    :return: a list of ``DeviceInfo`` (``library`` set), ``[]`` when there are none. Anything
        else, None included, fails the plugin.

    Example::

        @hookimpl
        def gpuscout_enumerate(context):
            return [DeviceInfo(id="acme-0", library="Acme", name="Acme X1", total_memory=2**34)]
    """
    raise NotImplementedError


@_spec(
    "your devices with fresh free memory, or None",
    is_device_list,
    "a list of DeviceInfo",
    pure=False,
    timeout="enumerate_timeout",
    guard="devices",
    label="refresh",
    run="refresh",
)
def gpuscout_refresh(devices: Sequence[DeviceInfo], context: Context) -> Sequence[DeviceInfo] | None:
    """Report this backend's ``devices`` again with free memory brought up to date.

    Called by ``Scout.refresh`` with devices of every library, under ``enumerate_timeout`` (a
    driver query may have to initialise the driver first, which can take seconds): still,
    answer only when it is cheap (a driver query, not a re-enumeration). Each returned record
    replaces the passed device with the same ``(id, library)`` and must keep its identity
    (``pci_id`` and ``uuid`` too); records of devices that were not passed are ignored. Returned
    records are checked as ``gpuscout_enumerate``'s are. A device left out of every answer keeps
    its values and is marked ``free_memory_stale``: leave out what you could not read, never
    answer 0 free.

    :param devices: the devices to refresh, of any library; leave other libraries' out of the
        answer.
    :param context: as for ``gpuscout_enumerate``; its deadline is the call's.
    :return: a list of ``DeviceInfo``, or None when none of ``devices`` is this backend's (or
        it cannot refresh): those devices keep their values, marked stale.

    Example::

        @for_library("Acme")  # called only when one of ``devices`` is of library "Acme"
        def gpuscout_refresh(devices, context):
            return [d.evolve(free_memory=acme_free(d.id)) for d in devices if d.library == "Acme"]
    """
    raise NotImplementedError


# -- Rules: how devices compare, what they support ---------------------------------------------
#
# Called per device or per pair, possibly thousands of times in one merge, each call under
# ``hook_timeout``. They must be cheap and should be pure: a function of the arguments alone (no
# files, drivers or clock).


@_spec(
    "a hashable key (or a frozenset of keys) that every twin shares, or None",
    is_hashable,
    "a hashable key or None",
    firstresult=True,
)
def gpuscout_duplicate_key(device: DeviceInfo) -> Hashable | None:
    """Give a key that every likely twin of ``device`` shares, so that the merge need not ask
    ``gpuscout_is_duplicate`` about every pair.

    Stops at the first non-None result. Two devices whose PCI ids cannot decide are asked
    ``gpuscout_is_duplicate`` only when they are of different libraries and their keys match.
    A ``frozenset`` answer is a set of keys: the device matches every device that shares at
    least one of them (an empty set matches nothing). Asked about devices of every library,
    since the other side of a twin pair is usually another backend's. Must be cheap and pure.

    :param device: the device to key.
    :return: a hashable key or a ``frozenset`` of keys; None when this plugin has no key for
        it. A device that no plugin keys is compared with every device of another library.

    Example::

        @hookimpl
        def gpuscout_duplicate_key(device):
            return (device.description.lower(), device.total_memory >> 30)
    """
    raise NotImplementedError


@_spec("True/None", is_bool, BOOL)
def gpuscout_is_duplicate(a: DeviceInfo, b: DeviceInfo) -> bool | None:
    """Say whether ``a`` and ``b`` are likely the same card seen through different libraries.

    Asked only when the PCI ids cannot decide (one of the two has none); in a merge, only for
    devices of different libraries whose ``gpuscout_duplicate_key`` answers match. Every plugin
    is asked; any True makes the pair duplicates, and ``gpuscout_preferred_library`` then picks
    the survivor. Must be cheap and pure.

    :param a: a device already kept by the merge.
    :param b: a device being merged.
    :return: True when they are one card; False or None when this plugin cannot tell.
    """
    raise NotImplementedError


@_spec("True/False/None", is_bool, BOOL, firstresult=True, guard="device", declines_foreign=True)
def gpuscout_preferred_library(device: DeviceInfo, other: DeviceInfo) -> bool | None:
    """Say whether ``device``'s library wins over ``other``'s for the same card.

    Stops at the first non-None result. Used when two libraries report one card (the merge
    keeps the winner) and by ``Scout.preferred``. Must be cheap and pure.

    :param device: the device whose library may be preferred.
    :param other: the other library's record of the same card (the seed ignores it).
    :return: True if ``device`` wins, False if it loses; None for no opinion (when no plugin
        has one, the core answers False and the merge keeps the earlier device).

    Example::

        @for_library("Acme")  # called only when ``device`` is of library "Acme"
        def gpuscout_preferred_library(device, other):
            return other.library == "Vulkan"
    """
    raise NotImplementedError


@_spec("True/False/None", is_bool, BOOL, firstresult=True, guard="device", declines_foreign=True)
def gpuscout_flash_attention(device: DeviceInfo) -> bool | None:
    """Say whether flash attention is safe on ``device``.

    Stops at the first non-None result. ``Scout.flash_attention_supported`` asks about each
    device; all must pass. Must be cheap and pure.

    :param device: the device to judge.
    :return: True or False for this backend's devices; None for any other device. When no
        plugin answers, library ``cpu`` passes and anything else fails.

    Example::

        @for_library("Acme")
        def gpuscout_flash_attention(device):
            return device.compute_major >= 2
    """
    raise NotImplementedError


@_spec("True/False/None", is_bool, BOOL, firstresult=True, guard="device", declines_foreign=True)
def gpuscout_ggml_supports_op(device: DeviceInfo, op: str, params: Mapping[str, int]) -> bool | None:
    """Say whether your ggml backend runs operation ``op`` on ``device`` (its ``supports_op``):
    ``gpuscout fit`` runs a refused one on the host, its inputs and outputs copied across, as
    ggml's scheduler does. Stops at the first non-None result. Must be cheap and pure.

    :param device: the device in question.
    :param op: ggml's operation name: ``"SSM_SCAN"`` (params ``d_state``, ``head_dim``,
        ``n_head``, ``n_group``, ``mamba2`` 1 or 0), ``"SSM_CONV"`` (``channels``), or the
        backend's ``"SPLIT_BUFFER"`` type (``-sm row``; no params).
    :return: True or False for this backend's devices; None for another device or an
        operation you do not judge (it then runs on the device that holds its layer). An
        example is in docs/plugins.md.
    """
    raise NotImplementedError


@_spec(
    "bytes or None",
    is_size,
    "a non-negative int or None",
    firstresult=True,
    guard="device",
    declines_foreign=True,
)
def gpuscout_minimum_memory(device: DeviceInfo) -> int | None:
    """Give the bytes to hold back on ``device`` (memory a program must not plan to use).

    Stops at the first non-None result. Used by ``Scout.minimum_memory``, by ``fits:``
    selectors and by layer planning. Must be cheap and pure.

    :param device: the device in question.
    :return: a whole number of bytes, 0 or more; None for the core default (457 MiB).

    Example::

        @for_library("Acme")
        def gpuscout_minimum_memory(device):
            return 256 * 1024 * 1024
    """
    raise NotImplementedError


# -- Child processes: what a child needs to see the chosen devices -----------------------------
#
# Answered from the arguments and ``context.env`` alone; cheap, and called under ``hook_timeout``
# (``context.deadline`` is None here).


@_spec(
    "list of `EnvEntry(position, name, value)` for your devices",
    is_entry_list,
    "a list of EnvEntry or None",
    may_refuse=True,
)
def gpuscout_visible_env(selection: Sequence[DeviceInfo], context: Context) -> Sequence[EnvEntry] | None:
    """Give the visibility variables that make a child see this backend's devices in
    ``selection``.

    A child that inherits the parent's environment plus these variables must see exactly the
    selected devices of this backend (``gpuscout env``, ``gpuscout exec``, ``Scout.visible_env``
    and init validation rely on it). Every plugin is asked with the whole selection, because a
    filtering rule may depend on it (the seed's mustFilter: CUDA filters only for one device or
    an all-CUDA selection). The core appends each entry's value to its variable, joined with
    commas in selection order, then applies each device's ``runner_env_overrides`` after its
    own entries.

    :param selection: the chosen devices of every library, in the caller's order.
    :param context: the environment (``context.env``) the child inherits, and the platform.
    :return: a list of ``EnvEntry(position, name, value)`` (the device at
        ``selection[position]`` appends ``value`` to variable ``name``); None or ``[]`` when
        none of the selection is this backend's or it sets nothing. A position outside the
        selection fails the plugin.

    Example::

        @hookimpl
        def gpuscout_visible_env(selection, context):
            return [EnvEntry(i, "ACME_VISIBLE_DEVICES", d.filter_id or d.id)
                    for i, d in devices_of(selection, "Acme")]
    """
    raise NotImplementedError


@_spec(
    "your devices as a ggml build enumerates them: `GgmlOrder(rank, devices, env)`, or None",
    is_ggml_order,
    "a GgmlOrder or None",
)
def gpuscout_ggml_devices(devices: Sequence[DeviceInfo], context: Context) -> GgmlOrder | None:
    """Say how a llama.cpp (ggml) build would enumerate this backend's devices among
    ``devices``: the device list ``gpuscout fit``'s llama.cpp planner plans on, and the names its
    ``-dev`` argument uses.

    :param devices: the candidate devices of every library, ranked.
    :param context: the environment (the backend's visibility variables decide what ggml
        enumerates) and the platform.
    :return: ``GgmlOrder(rank, devices, env)``: ``rank`` orders backends as ggml's registry
        does (lower first); ``devices`` lists ``(position, name)`` in ggml's order, a position
        into ``devices`` (it may repeat where ggml enumerates a device twice); ``env`` the
        variables that make a child enumerate exactly those, in that order. None when none of
        ``devices`` is this backend's. Without an answer a library's devices keep their rank
        order and are named ``<library><n>``, their environment ``visible_env``'s.

    Example::

        @hookimpl
        def gpuscout_ggml_devices(devices, context):
            mine = devices_of(devices, "Acme")
            if not mine:
                return None
            ids = ",".join(d.filter_id or d.id for _, d in mine)
            return GgmlOrder(40, tuple((i, f"ACME{n}") for n, (i, _) in enumerate(mine)),
                             {"ACME_VISIBLE_DEVICES": ids})
    """
    raise NotImplementedError


@_spec(
    "variables that hide your unselected devices (`--isolate`), or None",
    is_str_map,
    STR_MAP,
    registration_order=True,
)
def gpuscout_isolate_env(
    selection: Sequence[DeviceInfo], env: Mapping[str, str], context: Context
) -> Mapping[str, str] | None:
    """Give the variables that keep this backend's unselected devices from a child
    (``gpuscout env --isolate``, ``gpuscout exec --isolate``).

    Typically the backend's "hide everything" value when none of its devices is selected, and
    whatever makes the selected ones unambiguous (an index order). Called in registration
    order. The core never lets an answer overwrite a variable that ``env`` already sets to
    another value: it warns that this backend stays visible instead.

    :param selection: the chosen devices of every library.
    :param env: what ``Scout.visible_env(selection)`` produced (read-only).
    :param context: the environment the child inherits, and the platform.
    :return: a mapping of variable names to values to add; None when there is nothing to add.

    Example::

        @hookimpl
        def gpuscout_isolate_env(selection, env, context):
            return None if devices_of(selection, "Acme") else {"ACME_VISIBLE_DEVICES": ""}
    """
    raise NotImplementedError


@_spec(
    "env for a deep-init check in a child, or None",
    is_str_map,
    STR_MAP,
    guard="device",
    declines_foreign=True,
)
def gpuscout_validate_init(device: DeviceInfo, context: Context) -> Mapping[str, str] | None:
    """Ask for a deep-initialisation check of ``device`` in a child process before it is used
    (the seed's NeedsInitValidation/AddInitValidation).

    ``Scout.needs_init_validation`` is True when any plugin answers. With
    ``discover(validate=True)`` (``gpuscout list --validate``) the device is initialised in a
    child whose environment is the parent's, ``visible_env([device])`` and the answers of all
    plugins merged; a crash or a child that does not see the device drops it with the reason.

    :param device: a device found by discovery.
    :param context: the environment and the platform.
    :return: the extra variables the checking child needs (``{}`` for none); None when
        ``device`` needs no check.

    Example::

        @for_library("Acme")
        def gpuscout_validate_init(device, context):
            return {"ACME_INIT_CHECK": "1"}
    """
    raise NotImplementedError


__all__ = ["HOOKS", "HookFacts", *HOOKS]
