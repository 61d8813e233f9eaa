"""The zoo of recorded machines (tests/machines/<name>/): each directory is a recording
(docs/recordings.md) and an ``expected.json`` of what gpuscout must find on it, written from the
facts of that machine (its README.md says where each value comes from), never copied from
gpuscout's output.

Every machine is checked twice: through the command line in this process (``--replay DIR list
--json``, ``env best --format json``, ``list --explain``) and through the library
(``Scout(replay=DIR).discover()`` and ``visible_env``). A replay asks no driver, loader or child
process, so the results are the same on any box. The schema of ``expected.json`` is
tests/machines/README.md's.
"""

from __future__ import annotations

import functools
import json
import pathlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
import pytest

from gpuscout import DeviceInfo, Discovery, Scout
from gpuscout._records.encode import unstructure
from gpuscout.cli import main

MACHINES = pathlib.Path(__file__).parent / "machines"
#: Every folder of the zoo: a machine is a folder with a recording or an expectation.
MACHINE_DIRS = sorted(p for p in MACHINES.iterdir() if p.is_dir()) if MACHINES.is_dir() else []
#: The machines that say what gpuscout must find on them.
EXPECTED = [p for p in MACHINE_DIRS if (p / "expected.json").is_file()]
#: Wire key -> DeviceInfo field, where they differ (the keys of ``list --json``).
WIRE_FIELDS = {
    "backend": "library",
    "integration": "integrated",
    "ComputeMajor": "compute_major",
    "ComputeMinor": "compute_minor",
    "LibraryPath": "library_path",
}
#: What a dropped entry of expected.json says about the drop itself, not about its device.
DROP_KEYS = ("reason_contains", "duplicate_of")
#: The keys expected.json may hold, and those it must.
TOP_KEYS = {"devices", "dropped", "system", "notes", "status", "env_best", "explain_contains"}
REQUIRED_KEYS = {"devices", "dropped", "system", "env_best"}
#: Discovery variables of the process that the command line would read: a replay must not.
PROCESS_VARIABLES = ("GPUSCOUT_PLUGINS", "GPUSCOUT_DISABLE_PLUGINS")


def _ids(paths: Sequence[pathlib.Path]) -> list[str]:
    return [p.name for p in paths]


@pytest.fixture(autouse=True)
def _no_process_plugin_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keeps the developer's own plugin choice out of the replay."""
    for name in PROCESS_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def _expected(machine: pathlib.Path) -> dict[str, Any]:
    data = json.loads((machine / "expected.json").read_text(encoding="utf-8"))
    assert isinstance(data, dict), f"{machine.name}/expected.json: not an object"
    unknown = set(data) - TOP_KEYS
    assert not unknown, f"{machine.name}/expected.json: unknown keys {sorted(unknown)}"
    missing = REQUIRED_KEYS - set(data)
    assert not missing, f"{machine.name}/expected.json: missing keys {sorted(missing)}"
    return data


_FIELDS = {f.name: f for f in attrs.fields(DeviceInfo)}


def _wire_default(key: str) -> Any:
    """What an omitted wire key means (``list --json`` leaves out fields at their default);
    KeyError for a key that names no field."""
    field = _FIELDS.get(WIRE_FIELDS.get(key, key))
    if field is None:
        return KeyError
    factory = getattr(field.default, "factory", None)  # an attrs.Factory
    default = factory() if factory is not None else field.default
    return (list(default) or None) if isinstance(default, tuple) else default


def _record_value(device: DeviceInfo, key: str) -> Any:
    value = getattr(device, WIRE_FIELDS.get(key, key), KeyError)
    if attrs.has(type(value)):
        return unstructure(value)  # a nested record (pcie_link) by its wire keys
    return (unstructure(list(value)) or None) if isinstance(value, tuple) else value


def _wire_value(device: Mapping[str, Any], key: str) -> Any:
    return device[key] if key in device else _wire_default(key)


def _device_differences(want: Mapping[str, Any], got: Callable[[str], Any]) -> list[str]:
    out = []
    for key, value in want.items():
        found = got(key)
        if found is KeyError:
            out.append(f"{key}: no such device field")
        elif found != value:
            out.append(f"{key}: {found!r} != expected {value!r}")
    return out


