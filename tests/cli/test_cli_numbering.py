"""One numbering a user can see (issue 34 items 1, 2 and 11): ``cuda:N`` is CUDA's own device N
on replayed machines, ``list`` shows the selector of each device in a real pseudo-terminal at 50,
80 and 200 columns and in pipes, the terminal ids are prefixes that select, ``-q`` prints
selectors, and a watch in CSV stays one CSV table."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gpuscout.cli._commands.list import watch
from gpuscout.testing import injected, scout_of
from tests.cli.terminal import on_terminal
from tests.cli.test_cli_trial_commands_output import CUDA_A, CUDA_B, list_args

MACHINES = Path(__file__).resolve().parent.parent / "machines"
WSL2 = str(MACHINES / "wsl2_rtx4090_rtx3090")
H200 = str(MACHINES / "h200x8")
RYZEN = str(MACHINES / "ryzen_780m_plus_radeon")
VULKAN_TWINS = str(MACHINES / "two_nvidia_vulkan_cuda0")
RTX4090 = "GPU-1a2b3c4d-5e6f-7081-92a3-b4c5d6e7f809"
RTX3090 = "GPU-0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0"
WIDTHS = (50, 80, 200)
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def on_a_terminal(columns: int, *argv: str) -> str:
    """What ``python -m gpuscout ARGV`` prints on a real pseudo-terminal ``columns`` wide (stdout
    and stderr, as a user sees them), its escape sequences removed; the command must succeed."""
    code, text = on_terminal(list(argv), columns, env={**os.environ, "NO_COLOR": "1"})
    assert code == 0, text
    return ANSI.sub("", text)


def in_a_pipe(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpuscout", *argv], capture_output=True, text=True, timeout=60, check=False
    )


def exported(*argv: str) -> str:
    done = in_a_pipe(*argv)
    assert done.returncode == 0, done.stderr
    return done.stdout


# -- item 1: the index means what the runtime means ------------------------------------------------


def test_cuda_0_on_the_wsl2_pair_is_the_4090_cuda_calls_device_0() -> None:
    """``env cuda:0`` selects the RTX 4090 (CUDA's device 0, llama.cpp's CUDA0, rank 0), not the
    RTX 3090 that comes first in PCI order."""
    assert exported("--replay", WSL2, "env", "cuda:0") == f"export CUDA_VISIBLE_DEVICES='{RTX4090}'\n"
    assert exported("--replay", WSL2, "env", "cuda:1") == f"export CUDA_VISIBLE_DEVICES='{RTX3090}'\n"


def test_a_reserve_on_cuda_0_lands_on_the_device_env_cuda_0_selects() -> None:
    """``--reserve cuda:0=2GiB`` holds 2 GiB back on the 4090 and leaves the 3090 alone."""
    document = json.loads(exported("--replay", WSL2, "list", "--json", "--reserve", "cuda:0=2GiB"))
    usable = {d["id"]: d.get("usable_memory") for d in document["devices"]}
    assert usable[RTX3090] is None and usable[RTX4090] is not None


def test_rocm_0_is_the_device_hip_calls_rocm0() -> None:
    """On a Ryzen 780M beside a 7900 XTX, ``rocm:0`` is the 780M (HIP's ROCm0, at c6:00.0),
    though the 7900 XTX at 03:00.0 is first in PCI order."""
    assert exported("--replay", RYZEN, "env", "rocm:0") == "export ROCR_VISIBLE_DEVICES='0'\n"
    selectors = exported("--replay", RYZEN, "list", "-q").split()
    names = [d["name"] for d in json.loads(exported("--replay", RYZEN, "list", "--json"))["devices"]]
    assert [n.lower().replace("rocm", "rocm:") for n in names] == selectors


def test_a_vulkan_number_counts_the_devices_gpuscout_drops() -> None:
    """llvmpipe is Vulkan's device 2 (after the two NVIDIA cards, dropped as CUDA's twins), so
    it answers to ``vulkan:2``, the index GGML_VK_VISIBLE_DEVICES takes for it."""
    listed = exported("--replay", VULKAN_TWINS, "list", "-q", "--include-software")
    assert listed.split() == ["cuda:0", "vulkan:2"]
    done = in_a_pipe("--replay", VULKAN_TWINS, "env", "vulkan:0", "--include-software")
    assert done.returncode == 1 and "vulkan:2 ->" in done.stderr


# -- the numbering shown: -q, TSV, CSV, JSON --------------------------------------------------------


def test_list_quiet_prints_the_selector_of_each_device_best_first() -> None:
    """``list -q`` on the WSL2 pair: ``cuda:0`` (the 4090, rank 0), then ``cuda:1``."""
    assert exported("--replay", WSL2, "list", "-q") == "cuda:0\ncuda:1\n"


def test_the_pipe_form_ends_each_row_with_its_selector() -> None:
    """In a pipe the last column is ``selector``; the columns before it keep their places."""
    header, first, second = exported("--replay", WSL2, "list").splitlines()[:3]
    assert header.split("\t")[:3] == ["rank", "library", "id"] and header.split("\t")[-1] == "selector"
    assert first.split("\t")[2] == RTX4090 and first.split("\t")[-1] == "cuda:0"
    assert second.split("\t")[-1] == "cuda:1"


def test_json_explain_gives_the_selector_each_device_answers_to() -> None:
    """``list --json --explain``: each ranking entry has the ``selector`` its device answers to
    (the document's four keys stay as the public contract pins them)."""
    document = json.loads(exported("--replay", H200, "list", "--json", "--explain"))
    selectors = [entry["selector"] for entry in document["explain"]["ranking"]]
    assert sorted(selectors) == [f"cuda:{n}" for n in range(8)]
    for device, selector in zip(document["devices"], selectors, strict=True):
        expected = f"export CUDA_VISIBLE_DEVICES='{device['id']}'\n"
        assert exported("--replay", H200, "env", selector) == expected


def test_a_watch_in_csv_is_one_csv_table_with_a_timestamp_column() -> None:
    """``list --watch --format csv``: one header row, every row stamped in a first column,
    no ``#`` line and no blank line, so ``csv.DictReader`` reads the whole watch."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert watch(list_args("--format", "csv"), scout_of(injected([CUDA_A, CUDA_B])), 0.01, rounds=3) == 0
    text = out.getvalue()
    assert "#" not in text and "\n\n" not in text
    rows = list(csv.DictReader(io.StringIO(text)))
    assert len(rows) == 6 and all(re.fullmatch(r"\d{4}-\d\d-\d\dT[\d:.]+Z", r["timestamp"]) for r in rows)
    assert [r["selector"] for r in rows[:2]] == ["cuda:0", "cuda:1"]


# -- item 2: the terminal table ---------------------------------------------------------------------


@pytest.mark.parametrize("width", WIDTHS)
def test_the_h200_table_keeps_rank_and_selector_at_every_width(width: int) -> None:
    """On a real terminal 50, 80 and 200 columns wide every device shows its rank and selector
    (a table row or a block's first line), and no table line is wider than the terminal."""
    out = on_a_terminal(width, "--replay", H200, "list")
    for rank in range(8):
        assert re.search(rf"^(#{rank} |{rank}  +)cuda:[0-7] ", out, re.M), out
    table = out.split("8 devices")[0]
    assert all(len(line.rstrip()) <= width for line in table.splitlines())
    left_out = re.search(r"columns left out at \d+ columns: ([^;]*);", " ".join(out.split()))
    assert left_out is None or not {"rank", "selector", "id"} & set(left_out.group(1).split(", "))


def test_the_h200_table_at_80_columns_shows_id_prefixes_that_select() -> None:
    """At 80 columns the 42-character UUIDs are their shortest selecting prefixes, the
    description stays, the leaving columns are named, and each prefix selects its device."""
    out = on_a_terminal(80, "--replay", H200, "list")
    head = next(line for line in out.splitlines() if line.startswith("#  "))
    assert head.split()[:5] == ["#", "selector", "library", "id", "description"]
    rows = [line.split() for line in out.splitlines() if re.match(r"^[0-7]  ", line)]
    document = json.loads(exported("--replay", H200, "list", "--json"))
    for row, device in zip(rows, document["devices"], strict=True):
        prefix = row[3]
        assert len(prefix) == len("GPU-05d9") and device["id"].startswith(prefix)
        assert exported("--replay", H200, "env", prefix) == f"export CUDA_VISIBLE_DEVICES='{device['id']}'\n"
    assert "columns left out at 80 columns: used, compute, driver, integrated, NUMA, link;" in " ".join(
        out.split()
    )


@pytest.mark.parametrize("width", WIDTHS)
def test_notes_name_each_device_by_the_rank_and_selector_the_table_shows(width: int) -> None:
    """The WSL2 note line says ``note: #0 cuda:0, #1 cuda:1:``, as the table's rows do, once
    for the two cards it holds for."""
    out = " ".join(on_a_terminal(width, "--replay", WSL2, "list").split())
    if width > 50:
        assert "note: #0 cuda:0, #1 cuda:1: WSL2: reached through /dev/dxg" in out
        assert out.count("reached through /dev/dxg") == 1
    assert "#3" not in out and "CUDA GPU-1a2b3c4d" not in out.split("note:")[-1]


def test_dropped_twins_are_named_by_the_rank_and_selector_of_the_listed_card() -> None:
    """``dropped: Vulkan 0 NVIDIA H200 (duplicate of #1 cuda:0)``, not a 42-character UUID."""
    out = on_a_terminal(80, "--replay", H200, "list")
    assert "dropped: Vulkan 0 NVIDIA H200 (duplicate of #1 cuda:0)" in out


# -- item 11: the description on a wide terminal, did you mean ------------------------------------


@pytest.mark.parametrize("width", WIDTHS)
def test_an_unused_device_says_why_in_a_note_line(width: int) -> None:
    """llvmpipe's description is marked ``(unused)`` and not cut at 200 columns; the reason is
    a note line under the table, whole at every width."""
    out = on_a_terminal(width, "--replay", VULKAN_TWINS, "list", "--include-software")
    flat = " ".join(out.split())
    reason = "not in ggml-vulkan's default device set: a CPU device, not a discrete or integrated GPU"
    assert f"unused: {reason}" in flat
    if width == 200:
        assert "(software) llvmpipe (LLVM 15.0.6, 256 bits) (unused)" in out


@pytest.mark.parametrize(
    ("written", "meant"), [("cuda1", "cuda:1"), ("CUDA0", "cuda:0"), ("cdua:1", "cuda:1")]
)
def test_env_with_a_misspelled_selector_suggests_one_the_devices_answer_to(written: str, meant: str) -> None:
    """``env cuda1`` on the WSL2 pair: "did you mean 'cuda:1'?"."""
    done = in_a_pipe("--replay", WSL2, "env", written)
    assert done.returncode in (1, 2) and f"did you mean {meant!r}?" in done.stderr


def test_env_help_says_what_library_index_counts() -> None:
    """``env --help`` says LIBRARY:INDEX is the runtime's own number and where to see it."""
    text = " ".join(exported("env", "--help").split())
    assert "LIBRARY:INDEX is the runtime's own number" in text and "gpuscout list -q" in text


@pytest.mark.parametrize("width", WIDTHS)
def test_devices_dropped_for_one_reason_are_one_line_on_a_terminal(width: int) -> None:
    """Six MI300X partitions hidden by ROCR_VISIBLE_DEVICES are one ``dropped:`` line naming
    their ids; a pipe keeps a ``# dropped`` row each."""
    out = " ".join(on_a_terminal(width, "--replay", str(MACHINES / "mi300x_cpx_rocr"), "list").split())
    assert out.count("dropped: ") == 1
    line = "dropped: ROCm 0, 1, 4, 5, 6, 7 AMD Instinct MI300X OAM (hidden by ROCR_VISIBLE_DEVICES=2,3)"
    assert line in out
    piped = in_a_pipe("--replay", str(MACHINES / "mi300x_cpx_rocr"), "list").stdout
    assert piped.count("# dropped\t") == 6
