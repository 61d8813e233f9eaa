"""`gpuscout topology` (issue 34, item 10): the devices by NUMA node, their links, and a peer
matrix as `nvidia-smi topo -m` shows it, on recorded machines, at 50, 80 and 200 columns on a
real terminal and in a pipe, and as JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.terminal import on_terminal

MACHINES = Path(__file__).parents[1] / "machines"


def piped(*argv: str) -> subprocess.CompletedProcess[str]:
    """``python -m gpuscout ARGV`` with stdout a pipe."""
    return subprocess.run(
        [sys.executable, "-m", "gpuscout", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def matrix_rows(text: str) -> list[list[str]]:
    """The matrix's body rows, each split into its label and cells."""
    part = text.split("Peers (", 1)[1].split("\n\n", 1)[0].splitlines()[2:]
    return [line.split() for line in part]


@pytest.mark.parametrize("columns", [80, 200])
def test_eight_h200s_show_an_nvlink_matrix_that_fits(columns: int) -> None:
    """h200x8 at 80 and 200 columns: an 8x8 matrix, X on the diagonal, NVLINK elsewhere, no line
    wider than the terminal."""
    code, out = on_terminal(["--replay", str(MACHINES / "h200x8"), "topology"], columns)
    assert code == 0, out
    assert all(len(line) <= columns for line in out.splitlines()), out
    rows = matrix_rows(out)
    assert [row[0] for row in rows] == [str(i) for i in range(8)]
    assert all(row[1 + i] == "X" and row.count("NVLINK") == 7 for i, row in enumerate(rows)), out


def test_fifty_columns_list_each_device_peers_instead_of_a_matrix_too_wide() -> None:
    """h200x8 at 50 columns: every line fits, each device's peers on a line of its own."""
    code, out = on_terminal(["--replay", str(MACHINES / "h200x8"), "topology"], 50)
    assert code == 0, out
    assert all(len(line) <= 50 for line in out.splitlines()), out
    assert "0: NVLINK 1 2 3 4 5 6 7" in out and "7: NVLINK 0 1 2 3 4 5 6" in out


@pytest.mark.parametrize("columns", [50, 80, 200])
def test_nvlink_pairs_on_two_sockets_read_nvlink_and_sys(columns: int) -> None:
    """a100x4_nvlink_pairs: 0-1 and 2-3 are NVLink pairs, the others cross the sockets (SYS);
    the narrow card's link note is shown, wrapped within the width."""
    code, out = on_terminal(["--replay", str(MACHINES / "a100x4_nvlink_pairs"), "topology"], columns)
    assert code == 0, out
    assert all(len(line) <= columns for line in out.splitlines()), out
    assert matrix_rows(out) == [
        ["0", "X", "NVLINK", "SYS", "SYS"],
        ["1", "NVLINK", "X", "SYS", "SYS"],
        ["2", "SYS", "SYS", "X", "NVLINK"],
        ["3", "SYS", "SYS", "NVLINK", "X"],
    ]
    assert "Gen4 x8 of Gen4 x16" in out and "fewer lanes" in out.replace("\n", " ")


def test_devices_are_grouped_under_their_numa_node_with_its_cpus() -> None:
    """mi300x_x8_hive in a pipe: two nodes, each with its CPUs and four cards."""
    done = piped("--replay", str(MACHINES / "mi300x_x8_hive"), "topology")
    assert done.returncode == 0, done.stderr
    section = done.stdout.split("\n\n", 1)[0]
    nodes = [line for line in section.splitlines() if line.startswith("NUMA node")]
    assert nodes == ["NUMA node 0, CPUs 0-95,192-287", "NUMA node 1, CPUs 96-191,288-383"]
    assert section.count("AMD Instinct MI300X OAM") == 8 and "XGMI" in done.stdout


def test_a_pipe_gets_each_note_whole_on_one_line() -> None:
    """In a pipe nothing is cut or wrapped: the link note is one line."""
    done = piped("--replay", str(MACHINES / "a100x4_nvlink_pairs"), "topology")
    [note] = [line for line in done.stdout.splitlines() if "note:" in line]
    assert note.rstrip().endswith("a bad contact)")


def test_the_json_carries_the_matrix_nodes_and_legend() -> None:
    """`topology --json`: the same facts as one object."""
    done = piped("--replay", str(MACHINES / "a100x4_nvlink_pairs"), "topology", "--json")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert document["matrix"][0] == ["X", "NVLINK", "SYS", "SYS"]
    assert [n["devices"] for n in document["numa_nodes"]] == [[0, 1], [2, 3]]
    assert set(document["legend"]) == {"X", "NVLINK", "SYS"}
    assert document["devices"][3]["link_below_maximum"] is True


def test_without_a_numa_node_the_path_is_through_the_host() -> None:
    """wsl2_rtx4090_rtx3090 (no NUMA node known): PCIe between the two cards."""
    done = piped("--replay", str(MACHINES / "wsl2_rtx4090_rtx3090"), "topology")
    assert matrix_rows(done.stdout) == [["0", "X", "PCIe"], ["1", "PCIe", "X"]]
    assert "NUMA node not known" in done.stdout


def test_a_machine_without_devices_says_so_and_exits_zero() -> None:
    """No device (only the Metal plugin, on Linux): one line says so, exit 0 as for `list`."""
    done = piped("--plugins", "metal", "topology")
    assert (done.returncode, done.stdout) == (0, "no devices found\n"), done.stderr


def test_the_sample_in_docs_topology_is_what_the_command_prints() -> None:
    """docs/topology.md shows a100x4_nvlink_pairs' output as a pipe gets it, verbatim."""
    docs = (Path(__file__).parents[2] / "docs" / "topology.md").read_text(encoding="utf-8")
    sample = docs.split("a100x4_nvlink_pairs topology -->\n```text\n", 1)[1].split("```", 1)[0]
    assert piped("--replay", str(MACHINES / "a100x4_nvlink_pairs"), "topology").stdout == sample


def test_stdout_to_a_file_is_not_wrapped_though_stderr_is_a_terminal(tmp_path: Path) -> None:
    """`gpuscout topology > file` on a 50-column terminal: the file gets the pipe's form."""
    import os
    import pty

    master, slave = pty.openpty()
    target = tmp_path / "out.txt"
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    with target.open("w") as out:
        subprocess.run(
            [sys.executable, "-m", "gpuscout", "--replay", str(MACHINES / "a100x4_nvlink_pairs"), "topology"],
            stdout=out,
            stderr=slave,
            stdin=subprocess.DEVNULL,
            env=env,
            timeout=120,
            check=True,
        )
    os.close(slave)
    os.close(master)
    [note] = [line for line in target.read_text().splitlines() if "note:" in line]
    assert note.rstrip().endswith("a bad contact)")
