"""Cost of isolated discovery: `gpuscout list --isolated --json` against `gpuscout list --json`
(target: at most 2x), paired runs, median wall time. Standard library only.

    python bench/isolation.py [--runs 21] [-- EXTRA GPUSCOUT OPTIONS]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from startup import paired


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("extra", nargs="*", help="more options for both commands")
    args = parser.parse_args()
    exe = shutil.which("gpuscout", path=os.path.dirname(sys.executable))
    base = [exe, "list", "--json"] if exe else [sys.executable, "-m", "gpuscout", "list", "--json"]
    base += args.extra
    plain, isolated, _, isolated_rss = paired(base, [*base, "--isolated"], args.runs)
    print(f"gpuscout list --json:            {plain * 1000:7.1f} ms")
    print(
        f"gpuscout list --isolated --json: {isolated * 1000:7.1f} ms   "
        f"ratio {isolated / plain:.2f} (target <= 2.0)"
    )
    print(f"peak RSS of the isolated run (the host alone): {isolated_rss / 1024:.1f} MiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
