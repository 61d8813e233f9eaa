"""Settle on real NVIDIA hardware what the CUDA runtime sees, and whether gpuscout agrees.

THIS SCRIPT DOES NOT CHANGE THE MACHINE: no MIG mode change, no GPU reset, no persistence-mode
change, no clock or power setting. It reads NVML, runs the CUDA driver API in child processes
(one of which retains a primary context for ``cuMemGetInfo_v2`` and releases it) and runs gpuscout.

Steps, each under its own timeout, all within ``--budget`` seconds (default 330, under 6 minutes):

1. ``libnvidia-ml.so.1`` must load, else exit 2 at once ("no NVIDIA driver").
2. gpuscout from this tree goes into a temporary folder: ``pip install --no-index --find-links
   scripts/wheelhouse --target DIR .`` (no network needed), then runs as ``python -m gpuscout``
   with ``PYTHONPATH=DIR``. ``--gpuscout CMD`` uses an installed one instead.
3. Cold timing: the first ``gpuscout list --json --plugins cuda`` and ``nvidia-smi -L``.
4. Raw dumps in children (``scripts/device_probes.py``): NVML through ctypes (count, name, UUID,
   PCI, memory v1 and v2, compute capability, MIG mode, persistence mode, driver versions from
   ``nvmlSystemGetDriverVersion``, ``nvmlSystemGetCudaDriverVersion`` and ``_v2``), and the CUDA
   driver API (cuInit, cuDriverGetVersion, cuDeviceGetCount, per device cuDeviceGetUuid_v2, PCI
   attributes 33/34/50, INTEGRATED 18, cuDeviceTotalMem_v2, cuMemGetInfo_v2 in the primary context).
5. NVML against CUDA, and gpuscout's records against NVML.
6. A CUDA_VISIBLE_DEVICES matrix (``matrix_cases``): for each value the CUDA child's devices
   against ``gpuscout list --json --plugins cuda`` run with the same environment.
7. ``gpuscout env best --verify`` and ``gpuscout exec --device cuda:0 --verify -- <CUDA child>``
   must land on the same UUID.
8. Warm timing: the median of three more runs of each command in step 3.

It prints one table of every comparison, writes ``captured_<gpu>.json`` (the recorded-card format of
``tests/plugins/cuda/recorded/``, loadable by the tests' ``FakeNvmlRecorded``) and
``device_check_report.json`` (every raw answer) into ``--out``, else ``$OUT``. What one lent GPU
cannot show (MIG, order across GPUs) is listed as covered by the recorded cases.

The wheelhouse: run ``python3 scripts/device_check.py --prepare`` on a networked machine. It
downloads pure-Python wheels of gpuscout's runtime dependencies plus setuptools (the build
backend) into ``scripts/wheelhouse/`` (git-ignored; name it in the device tool's ``carry``), for
CPython ``--python-version`` (default 3.12, the device image's python3; the wheels are
``py3-none-any``, so the version only steers dependency markers).

Exit status: 0 everything agrees; 1 a disagreement or a step that failed or timed out; 2 no NVIDIA
driver; 3 gpuscout could not be installed (the raw dumps still run); 64 bad usage.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent
PROBES = HERE / "device_probes.py"
WHEELHOUSE = HERE / "wheelhouse"
RECORDED = REPO / "tests" / "plugins" / "cuda" / "recorded"
NVML_LIBRARY = "libnvidia-ml.so.1"
VISIBLE = "CUDA_VISIBLE_DEVICES"

OK, DISAGREE, NO_DRIVER, SETUP_FAILED, USAGE = 0, 1, 2, 3, 64
#: Row statuses; only the first two decide the exit status.
AGREE, DIFFER, FAILED, INFO, COVERED = "agree", "DISAGREE", "FAILED", "info", "covered"
BAD = (DIFFER, FAILED)
#: What one lent GPU cannot show, and the recorded cases that cover it.
COVERED_BY = {
    "MIG instances (one per process)": ("a100_mig.json",),
    "CUDA order across several GPUs": ("h100_sxm_x2.json", "rtx4090_h100_pcie.json"),
    "unified memory (NVML has no memory figures)": ("gb10.json",),
    "driver without nvmlDeviceGetMemoryInfo_v2": ("gtx1080ti_old_driver.json",),
}


# -- pure parts ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    """One CUDA_VISIBLE_DEVICES setting; ``value`` None means unset."""

    name: str
    value: str | None


@dataclass
class Row:
    """One line of the table: what CUDA saw, what gpuscout said, and the verdict."""

    check: str
    cuda: str
    gpuscout: str
    status: str


def matrix_cases(uuids: Sequence[str]) -> list[Case]:
    """The CUDA_VISIBLE_DEVICES values to try, given the UUIDs in CUDA order (first one used)."""
    cases = [Case("unset", None), Case("empty", ""), Case("minus one", "-1"), Case("index twice", "0,0")]
    cases += [Case(f"index {i}", str(i)) for i in range(len(uuids))]
    cases.append(Case("index past the end", str(len(uuids))))
    if uuids:
        full = uuids[0]
        bare = full.removeprefix("GPU-")
        cases += [
            Case("full UUID", full),
            Case("UUID prefix", full[:12]),
            Case("upper-case UUID", full.upper()),
            Case("UUID without GPU-", bare),
        ]
    cases += [Case("leading space", " 0"), Case("index then letters", "0gpu")]
    return cases


def case_env(base: Mapping[str, str], case: Case) -> dict[str, str]:
    """``base`` with CUDA_VISIBLE_DEVICES set as ``case`` says (removed when unset)."""
    env = {k: v for k, v in base.items() if k != VISIBLE}
    if case.value is not None:
        env[VISIBLE] = case.value
    return env


def cuda_uuids(dump: Mapping[str, Any]) -> list[str] | None:
    """The UUIDs a CUDA child saw, in ordinal order; None when it could not tell."""
    if not isinstance(dump.get("count"), int):
        return None
    found = [d.get("uuid") for d in dump.get("devices", [])]
    return [u for u in found if isinstance(u, str)] if len(found) == dump["count"] else None


def scout_uuids(listing: Mapping[str, Any]) -> list[str]:
    """The CUDA devices' UUIDs (else ids) in ``gpuscout list --json`` output."""
    return [
        str(d.get("uuid") or d.get("id"))
        for d in listing.get("devices", [])
        if str(d.get("backend", "")).upper() == "CUDA"
    ]


