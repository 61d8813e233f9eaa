"""A misspelled selector word, library name or plugin name is answered with the closest known
one (issue 22, "did you mean"), and `list` does not describe again what it has just listed."""

from __future__ import annotations

import pytest

from gpuscout import DeviceInfo, Scout
from gpuscout._selection.selectors import NoMatchError, SelectionError, select_devices
from gpuscout.errors import GpuscoutError
from gpuscout.sizes import GIB
from gpuscout.testing import CliRunner, injected, scout_of

VK = DeviceInfo(id="0", library="Vulkan", filter_id="0", total_memory=8 * GIB, free_memory=4 * GIB)


def _error(selector: str) -> str:
    with pytest.raises(SelectionError) as caught:
        select_devices(scout_of(injected([VK])), [VK], [selector])
    return str(caught.value)


@pytest.mark.parametrize(
    ("typed", "meant"),
    [("bset", "best"), ("al", "all"), ("fts:1GiB", "fits:1GiB"), ("libary=vulkan", "library=vulkan")],
)
def test_a_misspelled_selector_word_is_answered_with_the_word_meant(typed: str, meant: str) -> None:
    """The error names the selector word the user most likely meant, as they wrote the rest."""
    assert f"did you mean {meant!r}?" in _error(typed)


def test_a_misspelled_library_name_is_answered_with_a_library_found() -> None:
    """`library=vulkn` matches nothing and suggests the library that was found."""
    with pytest.raises(NoMatchError, match=r"did you mean 'vulkan'\?"):
        select_devices(scout_of(injected([VK])), [VK], ["library=vulkn"])


def test_an_unrelated_selector_gets_no_suggestion() -> None:
    """A word close to nothing known is not given a guess."""
    assert "did you mean" not in _error("zzzzzz")


def test_a_misspelled_plugin_name_is_answered_with_a_known_plugin() -> None:
    """`--plugins vulkn` is refused, naming the built-in it most likely meant."""
    with pytest.raises(GpuscoutError, match=r"did you mean 'vulkan'\?"):
        Scout(plugins=["vulkn"], entry_points=False)


def test_a_misspelled_plugin_in_the_deny_list_warns_with_the_plugin_meant() -> None:
    """A deny-list name that is no plugin is a warning that names the closest one."""
    s = Scout(disable=["rocn"], entry_points=False, plugins=["vulkan"])
    assert any("did you mean 'rocm'?" in w for w in s.warnings)


def test_list_on_a_machine_with_only_a_software_device_does_not_describe_it_twice(
    gpuscout_cli: CliRunner,
) -> None:
    """The listing shows the dropped software device with its reason; the hint only says how
    to rank it."""
    soft = DeviceInfo(
        id="9", library="Vulkan", filter_id="9", software=True, total_memory=GIB, free_memory=GIB
    )
    code, _, err = gpuscout_cli(["list"], [soft], builtins=False)
    assert code == 0
    hints = [line for line in err.splitlines() if "hint:" in line]
    assert any("listed above" in h and "--include-software" in h for h in hints), err