def _check_devices(
    want: Sequence[Mapping[str, Any]], got: Sequence[Any], value: Callable[[Any, str], Any]
) -> None:
    shown = [f"{value(d, 'backend')} {value(d, 'id')}" for d in got]
    assert len(got) == len(want), f"{len(got)} devices ranked ({shown}), expected {len(want)}"
    for rank, (expected, device) in enumerate(zip(want, got, strict=True)):
        problems = _device_differences(expected, functools.partial(value, device))
        assert not problems, f"device at rank {rank} ({shown[rank]}): {'; '.join(problems)}"


def _drop_matches(
    want: Mapping[str, Any], device: Callable[[str], Any], reason: str, duplicate_of: Mapping[str, str] | None
) -> bool:
    if "reason_contains" in want and want["reason_contains"] not in reason:
        return False
    if "duplicate_of" in want:
        expected = want["duplicate_of"]
        if expected is None:
            if duplicate_of is not None:
                return False
        elif duplicate_of is None or any(duplicate_of.get(k) != v for k, v in expected.items()):
            return False
    return not _device_differences({k: v for k, v in want.items() if k not in DROP_KEYS}, device)


def _assignment(want: Sequence[Mapping[str, Any]], fits: Callable[[int, int], bool], count: int) -> bool:
    """Whether each expected entry can be given its own actual entry that it fits."""
    taken: list[int | None] = [None] * count

    def place(i: int, seen: set[int]) -> bool:
        for j in range(count):
            if j in seen or not fits(i, j):
                continue
            seen.add(j)
            if taken[j] is None or place(taken[j], seen):  # type: ignore[arg-type]
                taken[j] = i
                return True
        return False

    return all(place(i, set()) for i in range(len(want)))


def _check_dropped(
    want: Sequence[Mapping[str, Any]],
    got: Sequence[Any],
    view: Callable[[Any], tuple[Callable[[str], Any], str, Mapping[str, str] | None]],
) -> None:
    views = [view(d) for d in got]
    shown = [f"{v[0]('backend')} {v[0]('id')}: {v[1]}" for v in views]
    assert len(got) == len(want), f"{len(got)} devices dropped ({shown}), expected {len(want)}"
    ok = _assignment(want, lambda i, j: _drop_matches(want[i], *views[j]), len(views))
    assert ok, f"the dropped devices {shown} do not match the expected {list(want)}"


def _check_common(
    expected: Mapping[str, Any],
    system: Mapping[str, Any],
    notes: Mapping[str, str],
    status: Mapping[str, str],
) -> None:
    for key, value in expected["system"].items():
        got = list(system[key]) if isinstance(system[key], tuple) else system[key]  # notes
        assert got == value, f"system {key}: {got} != expected {value}"
    for plugin, parts in expected.get("notes", {}).items():
        assert plugin in notes, f"no report of plugin {plugin}"
        for part in parts:
            assert part in notes[plugin], f"{plugin} note {notes[plugin]!r} lacks {part!r}"
    for plugin, value in expected.get("status", {}).items():
        assert status.get(plugin) == value, f"{plugin} status {status.get(plugin)!r} != {value!r}"


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(list(argv))
    return code, capsys.readouterr().out


def _wire_drop(entry: Mapping[str, Any]) -> tuple[Callable[[str], Any], str, Mapping[str, str] | None]:
    device = entry["device"]
    return (lambda key: _wire_value(device, key)), entry["reason"], entry.get("duplicate_of")


def _record_drop(drop: Any) -> tuple[Callable[[str], Any], str, Mapping[str, str] | None]:
    of = drop.duplicate_of
    return (
        (lambda key: _record_value(drop.device, key)),
        drop.reason,
        None if of is None else {"id": of.id, "backend": of.library},
    )


