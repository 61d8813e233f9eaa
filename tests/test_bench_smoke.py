"""Every benchmark under bench/ still runs: each script, with the smallest sizes it takes, exits 0
and prints its figures (so none rots between the runs that bench/RESULTS.md records).

The figures themselves are not checked (one run on a busy machine says nothing); the lines that
carry them are. ``llama_reference.py`` records what a llama.cpp build allocates: here a stand-in
``llama-completion`` prints a llama.cpp log, so everything but llama.cpp itself runs.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
#: Seconds one script may take (the Ray cluster's start is most of the slowest).
TIMEOUT = 120
#: What stands in for llama.cpp's ``llama-completion``: the memory lines of one load.
FAKE_LLAMA = """\
#!/bin/sh
cat >&2 <<'LOG'
0.01.000.000 I llama_context: n_ctx                 = 2048
0.01.000.000 I load_tensors:   CPU_Mapped model buffer size =    11.88 MiB
0.01.000.000 I llama_kv_cache:        CPU KV buffer size =     4.00 MiB
0.01.000.000 I sched_reserve:        CPU compute buffer size =    15.50 MiB
LOG
"""
#: What stands in for llama.cpp's ``llama-fit-params``: a breakdown with --fit-print on, a
#: fitted argument line otherwise.
FAKE_FIT_PARAMS = """\
#!/bin/sh
case " $* " in
  *" --fit-print on "*) printf 'Vulkan0 11 8 17 \\nHost 0 0 8 \\n' ;;
  *) echo "-c 32768 -ngl -1" ;;
esac
"""


@dataclass(frozen=True)
class Bench:
    script: str
    #: The arguments after the script; "{model}", "{bin}" and "{out}" are filled in.
    args: tuple[str, ...]
    #: A line the output must hold (a figure with its unit, or the script's summary).
    shows: str
    needs_lavapipe: bool = False


BENCHES = [
    # Its own RAY_TMPDIR, and ports the OS picks: no collision with tests/test_cluster_ray.py's.
    Bench(
        "cluster.py",
        ("--nodes", "1", "--runs", "1"),
        r"inventory, already attached: +\d+ ms",
        needs_lavapipe=True,
    ),
    Bench("fit_accuracy.py", ("--only", "llama-gqa", "--worst", "1"), r"\d+ figures held to the targets"),
    Bench(
        "fit_speed.py",
        ("{model}", "--runs", "1", "--reader-runs", "1"),
        r"gpuscout fit FILE --json +\d+\.\d+",
    ),
    Bench(
        "fit_plan_record.py",
        ("--bin", "{bin}", "--only", "^llama-gqa-1dev$", "--out", "{out}"),
        r"1 cases in \d+ s",
    ),
    Bench("fit_plan.py", ("--only", "llama-gqa-1dev"), r"agreement: \d+ of 1 "),
    Bench("fit_plan_sweep.py", ("--bin", "{bin}", "--seed", "1", "--count", "3"), r"seed 1: \d+ of 3 agree"),
    Bench("fit_probes.py", ("--only", "llama-gqa-1dev-fitt-1990", "--summary"), r"within 1 MiB: \d+ of \d+"),
    Bench("isolation.py", ("--runs", "1"), r"gpuscout list --isolated --json: +\d+\.\d ms +ratio"),
    Bench(
        "llama_reference.py",
        (
            "--bin",
            "{bin}",
            "--name",
            "smoke",
            "--out",
            "{out}",
            "--no-standard",
            "--run",
            "cpu:2048:on",
            "{model}",
        ),
        r"smoke cpu ctx=2048 fa=on : rc=0 kv=\{'CPU': 4\.0\} compute=\{'CPU': 15\.5\}",
    ),
    Bench("merge.py", ("--sizes", "20", "40", "--runs", "1"), r"twins +40 +\d+\.\d+"),
    Bench("plan.py", ("--runs", "1"), r"plan +\d+\.\d+ ms"),
    Bench("plugin_cost.py", ("--runs", "1", "--repeats", "1"), r"cuda: +\d+\.\d+ ms"),
    Bench("ray_detection.py", ("--runs", "1"), r"paired ratio gpuscout / Ray over 1 pairs: median \d"),
    Bench("refresh.py", ("--runs", "1"), r"discover: +\d+\.\d+ ms"),
    # vulkaninfo --summary, the peak-memory reference, needs a Vulkan device.
    Bench("startup.py", ("--runs", "1"), r"import gpuscout: +\d+\.\d ms +ratio", needs_lavapipe=True),
]


def _fit_writers() -> Any:
    """tests/fit/conftest.py as a module (its GGUF writers), loaded by path."""
    spec = importlib.util.spec_from_file_location(
        "gpuscout_tests_fit_writers", ROOT / "tests" / "fit" / "conftest.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small llama GGUF model (12 MiB, the fit tests' llama-gqa)."""
    write: Callable[[Path], Path] = _fit_writers().write_llama_gqa
    return write(tmp_path_factory.mktemp("bench-model") / "llama-gqa.gguf")


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A folder with a short path: Ray keeps Unix sockets in RAY_TMPDIR, whose paths are short."""
    path = Path(tempfile.mkdtemp(prefix="gsbench"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_every_bench_script_is_smoke_tested() -> None:
    """Each bench/*.py is in BENCHES (a new benchmark gets its tiny sizes here)."""
    assert sorted(p.name for p in BENCH.glob("*.py")) == sorted(b.script for b in BENCHES)


@pytest.mark.real_machine
@pytest.mark.parametrize("bench", BENCHES, ids=lambda b: b.script)
def test_bench_script_runs_with_tiny_sizes_and_prints_its_figures(
    bench: Bench,
    model: Path,
    tmp_path: Path,
    short_tmp: Path,
    env: dict[str, str],
    request: pytest.FixtureRequest,
) -> None:
    """The script exits 0 and prints the line that carries its figures."""
    run_env = {k: v for k, v in env.items() if not k.startswith("GPUSCOUT_") or k == "GPUSCOUT_TEST_CHILD"}
    run_env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{run_env.get('PATH', '')}"
    run_env["RAY_TMPDIR"] = str(short_tmp)
    run_env.pop("RAY_ADDRESS", None)
    if bench.needs_lavapipe:
        request.getfixturevalue("lavapipe_icd")
    fake_bin = tmp_path / "llama-bin"
    fake_bin.mkdir()
    (fake_bin / "llama-completion").write_text(textwrap.dedent(FAKE_LLAMA))
    (fake_bin / "llama-completion").chmod(0o755)
    (fake_bin / "llama-fit-params").write_text(textwrap.dedent(FAKE_FIT_PARAMS))
    (fake_bin / "llama-fit-params").chmod(0o755)
    args = [a.format(model=model, bin=fake_bin, out=tmp_path / "out.json") for a in bench.args]
    out = subprocess.run(
        [sys.executable, str(BENCH / bench.script), *args],
        cwd=tmp_path,
        env=run_env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    shown = out.stdout + out.stderr
    assert out.returncode == 0, f"{bench.script} exited {out.returncode}:\n{shown[-3000:]}"
    assert re.search(bench.shows, shown), f"{bench.script} printed no {bench.shows!r}:\n{shown[-3000:]}"
