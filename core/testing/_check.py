"""``check_plugin``: what is wrong with a plugin, found by reading it and then running it alone
in a Scout (the plugin author's kit, ``gpuscout.testing``)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from gpuscout.testing._scouts import isolated_scout
from gpuscout.testing._waits import promptly

if TYPE_CHECKING:
    from gpuscout._records.device import DeviceInfo
    from gpuscout.scout import Scout

#: Devices the rule hooks are asked about (the first ones a plugin reports).
_SAMPLE = 8
#: A library no plugin owns: what "not my device" guards must answer None for.
_FOREIGN = "gpuscout-check-foreign"
#: The operation check_plugin asks ``gpuscout_ggml_supports_op`` about (a Mamba2 scan).
_SCAN = {"d_state": 128, "head_dim": 64, "n_head": 16, "n_group": 1, "mamba2": 1}


def check_plugin(
    plugin: Any,
    *,
    name: str = "under_test",
    env: Mapping[str, str] | None = None,
    platform: str = "linux",
    root: str | os.PathLike[str] = "/",
    enumerate_timeout: float = 15.0,
) -> list[str]:
    """Problems found with ``plugin`` (an empty list when there are none), each naming its hook
    or device.

    Without running it: every ``gpuscout_*`` attribute must be a hook of ``gpuscout._host.hookspecs``
    (a misspelling gets a "did you mean"), every hook function must carry ``hookimpl``, there
    must be at least one hook, and a declared ``GPUSCOUT_API_VERSION`` must be one this gpuscout
    speaks. Then, alone in a Scout (``env``, default empty; ``platform``; ``root``): enumerate
    must finish in time with a list of DeviceInfo, each with a library, no DeviceID twice, each
    surviving the wire format; a plugin that reports devices must answer
    ``gpuscout_visible_env``; and every rule hook it implements is asked about its own devices
    (the first eight) and must answer the hook's type, and None for a device of a library that
    is not its own.
    """
    problems, loadable = _static_problems(plugin)
    if not loadable:
        return problems
    from gpuscout._records.results import PluginStatus
    from gpuscout.errors import GpuscoutError

    try:
        scout = isolated_scout(
            plugin, name, env=env, platform=platform, root=root, enumerate_timeout=enumerate_timeout
        )
    except GpuscoutError as exc:
        return [*problems, f"cannot be loaded: {exc}"]
    found = scout.discover(include_software=True)
    report = found.report(name)
    if report.status is not PluginStatus.OK:
        problems.append(f"{report.status}: {report.error}")
    devices = [*found.devices, *(d.device for d in found.dropped)]
    problems += _record_problems(devices, report.hooks)
    return problems + _rule_problems(scout, name, report.hooks, devices)


def _static_problems(plugin: Any) -> tuple[list[str], bool]:
    """What reading ``plugin`` tells, and whether gpuscout would load it at all."""
    import difflib

    import pluggy

    from gpuscout._host.hookspecs import HOOKS
    from gpuscout._host.markers import PROJECT
    from gpuscout.plugin import API_VERSION_ATTRIBUTE, check_api_version

    problems: list[str] = []
    loadable = True
    refused = check_api_version(plugin)
    if refused:
        named = refused.startswith(API_VERSION_ATTRIBUTE)
        problems.append(refused if named else f"{API_VERSION_ATTRIBUTE}: {refused}")
        loadable = False
    hooks = sorted(HOOKS)
    manager = pluggy.PluginManager(PROJECT)
    implemented = 0
    try:
        attributes = sorted(a for a in dir(plugin) if a.startswith(f"{PROJECT}_"))
    except Exception as exc:
        return [*problems, f"cannot be inspected: {type(exc).__name__}: {exc}"], False
    for attr in attributes:
        try:
            marked = manager.parse_hookimpl_opts(plugin, attr) is not None
        except Exception as exc:
            problems.append(f"{attr}: cannot be inspected: {type(exc).__name__}: {exc}")
            continue
        if attr not in hooks:
            close = difflib.get_close_matches(attr, hooks, n=1)
            hint = f": did you mean {close[0]}?" if close else f" (the hooks: {', '.join(hooks)})"
            problems.append(f"{attr} is not a gpuscout hook{hint}")
            loadable = loadable and not marked  # gpuscout refuses a plugin with unknown hooks
        elif not marked:
            problems.append(f"{attr} is not decorated with gpuscout.hookimpl: pluggy never calls it")
        else:
            implemented += 1
    if not implemented:
        problems.append(
            "implements no gpuscout hook (functions named after a hook of "
            "gpuscout._host.hookspecs, decorated with gpuscout.hookimpl)"
        )
        loadable = False
    return problems, loadable


def _record_problems(devices: Sequence[DeviceInfo], hooks: Sequence[str]) -> list[str]:
    from collections import Counter

    from gpuscout._records.decode import from_json
    from gpuscout._records.device import DeviceInfo
    from gpuscout._records.encode import to_json

    problems: list[str] = []
    for d in devices:
        if not d.library:
            problems.append(f"device {d.id!r} has no library")
        wire = d.evolve(runner_env_overrides={}, nvidia_driver_major=0)
        try:
            same: bool = from_json(to_json(wire), DeviceInfo) == wire
        except Exception as exc:
            problems.append(f"device {d.id!r} does not survive the wire format: {exc!s:.200}")
            continue
        if not same:
            problems.append(f"device {d.id!r} does not survive the wire format")
    for key, count in Counter(d.device_id for d in devices).items():
        if count > 1:
            problems.append(
                f"device {key.id!r} of library {key.library!r} is reported {count} "
                "times: a DeviceID (id, library) must name one device"
            )
    if devices and "gpuscout_visible_env" not in hooks:
        problems.append(
            "reports devices but does not implement gpuscout_visible_env: "
            "`gpuscout env` and `gpuscout exec` cannot select its devices"
        )
    return problems


def _rule_problems(scout: Scout, name: str, hooks: Sequence[str], devices: Sequence[DeviceInfo]) -> list[str]:
    """Ask each rule hook ``plugin`` implements about its own devices; what the Scout refused
    (and wrote into the plugin's report) comes back as problems."""
    from gpuscout._host.hookspecs import HOOKS
    from gpuscout._records.device import DeviceInfo
    from gpuscout._records.results import PluginStatus
    from gpuscout.errors import GpuscoutError

    report = next(r for r in scout.reports if r.name == name)
    problems: list[str] = []

    def ask(hook: str, about: str, call: Callable[[], object]) -> object:
        if hook not in hooks:
            return None
        before = report.error
        try:
            answer = call()
        except GpuscoutError as exc:
            problems.append(f"{hook} ({about}): {exc}")
            return None
        if report.error != before:
            added = report.error.removeprefix(before).removeprefix("; ")
            problems.append(f"{added} ({about})")
        return answer

    sample = list(devices[:_SAMPLE])
    for d in sample:
        about = f"device {d.id!r}"
        ask("gpuscout_flash_attention", about, partial(scout.flash_attention, d))
        ask("gpuscout_ggml_supports_op", about, partial(scout.ggml_supports_op, d, "SSM_SCAN", _SCAN))
        ask("gpuscout_minimum_memory", about, partial(scout.minimum_memory, d))
        ask("gpuscout_validate_init", about, partial(scout.init_env, d))
        ask("gpuscout_duplicate_key", about, partial(scout.duplicate_keys, [d]))
        for other in sample:
            pair = f"devices {d.id!r} and {other.id!r}"
            ask("gpuscout_preferred_library", pair, partial(scout.preferred, d, other))
            ask("gpuscout_is_duplicate", pair, partial(scout.is_duplicate, d, other))
    if sample:
        about = f"devices {', '.join(repr(d.id) for d in sample)}"
        visible = ask("gpuscout_visible_env", about, partial(scout.visible_env, sample))
        chosen = visible if isinstance(visible, dict) else {}
        ask("gpuscout_isolate_env", about, partial(scout.isolate_env, sample, chosen))
        ask("gpuscout_refresh", about, partial(scout.refresh, sample))
        ask("gpuscout_ggml_devices", about, partial(scout.ggml_devices, sample))
    ask("gpuscout_isolate_env", "an empty selection", partial(scout.isolate_env, [], {}))
    if report.status is PluginStatus.TIMEOUT:
        return problems  # it overran once: asking again would only wait again
    # Per-device answers must leave other libraries' devices alone: a firstresult answer about
    # a device that is not the plugin's overrules the plugin that owns it.
    foreign = DeviceInfo(id="0", library=_FOREIGN)
    values: dict[str, Any] = {
        "device": foreign,
        "other": sample[0] if sample else foreign,
        "context": scout.context(name),
        "op": "SSM_SCAN",
        "params": _SCAN,
    }
    for hook, facts in HOOKS.items():
        if facts.declines_foreign and hook in hooks:
            kwargs = {arg: values[arg] for arg in facts.args}
            problems += _foreign_problems(scout, hook, kwargs)
    return problems


def _foreign_problems(scout: Scout, hook: str, kwargs: Mapping[str, Any]) -> list[str]:
    """The plugin's own answer (it is the Scout's only plugin) about a foreign device."""
    caller = getattr(scout.plugin_manager.hook, hook)
    try:
        answer = promptly(lambda: caller(**kwargs), seconds=scout.hook_timeout)
    except AssertionError:
        return [
            f"{hook} did not answer within {scout.hook_timeout:g} s about a device of library {_FOREIGN!r}"
        ]
    except Exception as exc:
        return [
            f"{hook} raised {type(exc).__name__}: {exc!s:.200} about a device of library "
            f"{_FOREIGN!r}, which is not its own"
        ]
    if answer is None or answer == []:
        return []
    return [
        f"{hook} answers {answer!r:.80} about a device of library {_FOREIGN!r}, which is "
        "not its own: answer None for other libraries' devices "
        "(gpuscout.plugin.for_library does that)"
    ]
