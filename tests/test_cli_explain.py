"""`gpuscout list --explain`: why each device ranks where it does, what was dropped and why,
and what each plugin did, as text after the table and as the `"explain"` key of `--json`."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuscout import DeviceInfo, Scout, hookimpl, rank
from gpuscout.cli import main
from gpuscout.ranking import deciding_criterion
from gpuscout.sizes import GIB

# Keeps the real Vulkan loader from finding lavapipe.
NO_VULKAN_ENV = {"VK_DRIVER_FILES": "/nonexistent/gpuscout-test-icd.json"}

BIG = DeviceInfo(id="GPU-big", library="CUDA", pci_id="0000:01:00.0", total_memory=48 * GIB,
                 free_memory=40 * GIB)
SMALL = DeviceInfo(id="GPU-small", library="CUDA", pci_id="0000:02:00.0", total_memory=24 * GIB,
                   free_memory=20 * GIB)
IGPU = DeviceInfo(id="1", library="Vulkan", pci_id="0000:00:02.0", integrated=True,
                  total_memory=16 * GIB, free_memory=8 * GIB)
# The Vulkan view of BIG (same PCI id): dropped as its duplicate.
TWIN = DeviceInfo(id="0", library="Vulkan", pci_id="0000:01:00.0", total_memory=48 * GIB,
                  free_memory=40 * GIB)
MACHINE = [IGPU, TWIN, SMALL, BIG]


class Injected:
    """An in-process backend reporting the devices it is given."""

    def __init__(self, devices: Sequence[DeviceInfo]) -> None:
        self.devices = list(devices)

    @hookimpl
    def gpuscout_enumerate(self, context: Any) -> list[DeviceInfo]:
        return list(self.devices)


class Broken:
    """A backend whose enumerate raises."""

    @hookimpl
    def gpuscout_enumerate(self, context: Any) -> list[DeviceInfo]:
        raise RuntimeError("driver exploded")


def factory(devices: Sequence[DeviceInfo] = MACHINE,
            broken: object = None) -> Callable[[Any], Scout]:
    """A Scout factory for ``main``: the built-in rules, the injected devices, a failing plugin."""
    return lambda args: Scout(
        plugins=["cuda", "rocm", "metal", "vulkan", "injected", "broken"],
        extra=[("injected", Injected(devices)), ("broken", broken or Broken())],
        entry_points=False, env=NO_VULKAN_ENV, platform="linux")


def explain_json(capsys: pytest.CaptureFixture[str], *devices: DeviceInfo) -> dict[str, Any]:
    """The `"explain"` value of `gpuscout list --json --explain` over ``devices``."""
    assert main(["list", "--json", "--explain"],
                scout_factory=factory(devices or MACHINE)) == 0
    data: dict[str, Any] = json.loads(capsys.readouterr().out)["explain"]
    return data


def explain_text(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                 *devices: DeviceInfo, broken: object = None) -> list[str]:
    """The lines `gpuscout list --explain` prints over ``devices``."""
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["list", "--explain"], scout_factory=factory(devices or MACHINE, broken)) == 0
    return capsys.readouterr().out.splitlines()


def test_json_explain_names_the_criterion_that_decided_each_rank(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Free memory orders the two discrete cards, discreteness the integrated one, the last none."""
    ranking = explain_json(capsys)["ranking"]
    assert [(r["rank"], r["backend"], r["id"]) for r in ranking] == [
        (0, "CUDA", "GPU-big"), (1, "CUDA", "GPU-small"), (2, "Vulkan", "1")]
    assert [r["decided_by"] for r in ranking] == ["free_memory", "integrated", None]
    assert [r["next"] for r in ranking] == [
        {"id": "GPU-small", "backend": "CUDA"}, {"id": "1", "backend": "Vulkan"}, None]
    assert [(r["free_memory"], r["integrated"]) for r in ranking] == [
        (40 * GIB, False), (20 * GIB, False), (8 * GIB, True)]