@pytest.mark.parametrize("machine", EXPECTED, ids=_ids(EXPECTED))
def test_machine_lists_what_it_must(machine: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`list --json` on the recording ranks, drops and reports what expected.json says."""
    expected = _expected(machine)
    code, out = _cli(capsys, "--replay", str(machine), "list", "--json")
    assert code == 0
    found = json.loads(out)
    _check_devices(expected["devices"], found["devices"], _wire_value)
    _check_dropped(expected["dropped"], found["dropped"], _wire_drop)
    _check_common(
        expected,
        found["system"],
        {p["name"]: p["note"] for p in found["plugins"]},
        {p["name"]: p["status"] for p in found["plugins"]},
    )


@pytest.mark.parametrize("machine", EXPECTED, ids=_ids(EXPECTED))
def test_machine_env_best_names_the_expected_device(
    machine: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`env best --format json` prints exactly env_best, or exits 1 when no device is found."""
    expected = _expected(machine)["env_best"]
    code, out = _cli(capsys, "--replay", str(machine), "env", "best", "--format", "json")
    if expected is None:
        assert code == 1, f"exit {code}, expected 1 (no device); printed {out!r}"
        assert out == ""
    else:
        assert code == 0
        assert json.loads(out) == expected


def _explaining(machines: Sequence[pathlib.Path]) -> list[pathlib.Path]:
    found = []
    for machine in machines:
        try:
            data = json.loads((machine / "expected.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            found.append(machine)  # let the test say what is wrong with it
            continue
        if isinstance(data, dict) and "explain_contains" in data:
            found.append(machine)
    return found


EXPLAINING = _explaining(EXPECTED)


@pytest.mark.parametrize("machine", EXPLAINING, ids=_ids(EXPLAINING))
def test_machine_explains_itself(machine: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`list --explain` says what explain_contains names."""
    code, out = _cli(capsys, "--replay", str(machine), "list", "--explain")
    assert code == 0
    for part in _expected(machine).get("explain_contains", []):
        assert part in out, f"--explain lacks {part!r}:\n{out}"


def _discover(machine: pathlib.Path) -> tuple[Scout, Discovery]:
    scout = Scout(replay=machine)
    return scout, scout.discover()


@pytest.mark.parametrize("machine", EXPECTED, ids=_ids(EXPECTED))
def test_machine_discovers_the_same_through_the_library(machine: pathlib.Path) -> None:
    """Scout(replay=DIR).discover() finds the same records as the command line."""
    expected = _expected(machine)
    _, found = _discover(machine)
    _check_devices(expected["devices"], found.devices, _record_value)
    _check_dropped(expected["dropped"], found.dropped, _record_drop)
    _check_common(
        expected,
        attrs.asdict(found.system),
        {r.name: r.note for r in found.plugins},
        {r.name: str(r.status) for r in found.plugins},
    )


@pytest.mark.parametrize("machine", EXPECTED, ids=_ids(EXPECTED))
def test_machine_visible_env_of_the_best_device_is_env_best(machine: pathlib.Path) -> None:
    """Scout.visible_env of the first ranked device equals env_best (no device: nothing)."""
    expected = _expected(machine)["env_best"]
    scout, found = _discover(machine)
    if expected is None:
        assert found.devices == []
        assert scout.visible_env(found.devices[:1]) == {}
    else:
        assert scout.visible_env(found.devices[:1]) == expected


@pytest.mark.parametrize("machine", MACHINE_DIRS, ids=_ids(MACHINE_DIRS))
def test_machine_is_a_documented_recording(machine: pathlib.Path) -> None:
    """Each machine has a format-1 recording.json, an expected.json and a README naming its
    sources."""
    files = {p.name for p in machine.iterdir()}
    assert {"recording.json", "expected.json", "README.md"} <= files, sorted(files)
    manifest = json.loads((machine / "recording.json").read_text(encoding="utf-8"))
    assert manifest["format"] == 1
    assert isinstance(manifest.get("platform"), str) and manifest["platform"]
    readme = (machine / "README.md").read_text(encoding="utf-8")
    lines = readme.splitlines()
    heading = next(
        (i for i, line in enumerate(lines) if line.startswith("#") and "source" in line.lower()), None
    )
    assert heading is not None, "README.md has no heading naming its sources ('## Sources')"
    body = "\n".join(lines[heading + 1 :]).split("\n#", 1)[0]
    assert len(body.strip()) > 40, "the sources section of README.md is empty"


def test_the_zoo_is_not_empty() -> None:
    """tests/machines/ holds machines with expectations."""
    assert len(EXPECTED) >= 8