def show(uuids: Sequence[str] | None) -> str:
    """A UUID list for the table: ``-`` for none."""
    if uuids is None:
        return "?"
    return ",".join(uuids) or "-"


def same_devices(cuda: Sequence[str], scout: Sequence[str]) -> bool:
    """Whether two views hold the same devices (UUIDs ignore case; gpuscout ranks, CUDA numbers)."""
    return sorted(u.lower() for u in cuda) == sorted(u.lower() for u in scout)


def matrix_row(case: Case, cuda: Mapping[str, Any] | str, scout: Mapping[str, Any] | str) -> Row:
    """Compare one matrix case; a str in place of a dump is why that side has no answer."""
    check = f"{VISIBLE}={case.value!r}" if case.value is not None else f"{VISIBLE} unset"
    check = f"{check} ({case.name})"
    seen = cuda_uuids(cuda) if not isinstance(cuda, str) else None
    said = scout_uuids(scout) if not isinstance(scout, str) else None
    cuda_text = cuda if isinstance(cuda, str) else show(seen)
    if not isinstance(cuda, str) and "init" in cuda:
        cuda_text += f" [{cuda['init'].get('error')}]"
    scout_text = scout if isinstance(scout, str) else show(said)
    if seen is None or said is None:
        return Row(check, cuda_text, scout_text, FAILED)
    return Row(check, cuda_text, scout_text, AGREE if same_devices(seen, said) else DIFFER)


def compare(check: str, cuda: Any, scout: Any, informative: bool = False) -> Row:
    """One value from each side: agree when equal (``info`` rows never fail the run)."""
    status = INFO if informative else (AGREE if cuda == scout else DIFFER)
    return Row(check, str(cuda), str(scout), status)


