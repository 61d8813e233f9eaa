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
    python bench/fit_plan_sweep.py --bin $LLAMA/vulkan --held-out --seed 1 --count 100

``--held-out`` draws over five model shapes written here (``HELD_OUT``), not the fixture's:
what the oracle does on a model nobody fitted a rule to.

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


def _module(name: str, path: Path | None = None) -> Any:
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path or ROOT / "bench" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _llama(
    path: Path,
    n_layer: int,
    n_embd: int,
    n_head: int,
    n_head_kv: int,
    n_ff: int,
    kinds: tuple[str, str],
    out: str | None,
) -> Path:
    """A llama header: ``kinds`` the attention's and the feed-forward's weight types, ``out`` the
    output weight's (None: tied to the embeddings)."""
    pm = _module("fit_plan_models", ROOT / "tests" / "fit_plan_models.py")
    m = pm.HeaderWriter(path, "llama", n_ctx_train=32768)
    pm._attention_kv(m, n_embd, n_layer, n_head, n_head_kv)
    m.kv("feed_forward_length", n_ff)
    m.kv("rope.dimension_count", n_embd // n_head)
    pm._embeddings(m, n_embd, "q8_0", out)
    for i in range(n_layer):
        m.norm(f"blk.{i}.attn_norm.weight", n_embd)
        pm._attn(m, i, n_embd, n_embd, n_head_kv * (n_embd // n_head), (kinds[0],) * 4)
        m.norm(f"blk.{i}.ffn_norm.weight", n_embd)
        pm._ffn(m, i, n_embd, n_ff, (kinds[1],) * 3)
    return Path(m.close())


def _qwen3moe(path: Path, *shape: int) -> Path:
    pm = _module("fit_plan_models", ROOT / "tests" / "fit_plan_models.py")
    return Path(pm._qwen3moe(path, *shape))


#: Header-only models of shapes the fixture does not have, written here and nowhere else, so that
#: no rule of the oracle was fitted with them in view (``--held-out``): llama at n_embd 1024,
#: 1536 and 2048 (a wide n_ff of 11008, tied output), and qwen3moe with 8 and 16 experts.
HELD_OUT = {
    "u-llama1536": lambda p: _llama(p, 12, 1536, 12, 4, 4096, ("q8_0", "q4_k"), "q8_0"),
    "u-llama2048w": lambda p: _llama(p, 16, 2048, 16, 8, 11008, ("q4_k", "q4_k"), None),
    "u-llama1024": lambda p: _llama(p, 24, 1024, 16, 2, 2816, ("q8_0", "q8_0"), "q8_0"),
    "u-moe16": lambda p: _qwen3moe(p, 16, 1536, 16, 4, 16, 4, 768),
    "u-moe12": lambda p: _qwen3moe(p, 12, 2048, 16, 4, 8, 2, 1408),
}


def sweep(
    bench: Any,
    record: Any,
    bin_dir: str,
    seed: int,
    count: int,
    only: str | None,
    folder: Path,
    held_out: bool = False,
) -> int:
    """Draw ``count`` cases with ``seed``; print the misses; return how many agree."""
    fixture = bench.load()
    agreed = seen = 0
    models = sorted(HELD_OUT) if held_out else None
    for case in record.random_cases(seed, count, models=models):
        if only and only not in case["name"]:
            continue
        case["env"] = {"GGML_VK_VISIBLE_DEVICES": ",".join(["0"] * case["devices"])}
        if held_out:
            model = folder / f"{case['model']}.gguf"
            if not model.exists():
                HELD_OUT[case["model"]](model)
        else:
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
    parser.add_argument(
        "--held-out", action="store_true", help="draw over HELD_OUT's model shapes, not the fixture's"
    )
    opts = parser.parse_args(argv)
    bench, record = _module("fit_plan"), _module("fit_plan_record")
    seeds = opts.seed or [777]
    total = 0
    with tempfile.TemporaryDirectory() as tmp:
        for seed in seeds:
            total += sweep(bench, record, opts.bin, seed, opts.count, opts.only, Path(tmp), opts.held_out)
    if not opts.only:
        print(f"all: {total} of {opts.count * len(seeds)} agree")
    return 0


if __name__ == "__main__":
    sys.exit(main())
