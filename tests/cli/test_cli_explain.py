"""`gpuscout list --explain`: why each device ranks where it does, what was dropped and why,
and what each plugin did, as text after the table and as the `"explain"` key of `--json`."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuscout import DeviceInfo, hookimpl, rank
from gpuscout._discovery.ranking import deciding_criterion
from gpuscout.sizes import GIB
from gpuscout.testing import CliRun, CliRunner

# Keeps the real Vulkan loader from finding lavapipe.
NO_VULKAN_ENV = {"VK_DRIVER_FILES": "/nonexistent/gpuscout-test-icd.json"}

BIG = DeviceInfo(
    id="GPU-big", library="CUDA", pci_id="0000:01:00.0", total_memory=48 * GIB, free_memory=40 * GIB
)
SMALL = DeviceInfo(
    id="GPU-small", library="CUDA", pci_id="0000:02:00.0", total_memory=24 * GIB, free_memory=20 * GIB
)
IGPU = DeviceInfo(
    id="1",
    library="Vulkan",
    pci_id="0000:00:02.0",
    integrated=True,
    total_memory=16 * GIB,
    free_memory=8 * GIB,
)
# The Vulkan view of BIG (same PCI id): dropped as its duplicate.
TWIN = DeviceInfo(
    id="0", library="Vulkan", pci_id="0000:01:00.0", total_memory=48 * GIB, free_memory=40 * GIB
)
MACHINE = [IGPU, TWIN, SMALL, BIG]


class Broken:
    """A backend whose enumerate raises."""

    @hookimpl
    def gpuscout_enumerate(self, context: Any) -> list[DeviceInfo]:
        raise RuntimeError("driver exploded")


def explain(
    cli: CliRunner, argv: list[str], devices: Sequence[DeviceInfo] = MACHINE, broken: object = None
) -> CliRun:
    """`gpuscout ARGV` over the built-in rules, ``devices`` and a failing plugin; exit 0."""
    run = cli(argv, devices, plugins=[("broken", broken or Broken())], env=NO_VULKAN_ENV)
    assert run.code == 0, run.err
    return run


def explain_json(cli: CliRunner, *devices: DeviceInfo) -> dict[str, Any]:
    """The `"explain"` value of `gpuscout list --json --explain` over ``devices``."""
    data: dict[str, Any] = explain(cli, ["list", "--json", "--explain"], devices or MACHINE).json()
    return data["explain"]  # type: ignore[no-any-return]


def explain_text(
    cli: CliRunner, monkeypatch: pytest.MonkeyPatch, *devices: DeviceInfo, broken: object = None
) -> list[str]:
    """The lines `gpuscout list --explain` prints over ``devices``."""
    monkeypatch.setenv("COLUMNS", "200")
    return explain(cli, ["list", "--explain"], devices or MACHINE, broken).out.splitlines()


def test_json_explain_names_the_criterion_that_decided_each_rank(gpuscout_cli: CliRunner) -> None:
    """Free memory orders the two discrete cards, discreteness the integrated one, the last none."""
    ranking = explain_json(gpuscout_cli)["ranking"]
    assert [(r["rank"], r["backend"], r["id"]) for r in ranking] == [
        (0, "CUDA", "GPU-big"),
        (1, "CUDA", "GPU-small"),
        (2, "Vulkan", "1"),
    ]
    assert [r["decided_by"] for r in ranking] == ["free_memory", "integrated", None]
    assert [r["next"] for r in ranking] == [
        {"id": "GPU-small", "backend": "CUDA"},
        {"id": "1", "backend": "Vulkan"},
        None,
    ]
    assert [(r["free_memory"], r["integrated"]) for r in ranking] == [
        (40 * GIB, False),
        (20 * GIB, False),
        (8 * GIB, True),
    ]


def test_json_explain_lists_the_dropped_duplicate_and_its_survivor(gpuscout_cli: CliRunner) -> None:
    """The Vulkan twin of the big card is dropped as a duplicate of the CUDA device."""
    assert explain_json(gpuscout_cli)["dropped"] == [
        {
            "id": "0",
            "backend": "Vulkan",
            "reason": "duplicate",
            "duplicate_of": {"id": "GPU-big", "backend": "CUDA"},
            "hidden_by": "",
        }
    ]


def test_json_explain_reports_every_plugin(gpuscout_cli: CliRunner) -> None:
    """Each plugin has its status, device count, time, error and note; the failed one its error."""
    plugins = {p["name"]: p for p in explain_json(gpuscout_cli)["plugins"]}
    assert list(plugins) == ["cuda", "rocm", "metal", "vulkan", "injected", "broken"]
    assert all(
        list(p) == ["name", "status", "devices", "elapsed_ms", "error", "note"] for p in plugins.values()
    )
    assert (plugins["injected"]["status"], plugins["injected"]["devices"]) == ("ok", 4)
    assert (plugins["broken"]["status"], plugins["broken"]["devices"]) == ("failed", 0)
    assert "driver exploded" in plugins["broken"]["error"]
    assert all(isinstance(p["elapsed_ms"], float) and p["elapsed_ms"] >= 0 for p in plugins.values())


def test_json_explain_is_added_to_the_usual_document(gpuscout_cli: CliRunner) -> None:
    """`--explain` adds one key after the usual four; without it there is none."""
    assert list(explain(gpuscout_cli, ["list", "--json", "--explain"]).json()) == [
        "devices",
        "dropped",
        "system",
        "plugins",
        "explain",
    ]
    assert "explain" not in explain(gpuscout_cli, ["list", "--json"]).json()


def test_text_explain_says_why_each_device_ranks_where_it_does(
    gpuscout_cli: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each ranked device names the next one and the reason, with the free memory compared; a
    device is named by the selector it answers to (the table's selector column: the rank and the
    runtime's own number differ here), then its library and id."""
    lines = explain_text(gpuscout_cli, monkeypatch)
    assert (
        "  #0 cuda:1 (CUDA GPU-big, discrete, 40.0 GiB free) before #1 cuda:0 (CUDA GPU-small): "
        "more free memory (40.0 GiB > 20.0 GiB)" in lines
    )
    assert (
        "  #1 cuda:0 (CUDA GPU-small, discrete, 20.0 GiB free) before #2 vulkan:0 (Vulkan 1): "
        "discrete before integrated" in lines
    )
    assert "  #2 vulkan:0 (Vulkan 1, integrated, 8.0 GiB free): last" in lines


