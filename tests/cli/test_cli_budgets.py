"""``--reserve``, ``--cap`` and ``--prefer`` (docs/budgets.md) on the command line: on the
recorded h200x8 machine through ``list --json``, ``--explain`` and ``fit --cap``, the variables,
and every malformed value as one usage line."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from gpuscout import DeviceInfo
from gpuscout.cli import main
from gpuscout.cli._common import scout_argv
from gpuscout.sizes import GIB, MIB
from gpuscout.testing import CliRunner

H200X8 = str(Path(__file__).parents[1] / "machines" / "h200x8")
#: The H200's total as NVML reports it there (tests/machines/h200x8/README.md).
H200_TOTAL = 150141403136


def replay(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``gpuscout --replay h200x8 ARGV`` in-process: exit code, stdout, stderr."""
    capsys.readouterr()
    try:
        code = main(["--replay", H200X8, *argv])
    except SystemExit as exc:  # a usage error, from argparse
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def replay_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    code, out, err = replay(capsys, *argv, "--json")
    assert code == 0, err
    document: dict[str, Any] = json.loads(out)
    return document


def test_list_json_carries_the_usable_figure(capsys: pytest.CaptureFixture[str]) -> None:
    """--cap all=20GiB --reserve cuda:0=2GiB: every H200 keeps its total; cuda:0 (PCI 19:00.0)
    is usable for 18 GiB, the others for 20 GiB, and each says so in its notes."""
    devices = replay_json(capsys, "list", "--cap", "all=20GiB", "--reserve", "cuda:0=2GiB")["devices"]
    assert len(devices) == 8
    for d in devices:
        assert d["total_memory"] == H200_TOTAL
        expected = 18 * GIB if d["pci_id"] == "0000:19:00.0" else 20 * GIB
        assert d["usable_memory"] == expected
        assert any(note.startswith("budget: cap all=20GiB") for note in d["notes"])


def test_list_json_has_no_usable_figure_without_a_budget(capsys: pytest.CaptureFixture[str]) -> None:
    """Without a budget no device has the usable_memory key or a budget note."""
    devices = replay_json(capsys, "list")["devices"]
    assert all("usable_memory" not in d and "notes" not in d for d in devices)


def test_a_budget_option_after_the_command_wins(capsys: pytest.CaptureFixture[str]) -> None:
    """``--cap all=1GiB list --cap all=2GiB``: the value after the command counts."""
    capsys.readouterr()
    assert main(["--cap", "all=1GiB", "--replay", H200X8, "list", "--cap", "all=2GiB", "--json"]) == 0
    devices = json.loads(capsys.readouterr().out)["devices"]
    assert {d["usable_memory"] for d in devices} == {2 * GIB}


def test_repeated_options_and_comma_lists_add_up(capsys: pytest.CaptureFixture[str]) -> None:
    """``--cap all=20GiB --cap cuda:1=4GiB,cuda:2=6GiB`` applies all three entries."""
    devices = replay_json(capsys, "list", "--cap", "all=20GiB", "--cap", "cuda:1=4GiB,cuda:2=6GiB")["devices"]
    by_pci = {d["pci_id"]: d["usable_memory"] for d in devices}
    # cuda:N is CUDA's own number; for eight of one model (FASTEST_FIRST) that is PCI order: 19, 3b, 4c, ...
    assert (by_pci["0000:19:00.0"], by_pci["0000:3b:00.0"], by_pci["0000:4c:00.0"]) == (
        20 * GIB,
        4 * GIB,
        6 * GIB,
    )


