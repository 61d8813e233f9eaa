"""The command-line part of the public contract (DESIGN.md "Command line" and its added part), as a
host script sees it: run in-process through ``gpuscout.testing``'s ``gpuscout_cli`` over injected
devices, checking the documented keys, exit codes and forms. One promise per test.
"""

from __future__ import annotations

import json
from pathlib import Path

from gpuscout import DeviceInfo
from gpuscout.sizes import GIB, MIB
from gpuscout.testing import CliRunner
from tests.test_public_contract import cuda_card
from tests.test_rules_mutation_core import tiny_model


def test_list_json_is_one_object_with_the_four_keys(gpuscout_cli: CliRunner) -> None:
    """``list --json`` prints one object with ``devices``, ``dropped``, ``system``, ``plugins``."""
    run = gpuscout_cli(["list", "--json"], [cuda_card(0)])
    assert (run.code, list(run.json())) == (0, ["devices", "dropped", "system", "plugins"])


def test_list_json_system_always_holds_its_three_keys(gpuscout_cli: CliRunner) -> None:
    """The ``system`` object of ``list --json`` holds all three keys, zeros included."""
    system = gpuscout_cli(["list", "--json"], [cuda_card(0)]).json()["system"]
    assert {"total_memory", "free_memory", "free_swap"} <= set(system)


def test_list_json_plugin_reports_carry_the_documented_keys(gpuscout_cli: CliRunner) -> None:
    """Each ``plugins`` entry holds name, version, distribution, hooks, status, devices, elapsed_ms."""
    reports = gpuscout_cli(["list", "--json"], [cuda_card(0)]).json()["plugins"]
    keys = {"name", "version", "distribution", "hooks", "status", "devices", "elapsed_ms"}
    assert reports and all(keys <= set(r) for r in reports)


def test_list_json_dropped_entries_carry_device_reason_and_duplicate_of(gpuscout_cli: CliRunner) -> None:
    """A dropped Vulkan twin is ``{"device", "reason", "duplicate_of": {"id", "backend"}}``."""
    card = cuda_card(0)
    twin = DeviceInfo(id="0", library="Vulkan", pci_id=card.pci_id, total_memory=card.total_memory)
    (dropped,) = gpuscout_cli(["list", "--json"], [card, twin]).json()["dropped"]
    assert (dropped["device"]["backend"], dropped["duplicate_of"]) == (
        "Vulkan",
        {"id": card.id, "backend": "CUDA"},
    )


def test_a_machine_without_accelerators_lists_with_exit_zero(gpuscout_cli: CliRunner) -> None:
    """``list`` on a machine with no device exits 0."""
    assert gpuscout_cli(["list", "--json"], []).code == 0


def test_a_selector_matching_nothing_exits_one(gpuscout_cli: CliRunner) -> None:
    """``env fits:1TiB`` exits 1 when no device has that much free."""
    assert gpuscout_cli(["env", "fits:1TiB"], [cuda_card(0)]).code == 1


def test_a_usage_error_exits_two_with_one_line_and_no_traceback(gpuscout_cli: CliRunner) -> None:
    """A misspelled command exits 2 with one stderr line and no traceback."""
    run = gpuscout_cli(["lsit"], [cuda_card(0)])
    assert (run.code, len(run.err.strip().splitlines()), "Traceback" in run.err) == (2, 1, False)


def test_global_options_work_after_the_command(gpuscout_cli: CliRunner) -> None:
    """A global option (``-v``) is accepted before and after the command alike."""
    before = gpuscout_cli(["-v", "list", "--json"], [cuda_card(0)])
    after = gpuscout_cli(["list", "--json", "-v"], [cuda_card(0)])
    assert (before.code, after.code, before.json()["devices"]) == (0, 0, after.json()["devices"])


def test_env_json_is_one_object_of_the_visibility_variable(gpuscout_cli: CliRunner) -> None:
    """``env best --format json`` prints the best device's visibility variable as one object."""
    small, big = cuda_card(0, free=GIB), cuda_card(1)
    run = gpuscout_cli(["env", "best", "--format", "json"], [small, big])
    assert json.loads(run.out) == {"CUDA_VISIBLE_DEVICES": big.filter_id}


def test_fit_layers_json_keeps_the_documented_keys(gpuscout_cli: CliRunner) -> None:
    """``fit --layers ... --json`` prints ``model``, ``placement``, ``cpu_layers`` and a bool ``fits``."""
    run = gpuscout_cli(["fit", "--layers", "100MiB,100MiB,100MiB", "--json"], [cuda_card(0)])
    document = run.json()
    assert {"model", "placement", "cpu_layers", "fits"} <= set(document) and document["fits"] is True