def nvml_rows(nvml: Mapping[str, Any], cuda: Mapping[str, Any]) -> list[Row]:
    """NVML (the gpuscout column) against the CUDA driver API, per UUID."""
    rows = [
        compare(
            "NVML CUDA version _v2 = cuDriverGetVersion",
            cuda.get("driver_version"),
            nvml.get("driver", {}).get("cuda_v2"),
        ),
        compare(
            "NVML CUDA version v1 (info)",
            cuda.get("driver_version"),
            nvml.get("driver", {}).get("cuda"),
            informative=True,
        ),
    ]
    gpus = {str(g.get("uuid")).lower(): g for g in nvml.get("gpus", [])}
    seen = cuda_uuids(cuda) or []
    rows.append(
        compare("device UUIDs: CUDA = NVML", show(sorted(u.lower() for u in seen)), show(sorted(gpus)))
    )
    for device in cuda.get("devices", []):
        gpu = gpus.get(str(device.get("uuid")).lower())
        if gpu is None:
            continue
        label = f"cuda:{device['ordinal']}"
        pci = gpu.get("pci", {})
        rows.append(
            compare(
                f"{label} PCI domain:bus:device",
                (device.get("pci_domain"), device.get("pci_bus"), device.get("pci_device")),
                (pci.get("domain"), pci.get("bus"), pci.get("device")),
            )
        )
        rows.append(
            compare(
                f"{label} compute capability",
                [device.get("compute_major"), device.get("compute_minor")],
                gpu.get("compute"),
            )
        )
        v2 = gpu.get("memory_v2", {})
        rows.append(
            compare(
                f"{label} cuDeviceTotalMem_v2 vs NVML v2 total (info)",
                device.get("total_mem"),
                v2.get("total"),
                informative=True,
            )
        )
        if isinstance(v2.get("total"), int) and isinstance(device.get("total_mem"), int):
            rows.append(
                compare(
                    f"{label} NVML total - reserved - cuDeviceTotalMem (info)",
                    "",
                    v2["total"] - v2.get("reserved", 0) - device["total_mem"],
                    informative=True,
                )
            )
        mem = device.get("mem_info", {})
        rows.append(
            compare(
                f"{label} cuMemGetInfo free/total vs NVML v2 free (info)",
                f"{mem.get('free')}/{mem.get('total')}",
                v2.get("free"),
                informative=True,
            )
        )
        rows.append(compare(f"{label} integrated (info)", device.get("integrated"), "", informative=True))
    return rows


def record_rows(nvml: Mapping[str, Any], cuda: Mapping[str, Any], listing: Mapping[str, Any]) -> list[Row]:
    """gpuscout's CUDA records (unset env) against the CUDA child and NVML, per UUID.

    Totals are the CUDA runtime's (cuDeviceTotalMem_v2), PCI and compute capability NVML's.
    """
    gpus = {str(g.get("uuid")).lower(): g for g in nvml.get("gpus", [])}
    ordinals = {str(d.get("uuid")).lower(): d for d in cuda.get("devices", [])}
    rows = []
    for device in listing.get("devices", []):
        key = str(device.get("uuid") or device.get("id")).lower()
        gpu, seen = gpus.get(key), ordinals.get(key, {})
        if gpu is None or device.get("backend") != "CUDA":
            continue
        pci = gpu.get("pci", {})
        expect_pci = f"{pci.get('domain', 0):04x}:{pci.get('bus', 0):02x}:{pci.get('device', 0):02x}.0"
        name = f"gpuscout {str(device.get('id'))[:12]}"
        rows.append(compare(f"{name} pci_id (NVML | gpuscout)", expect_pci, device.get("pci_id")))
        rows.append(
            compare(
                f"{name} total_memory (cuDeviceTotalMem_v2 | gpuscout)",
                seen.get("total_mem"),
                device.get("total_memory"),
            )
        )
        rows.append(
            compare(
                f"{name} integrated (CUDA attribute 18 | gpuscout)",
                bool(seen.get("integrated")),
                bool(device.get("integration")),
            )
        )
        rows.append(
            compare(
                f"{name} compute (NVML | gpuscout)",
                gpu.get("compute"),
                [device.get("ComputeMajor"), device.get("ComputeMinor")],
            )
        )
    return rows


