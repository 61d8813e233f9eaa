"""Start-up cost of gpuscout against the packages it is built on, and peak memory against vulkaninfo.

Prints four ratios (targets from the codebase-shape issues):
- `gpuscout list --json` wall time / `import pluggy, attrs, cattrs, structlog` (target <= 1.1)
- `import gpuscout` wall time / the same import (target <= 0.45)
- `gpuscout list --json` wall time / `vulkaninfo --summary` wall time, the median of the
  per-pair ratios over the interleaved rounds (issue 33 item 8: target <= 2.0)
- `gpuscout list --json` peak RSS / `vulkaninfo --summary` peak RSS (target <= 1.5)

Runs are paired (baseline and candidate alternate, so machine noise hits both alike) and the
median wall time of each is compared. Every run may write bytecode (PYTHONDONTWRITEBYTECODE is
removed from its environment): an installed package has its .pyc files, the four libraries of
the baseline already do, and compiling gpuscout's sources on every run measured the compiler,
not gpuscout. Standard library only.

    python bench/startup.py [--runs 21]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time

_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _run(argv: list[str]) -> tuple[float, int]:
    """(wall seconds, peak RSS in KiB) of one run of ``argv``."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_ENV)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}")
    return wall, usage.ru_maxrss


def rounds(base: list[str], cand: list[str], runs: int) -> tuple[list[float], list[float], int, int]:
    """Wall seconds of base and candidate over ``runs`` interleaved rounds (which runs first
    alternates, so a slow spell of the machine hits both alike), and their largest peak RSS."""
    _run(base), _run(cand)  # warm the page cache
    bw, cw, br, cr = [], [], [], []
    for i in range(runs):
        for argv, walls, peaks in ((base, bw, br), (cand, cw, cr))[:: -1 if i % 2 else 1]:
            w, r = _run(argv)
            walls.append(w)
            peaks.append(r)
    return bw, cw, max(br), max(cr)


def paired(base: list[str], cand: list[str], runs: int) -> tuple[float, float, int, int]:
    """Median wall of base and candidate over paired runs, and their largest peak RSS."""
    bw, cw, br, cr = rounds(base, cand, runs)
    return statistics.median(bw), statistics.median(cw), br, cr


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=21)
    args = parser.parse_args()
    py = sys.executable
    exe = shutil.which("gpuscout", path=os.path.dirname(py)) or shutil.which("gpuscout")
    listing = [exe, "list", "--json"] if exe else [py, "-m", "gpuscout", "list", "--json"]
    four = [py, "-c", "import pluggy, attrs, cattrs, structlog"]
    bare = [py, "-c", "pass"]
    few = min(args.runs, max(5, args.runs // 3))  # the side figures: fewer runs, at least 5 (or --runs)

    b, _, _, _ = paired(bare, bare, few)
    print(f"bare interpreter:                     {b * 1000:7.1f} ms")
    base, cand, _, list_rss = paired(four, listing, args.runs)
    print(f"import pluggy+attrs+cattrs+structlog: {base * 1000:7.1f} ms")
    print(
        f"gpuscout list --json:                 {cand * 1000:7.1f} ms   "
        f"ratio {cand / base:.2f} (target <= 1.1)"
    )
    base2, imp, _, _ = paired(four, [py, "-c", "import gpuscout"], args.runs)
    print(
        f"import gpuscout:                      {imp * 1000:7.1f} ms   "
        f"ratio {imp / base2:.2f} (target <= 0.45)"
    )
    vulkaninfo = shutil.which("vulkaninfo")
    if vulkaninfo is None:
        print("vulkaninfo not installed: peak-memory ratio not measured")
        return 0
    vw, lw, vk_rss, list_rss2 = rounds([vulkaninfo, "--summary"], listing, args.runs)
    ratio = statistics.median(c / b for b, c in zip(vw, lw, strict=True))
    print(f"vulkaninfo --summary:                 {statistics.median(vw) * 1000:7.1f} ms")
    print(
        f"gpuscout list --json:                 {statistics.median(lw) * 1000:7.1f} ms   "
        f"paired ratio {ratio:.2f} over {args.runs} rounds (target <= 2.0)"
    )
    peak = max(list_rss, list_rss2)
    print(f"peak RSS vulkaninfo --summary:        {vk_rss / 1024:7.1f} MiB")
    print(
        f"peak RSS gpuscout list --json:        {peak / 1024:7.1f} MiB   "
        f"ratio {peak / vk_rss:.2f} (target <= 1.5)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
