"""gpuscout.plugin, the plugin author's surface: the guard written once, the API version."""

from __future__ import annotations

import types
from typing import Any

import pytest

import gpuscout.plugin as surface
from gpuscout import Scout
from gpuscout.plugin import API_VERSION, DeviceInfo, EnvEntry, devices_of, for_library, hookimpl

ACME = DeviceInfo(id="a0", library="Acme", total_memory=1 << 30)
OTHER = DeviceInfo(id="o0", library="Other")


def scout_with(*plugins: tuple[str, Any]) -> Scout:
    return Scout(plugins=[n for n, _ in plugins], extra=list(plugins), entry_points=False, env={})


def test_everything_the_surface_names_is_importable() -> None:
    """Every name in gpuscout.plugin.__all__ resolves, and the API version is a whole number >= 1."""
    for name in surface.__all__:
        assert getattr(surface, name) is not None, name
    assert isinstance(API_VERSION, int) and API_VERSION >= 1


def test_for_library_calls_the_hook_only_for_its_own_devices() -> None:
    """A hook guarded by for_library runs only for its library's devices and answers None for others."""
    calls: list[str] = []

    @for_library("Acme")
    def gpuscout_minimum_memory(device: DeviceInfo) -> int | None:
        calls.append(device.id)
        return 123

    assert gpuscout_minimum_memory(ACME) == 123
    assert gpuscout_minimum_memory(OTHER) is None
    assert gpuscout_minimum_memory(device=ACME) == 123
    assert calls == ["a0", "a0"]


def test_a_guarded_hook_answers_through_a_scout() -> None:
    """pluggy sees the hook's own parameters through the guard (it unwraps the function)."""

    class Acme:
        @staticmethod
        @for_library("Acme")
        def gpuscout_minimum_memory(device: DeviceInfo) -> int | None:
            return 5

        @staticmethod
        @for_library("Acme", tryfirst=True)
        def gpuscout_flash_attention(device: DeviceInfo) -> bool | None:
            return False

    scout = scout_with(("acme", Acme))
    assert scout.minimum_memory(ACME) == 5
    assert scout.minimum_memory(OTHER) == 457 * 1024 * 1024
    assert scout.flash_attention_supported([ACME]) is False
    report = next(r for r in scout.reports if r.name == "acme")
    assert report.status == "ok"
    assert report.hooks == ["gpuscout_flash_attention", "gpuscout_minimum_memory"]


def test_for_library_on_refresh_skips_lists_without_its_devices() -> None:
    """A guarded refresh hook runs only on a list that holds one of its library's devices."""

    @for_library("Acme")
    def gpuscout_refresh(devices: list[DeviceInfo], context: Any) -> list[DeviceInfo] | None:
        return [d for d in devices if d.library == "Acme"]

    assert gpuscout_refresh([OTHER], None) is None
    assert gpuscout_refresh([OTHER, ACME], None) == [ACME]


def test_for_library_refuses_hooks_that_see_a_whole_selection() -> None:
    """for_library refuses a hook it cannot guard, a first parameter not named device, and no library."""
    with pytest.raises(TypeError, match="cannot guard gpuscout_visible_env"):

        @for_library("Acme")
        def gpuscout_visible_env(selection: Any, context: Any) -> None:
            return None

    with pytest.raises(TypeError, match="first parameter must be 'device'"):

        @for_library("Acme")
        def gpuscout_flash_attention(card: DeviceInfo) -> bool:
            return True

    with pytest.raises(TypeError, match="needs a library name"):
        for_library("")


def test_devices_of_gives_the_positions_env_entries_need() -> None:
    """devices_of gives each of a library's devices with its position in the selection."""
    selection = [OTHER, ACME, OTHER, ACME]
    assert devices_of(selection, "Acme") == [(1, ACME), (3, ACME)]
    assert [EnvEntry(i, "ACME_VISIBLE", d.id) for i, d in devices_of(selection, "Acme")] == [
        EnvEntry(1, "ACME_VISIBLE", "a0"),
        EnvEntry(3, "ACME_VISIBLE", "a0"),
    ]


