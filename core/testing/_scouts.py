"""Scouts for the plugin author's kit (``gpuscout.testing``): ``scout_of`` and its kin
(``isolated_scout``, ``replay_scout``), the in-process plugin ``injected``, and
``plugin_test_env``, what keeps a kit's Scout from finding the real machine's devices."""

from __future__ import annotations

import os
import types
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from gpuscout._host.markers import hookimpl

if TYPE_CHECKING:
    from gpuscout._machine.context import Context
    from gpuscout._records.device import DeviceInfo
    from gpuscout.scout import Scout

#: What the kit's Scouts see by default besides their plugins' ``GPUSCOUT_TEST_ENV``: nothing
#: from this process.
DEFAULT_ENV: Mapping[str, str] = types.MappingProxyType({})
#: The attribute a plugin names the variables with under which it finds none of the real
#: machine's devices (the Vulkan plugin: a driver manifest that does not exist).
TEST_ENV_ATTRIBUTE = "GPUSCOUT_TEST_ENV"


def plugin_test_env(*plugins: Any) -> dict[str, str]:
    """The ``GPUSCOUT_TEST_ENV`` of each plugin (an object, a module or a built-in's name)
    merged in order: what keeps a kit's Scout from finding the real machine's devices."""
    from gpuscout._host.names import BUILTINS, normal_name

    modules = {normal_name(name): module for name, module in BUILTINS}
    env: dict[str, str] = {}
    for plugin in plugins:
        if isinstance(plugin, tuple) and len(plugin) == 2:
            plugin = plugin[1]
        if isinstance(plugin, str):
            module = modules.get(normal_name(plugin))
            if module is None:
                continue
            import importlib

            plugin = importlib.import_module(module)
        declared = getattr(plugin, TEST_ENV_ATTRIBUTE, None)
        if isinstance(declared, Mapping):
            env.update({k: v for k, v in declared.items() if isinstance(k, str) and isinstance(v, str)})
    return env


# -- in-process plugins ----------------------------------------------------------------------------


class InjectedDevices:
    """An in-process plugin that reports the devices it is handed (and answers no rule hook)."""

    def __init__(self, devices: Iterable[DeviceInfo] = ()) -> None:
        self.devices = list(devices)

    @hookimpl
    def gpuscout_enumerate(self, context: Context) -> list[DeviceInfo]:
        """The devices given, every time."""
        return list(self.devices)


def injected(devices: Iterable[DeviceInfo] = (), name: str = "injected") -> tuple[str, InjectedDevices]:
    """``(name, InjectedDevices(devices))``: a plugin for ``gpuscout_scout`` or ``Scout(extra=...)``."""
    return name, InjectedDevices(devices)


# -- Scouts ----------------------------------------------------------------------------------------

#: Scout arguments the kit decides itself: the Scout holds exactly the plugins given.
_FIXED = frozenset({"plugins", "extra", "entry_points"})


def _plugin_lists(
    plugins: Sequence[Any], include_builtins: bool, scout_options: Mapping[str, Any]
) -> tuple[list[str], list[tuple[str, Any]]]:
    """(allowed names, ``extra`` pairs) of the kit's Scouts: built-in names, plugin objects or
    modules, ``(name, plugin)`` pairs, and every built-in with ``include_builtins``."""
    from gpuscout._host.names import BUILTINS, normal_name

    fixed = sorted(_FIXED & scout_options.keys())
    if fixed:
        raise TypeError(f"{', '.join(fixed)}: the kit's Scout holds exactly the plugins passed")
    names: list[str] = [name for name, _ in BUILTINS] if include_builtins else []
    extra: list[tuple[str, Any]] = []
    for plugin in plugins:
        if isinstance(plugin, str):
            if normal_name(plugin) not in map(normal_name, names):
                names.append(plugin)
            continue
        if isinstance(plugin, tuple):
            if len(plugin) != 2 or not isinstance(plugin[0], str):
                raise TypeError(f"a plugin pair must be (name, plugin), got {plugin!r:.80}")
            name, obj = plugin
        else:
            name, obj = _plugin_name(plugin), plugin
        if normal_name(name) in map(normal_name, names):
            raise ValueError(f"two plugins named {name!r}: pass (name, plugin) pairs")
        names.append(name)
        extra.append((name, obj))
    return names, extra


def scout_of(
    *plugins: Any,
    env: Mapping[str, str] | None = None,
    platform: str = "linux",
    root: str | os.PathLike[str] = "/",
    include_builtins: bool = False,
    defaults: Mapping[str, str] = DEFAULT_ENV,
    **scout_options: Any,
) -> Scout:
    """A Scout that holds exactly ``plugins`` (the fixture-free ``gpuscout_scout``).

    Each plugin is a built-in's name (``"cuda"``), a plugin object or module (registered under
    its ``__name__``, or its class's name), or a ``(name, plugin)`` pair, in any mix and order;
    ``include_builtins`` adds every built-in. No entry point loads. ``env`` defaults to the
    plugins' ``plugin_test_env`` with ``defaults`` over it; ``scout_options`` go to Scout
    (``enumerate_timeout``, ``hook_timeout``, ``disable``).
    """
    from gpuscout.scout import Scout

    names, extra = _plugin_lists(plugins, include_builtins, scout_options)
    if env is None:
        env = {**plugin_test_env(*names, *(obj for _, obj in extra)), **defaults}
    return Scout(
        plugins=names,
        extra=extra,
        entry_points=False,
        env=dict(env),
        platform=platform,
        root=root,
        **scout_options,
    )


def isolated_scout(
    plugin: Any,
    name: str = "under_test",
    *,
    env: Mapping[str, str] | None = None,
    platform: str = "linux",
    root: str | os.PathLike[str] = "/",
    enumerate_timeout: float = 15.0,
) -> Scout:
    """A Scout holding ``plugin`` alone under ``name``: no built-in, no entry point, and only
    ``env`` (default empty) for environment."""
    return scout_of(
        (name, plugin), env=dict(env or {}), platform=platform, root=root, enumerate_timeout=enumerate_timeout
    )


def _plugin_name(plugin: Any) -> str:
    name = getattr(plugin, "__name__", None)
    return name if isinstance(name, str) else type(plugin).__name__


def replay_scout(
    recording: str | os.PathLike[str],
    *plugins: Any,
    env: Mapping[str, str] | None = None,
    include_builtins: bool = True,
    **scout_options: Any,
) -> Scout:
    """A Scout that discovers on ``recording`` (a ``gpuscout record`` directory) with every
    built-in (unless ``include_builtins=False``) and ``plugins``; no entry point loads.

    The environment is the recording's unless ``env`` is given; the platform the recording's.
    Raises ``RecordingError`` for a malformed recording.
    """
    from gpuscout.scout import Scout

    names, extra = _plugin_lists(plugins, include_builtins, scout_options)
    return Scout(plugins=names, extra=extra, entry_points=False, env=env, replay=recording, **scout_options)
