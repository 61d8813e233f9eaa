"""What the CUDA and ROCm plugins cost `gpuscout list --json` on this machine (issue 19).

Target: on a machine without an NVIDIA or AMD driver each plugin costs at most 3 ms of
`gpuscout list --json`. Four measurements, each printed with the command it ran:

1. Wall time of `python -m gpuscout list --json` as a fresh process with every plugin, with
   `--disable cuda` and with `--disable rocm`: paired rounds (the three commands interleaved,
   their order rotated each round, so machine noise hits all alike). A plugin's cost is
   median(all) - median(without it); printed too are min(all) - min(without) (the figure a
   busy machine moves least) and the median and quartiles of the per-round differences, each
   also for CPU time (user + system, from ``wait4``). 1b: the same with the Vulkan plugin
   disabled in every command: its driver load (llvmpipe, about half of the run) is most of
   the noise. On a shared machine a run varies by tens of ms: section 3 resolves the
   plugins' own cost far more finely.
2. The import cost of each plugin package and of the modules its hooks import lazily
   (`python -X importtime`, cumulative, with `gpuscout.plugin` already imported, as the host
   has it when it loads a plugin), median over fresh interpreters.
3. The enumerate cost in-process: `Scout(plugins=[name]).discover()` against
   `Scout(plugins=[]).discover()`: the first discovery of a fresh interpreter (cold: lazy
   imports included), median over fresh interpreters, and later discoveries (warm), median
   over many repeats in one interpreter.
4. The import graph: the modules `gpuscout list --json` loads because of each plugin (the
   difference of ``sys.modules`` at exit between all plugins and the plugin disabled).
5. Each plugin's ``elapsed_ms`` in `gpuscout list --json --explain`: the host's own timing of
   its enumerate (all plugins start together, each on its thread; answers are collected in
   plugin order, cuda first, so a later plugin's figure includes waiting for an earlier one),
   median over runs.

Every run may write bytecode (PYTHONDONTWRITEBYTECODE is removed from its environment), as in
bench/startup.py: an installed package has its .pyc files. Standard library only.

    python bench/plugin_cost.py [--runs 20] [--repeats 200] [--process-only]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import time

PY = sys.executable
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
PLUGINS = ("cuda", "rocm")
LIST = [PY, "-m", "gpuscout", "list", "--json"]

#: Modules each plugin's hooks import lazily (enumerate, refresh, rules), for the import table.
LAZY = {
    "cuda": [
        "gpuscout.plugins.cuda",
        "gpuscout.plugins.cuda.enumeration",
        "gpuscout.plugins.cuda.rules",
        "gpuscout.plugins.cuda.visibility",
        "gpuscout.plugins.cuda.order",
    ],
    "rocm": [
        "gpuscout.plugins.rocm",
        "gpuscout.plugins.rocm.enumeration",
        "gpuscout.plugins.rocm.rules",
        "gpuscout.plugins.rocm.sysfs",
        "gpuscout.plugins.rocm.smi",
    ],
}

#: ``python -m gpuscout ARGS``, then every module loaded, as JSON on the last stderr line
#: (as tests/cli/test_cli_imports.py does: sys.modules also sees importlib.import_module).
MODULES_DRIVER = """
import json, os, runpy, sys
sys.argv[0] = "gpuscout"
try:
    runpy.run_module("gpuscout", run_name="__main__", alter_sys=True)
finally:
    os.write(2, ("\\nMODULES " + json.dumps(sorted(sys.modules)) + "\\n").encode())
"""

#: One fresh interpreter: the first discovery's seconds, then ``repeats`` later ones (JSON).
DISCOVER_DRIVER = """
import json, sys, time
from gpuscout import Scout
plugins = json.loads(sys.argv[1])
repeats = int(sys.argv[2])
def once():
    scout = Scout(plugins=plugins)
    start = time.perf_counter()
    scout.discover()
    return time.perf_counter() - start
