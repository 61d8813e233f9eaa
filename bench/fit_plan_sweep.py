"""gpuscout's llama.cpp planner against llama.cpp's fit on cases drawn now, not recorded.

The recorded cases (bench/fit_plan.py) were partly chosen to be hard, and the compute-buffer
rules were fitted with them in view. This draws fresh cases the way the recorded ``random``
group was drawn (bench/fit_plan_record.py ``random_cases``: any model of the fixture, 1-3
lavapipe devices, by chance ``-c``, margins, ``-ub``, ``-np``, ``-fa`` and a quantised cache),
with seeds of your choosing, runs llama-fit-params on each live and compares its printed
decision with gpuscout's, as bench/fit_plan.py compares a recorded case (``fitted`` and the
same reading of a failure)::

    python bench/fit_plan_sweep.py --bin $LLAMA/vulkan --seed 777 --seed 31337 --count 80
    python bench/fit_plan_sweep.py --bin $LLAMA/vulkan --seed 4242 --only dense16

Each miss is printed with both lines; then the agreement per seed and in all. Nothing here is
part of the test suite (it needs the llama.cpp build).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _module(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def sweep(
    bench: Any, record: Any, bin_dir: str, seed: int, count: int, only: str | None, folder: Path
) -> int:
    """Draw ``count`` cases with ``seed``; print the misses; return how many agree."""
    fixture = bench.load()
    agreed = seen = 0
    for case in record.random_cases(seed, count):
        if only and only not in case["name"]:
            continue
        case["env"] = {"GGML_VK_VISIBLE_DEVICES": ",".join(["0"] * case["devices"])}
        model = bench.materialize(fixture, case["model"], folder)
        theirs = bench.rerun(bin_dir, case, model)
        line, _, code = bench.decide(fixture, case, model)
        if theirs.startswith("rc "):
            ok = code in (1, 2)
        else:
            mine, want = bench.fitted(line), bench.fitted(theirs)
            ok = code in (0, 1) and all(mine[k] == want[k] for k in ("-c", "-ngl", "-ts", "-ot"))
        seen += 1
        agreed += ok
        if not ok:
            print(f"x {case['name']} {' '.join(case['options'])}")
            print(f"    llama.cpp: {theirs}")
            print(f"    gpuscout:  {line}")
    print(f"seed {seed}: {agreed} of {seen} agree", flush=True)
    return agreed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--bin", required=True, help="llama.cpp's vulkan build folder")
    parser.add_argument("--seed", type=int, action="append", help="a seed (repeat for more)")
    parser.add_argument("--count", type=int, default=80, help="cases per seed (default 80)")
    parser.add_argument("--only", help="only cases whose name holds this text (a model name)")
    opts = parser.parse_args(argv)
    bench, record = _module("fit_plan"), _module("fit_plan_record")
    seeds = opts.seed or [777]
    total = 0
    with tempfile.TemporaryDirectory() as tmp:
        for seed in seeds:
            total += sweep(bench, record, opts.bin, seed, opts.count, opts.only, Path(tmp))
    if not opts.only:
        print(f"all: {total} of {opts.count * len(seeds)} agree")
    return 0


if __name__ == "__main__":
    sys.exit(main())
