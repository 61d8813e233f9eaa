"""`gpuscout cluster` on a narrow terminal (issue 34, item 11): the progress line stays one
line, so it is redrawn in place, and the node lines break between words, never `GP⏎U`. No Ray
cluster is started: the child replaces the inventory with one built here."""

from __future__ import annotations

import io

import pytest

from gpuscout.cli._commands.cluster import _progress
from tests.cli.terminal import on_terminal

#: A child that answers `cluster` with one node Ray gives no GPU, after 1.2 s of waiting.
CHILD = """
import sys, time
from gpuscout import Discovery, SystemInfo
from gpuscout.cluster.inventory import Inventory, NodeResult, NodeStatus, summarize
import gpuscout.cluster.ray as ray

node = NodeResult(node_id="3ef93a9f0c1d2e3f", hostname="a-long-host-name.example.internal",
                  address="127.0.0.1", status=NodeStatus.OK, ray_resources={"CPU": 8.0, "GPU": 0.0},
                  discovery=Discovery(devices=[], dropped=[], system=SystemInfo(), plugins=[]),
                  notes=("a note that is long enough to need more than one line of fifty columns",))

def inventory(*args, **kwargs):
    time.sleep(1.2)
    return Inventory(nodes=(node,), summary=summarize((node,)), elapsed=1.2)

ray.inventory = inventory
from gpuscout.cli import main
sys.exit(main(sys.argv[1:]))
"""


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("columns", [50, 80, 200])
def test_the_progress_line_is_narrower_than_the_terminal(
    monkeypatch: pytest.MonkeyPatch, columns: int
) -> None:
    """Each drawing of the progress line is shorter than the terminal, whatever the address."""
    monkeypatch.setenv("COLUMNS", str(columns))
    stream = _Tty()
    with _progress(stream, "127.0.0.1:6379" + "0" * 30, 60.0):
        pass
    drawings = [part.replace("\x1b[K", "") for part in stream.getvalue().split("\r") if part.strip("\x1b[K")]
    assert drawings and all(len(line) < columns for line in drawings), drawings
    assert all("waiting for the nodes" in line for line in drawings), drawings


@pytest.mark.parametrize("columns", [50, 80, 200])
def test_cluster_on_a_real_terminal_breaks_lines_between_words(columns: int) -> None:
    """At 50, 80 and 200 columns no line, nor any drawing of the progress line, is wider than the
    terminal (a wider one wraps and leaves its start behind), and `Ray: 0 GPU` stays whole."""
    code, out = on_terminal(["cluster", "--ray", "127.0.0.1:6379"], columns, script=CHILD)
    assert code == 0, out
    lines = out.replace("\x1b[K", "").split("\n")
    assert all(len(part) <= columns for line in lines for part in line.split("\r")), out
    assert "Ray: 0 GPU" in " ".join(out.split()) and "GP\nU" not in out


def test_cluster_in_a_pipe_keeps_each_node_line_whole() -> None:
    """Through a pipe nothing is wrapped and no progress line is drawn, whatever COLUMNS says."""
    import os
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", CHILD, "cluster", "--ray", "127.0.0.1:6379"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "50"},
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0 and done.stderr == "", done.stderr
    heading = done.stdout.splitlines()[0]
    assert heading == "node 3ef93a9f0c1d on a-long-host-name.example.internal (127.0.0.1): ok; Ray: 0 GPU"