def covered_rows(gpu_count: int, mig_seen: bool, recorded: pathlib.Path = RECORDED) -> list[Row]:
    """What this machine cannot show, and the recorded files that cover it."""
    rows = []
    for what, files in COVERED_BY.items():
        if (what.startswith("CUDA order") and gpu_count > 1) or (what.startswith("MIG") and mig_seen):
            continue
        names = [f if (recorded / f).is_file() else f"{f} (MISSING)" for f in files]
        rows.append(Row(f"{what}: covered by recorded cases", "", ", ".join(names), COVERED))
    return rows


def render(rows: Sequence[Row]) -> str:
    """The table of every comparison, one row per line, columns padded."""
    head = Row("check", "CUDA runtime", "gpuscout / NVML", "result")
    table = [head, *rows]
    widths = [max(len(getattr(r, f)) for r in table) for f in ("check", "cuda", "gpuscout")]
    lines = []
    for r in table:
        cells = (r.check.ljust(widths[0]), r.cuda.ljust(widths[1]), r.gpuscout.ljust(widths[2]))
        lines.append("  ".join((*cells, r.status)).rstrip())
    return "\n".join(lines) + "\n"


def exit_status(rows: Sequence[Row], installed: bool) -> int:
    """1 on any disagreement or failed step, else 3 when gpuscout was missing, else 0."""
    if any(r.status in BAD for r in rows):
        return DISAGREE
    return OK if installed else SETUP_FAILED


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower().removeprefix("nvidia ")).strip("_") or "gpu"


def recorded_card(nvml: Mapping[str, Any], captured: Mapping[str, Any]) -> dict[str, Any]:
    """NVML's raw dump in the recorded-card format of ``tests/plugins/cuda/recorded/``."""
    driver = nvml.get("driver", {})
    gpus = []
    for raw in nvml.get("gpus", []):
        gpu = {
            k: raw[k]
            for k in (
                "name",
                "uuid",
                "memory_v2",
                "memory_v1",
                "compute",
                "mig_mode",
                "max_mig",
                "mig",
                "handle",
            )
            if k in raw
        }
        pci = raw.get("pci", {})
        gpu["pci"] = {k: pci[k] for k in ("busId", "domain", "bus", "device") if k in pci}
        for key in ("memory_v2", "memory_v1", "mig_mode", "handle"):
            if isinstance(gpu.get(key), dict) and "error" in gpu[key]:
                gpu[key] = {"error": gpu[key]["error"]}
        gpus.append(gpu)
    names = sorted({str(g.get("name")) for g in gpus})
    cuda = driver.get("cuda")
    version = f"{cuda // 1000}.{cuda % 1000 // 10}" if isinstance(cuda, int) else "unknown"
    machine = (
        f"{len(gpus)} x {' + '.join(names)}, driver {driver.get('kernel')}, "
        f"CUDA {version}: captured by scripts/device_check.py"
    )
    return {
        "machine": machine,
        "captured": dict(captured),
        "driver": {k: driver[k] for k in ("kernel", "cuda", "cuda_v2") if k in driver},
        "gpus": gpus,
    }


def fixture_name(card: Mapping[str, Any]) -> str:
    """``captured_<model>[_xN].json`` for a recorded card."""
    gpus = card.get("gpus", [])
    names = sorted({_slug(str(g.get("name"))) for g in gpus}) or ["none"]
    count = f"_x{len(gpus)}" if len(gpus) > 1 else ""
    return f"captured_{'_'.join(names)}{count}.json"


# -- running things -----------------------------------------------------------------------------
@dataclass
class Outcome:
    """A finished (or abandoned) child: exit status, output and wall time."""

    rc: int | None
    stdout: str = ""
    stderr: str = ""
    seconds: float = 0.0
    why: str = ""  # set when the child did not finish normally

    def problem(self) -> str:
        """Why this child gives no answer, or '' when it exited 0."""
        if self.why:
            return self.why
        if self.rc:
            tail = (self.stderr.strip().splitlines() or ["no stderr"])[-1]
            return f"exit {self.rc}: {tail[:120]}"
        return ""


