"""Rules of the selection environment (gpuscout._selection.visibility) found by mutmut's survivors
(tests/MUTATION.md, "Automatic mutants (mutmut)", second round)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pytest

from gpuscout import DeviceInfo
from gpuscout._selection.visibility import (
    EnvFormatError,
    SelectionEnv,
    check_env,
    isolation_env,
    render,
    selection_env,
    visible_env,
)
from gpuscout.errors import GpuscoutError

GPU0 = DeviceInfo(id="GPU-0", library="CUDA")
GPU1 = DeviceInfo(id="GPU-1", library="CUDA")


class Host:
    """A plugin host whose plugins answer ``gpuscout_visible_env`` with fixed entries."""

    def __init__(self, *answers: tuple[str, list[tuple[int, str, str]]]) -> None:
        self.answers = answers
        self.failures: list[tuple[str, str, str]] = []

    def each(self, hook: str, **kwargs: Any) -> Iterator[tuple[str, list[tuple[int, str, str]]]]:
        assert hook == "gpuscout_visible_env"
        yield from self.answers

    def record_failure(self, plugin: str, hook: str, message: str) -> None:
        self.failures.append((plugin, hook, message))


class Log:
    def __init__(self) -> None:
        self.warnings: list[tuple[str, dict[str, Any]]] = []

    def warning(self, event: str, **kw: Any) -> None:
        self.warnings.append((event, kw))


def test_an_entry_past_the_selection_is_that_plugins_failure_of_its_visible_env_hook() -> None:
    """A visibility entry naming a position past the selection is recorded as the answering
    plugin's failure of ``gpuscout_visible_env``, with the entry, and its other entries are dropped.
    Kills gpuscout._selection.visibility.x_visible_env__mutmut_20, _25 and _26 (the hook's name)."""
    host = Host(("bad", [(0, "A", "x"), (2, "A", "y")]), ("good", [(1, "B", "z")]))
    assert visible_env(host, [GPU0, GPU1], Log()) == {"B": "z"}  # type: ignore[arg-type]
    assert host.failures == [("bad", "gpuscout_visible_env", "entry index out of range: (2, 'A', 'y')")]


def test_a_device_override_that_changes_a_plugins_value_is_logged_with_both() -> None:
    """A device's runner_env_overrides replace a plugin's value, and a changed value is logged as
    ``env.override_conflict`` with the variable, both values and the device.
    Kills gpuscout._selection.visibility.x_visible_env__mutmut_52..62 (the warning's fields)."""
    device = DeviceInfo(id="GPU-0", library="CUDA", runner_env_overrides={"A": "mine"})
    log = Log()
    assert visible_env(Host(("p", [(0, "A", "theirs")])), [device], log) == {"A": "mine"}  # type: ignore[arg-type]
    assert log.warnings == [
        (
            "env.override_conflict",
            {"key": "A", "existing": "theirs", "new": "mine", "library": "CUDA", "id": "GPU-0"},
        )
    ]


@pytest.mark.parametrize(("name", "value"), [("", "v"), ("A=B", "v"), ("A\x00", "v"), ("A", "v\x00")])
def test_a_variable_no_environment_can_hold_is_refused(name: str, value: str) -> None:
    """An empty name, a name with '=' or a NUL, or a value with a NUL is refused by visible_env
    (each on its own), with the variable and the reason.
    Kills gpuscout._selection.visibility.x_visible_env__mutmut_66..79 (the test and its message)."""
    with pytest.raises(GpuscoutError) as caught:
        visible_env(Host(("p", [(0, name, value)])), [GPU0], Log())  # type: ignore[arg-type]
    assert str(caught.value) == (
        f"visible_env: variable {name!r} = {value!r} cannot be put into an environment (an empty "
        "name, '=' in the name, or a NUL character)"
    )


class Source:
    """A Scout stand-in: a fixed visible environment and fixed isolation answers."""

    def __init__(self, env: dict[str, str], isolate: list[tuple[str, dict[str, str]]]) -> None:
        self.env = env
        self.isolate = isolate

    def visible_env(self, devices: Sequence[DeviceInfo]) -> dict[str, str]:
        return dict(self.env)

    def isolate_env(
        self, devices: Sequence[DeviceInfo], env: Mapping[str, str]
    ) -> list[tuple[str, dict[str, str]]]:
        return self.isolate


def test_isolation_keeps_the_selections_values_and_says_which_backend_stays_visible() -> None:
    """A plugin's hide value never overwrites a variable the selection sets to something else (a
    note says that backend stays visible) and the plugin's other values still apply; a hide value
    equal to the selection's is no conflict.
    Kills gpuscout._selection.visibility.x_isolation_env__mutmut_10, _11, _12 and _17."""
    source = Source(
        {"CUDA_VISIBLE_DEVICES": "0", "HIP_VISIBLE_DEVICES": "1"},
        [("rocm", {"CUDA_VISIBLE_DEVICES": "-1", "ROCR_VISIBLE_DEVICES": "-1", "HIP_VISIBLE_DEVICES": "1"})],
    )
    assert isolation_env(source, [GPU0], source.env) == SelectionEnv(
        {"CUDA_VISIBLE_DEVICES": "0", "HIP_VISIBLE_DEVICES": "1", "ROCR_VISIBLE_DEVICES": "-1"},
        ("cannot hide rocm devices: CUDA_VISIBLE_DEVICES already carries '0' for the selection",),
    )


def test_selection_env_isolates_only_when_asked() -> None:
    """selection_env is the visible environment alone unless isolation is asked for.
    Kills gpuscout._selection.visibility.x_selection_env__mutmut_1 (isolate by default)."""
    source = Source({"CUDA_VISIBLE_DEVICES": "0"}, [("rocm", {"ROCR_VISIBLE_DEVICES": "-1"})])
    assert selection_env(source, [GPU0]) == SelectionEnv({"CUDA_VISIBLE_DEVICES": "0"})
    assert selection_env(source, [GPU0], isolate=True).env["ROCR_VISIBLE_DEVICES"] == "-1"


def test_a_bad_variable_name_is_refused_with_what_a_name_may_hold() -> None:
    """A name that is not a shell variable name is an EnvFormatError saying what a name may hold.
    Kills gpuscout._selection.visibility.x_check_env__mutmut_6 and _7 (the message)."""
    with pytest.raises(EnvFormatError) as caught:
        check_env({"1A": "v"})
    assert str(caught.value) == (
        "not a valid environment variable name: '1A' (expected ASCII letters, digits and '_', "
        "not starting with a digit)"
    )


def test_a_value_that_is_not_text_is_refused_with_its_type() -> None:
    """A value that is not a str is an EnvFormatError naming the variable and the value's type.
    Kills gpuscout._selection.visibility.x_check_env__mutmut_9 and _10."""
    with pytest.raises(EnvFormatError) as caught:
        check_env({"A": 1})  # type: ignore[dict-item]
    assert str(caught.value) == "the value of variable 'A' is int, expected str"


def test_json_output_is_one_object_indented_by_two() -> None:
    """``gpuscout env --format json`` writes one object, two spaces of indent, and a newline.
    Kills gpuscout._selection.visibility.x_render__mutmut_7, _9 and _11 (the indent)."""
    assert render({"A": "1", "B": "x y"}, "json") == '{\n  "A": "1",\n  "B": "x y"\n}\n'