def _plugin(version: object) -> types.ModuleType:
    module = types.ModuleType("acme_backend")

    @hookimpl
    def gpuscout_enumerate(context: Any) -> list[DeviceInfo]:
        return [ACME]

    module.gpuscout_enumerate = gpuscout_enumerate  # type: ignore[attr-defined]
    module.GPUSCOUT_API_VERSION = version  # type: ignore[attr-defined]
    return module


@pytest.mark.parametrize("version", [1, API_VERSION])
def test_a_plugin_for_this_api_version_loads(version: int) -> None:
    """A plugin declaring API version 1 or the current one loads and finds its devices."""
    found = scout_with(("acme", _plugin(version))).discover()
    assert [d.id for d in found.devices] == ["a0"]


def test_a_plugin_for_a_later_api_version_is_refused_with_a_clear_report() -> None:
    """A plugin for a later API version is refused, its report naming both versions."""
    found = scout_with(("acme", _plugin(API_VERSION + 1))).discover()
    report = found.report("acme")
    assert found.devices == []
    assert report.status == "failed"
    assert f"written for gpuscout hook API {API_VERSION + 1}" in report.error
    assert f"this gpuscout speaks API {API_VERSION}" in report.error


@pytest.mark.parametrize("version", ["1", 1.0, 0, -3, True])
def test_a_malformed_api_version_is_refused(version: object) -> None:
    """An API version that is not a whole number of at least 1 is refused."""
    report = scout_with(("acme", _plugin(version))).discover().plugins[-1]
    assert report.status == "failed"
    assert "GPUSCOUT_API_VERSION must be a whole number of at least 1" in report.error


@pytest.mark.parametrize("name", ["cuda", "rocm", "metal", "vulkan"])
def test_built_in_plugins_declare_the_api_they_were_written_for(name: str) -> None:
    """Each built-in plugin declares the current API version and passes its check."""
    import importlib

    module = importlib.import_module(f"gpuscout.plugins.{name}")
    assert module.GPUSCOUT_API_VERSION == API_VERSION
    assert surface.check_api_version(module) == ""


def test_a_relative_path_is_refused_with_a_note_not_read_under_the_root(tmp_path: Any) -> None:
    """``inv.json`` would otherwise silently mean ``<root>/inv.json``."""
    (tmp_path / "inv.json").write_text("{}")
    context = surface.Context(env={}, platform="linux", root=str(tmp_path))
    assert context.read_text("/inv.json") == "{}"
    assert context.read_text("inv.json") is None
    assert context.list_dir("sys") is None
    assert context.notes == [
        f"inv.json: not an absolute path (paths are read under the root {str(tmp_path)!r}); not read",
        f"sys: not an absolute path (paths are read under the root {str(tmp_path)!r}); not listed",
    ]


def test_a_plugin_refuses_a_selection_no_child_can_see() -> None:
    """SelectionRefused from gpuscout_visible_env reaches the caller with the plugin's name;
    the plugin is not failed for it, and the CLI prints it as one line, exit 2."""
    from gpuscout.cli import main
    from gpuscout.plugin import SelectionRefused

    class Picky:
        @hookimpl
        def gpuscout_enumerate(self, context: Any) -> list[DeviceInfo]:
            return [ACME, DeviceInfo(id="a1", library="Acme")]

        @hookimpl
        def gpuscout_visible_env(self, selection: Any, context: Any) -> list[EnvEntry]:
            if len(selection) > 1:
                raise SelectionRefused("one Acme card per child")
            return [EnvEntry(0, "ACME_VISIBLE", selection[0].id)]

    scout = scout_with(("picky", Picky()))
    devices = scout.discover().devices
    with pytest.raises(SelectionRefused, match=r"^picky: one Acme card per child$"):
        scout.visible_env(devices)
    assert scout.visible_env(devices[:1]) == {"ACME_VISIBLE": "a0"}
    assert next(r for r in scout.reports if r.name == "picky").status == "ok"
    assert main(["env", "all"], scout_factory=lambda args: scout) == 2
