"""The plugin authors' test kit: an isolated Scout and a well-behavedness check."""

from __future__ import annotations

from typing import Any

from gpuscout import DeviceInfo, hookimpl
from gpuscout.testing import check_plugin, isolated_scout


class Card:
    @hookimpl
    def gpuscout_enumerate(self, context: Any) -> list[DeviceInfo]:
        free = int(context.env.get("FREE", "4"))
        return [DeviceInfo(id="0", library="Mine", total_memory=8, free_memory=free)]


class NoLibrary:
    @hookimpl
    def gpuscout_enumerate(self, context: Any) -> list[DeviceInfo]:
        return [DeviceInfo(id="0")]


def test_isolated_scout_holds_only_the_plugin_and_its_env() -> None:
    """Only the plugin under test loads, and it sees only the env it is given."""
    scout = isolated_scout(Card(), env={"FREE": "6"})
    assert [r.name for r in scout.reports if r.status != "disabled"] == ["under_test"]
    assert [d.free_memory for d in scout.discover().devices] == [6]


def test_check_plugin_passes_a_good_plugin() -> None:
    """A plugin with sane records has no problems."""
    assert check_plugin(Card()) == []


def test_check_plugin_flags_records_without_library() -> None:
    """A record without a library is named as a problem."""
    assert check_plugin(NoLibrary()) == ["device '0' has no library"]