def test_the_variables_apply_and_the_options_override_them(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """GPUSCOUT_CAP in the environment applies (with --replay-env process); --cap replaces it."""
    monkeypatch.setenv("GPUSCOUT_CAP", "all=10GiB")
    base = ("list", "--replay-env", "process")
    assert {d["usable_memory"] for d in replay_json(capsys, *base)["devices"]} == {10 * GIB}
    assert {d["usable_memory"] for d in replay_json(capsys, *base, "--cap", "all=30GiB")["devices"]} == {
        30 * GIB
    }


def test_prefer_orders_the_list(capsys: pytest.CaptureFixture[str]) -> None:
    """--prefer cuda:7,cuda:3 ranks CUDA's devices 7 and 3 first (one model: PCI order)."""
    devices = replay_json(capsys, "list", "--prefer", "cuda:7,cuda:3")["devices"]
    assert [d["pci_id"] for d in devices[:2]] == ["0000:db:00.0", "0000:5d:00.0"]


def test_explain_says_which_budget_applied(capsys: pytest.CaptureFixture[str]) -> None:
    """--explain (JSON) names the deciding cap and reserve per device and their sentence; with
    --prefer its criteria start with prefer and the first device was decided by it."""
    document = replay_json(
        capsys, "list", "--explain", "--cap", "all=20GiB", "--reserve", "cuda:0=2GiB", "--prefer", "cuda:3"
    )
    explain = document["explain"]
    assert explain["criteria"][0] == "prefer"
    assert explain["prefer"] == ["cuda:3"]
    assert explain["ranking"][0]["decided_by"] == "prefer"
    budget = next(e["budget"] for e in explain["ranking"] if e["budget"]["reserve"])
    assert budget["cap"] == "all=20GiB"
    assert budget["reserve"] == "cuda:0=2GiB"
    assert budget["usable_memory"] == 18 * GIB
    assert budget["sentence"] == "cap all=20GiB, reserve cuda:0=2GiB: usable 18.0 GiB of 139.8 GiB"


def test_explain_text_says_which_budget_applied(capsys: pytest.CaptureFixture[str]) -> None:
    """The text form gives each device its budget sentence and words the prefer decision."""
    code, out, _ = replay(
        capsys, "list", "--explain", "--cap", "all=20GiB", "--prefer", "cuda:3", "--format", "tsv"
    )
    assert code == 0
    assert "[budget: cap all=20GiB: usable 20.0 GiB of 139.8 GiB]" in out
    assert "earlier in --prefer: it matches 'cuda:3' (prefer #1)" in out


def test_the_plain_list_notes_the_budget(capsys: pytest.CaptureFixture[str]) -> None:
    """In a pipe the note column of each device holds its budget sentence; the columns stay."""
    code, out, _ = replay(capsys, "list", "--cap", "all=20GiB")
    assert code == 0
    header, first = out.splitlines()[:2]
    note = header.split("\t").index("note")
    assert first.split("\t")[note] == "budget: cap all=20GiB: usable 20.0 GiB of 139.8 GiB"


def test_the_table_has_a_usable_column_only_with_a_budget(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The terminal table shows free and total under the budget in a ``usable`` column; a
    narrow terminal leaves it out and says so."""
    monkeypatch.setenv("COLUMNS", "200")
    _, out, _ = replay(capsys, "list", "--format", "table", "--cap", "all=20GiB")
    assert "usable" in out.splitlines()[1]
    assert "20.0/20.0 GiB" in out
    _, plain, _ = replay(capsys, "list", "--format", "table")
    assert "usable" not in plain
    monkeypatch.setenv("COLUMNS", "80")
    _, narrow, _ = replay(capsys, "list", "--format", "table", "--cap", "all=20GiB")
    left_out = next(line for line in narrow.splitlines() if line.startswith("columns left out"))
    assert "usable" in left_out


def test_an_unmatched_budget_is_one_warning(capsys: pytest.CaptureFixture[str]) -> None:
    """--cap library=rocm=1GiB on a machine without ROCm: exit 0, one warning line naming it."""
    code, _, err = replay(capsys, "list", "--cap", "library=rocm=1GiB")
    assert code == 0
    assert "gpuscout: warning: budget cap 'library=rocm' matches no device" in err


def test_fit_layers_under_a_cap_spread_over_the_cards(capsys: pytest.CaptureFixture[str]) -> None:
    """fit --layers 4 x 10 GiB + 1 GiB: one H200 holds all of it; under --cap all=20GiB no card
    holds more than 20 GiB less its 457 MiB reserve and four cards share the layers."""
    layers = "10GiB,10GiB,10GiB,10GiB,1GiB"
    plain = replay_json(capsys, "fit", "--layers", layers)
    assert len(plain["placement"]) == 1
    capped = replay_json(capsys, "fit", "--cap", "all=20GiB", "--layers", layers)
    assert capped["fits"] is True
    assert sorted(n for p in capped["placement"] for n in p["layers"]) == [0, 1, 2, 3, 4]
    assert len(capped["placement"]) == 4
    for row in capped["memory"][:-1]:
        assert row["total"] <= 20 * GIB - 457 * MIB
    assert any("budget: cap all=20GiB" in note for note in capped["notes"])


def test_fit_with_a_cap_below_the_reserve_keeps_everything_on_the_cpu(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """--cap all=256MiB leaves no room beyond the 457 MiB minimum reserve: no layer on a GPU."""
    capped = replay_json(capsys, "fit", "--cap", "all=256MiB", "--layers", "100MiB,100MiB")
    assert capped["placement"] == []
    assert capped["cpu_layers"] == [0, 1]


@pytest.mark.parametrize(
    "argv",
    [
        ["--cap", "="],
        ["--cap", "cuda:0="],
        ["--cap", "=1GiB"],
        ["--cap", "cuda:0=-1"],
        ["--cap", "cuda:0=1e400"],
        ["--reserve", "all=99999999999999999999999999TiB"],
        ["--reserve", "cuda:0='2GiB'"],
        ["--reserve", "$(reboot)=1GiB"],
        ["--cap", "alll=1GiB"],
        ["--cap", "best=1GiB"],
        ["--cap", ","],
        ["--prefer", "0"],
        ["--prefer", ","],
        ["--prefer", "nope"],
    ],
)
def test_a_malformed_budget_is_one_usage_line(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    """Each malformed value exits 2 with one line on stderr naming the option, nothing on stdout."""
    code, out, err = replay(capsys, "list", *argv)
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1
    assert f"argument {argv[0]}" in err
    assert "Traceback" not in err


def test_a_misspelled_selector_in_a_budget_gets_a_did_you_mean(capsys: pytest.CaptureFixture[str]) -> None:
    """``--cap alll=1GiB`` is answered with "did you mean 'all'"."""
    _, _, err = replay(capsys, "list", "--cap", "alll=1GiB")
    assert "did you mean 'all'?" in err


def test_a_malformed_variable_is_one_error_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """GPUSCOUT_RESERVE=cuda:0 (no size) exits 2 naming the variable."""
    monkeypatch.setenv("GPUSCOUT_RESERVE", "cuda:0")
    code, _, err = replay(capsys, "list", "--replay-env", "process")
    assert code == 2
    expected = "GPUSCOUT_RESERVE entry 1 'cuda:0': expected SEL=SIZE, e.g. all=20GiB or cuda:0=2GiB"
    assert err == f"gpuscout: error: {expected}\n"


def test_a_child_gets_the_same_budgets() -> None:
    """scout_argv (what a --verify child is started with) repeats every budget option."""
    args = argparse.Namespace(reserve=["cuda:0=2GiB"], cap=["all=20GiB", "cuda:1=4GiB"], prefer=["cuda:1"])
    assert scout_argv(args) == [
        "--reserve",
        "cuda:0=2GiB",
        "--cap",
        "all=20GiB",
        "--cap",
        "cuda:1=4GiB",
        "--prefer",
        "cuda:1",
    ]


def test_the_kit_applies_the_budget_options(gpuscout_cli: CliRunner) -> None:
    """gpuscout_cli hands --cap to its Scout: env fits:30GiB then matches no 80 GiB card (exit 1)."""
    card = DeviceInfo(
        id="GPU-1", library="CUDA", filter_id="GPU-1", total_memory=80 * GIB, free_memory=80 * GIB
    )
    assert gpuscout_cli(["env", "fits:30GiB"], [card]).code == 0
    run = gpuscout_cli(["env", "--cap", "all=20GiB", "fits:30GiB"], [card])
    assert run.code == 1
    assert "under its budget" in run.err


def test_env_warns_of_an_unmatched_budget_and_still_selects(gpuscout_cli: CliRunner) -> None:
    """env --cap cuda:9=1GiB best on a one-card machine: the selection is printed, exit 0, and
    one warning names the entry that matched nothing."""
    card = DeviceInfo(
        id="GPU-1", library="CUDA", filter_id="GPU-1", total_memory=80 * GIB, free_memory=80 * GIB
    )
    run = gpuscout_cli(["env", "--cap", "cuda:9=1GiB", "best"], [card])
    assert run.code == 0
    assert "CUDA_VISIBLE_DEVICES" in run.out
    assert run.err.count("gpuscout: warning: budget cap 'cuda:9' matches no device") == 1
