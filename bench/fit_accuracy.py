"""gpuscout fit against what llama.cpp really allocates: a table of figures and ratios.

    python bench/fit_accuracy.py                  # the recorded fixtures (tests/data/fit)
    python bench/fit_accuracy.py --bin DIR        # rerun llama.cpp from DIR (its cpu build) first
    python bench/fit_accuracy.py --only gemma3-270m-q4_k_m --worst 10

For every recorded run (model, context, flash attention, extra llama.cpp options, build) it
prints per backend: model buffers, KV cache (with recurrent state), compute buffer, then the
total, as gpuscout estimates and as llama.cpp reported them (MiB), and the ratio. The tests
(tests/fit/test_fit_accuracy.py) use ``compare`` and hold the same targets: each part within
5 % (or 0.25 MiB), the total within 3 %.
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import shlex
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
FIXTURES = HERE.parent / "tests" / "data" / "fit"
MiB = 1 << 20
#: lavapipe as the Vulkan plugin reports it (maxStorageBufferRange 128 MiB).
LAVAPIPE = {
    "id": "0",
    "library": "Vulkan",
    "name": "llvmpipe",
    "total_memory": 2048 * MiB,
    "free_memory": 2048 * MiB,
    "max_allocation": 128 * MiB,
}


def writers() -> dict[str, Any]:
    """The synthetic models' writers (tests/fit/conftest.py MODELS)."""
    spec = importlib.util.spec_from_file_location("fit_models", HERE.parent / "tests" / "fit" / "conftest.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return dict(module.MODELS)


def materialize(fixture: dict[str, Any], folder: Path) -> Path:
    """The fixture's model file under ``folder``: written by its writer, or the recorded
    header extended (sparse) to the real file's size."""
    name = fixture["model"]["name"]
    target = folder / f"{name}.gguf"
    header = FIXTURES / f"{name}.header.gguf.gz"
    if header.exists():
        with gzip.open(header) as src, open(target, "wb") as dst:
            dst.write(src.read())
            dst.truncate(fixture["model"]["file_size"])
        return target
    return Path(writers()[name](target))


def options(run: dict[str, Any]) -> dict[str, Any]:
    """Scout.fit keywords for a recorded llama.cpp command line."""
    args = list(run["args"])
    kw: dict[str, Any] = {"ctx": run["ctx"], "flash_attn": bool(run["flash_attn"])}
    flags = {
        "-ub": ("ubatch_size", int),
        "-ctk": ("cache_type_k", str),
        "-ctv": ("cache_type_v", str),
        "-np": ("parallel", int),
        "-ngl": ("num_gpu", int),
        "-b": ("batch_size", int),
    }
    i = 0
    while i < len(args):
        if args[i] == "--swa-full":
            kw["swa_full"] = True
        elif args[i] in flags:
            key, kind = flags[args[i]]
            kw[key] = kind(args[i + 1])
            i += 1
        i += 1
    return kw


def figures(result: Any) -> dict[str, dict[str, float]]:
    """gpuscout's figures per backend name as llama.cpp names them (CPU / Vulkan0), MiB."""
    out = {}
    for u in result.usage:
        key = "CPU" if u.library == "cpu" else f"{u.library}0"
        out[key] = {
            "model": u.weights / MiB,
            "kv": u.kv_cache / MiB,
            "compute": u.graph / MiB,
            "output": u.output / MiB,
        }
    return out


def reported(run: dict[str, Any]) -> dict[str, dict[str, float]]:
    """llama.cpp's figures per backend: host buffers (CPU_Mapped, CPU_REPACK, *_Host) under CPU."""
    out: dict[str, dict[str, float]] = {}

    def add(buffer: str, part: str, mib: float) -> None:
        key = "CPU" if buffer.startswith("CPU") or buffer.endswith("_Host") else buffer
        out.setdefault(key, {"model": 0.0, "kv": 0.0, "compute": 0.0, "output": 0.0})[part] += mib

    for part, field in (
        ("model", "model_buffers_mib"),
        ("kv", "kv_buffers_mib"),
        ("kv", "rs_buffers_mib"),
        ("compute", "compute_buffers_mib"),
        ("output", "output_buffers_mib"),
    ):
        for buffer, mib in (run.get(field) or {}).items():
            add(buffer, part, float(mib))
    return out


def compare(fixture: dict[str, Any], run: dict[str, Any], model: Path) -> list[tuple[str, float, float]]:
    """(what, gpuscout MiB, llama.cpp MiB) for each part of each backend, then the total."""
    from gpuscout import DeviceInfo, Scout, SystemInfo

    kw = options(run)
    devices = [DeviceInfo(**LAVAPIPE)] if run["build"] == "vulkan" else []
    if not devices:
        kw.pop("num_gpu", None)
    elif kw.get("num_gpu", 0) > 1 << 16:
        kw["num_gpu"] = -1  # -ngl 99: every layer
    scout = Scout(plugins=[], entry_points=False)
    roomy = SystemInfo(total_memory=64 << 30, free_memory=64 << 30)
    result = scout.fit(str(model), devices=devices, system=roomy, cpu_features=["avx2"], **kw)
    ours, theirs = figures(result), reported(run)
    rows = []
    for backend in sorted(set(ours) | set(theirs)):
        for part in ("model", "kv", "compute"):
            a = ours.get(backend, {}).get(part, 0.0)
            b = theirs.get(backend, {}).get(part, 0.0)
            if a or b:
                rows.append((f"{backend} {part}", a, b))
    total_ours = sum(sum(v.values()) for v in ours.values())
    total_theirs = sum(sum(v.values()) for v in theirs.values())
    rows.append(("total", total_ours, total_theirs))
    return rows


def within(what: str, ours: float, theirs: float) -> bool:
    """The targets: a part within 5 % (or 0.25 MiB: llama.cpp prints 2 decimals), the total 3 %."""
    slack = 0.03 if what == "total" else 0.05
    return abs(ours - theirs) <= max(slack * theirs, 0.25)


def comparable(fixture: dict[str, Any], run: dict[str, Any]) -> bool:
    """Whether llama.cpp completed the run (``--num-gpu N`` is llama.cpp's ``-ngl N``)."""
    return bool(run.get("rc") == 0)


def partial(fixture: dict[str, Any], run: dict[str, Any]) -> bool:
    """A partial offload: some blocks on the GPU, some on the host. Its compute buffers are
    not modelled to the targets (the scheduler's copies for offloaded host operations, and
    which operations a backend supports, decide them): see docs/fit.md."""
    ngl = options(run).get("num_gpu")
    blocks = int(fixture["model"].get("hparams", {}).get("n_layer", 0) or 0)
    return run["build"] != "cpu" and ngl is not None and ngl <= blocks


#: Figures known to be off the targets, and why (docs/fit.md): (model, build, ctx, flash
#: attention, part) -> reason. The tests hold them to a looser bound instead.
KNOWN_OFF: dict[tuple[str, str, int, bool, str], str] = {
    (
        "deepseek2-mla",
        "vulkan",
        8192,
        True,
        "Vulkan0 compute",
    ): "latent attention on ggml-vulkan keeps more of Q than the two copies counted",
    ("qwen3", "vulkan", 8192, False, "CPU compute"): "the host's staging without flash attention",
    ("gemma3-swa", "vulkan", 8192, False, "CPU compute"): "the host's staging without flash attention",
    ("gemma2", "vulkan", 8192, False, "CPU compute"): "the host's staging without flash attention",
}


def known_off(fixture: dict[str, Any], run: dict[str, Any], what: str) -> str | None:
    """Why this figure is not held to the target, or None when it is."""
    if partial(fixture, run):
        return "partial offload"
    if run["build"] != "cpu" and recurrent(fixture):
        return "recurrent blocks on a GPU backend: op support decides what stays on the host"
    key = (fixture["model"]["name"], run["build"], run["ctx"], bool(run["flash_attn"]), what)
    return KNOWN_OFF.get(key)


def recurrent(fixture: dict[str, Any]) -> bool:
    """A model with recurrent blocks (its op support on a GPU backend decides where its scan
    tensors live)."""
    return bool(fixture["model"].get("hparams", {}).get("ssm_d_inner"))


def fixtures(only: list[str] | None = None) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """Every recorded (fixture, run) that llama.cpp completed and gpuscout can be compared on."""
    for path in sorted(FIXTURES.glob("*.json")):
        fixture = json.loads(path.read_text())
        if only and fixture["model"]["name"] not in only:
            continue
        for run in fixture["runs"]:
            if comparable(fixture, run):
                yield fixture, run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", help="a llama.cpp build folder: rerun each recorded command first")
    parser.add_argument("--only", action="append", help="fixture name (repeatable)")
    parser.add_argument("--worst", type=int, default=0, help="print only the N worst rows")
    args = parser.parse_args(argv)
    rows: list[tuple[str, str, str, float, float, str | None]] = []
    with tempfile.TemporaryDirectory() as tmp:
        models: dict[str, Path] = {}
        for fixture, run in fixtures(args.only):
            name = fixture["model"]["name"]
            if name not in models:
                models[name] = materialize(fixture, Path(tmp))
            if args.bin and run["build"] == "cpu":
                sys.path.insert(0, str(HERE))
                from llama_reference import run as rerun

                run = rerun(args.bin, str(models[name]), run["ctx"], run["flash_attn"], run["args"])
            fa = "on" if run["flash_attn"] else "off"
            kind = "partial " if partial(fixture, run) else ""
            label = f"{kind}{run['build']} ctx={run['ctx']} fa={fa} {shlex.join(run['args'])}"
            for what, ours, theirs in compare(fixture, run, models[name]):
                rows.append((name, label.strip(), what, ours, theirs, known_off(fixture, run, what)))

    def ratio(r: tuple[str, str, str, float, float, str | None]) -> float:
        return r[3] / r[4] if r[4] else (1.0 if not r[3] else float("inf"))

    shown = sorted(rows, key=lambda r: -abs(ratio(r) - 1))[: args.worst] if args.worst else rows
    print(f"{'model':<22} {'run':<44} {'part':<16} {'gpuscout':>10} {'llama.cpp':>10} {'ratio':>7}")
    for row in shown:
        name, label, what, ours, theirs, gap = row
        flag = "" if within(what, ours, theirs) else ("  (known gap)" if gap else "  <-- off target")
        print(f"{name:<22} {label:<44} {what:<16} {ours:>10.2f} {theirs:>10.2f} {ratio(row):>7.3f}{flag}")
    held = [r for r in rows if not r[5]]
    gaps = [r for r in rows if r[5]]
    off = sum(not within(r[2], r[3], r[4]) for r in held)
    gap_off = sum(not within(r[2], r[3], r[4]) for r in gaps)
    print(
        f"{len(held)} figures held to the targets, {off} off (part 5 %, total 3 %); "
        f"{len(gaps)} in known gaps (partial offload, recurrent models on a GPU, KNOWN_OFF), "
        f"{gap_off} of them off"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
