"""Device ids that cannot stand in a visibility list: an empty one hides every device, one with
the separator ``,`` stands for two. A plugin returning one fails; visible_env refuses one."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from gpuscout import DeviceInfo, Scout, hookimpl
from gpuscout._selection.visibility import selection_env
from gpuscout.errors import GpuscoutError
from gpuscout.testing import ScoutFactory

GOOD = DeviceInfo(id="GPU-1", library="CUDA", filter_id="GPU-1")


class Reports:
    """Reports one fixed list of devices."""

    def __init__(self, *devices: DeviceInfo) -> None:
        self.devices = list(devices)

    @hookimpl
    def gpuscout_enumerate(self, context: Any) -> Any:
        return self.devices


def status(s: Scout, name: str) -> tuple[str, str]:
    r = next(r for r in s.reports if r.name == name)
    return str(r.status), r.error


BAD = [
    # (id, filter_id, field named, words in the reason)
    ("", "", "[0].id", "empty"),
    (" ", "", "[0].id", "blank"),
    ("\t\n", "", "[0].id", "blank"),
    ("GPU-a,GPU-b", "", "[0].id", "2 devices"),
    (",", "", "[0].id", "2 devices"),
    ("GPU-a", ",GPU-b,", "[0].filter_id", "3 devices"),
    ("GPU-a", " ", "[0].filter_id", "blank"),
    ("", "GPU-a", "[0].id", "empty"),
    ("GPU-a,GPU-b", "GPU-a", "[0].id", "2 devices"),
]


@pytest.mark.parametrize("library", ["CUDA", "ROCm", "Vulkan", "Acme"])
@pytest.mark.parametrize(("id", "filter_id", "field", "why"), BAD)
def test_a_plugin_device_with_an_unusable_visibility_id_fails_that_plugin(
    gpuscout_scout: ScoutFactory, library: str, id: str, filter_id: str, field: str, why: str
) -> None:
    """A plugin's device whose id or filter_id is empty or holds ',' fails it, naming the field."""
    bad = DeviceInfo(id=id, library=library, filter_id=filter_id)
    s = gpuscout_scout(("liar", Reports(bad)), ("good", Reports(GOOD)))
    assert [d.id for d in s.discover().devices] == ["GPU-1"]
    state, error = status(s, "liar")
    assert state == "failed" and f"{field}:" in error and why in error
    assert status(s, "good") == ("ok", "")


def test_the_bad_device_is_named_by_its_index_in_the_answer(gpuscout_scout: ScoutFactory) -> None:
    """The failure points at the device of the answer that is bad, not the first one."""
    bad = DeviceInfo(id="a,b", library="CUDA")
    s = gpuscout_scout(("liar", Reports(GOOD, bad)))
    s.discover()
    assert "[1].id:" in status(s, "liar")[1]


def test_a_record_constructor_accepts_any_id() -> None:
    """DeviceInfo itself takes any str id: only the border and visible_env judge them."""
    d = DeviceInfo(id="", library="CUDA", filter_id="a,b")
    assert (d.id, d.filter_id) == ("", "a,b")


@pytest.mark.parametrize("library", ["CUDA", "ROCm", "Vulkan"])
@pytest.mark.parametrize(("id", "filter_id", "field", "why"), BAD)
def test_visible_env_refuses_a_hand_built_device_with_an_unusable_id(
    scout_with: Callable[..., Scout], library: str, id: str, filter_id: str, field: str, why: str
) -> None:
    """visible_env raises GpuscoutError naming the device, the field and why."""
    bad = DeviceInfo(id=id, library=library, filter_id=filter_id)
    with pytest.raises(GpuscoutError) as exc:
        scout_with().visible_env([GOOD, bad])
    message = str(exc.value)
    assert "device [1]" in message and library in message and repr(id) in message
    assert f"{field.removeprefix('[0].')}:" in message and why in message


def test_the_env_command_path_refuses_such_a_device(scout_with: Callable[..., Scout]) -> None:
    """selection_env, which `gpuscout env` and `exec` use, refuses it too (isolated or not)."""
    bad = DeviceInfo(id="GPU-a,GPU-b", library="CUDA")
    for isolate in (False, True):
        with pytest.raises(GpuscoutError, match="2 devices"):
            selection_env(scout_with(), [bad], isolate=isolate)


@pytest.mark.parametrize(
    "token", ["GPU-'a'", 'GPU-"a"', "$(touch /tmp/x)", "`id`", "a b", "GPU-a;rm -rf /", "\\x", "a=b"]
)
def test_an_id_full_of_shell_syntax_is_still_made_visible(
    scout_with: Callable[..., Scout], gpuscout_scout: ScoutFactory, token: str
) -> None:
    """Only the separator and an empty id are refused: quotes and $() pass and are quoted."""
    device = DeviceInfo(id=token, library="CUDA", filter_id=token)
    assert scout_with().visible_env([device]) == {"CUDA_VISIBLE_DEVICES": token}
    s = gpuscout_scout(("odd", Reports(device)))
    assert [d.id for d in s.discover().devices] == [token]
    assert status(s, "odd") == ("ok", "")