def test_fit_layers_that_do_not_fit_exit_one(gpuscout_cli: CliRunner) -> None:
    """``fit --layers`` larger than the machine exits 1; a 2**63-1 byte layer is valid input."""
    run = gpuscout_cli(["fit", "--layers", f"{2**63 - 1}B,{MIB}B", "--json"], [cuda_card(0)])
    assert (run.code, run.json()["fits"]) == (1, False)


def test_fit_model_json_adds_the_documented_keys(gpuscout_cli: CliRunner, tmp_path: Path) -> None:
    """``fit MODEL --json`` adds ctx, flash_attn (bool), cache types, notes, memory and total."""
    model = tiny_model(tmp_path / "m.gguf")
    document = gpuscout_cli(["fit", str(model), "--ctx", "256", "--json"], [cuda_card(0)]).json()
    expected = {
        "model",
        "placement",
        "cpu_layers",
        "fits",
        "ctx",
        "flash_attn",
        "cache_type_k",
        "cache_type_v",
    }
    assert (
        expected | {"notes", "memory", "total"} <= set(document),
        type(document["flash_attn"]),
        "input_weights" in document["model"],
    ) == (True, bool, True)


def test_fit_memory_entries_end_with_the_cpu(gpuscout_cli: CliRunner, tmp_path: Path) -> None:
    """Each ``memory`` entry is {id, backend, weights, kv_cache, graph, total}; the last is the CPU's."""
    model = tiny_model(tmp_path / "m.gguf")
    memory = gpuscout_cli(["fit", str(model), "--ctx", "256", "--json"], [cuda_card(0)]).json()["memory"]
    keys = {"id", "backend", "weights", "kv_cache", "graph", "total"}
    assert all(set(m) == keys for m in memory) and (memory[-1]["backend"], memory[-1]["id"]) == ("cpu", "")


def test_fit_total_is_the_sum_of_the_memory_entries(gpuscout_cli: CliRunner, tmp_path: Path) -> None:
    """``total`` is the sum of every ``memory`` entry's total."""
    model = tiny_model(tmp_path / "m.gguf")
    document = gpuscout_cli(["fit", str(model), "--ctx", "256", "--json"], [cuda_card(0)]).json()
    assert document["total"] == sum(m["total"] for m in document["memory"])


def test_fit_of_a_bad_file_exits_two_naming_it(gpuscout_cli: CliRunner, tmp_path: Path) -> None:
    """``fit`` of a GGUF of version 9 exits 2 with one line naming the file."""
    bad = tmp_path / "v9.gguf"
    bad.write_bytes(b"GGUF\x09\x00\x00\x00" + b"\x00" * 16)
    run = gpuscout_cli(["fit", str(bad)], [cuda_card(0)])
    assert (run.code, "v9.gguf" in run.err, len(run.err.strip().splitlines())) == (2, True, 1)


def test_budget_options_give_usable_memory_on_the_wire(gpuscout_cli: CliRunner) -> None:
    """``list --json --cap all=4GiB --reserve all=1GiB`` keeps total_memory and writes usable_memory."""
    run = gpuscout_cli(["list", "--json", "--cap", "all=4GiB", "--reserve", "all=1GiB"], [cuda_card(0)])
    (device,) = run.json()["devices"]
    assert (device["total_memory"], device["usable_memory"]) == (16 * GIB, 3 * GIB)


def test_a_link_below_its_maximum_is_named_in_the_listing(gpuscout_cli: CliRunner) -> None:
    """A PCIe link below its maximum is a note naming both widths (``PCIe Gen3 x4 of Gen4 x16``)."""
    from gpuscout import PcieLink

    card = cuda_card(0, pcie_link=PcieLink(speed=8.0, width=4, max_speed=16.0, max_width=16))
    run = gpuscout_cli(["list", "--format", "tsv"], [card])
    assert "PCIe Gen3 x4 of Gen4 x16" in run.out


def test_a_link_below_its_maximum_is_a_note_in_the_json_listing(gpuscout_cli: CliRunner) -> None:
    """``list --json``'s device ``notes`` name a link below its maximum with both widths."""
    from gpuscout import PcieLink

    card = cuda_card(0, pcie_link=PcieLink(speed=8.0, width=4, max_speed=16.0, max_width=16))
    (device,) = gpuscout_cli(["list", "--json"], [card]).json()["devices"]
    assert any("PCIe Gen3 x4 of Gen4 x16" in note for note in device["notes"])


def test_a_link_below_its_maximum_is_a_note_in_the_explanation(gpuscout_cli: CliRunner) -> None:
    """``list --json --explain``'s ranking entry carries the link note."""
    from gpuscout import PcieLink

    card = cuda_card(0, pcie_link=PcieLink(speed=8.0, width=4, max_speed=16.0, max_width=16))
    (entry,) = gpuscout_cli(["list", "--json", "--explain"], [card]).json()["explain"]["ranking"]
    assert any("PCIe Gen3 x4 of Gen4 x16" in note for note in entry["notes"])
