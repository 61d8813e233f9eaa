"""gpuscout's memory oracle against each dry run llama.cpp's fit made (the recorded probes).

For every recorded case (tests/data/fit_plan/cases.json) this measures, with gpuscout's oracle
(``gpuscout._fit.oracle``) on the case's devices and options:

- each probe of llama.cpp's layer search (``trace.probes``: the layers, partial layers and
  overflow kind per device, at the context llama.cpp settled on) against the MiB llama.cpp's
  dry run reported per device;
- llama.cpp's own decision (its printed ``-c -ngl -ts -ot``) against its ``--fit-print``
  breakdown: model, context and compute per device and for the host.

Differences are gpuscout minus llama.cpp in MiB (llama.cpp truncates to whole MiB)::

    python bench/fit_probes.py                   # every case, one line per probe / device
    python bench/fit_probes.py --only NAME ...   # some cases
    python bench/fit_probes.py --summary         # the distribution of the differences only
"""

from __future__ import annotations

import argparse
import importlib.util
import shlex
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MiB = 1 << 20
_KIND = {"ATTN": 1, "UP": 2, "GATE": 3, "MOE": 4}


def _bench() -> Any:
    spec = importlib.util.spec_from_file_location("fit_plan_bench", ROOT / "bench" / "fit_plan.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["fit_plan_bench"] = module
    spec.loader.exec_module(module)
    return module


def oracle_for(bench: Any, fixture: dict[str, Any], case: dict[str, Any], model: Path) -> Any:
    """The oracle gpuscout's planner builds for ``case`` (captured from ``llamacpp.plan``)."""
    from gpuscout._fit import decide

    seen: list[Any] = []
    original = decide.llamacpp.plan

    def spy(oracle: Any, **kw: Any) -> Any:
        seen.append((oracle, kw))
        return original(oracle, **kw)

    decide.llamacpp.plan = spy  # type: ignore[assignment]
    try:
        bench.decide_full(fixture, case, model)
    finally:
        decide.llamacpp.plan = original  # type: ignore[assignment]
    return seen[-1] if seen else None


def config_of(line: str, names: list[str]) -> Any:
    """llama.cpp's printed decision as an oracle Config."""
    from gpuscout._fit.oracle import CPU, Config

    words = shlex.split(line)
    got = {words[i]: words[i + 1] for i in range(len(words) - 1) if words[i].startswith("-")}
    ts = tuple(float(x) for x in got["-ts"].split(",")) if "-ts" in got else ()
    ot: list[tuple[str, int | None]] = []
    for part in got.get("-ot", "").split(",") if "-ot" in got else []:
        pattern, _, buft = part.partition("=")
        ot.append((pattern, CPU if buft == "CPU" else names.index(buft)))
    return Config(int(got["-c"]), int(got["-ngl"]), ts, tuple(ot))


def probe_config(n_ctx: int, probe: dict[str, Any], hp_ngl: int) -> Any:
    """A recorded probe (layers per device) as the Config llama.cpp's fit measured."""
    from gpuscout._fit import llamacpp
    from gpuscout._fit.oracle import CPU, Config

    nd = len(probe["layers"])
    ngl = [llamacpp._Ngl(a, b, _KIND[c]) for a, b, c in probe["layers"]]
    bufts: list[int | None] = [
        k + 1 if (k < nd - 1 and ngl[k].overflow != _KIND["MOE"] and ngl[k].n_part) else CPU
        for k in range(nd)
    ]
    n, ts, ot = llamacpp._settings(ngl, bufts, nd, hp_ngl)
    return Config(n_ctx, n, ts, ot)


def rows(fixture: dict[str, Any], case: dict[str, Any], folder: Path, bench: Any) -> list[dict[str, Any]]:
    """The comparisons of one case."""
    if case["rc"] != 0 or not case["devices"]:
        return []
    model = bench.materialize(fixture, case["model"], folder)
    got = oracle_for(bench, fixture, case, model)
    if got is None:
        return []
    oracle, kw = got
    names = list(kw["names"])
    out: list[dict[str, Any]] = []
    args = case.get("fit_print_args") or []
    decided = config_of(shlex.join(args) if args else case["printed"], names)
    m = oracle.measure(decided)
    by_key = {(u.id, u.library): u for u in m.usage[:-1]}
    for row in case.get("fit_print") or []:
        if row["device"] == "Host":
            u = m.usage[-1]
            mine = (u.weights, u.kv_cache + u.output, u.graph)
        else:
            if row["device"] not in names:
                continue
            d = oracle.devices[names.index(row["device"])]
            u = by_key.get((d.id, d.library))
            mine = (u.weights, u.kv_cache, u.graph) if u is not None else (0, 0, 0)
        theirs = (row["model_mib"], row["context_mib"], row["compute_mib"])
        out.append(
            {
                "kind": "print",
                "case": case["name"],
                "device": row["device"],
                "mine": [x / MiB for x in mine],
                "theirs": list(theirs),
            }
        )
    for i, probe in enumerate(case["trace"].get("probes") or []):
        cfg = probe_config(decided.n_ctx, probe, oracle.model.hparams.n_layer)
        pm = oracle.measure(cfg)
        out.append(
            {
                "kind": "probe",
                "case": case["name"],
                "index": i,
                "layers": probe["layers"],
                "mine": [x / MiB for x in pm.devices],
                "theirs": probe["mem_mib"],
            }
        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--only", nargs="*", default=[], help="case names")
    parser.add_argument("--summary", action="store_true", help="the distribution only")
    opts = parser.parse_args(argv)
    bench = _bench()
    fixture = bench.load()
    cases = [c for c in fixture["cases"] if not opts.only or c["name"] in opts.only]
    hist: Counter[int] = Counter()
    parts: dict[str, Counter[int]] = {"model": Counter(), "context": Counter(), "compute": Counter()}
    with tempfile.TemporaryDirectory() as tmp:
        for case in cases:
            for r in rows(fixture, case, Path(tmp), bench):
                if r["kind"] == "probe":
                    diffs = [round(a - b) for a, b in zip(r["mine"], r["theirs"], strict=False)]
                    for a, b in zip(r["mine"], r["theirs"], strict=False):
                        if a or b:
                            hist[int(a) - b] += 1
                    if not opts.summary:
                        where = f"{r['case']:<44} #{r['index']:<2} {r['layers']}"
                        print(f"probe {where} llama {r['theirs']} d {diffs}")
                else:
                    d = [int(a) - b for a, b in zip(r["mine"], r["theirs"], strict=True)]
                    for key, x in zip(parts, d, strict=True):
                        parts[key][x] += 1
                    if not opts.summary:
                        print(f"print {r['case']:<44} {r['device']:<8} llama {r['theirs']} d {d}")
    print("probe totals, gpuscout - llama.cpp (MiB): count")
    print("  " + ", ".join(f"{k:+d}: {v}" for k, v in sorted(hist.items())))
    exact = sum(v for k, v in hist.items() if abs(k) <= 1)
    print(f"  within 1 MiB: {exact} of {sum(hist.values())}")
    for key, counter in parts.items():
        good = sum(v for k, v in counter.items() if abs(k) <= 1)
        print(f"fit-print {key}: within 1 MiB {good} of {sum(counter.values())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