def test_json_explain_lists_the_dropped_duplicate_and_its_survivor(
        capsys: pytest.CaptureFixture[str]) -> None:
    """The Vulkan twin of the big card is dropped as a duplicate of the CUDA device."""
    assert explain_json(capsys)["dropped"] == [
        {"id": "0", "backend": "Vulkan", "reason": "duplicate",
         "duplicate_of": {"id": "GPU-big", "backend": "CUDA"}, "hidden_by": ""}]


def test_json_explain_reports_every_plugin(capsys: pytest.CaptureFixture[str]) -> None:
    """Each plugin has its status, device count, time, error and note; the failed one its error."""
    plugins = {p["name"]: p for p in explain_json(capsys)["plugins"]}
    assert list(plugins) == ["cuda", "rocm", "metal", "vulkan", "injected", "broken"]
    assert all(list(p) == ["name", "status", "devices", "elapsed_ms", "error", "note"]
               for p in plugins.values())
    assert (plugins["injected"]["status"], plugins["injected"]["devices"]) == ("ok", 4)
    assert (plugins["broken"]["status"], plugins["broken"]["devices"]) == ("failed", 0)
    assert "driver exploded" in plugins["broken"]["error"]
    assert all(isinstance(p["elapsed_ms"], float) and p["elapsed_ms"] >= 0
               for p in plugins.values())


def test_json_explain_is_added_to_the_usual_document(capsys: pytest.CaptureFixture[str]) -> None:
    """`--explain` adds one key after the usual four; without it there is none."""
    assert main(["list", "--json", "--explain"], scout_factory=factory()) == 0
    assert list(json.loads(capsys.readouterr().out)) == [
        "devices", "dropped", "system", "plugins", "explain"]
    assert main(["list", "--json"], scout_factory=factory()) == 0
    assert "explain" not in json.loads(capsys.readouterr().out)


