"""A kit for testing a gpuscout plugin in isolation (for plugin authors and this project alike).

    from gpuscout.testing import isolated_scout, check_plugin

    def test_my_backend_reports_its_card():
        scout = isolated_scout(my_plugin_module, env={"MY_SDK_FAKE": "1"})
        assert [d.library for d in scout.discover().devices] == ["MyLib"]

    def test_my_backend_is_well_behaved():
        assert check_plugin(my_plugin_module) == []
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpuscout.records import DeviceInfo
from gpuscout.scout import Scout


def isolated_scout(
    plugin: Any, name: str = "under_test", *, env: Mapping[str, str] | None = None,
    platform: str = "linux", root: str = "/", enumerate_timeout: float = 5.0,
) -> Scout:
    """A Scout holding ``plugin`` alone: no built-in, no entry point, only the given environment."""
    return Scout(plugins=[name], extra=[(name, plugin)], entry_points=False, env=dict(env or {}),
                 platform=platform, root=root, enumerate_timeout=enumerate_timeout)


def check_plugin(plugin: Any, **scout_options: Any) -> list[str]:
    """Problems found with ``plugin`` (an empty list when there are none).

    Checks that it registers, that enumerate finishes in time with a list of DeviceInfo whose
    library is set, and that every record serializes to the wire format and reads back equal.
    """
    from gpuscout.wire import from_json, to_json

    name = scout_options.pop("name", "under_test")
    scout = isolated_scout(plugin, name, **scout_options)
    found = scout.discover(include_software=True)
    report = next(r for r in found.plugins if r.name == name)
    problems = [] if report.status == "ok" else [f"{report.status}: {report.error}"]
    devices = [*found.devices, *(d.device for d in found.dropped)]
    for d in devices:
        if not d.library:
            problems.append(f"device {d.id!r} has no library")
        wire = d.evolve(runner_env_overrides={}, nvidia_driver_major=0)
        if from_json(to_json(wire), DeviceInfo) != wire:
            problems.append(f"device {d.id!r} does not survive the wire format")
    return problems