cold = once()
print(json.dumps({"cold": cold, "warm": [once() for _ in range(repeats)]}))
"""


def show(argv: list[str]) -> str:
    """``argv`` as a shell line, with the interpreter written ``python``."""
    return shlex.join(["python" if a == PY else a for a in argv])


def wall(argv: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds: user + system) of one run of ``argv`` (output discarded; a
    failure stops the benchmark). CPU time is much less moved by other processes than wall."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV)
    _, status, usage = os.wait4(proc.pid, 0)
    took = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{show(argv)} exited {os.waitstatus_to_exitcode(status)}")
    return took, usage.ru_utime + usage.ru_stime


def ms(seconds: float) -> str:
    return f"{seconds * 1000:7.2f} ms"


def _quartiles(values: list[float]) -> str:
    if len(values) < 2:  # --runs 1 (the smoke test): no spread to show
        return "IQR - (one round)"
    q1, _, q3 = statistics.quantiles(values, n=4)
    return f"IQR {q1 * 1000:.2f}..{q3 * 1000:.2f} ms"


def process_cost(runs: int, also_disabled: str = "") -> None:
    """Section 1; with ``also_disabled`` (a plugin name) every command disables it too."""
    block = [also_disabled] if also_disabled else []
    commands = {
        "all": [*LIST, *(["--disable", *block] if block else [])],
        **{f"without {p}": [*LIST, "--disable", ",".join([*block, p])] for p in PLUGINS},
    }
    names = list(commands)
    for argv in commands.values():  # warm the page cache and the bytecode
        wall(argv), wall(argv)
    times: dict[str, list[float]] = {n: [] for n in names}
    cpus: dict[str, list[float]] = {n: [] for n in names}
    for i in range(runs):
        for name in names[i % len(names) :] + names[: i % len(names)]:
            took, cpu = wall(commands[name])
            times[name].append(took)
            cpus[name].append(cpu)
    which = f", every command with {also_disabled} disabled too" if also_disabled else ""
    print(
        f"1{'b' if also_disabled else ''}. `gpuscout list --json` as a fresh process{which}, "
        f"{runs} paired rounds, median wall (and CPU time, user + system, from wait4):"
    )
    for name in names:
        print(
            f"   {ms(statistics.median(times[name]))} wall, "
            f"{ms(statistics.median(cpus[name]))} CPU  {show(commands[name])}"
        )
    for p in PLUGINS:
        for label, series in (("wall", times), ("CPU", cpus)):
            base = series[f"without {p}"]
            diff = statistics.median(series["all"]) - statistics.median(base)
            paired = [a - b for a, b in zip(series["all"], base, strict=True)]
            print(
                f"   {p} costs {ms(diff)} {label:4} = median(all) - median(--disable {p}); "
                f"min(all) - min(without) {ms(min(series['all']) - min(base))}; paired "
                f"differences: median {ms(statistics.median(paired))}, {_quartiles(paired)}"
            )


def import_cost(runs: int) -> None:
    print(
        f"2. import cost, cumulative, median of {runs} fresh interpreters (gpuscout.plugin imported first):"
    )
    for plugin in PLUGINS:
        for module in LAZY[plugin]:
            code = f"import gpuscout.plugin, gpuscout.plugins; import {module}"
            argv = [PY, "-X", "importtime", "-c", code]
            found: list[int] = []
            for _ in range(runs):
                err = subprocess.run(argv, capture_output=True, text=True, env=ENV, check=True).stderr
                for line in err.splitlines():
                    parts = [s.strip() for s in line.removeprefix("import time:").split("|")]
                    if len(parts) == 3 and parts[2] == module:  # top level: no indent
                        found.append(int(parts[1]))
            print(f"   {statistics.median(found) / 1000:7.2f} ms  {show(argv)}")


def discover_cost(runs: int, repeats: int) -> None:
    print(
        f"3. enumerate cost in-process: Scout(plugins=[name]).discover() - "
        f"Scout(plugins=[]).discover(); cold: first discovery, median of {runs} fresh "
        f"interpreters; warm: median of {repeats} later ones"
    )
    results: dict[str, tuple[float, float]] = {}
    for plugins in ([], *([p] for p in PLUGINS)):
        argv = [PY, "-c", DISCOVER_DRIVER, json.dumps(plugins), str(repeats)]
        colds: list[float] = []
        warms: list[float] = []
        for i in range(runs):
            out = subprocess.run(argv, capture_output=True, text=True, env=ENV, check=True)
            answer = json.loads(out.stdout)
            colds.append(answer["cold"])
            if i == 0:
                warms = answer["warm"]
        results[plugins[0] if plugins else ""] = (statistics.median(colds), statistics.median(warms))
    print(
        "   command: python -c '<Scout(plugins=P).discover(), timed>' for P in [], "
        + ", ".join(f"[{p!r}]" for p in PLUGINS)
        + " (DISCOVER_DRIVER in this file)"
    )
    cold0, warm0 = results[""]
    print(f"   plugins=[]:      cold {ms(cold0)}  warm {ms(warm0)}")
    for p in PLUGINS:
        cold, warm = results[p]
        print(
            f"   plugins=[{p!r}]: cold {ms(cold)}  warm {ms(warm)}   -> {p} enumerate "
            f"costs cold {ms(cold - cold0)}, warm {ms(warm - warm0)}"
        )


def host_timing(runs: int) -> None:
    argv = [*LIST, "--explain"]
    found: dict[str, list[float]] = {p: [] for p in PLUGINS}
    for _ in range(runs):
        out = subprocess.run(argv, capture_output=True, text=True, env=ENV, check=True)
        for report in json.loads(out.stdout)["plugins"]:
            if report["name"] in found:
                found[report["name"]].append(report["elapsed_ms"] / 1000)
    print(
        f"5. each plugin's enumerate as the host times it (its report's elapsed_ms: from the "
        f"start of the parallel enumerate until its answer is collected), median of {runs} "
        f"runs of {show(argv)}:"
    )
    for p in PLUGINS:
        print(f"   {p}: {ms(statistics.median(found[p]))}  ({_quartiles(found[p])})")


def loaded(args: list[str]) -> set[str]:
    argv = [PY, "-c", MODULES_DRIVER, *args]
    out = subprocess.run(argv, capture_output=True, text=True, env=ENV)
    last = out.stderr.rstrip("\n").rsplit("\n", 1)[-1]
    if out.returncode != 0 or not last.startswith("MODULES "):
        raise SystemExit(f"{show(argv)} failed: {out.stderr[-400:]}")
    return set(json.loads(last.removeprefix("MODULES ")))


def import_graph() -> None:
    print(
        "4. modules `gpuscout list --json` loads because of each plugin "
        "(sys.modules at exit: all plugins minus --disable NAME):"
    )
    everything = loaded(["list", "--json"])
    for p in PLUGINS:
        extra = sorted(everything - loaded(["list", "--json", "--disable", p]))
        ours = [m for m in extra if m.startswith("gpuscout")]
        other = [m for m in extra if not m.startswith("gpuscout")]
        print(f"   {p}: {len(ours)} gpuscout module(s): {', '.join(ours) or '-'}")
        print(f"   {p}: {len(other)} other module(s): {', '.join(other) or '-'}")


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--runs", type=int, default=20, help="fresh processes per figure")
    parser.add_argument("--repeats", type=int, default=200, help="warm discoveries in-process")
    parser.add_argument("--process-only", action="store_true", help="section 1 (and 1b) alone")
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]} ({PY}), {os.cpu_count()} CPUs")
    process_cost(args.runs)
    # Vulkan's driver load (llvmpipe here) is most of the run and most of its noise.
    process_cost(args.runs, also_disabled="vulkan")
    if args.process_only:
        return 0
    import_cost(args.runs)
    discover_cost(args.runs, args.repeats)
    import_graph()
    host_timing(args.runs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