def test_text_explain_says_why_each_device_ranks_where_it_does(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Each ranked device names the next one and the reason, with the free memory compared."""
    lines = explain_text(capsys, monkeypatch)
    assert "  #0 CUDA GPU-big (discrete, 40.0 GiB free) before #1 CUDA GPU-small: " \
           "more free memory (40.0 GiB > 20.0 GiB)" in lines
    assert "  #1 CUDA GPU-small (discrete, 20.0 GiB free) before #2 Vulkan 1: " \
           "discrete before integrated" in lines
    assert "  #2 Vulkan 1 (integrated, 8.0 GiB free): last" in lines


def test_text_explain_follows_the_table(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The explanation comes after the table's last line (system memory)."""
    lines = explain_text(capsys, monkeypatch)
    system = next(i for i, line in enumerate(lines) if line.startswith("System memory:"))
    assert lines[system + 1].startswith("Ranking: discrete before integrated")


def test_text_explain_lists_the_dropped_device_and_every_plugin(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The dropped twin names its survivor; the failed plugin its status, count and error."""
    lines = explain_text(capsys, monkeypatch)
    assert "  Vulkan 0: duplicate of CUDA GPU-big" in lines
    broken = next(line for line in lines if line.startswith("  broken: "))
    assert broken.startswith("  broken: failed, 0 device(s), ") and " ms; error: " in broken
    assert "driver exploded" in broken
    assert any(line.startswith("  injected: ok, 4 device(s), ") for line in lines)


@pytest.mark.parametrize(("devices", "expected"), [
    ([BIG, BIG.evolve(id="0", library="ROCm", pci_id="")],
     "same kind and free memory, and library 'CUDA' sorts before 'ROCm'"),
    ([BIG, BIG.evolve(id="GPU-bis", pci_id="")],
     "same kind, free memory and library, and id 'GPU-big' sorts before 'GPU-bis'"),
    ([BIG, BIG.evolve(id="0", library="Vulkan", pci_id="", software=True)],
     "a hardware device before a software one"),
], ids=["library", "id", "software"])
def test_text_explain_names_the_tie_breakers(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        devices: list[DeviceInfo], expected: str) -> None:
    """Between devices of equal kind and free memory, library and then id decide."""
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["list", "--explain", "--include-software"],
                scout_factory=factory(devices)) == 0
    first = next(line for line in capsys.readouterr().out.splitlines()
                 if line.startswith("  #0 "))
    assert first.endswith(expected)


def test_text_explain_shows_plugin_text_escaped(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Control characters in a device id or a plugin's error cannot break a line or reach
    the terminal."""
    class Shouting:
        @hookimpl
        def gpuscout_enumerate(self, context: Any) -> list[DeviceInfo]:
            raise RuntimeError("line one\nline two \x1b[2J")

    lines = explain_text(capsys, monkeypatch, IGPU.evolve(id="a\x1b[31mb\nc"),
                         broken=Shouting())
    text = "\n".join(lines)
    assert "\x1b" not in text
    assert "  #0 Vulkan a\\x1b[31mb\\nc (integrated, 8.0 GiB free): last" in lines
    assert any("line one\\nline two \\x1b[2J" in line for line in lines)


def test_an_empty_machine_is_explained_too(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """With nothing found, the explanation says so and still reports the plugins."""
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["list", "--explain"], scout_factory=factory([])) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "  no device was ranked" in lines and "Plugins:" in lines


DEVICES = st.lists(st.builds(
    DeviceInfo, id=st.sampled_from(["0", "1", "GPU-a"]),
    library=st.sampled_from(["CUDA", "ROCm", "Vulkan"]), integrated=st.booleans(),
    software=st.booleans(), unused_reason=st.sampled_from(["", "", "compute capability 3.0"]),
    free_memory=st.sampled_from([0, GIB, 8 * GIB])), max_size=6)


def deciding_by_hand(a: DeviceInfo, b: DeviceInfo) -> tuple[str, bool] | None:
    """The rule that orders ``a`` and ``b``, written out from the ranking's documentation (the
    seed's ByFreeMemory, with software renderers and unused devices put last): its name, and
    whether ``a`` goes first. None when nothing tells them apart."""
    if a.software != b.software:
        return "software", not a.software
    if bool(a.unused_reason) != bool(b.unused_reason):
        return "unused", not a.unused_reason
    if a.integrated != b.integrated:
        return "integrated", not a.integrated
    if a.free_memory != b.free_memory:
        return "free_memory", a.free_memory > b.free_memory
    if a.library != b.library:
        return "library", a.library < b.library
    if a.id != b.id:
        return "id", a.id < b.id
    return None


@given(devices=DEVICES)
def test_the_criteria_are_the_ranking(devices: list[DeviceInfo]) -> None:
    """rank() orders every pair as the rules written out by hand do, and the explained deciding
    criterion of each neighbouring pair is the rule that decided it."""
    ranked = rank(devices)
    assert sorted(ranked, key=repr) == sorted(devices, key=repr)
    for device, following in itertools.pairwise(ranked):
        rule = deciding_by_hand(device, following)
        assert rule is None or rule[1], (rule, device, following)
        decided = deciding_criterion(device, following)
        assert (decided.name if decided else None) == (rule[0] if rule else None)


def test_the_ranking_of_a_written_out_machine() -> None:
    """A discrete GPU with the most free memory first, then by free memory, integrated after
    discrete, unused after those, llvmpipe last."""
    big = DeviceInfo(id="0", library="CUDA", free_memory=24 * GIB)
    small = DeviceInfo(id="1", library="CUDA", free_memory=8 * GIB)
    twin = DeviceInfo(id="0", library="ROCm", free_memory=8 * GIB)
    apu = DeviceInfo(id="0", library="Vulkan", integrated=True, free_memory=32 * GIB)
    old = DeviceInfo(id="2", library="CUDA", free_memory=48 * GIB, unused_reason="too old")
    cpu = DeviceInfo(id="1", library="Vulkan", software=True, free_memory=64 * GIB)
    assert rank([cpu, old, apu, twin, small, big]) == [big, small, twin, apu, old, cpu]