@dataclass
class Runner:
    """Runs children within one overall deadline, each with its own cap."""

    budget: float
    start: float = field(default_factory=time.monotonic)

    def left(self) -> float:
        return self.budget - (time.monotonic() - self.start)

    def run(self, argv: Sequence[str], cap: float, env: Mapping[str, str] | None = None) -> Outcome:
        timeout = min(cap, self.left())
        if timeout < 1:
            return Outcome(None, why="skipped: the overall time budget is spent")
        began = time.perf_counter()
        try:
            done = subprocess.run(
                list(argv),
                env=dict(env) if env is not None else None,
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired:
            return Outcome(None, seconds=timeout, why=f"timed out after {timeout:.0f} s")
        except OSError as exc:
            return Outcome(None, why=f"could not start: {exc}")
        return Outcome(done.returncode, done.stdout, done.stderr, time.perf_counter() - began)


def as_json(outcome: Outcome) -> dict[str, Any] | str:
    """The child's JSON object, or why there is none."""
    if outcome.problem():
        return outcome.problem()
    try:
        value = json.loads(outcome.stdout)
    except ValueError:
        return f"no JSON on stdout: {outcome.stdout.strip()[:80]!r}"
    return value if isinstance(value, dict) else "JSON is not an object"


def prepare(wheelhouse: pathlib.Path, python_version: str) -> int:
    """Download gpuscout's runtime dependencies and setuptools as wheels (needs the network)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    wanted = [*project["project"]["dependencies"], *project["build-system"]["requires"], "wheel"]
    wheelhouse.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--disable-pip-version-check",
        "--only-binary=:all:",
        "--python-version",
        python_version,
        "--implementation",
        "cp",
        "--platform",
        "manylinux2014_x86_64",
        "--platform",
        "any",
        "-d",
        str(wheelhouse),
        *wanted,
    ]
    print("device-check: " + " ".join(command), flush=True)
    rc = subprocess.run(command, check=False).returncode
    if rc == 0:
        print(f"device-check: wheelhouse ready in {wheelhouse} (CPython {python_version})")
    return rc


def install(runner: Runner, wheelhouse: pathlib.Path, target: pathlib.Path) -> Outcome:
    """pip-install this tree and its dependencies from the wheelhouse into ``target``."""
    if not any(wheelhouse.glob("*.whl")):
        return Outcome(None, why=f"no wheels in {wheelhouse}: run --prepare on a networked machine")
    return runner.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-input",
            "--disable-pip-version-check",
            "--no-cache-dir",
            "--no-compile",
            "--no-index",
            "--find-links",
            str(wheelhouse),
            "--target",
            str(target),
            str(REPO),
        ],
        cap=150,
    )


# -- the check ----------------------------------------------------------------------------------
@dataclass
class Check:
    """One run of the device check: its runner, gpuscout command and everything gathered."""

    runner: Runner
    scout: list[str] | None
    env: dict[str, str]
    rows: list[Row] = field(default_factory=list)
    report: dict[str, Any] = field(default_factory=dict)

    def probe(
        self, kind: str, env: Mapping[str, str] | None = None, context: bool = False, cap: float = 60
    ) -> dict[str, Any] | str:
        argv = [sys.executable, str(PROBES), kind, *(["--context"] if context else [])]
        return as_json(self.runner.run(argv, cap, env if env is not None else self.env))

    def listing(self, env: Mapping[str, str] | None = None) -> tuple[dict[str, Any] | str, Outcome]:
        if self.scout is None:
            return "gpuscout not installed", Outcome(None, why="gpuscout not installed")
        done = self.runner.run(
            [*self.scout, "list", "--json", "--plugins", "cuda"], 60, env if env is not None else self.env
        )
        return as_json(done), done

    def timing(self, name: str, argv: Sequence[str], runs: int) -> list[float]:
        seconds = []
        for _ in range(runs):
            done = self.runner.run(argv, 60, self.env)
            if done.problem():
                self.rows.append(Row(f"timing {name}", "", done.problem(), FAILED))
                break
            seconds.append(round(done.seconds, 3))
        self.report.setdefault("timings", {}).setdefault(name, []).extend(seconds)
        return seconds


def timing_rows(timings: Mapping[str, Sequence[float]]) -> list[Row]:
    """Cold (first run) and warm (median of the later runs) wall times, in seconds."""
    rows = []
    for name, seconds in timings.items():
        warm = f"{statistics.median(seconds[1:]):.3f}" if len(seconds) > 1 else "?"
        cold = f"{seconds[0]:.3f}" if seconds else "?"
        rows.append(Row(f"timing {name}: cold | warm median (s)", cold, warm, INFO))
    return rows


def selection_rows(check: Check, best_uuid: str | None) -> list[Row]:
    """``env best --verify`` and ``exec --device cuda:0 --verify`` must land on one UUID."""
    assert check.scout is not None
    rows = []
    done = check.runner.run(
        [*check.scout, "env", "best", "--verify", "--format", "json", "--plugins", "cuda"], 90, check.env
    )
    chosen = as_json(done)
    check.report["env_best"] = {"rc": done.rc, "stdout": done.stdout, "stderr": done.stderr}
    if isinstance(chosen, str):
        return [Row("gpuscout env best --verify", "", chosen, FAILED)]
    child = check.probe("cuda", {**check.env, **{k: str(v) for k, v in chosen.items()}})
    seen = cuda_uuids(child) if not isinstance(child, str) else None
    rows.append(
        compare(
            "env best --verify: CUDA child | gpuscout best (list)",
            show(seen),
            show([best_uuid] if best_uuid else []),
        )
    )
    rows.append(
        compare("env best: CUDA child | CUDA_VISIBLE_DEVICES written", show(seen), chosen.get(VISIBLE))
    )
    done = check.runner.run(
        [
            *check.scout,
            "exec",
            "--plugins",
            "cuda",
            "--device",
            "cuda:0",
            "--verify",
            "--",
            sys.executable,
            str(PROBES),
            "cuda",
        ],
        90,
        check.env,
    )
    check.report["exec_cuda0"] = {"rc": done.rc, "stdout": done.stdout, "stderr": done.stderr}
    ran = as_json(done)
    exec_seen = cuda_uuids(ran) if not isinstance(ran, str) else None
    rows.append(
        Row(
            "exec --device cuda:0 --verify: child | env best child",
            ran if isinstance(ran, str) else show(exec_seen),
            show(seen),
            AGREE if exec_seen is not None and exec_seen == seen else DIFFER,
        )
    )
    return rows


def run_check(check: Check) -> None:
    """Steps 3-8 of the module docstring; fills ``check.rows`` and ``check.report``."""
    smi = shutil.which("nvidia-smi")
    listing = "gpuscout list --json --plugins cuda"
    check.report["timings"] = {}
    first, done = check.listing()  # the cold run: the first NVML user of this check
    if check.scout is not None:
        if done.problem():
            check.rows.append(Row(f"timing {listing}", "", done.problem(), FAILED))
        else:
            check.report["timings"][listing] = [round(done.seconds, 3)]
    if smi:
        check.timing("nvidia-smi -L", [smi, "-L"], 1)
    nvml = check.probe("nvml")
    cuda = check.probe("cuda", context=True, cap=90)
    check.report.update(nvml=nvml, cuda=cuda, gpuscout_list=first)
    if isinstance(nvml, str) or isinstance(cuda, str):
        check.rows.append(Row("raw dumps", str(cuda)[:80], str(nvml)[:80], FAILED))
        return
    check.rows += nvml_rows(nvml, cuda)
    if isinstance(first, dict):
        check.rows += record_rows(nvml, cuda, first)
    uuids = cuda_uuids(cuda) or []
    check.report["matrix"] = []
    for case in matrix_cases(uuids):
        env = case_env(check.env, case)
        child = check.probe("cuda", env)
        listed, _ = check.listing(env)
        check.rows.append(matrix_row(case, child, listed))
        check.report["matrix"].append({"case": asdict(case), "cuda": child, "gpuscout": listed})
    if check.scout is not None:
        said = scout_uuids(first) if isinstance(first, dict) else []
        check.rows += selection_rows(check, said[0] if said else None)
        check.timing(listing, [*check.scout, "list", "--json", "--plugins", "cuda"], 3)
    if smi:
        check.timing("nvidia-smi -L", [smi, "-L"], 3)
    check.rows += timing_rows(check.report["timings"])
    mig_seen = any(
        isinstance(g.get("mig_mode"), list) and g["mig_mode"][0] == 1 for g in nvml.get("gpus", [])
    )
    check.rows += covered_rows(len(nvml.get("gpus", [])), mig_seen)


def write_outputs(check: Check, out: pathlib.Path) -> list[pathlib.Path]:
    """The recorded card (when NVML answered) and the full report, into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    nvml = check.report.get("nvml")
    if isinstance(nvml, dict) and nvml.get("gpus"):
        cuda = check.report.get("cuda")
        card = recorded_card(
            nvml,
            {
                "by": "scripts/device_check.py",
                "date": time.strftime("%Y-%m-%d"),
                "nvml_version": nvml.get("nvml_version"),
                "cuda_driver_version_v2": nvml.get("driver", {}).get("cuda_v2"),
                "cuda_driver_api": cuda.get("driver_version") if isinstance(cuda, dict) else None,
            },
        )
        path = out / fixture_name(card)
        path.write_text(json.dumps(card, indent=2) + "\n")
        written.append(path)
    check.report["rows"] = [asdict(r) for r in check.rows]
    path = out / "device_check_report.json"
    path.write_text(json.dumps(check.report, indent=2, default=str) + "\n")
    written.append(path)
    return written


def arguments(argv: Sequence[str]) -> argparse.Namespace:
    """The command line (see the module docstring)."""
    p = argparse.ArgumentParser(prog="device_check.py", description=__doc__.split("\n")[0])
    p.add_argument(
        "--out",
        type=pathlib.Path,
        help="folder for the fixture and report (default: $OUT when set, else nothing is written)",
    )
    p.add_argument("--gpuscout", help="run this gpuscout command instead of installing one")
    p.add_argument("--wheelhouse", type=pathlib.Path, default=WHEELHOUSE)
    p.add_argument("--budget", type=float, default=330.0, help="seconds for the whole run")
    p.add_argument("--prepare", action="store_true", help="fill the wheelhouse (networked machine) and stop")
    p.add_argument("--python-version", default="3.12", help="CPython version the wheels are for")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the device check; the exit status is described in the module docstring."""
    try:
        args = arguments(sys.argv[1:] if argv is None else argv)
    except SystemExit as exc:
        return USAGE if exc.code else OK
    if args.prepare:
        return prepare(args.wheelhouse, args.python_version)
    import ctypes

    try:
        ctypes.CDLL(NVML_LIBRARY)  # dlopen only: nothing is initialised in this process
    except OSError as exc:
        sys.stderr.write(f"device-check: no NVIDIA driver ({NVML_LIBRARY} cannot be loaded: {exc})\n")
        return NO_DRIVER
    runner = Runner(args.budget)
    env = {k: v for k, v in os.environ.items() if k not in (VISIBLE, "GPUSCOUT_PLUGINS")}
    print(
        f"device-check: read-only (no MIG, reset or persistence-mode change); budget {args.budget:.0f} s",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="gpuscout-device-check-") as target:
        scout: list[str] | None = args.gpuscout.split() if args.gpuscout else None
        if scout is None:
            done = install(runner, args.wheelhouse, pathlib.Path(target))
            print(f"device-check: install {done.problem() or 'ok'} ({done.seconds:.1f} s)", flush=True)
            if not done.problem():
                scout = [sys.executable, "-m", "gpuscout"]
                env["PYTHONPATH"] = os.pathsep.join(filter(None, (target, env.get("PYTHONPATH"))))
        check = Check(runner, scout, env)
        check.report["install"] = "given" if args.gpuscout else ("ok" if scout else "failed")
        run_check(check)
    print(render(check.rows), end="")
    out = args.out or (pathlib.Path(os.environ["OUT"]) if os.environ.get("OUT") else None)
    if out is not None:
        for path in write_outputs(check, out):
            print(f"device-check: wrote {path}")
    status = exit_status(check.rows, scout is not None)
    print(f"device-check: exit {status} after {time.monotonic() - runner.start:.1f} s")
    return status


if __name__ == "__main__":
    sys.exit(main())