def test_text_explain_follows_the_table(gpuscout_cli: CliRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    """The explanation comes after the table's last line (system memory)."""
    lines = explain_text(gpuscout_cli, monkeypatch)
    system = next(i for i, line in enumerate(lines) if line.startswith("System memory:"))
    assert lines[system + 1].startswith("Ranking: discrete before integrated")


def test_text_explain_lists_the_dropped_device_and_every_plugin(
    gpuscout_cli: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The dropped twin names its survivor; the failed plugin its status, count and error."""
    lines = explain_text(gpuscout_cli, monkeypatch)
    assert "  Vulkan 0: duplicate of CUDA GPU-big" in lines
    broken = next(line for line in lines if line.startswith("  broken: "))
    assert broken.startswith("  broken: failed, 0 devices, ") and " ms; error: " in broken
    assert "driver exploded" in broken
    assert any(line.startswith("  injected: ok, 4 devices, ") for line in lines)


@pytest.mark.parametrize(
    ("devices", "expected"),
    [
        (
            [BIG, BIG.evolve(id="0", library="ROCm", pci_id="")],
            "same kind and free memory, and library 'CUDA' sorts before 'ROCm'",
        ),
        (
            [BIG, BIG.evolve(id="GPU-bis", pci_id="")],
            "same kind, free memory and library, and id 'GPU-big' sorts before 'GPU-bis'",
        ),
        (
            [BIG, BIG.evolve(id="0", library="Vulkan", pci_id="", software=True)],
            "a hardware device before a software one",
        ),
    ],
    ids=["library", "id", "software"],
)
def test_text_explain_names_the_tie_breakers(
    gpuscout_cli: CliRunner, monkeypatch: pytest.MonkeyPatch, devices: list[DeviceInfo], expected: str
) -> None:
    """Between devices of equal kind and free memory, library and then id decide."""
    monkeypatch.setenv("COLUMNS", "200")
    run = explain(gpuscout_cli, ["list", "--explain", "--include-software"], devices)
    first = next(line for line in run.out.splitlines() if line.startswith("  #0 "))
    assert first.endswith(expected)


def test_text_explain_shows_plugin_text_escaped(
    gpuscout_cli: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Control characters in a device id or a plugin's error cannot break a line or reach
    the terminal."""

    class Shouting:
        @hookimpl
        def gpuscout_enumerate(self, context: Any) -> list[DeviceInfo]:
            raise RuntimeError("line one\nline two \x1b[2J")

    lines = explain_text(gpuscout_cli, monkeypatch, IGPU.evolve(id="a\x1b[31mb\nc"), broken=Shouting())
    text = "\n".join(lines)
    assert "\x1b" not in text
    assert "  #0 vulkan:0 (Vulkan a\\x1b[31mb\\nc, integrated, 8.0 GiB free): last" in lines
    assert any("line one\\nline two \\x1b[2J" in line for line in lines)


def test_an_empty_machine_is_explained_too(gpuscout_cli: CliRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    """With nothing found, the explanation says so and still reports the plugins."""
    monkeypatch.setenv("COLUMNS", "200")
    lines = explain(gpuscout_cli, ["list", "--explain"], []).out.splitlines()
    assert "  no device was ranked" in lines and "Plugins:" in lines


DEVICES = st.lists(
    st.builds(
        DeviceInfo,
        id=st.sampled_from(["0", "1", "GPU-a"]),
        library=st.sampled_from(["CUDA", "ROCm", "Vulkan"]),
        integrated=st.booleans(),
        software=st.booleans(),
        unused_reason=st.sampled_from(["", "", "compute capability 3.0"]),
        free_memory=st.sampled_from([0, GIB, 8 * GIB]),
    ),
    max_size=6,
)


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
