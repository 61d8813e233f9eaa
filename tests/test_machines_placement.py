"""Recorded machines of the zoo through `exec --cpu-affinity --verify` and `fit --cap`: the CPUs
chosen are the recorded device's local CPUs that this process may use (docs/recordings.md,
"What a replay does not do"), and a cap bounds what the planner puts on every recorded card
(docs/budgets.md, "What usable means")."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

from gpuscout._records.cpulist import cpulist, cpus
from gpuscout._selection.affinity import allowed_cpus, supported
from gpuscout.sizes import GIB, MIB

MACHINES = pathlib.Path(__file__).parent / "machines"
#: Prints the CPUs the command runs on, as exec started it.
SAY_CPUS = "import os; print('cpus', ','.join(map(str, sorted(os.sched_getaffinity(0)))))"
#: The CUDA and ROCm minimum reserve (docs/budgets.md).
RESERVE = 457 * MIB


def _gpuscout(*argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUSCOUT_")}
    return subprocess.run(
        [sys.executable, "-m", "gpuscout", *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.skipif(not supported(), reason="this platform has no sched_setaffinity")
@pytest.mark.parametrize(
    ("machine", "device", "local"),
    [
        ("a100x4_nvlink_pairs", "cuda:0", "0-31,64-95"),
        ("a100x4_nvlink_pairs", "cuda:3", "32-63,96-127"),
        ("mi300x_container_4_of_8", "rocm:2", "48-95,144-191"),
        ("strix_halo_64g_carveout", "rocm:0", "0-31"),
        ("wsl2_rtx4090_rtx3090", "cuda:0", ""),
        ("mi250x_8gcd_2socket", "rocm:5", "64-127,192-255"),
        ("slurm_h100_2_of_8", "cuda:1", "56-111,168-223"),
    ],
    ids=[
        "a100-node0",
        "a100-node1-x8",
        "mi300x-node1",
        "strix-all",
        "wsl2-none",
        "mi250x-node1",
        "slurm-node1",
    ],
)
def test_exec_on_a_recorded_machine_runs_on_the_local_cpus_this_process_may_use(
    machine: str, device: str, local: str
) -> None:
    """It runs on local ∩ allowed, or unchanged with a warning when that is empty; --verify agrees."""
    allowed = allowed_cpus()
    assert allowed
    chosen = (cpus(local) or frozenset()) & allowed
    run = _gpuscout(
        "--replay", str(MACHINES / machine), "exec", "--cpu-affinity", "--verify", "--device", device,
        "--", sys.executable, "-c", SAY_CPUS,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    runs_on = chosen or allowed
    assert f"cpus {','.join(map(str, sorted(runs_on)))}" in run.stdout.splitlines()
    assert "gpuscout: verified: the child sees exactly the 1 selected device: " in run.stderr
    if chosen:
        assert f"gpuscout: CPU affinity {cpulist(chosen)} " in run.stderr
        assert f"the child runs on CPUs {cpulist(chosen)}, the ones chosen" in run.stderr
    else:
        assert "gpuscout: warning: CPU affinity unchanged" in run.stderr
        assert f"the child runs on CPUs {cpulist(allowed)}, this process's own" in run.stderr


def _fit(machine: str, cap: str, layers: int) -> dict[str, object]:
    run = _gpuscout(
        "--replay",
        str(MACHINES / machine),
        "fit",
        "--cap",
        cap,
        "--json",
        "--layers",
        ",".join(["1GiB"] * layers),
    )
    assert run.returncode in (0, 1), run.stderr
    result = json.loads(run.stdout)
    assert isinstance(result, dict)
    assert run.returncode == (0 if result["fits"] else 1)
    return result


@pytest.mark.parametrize(
    ("machine", "cap", "used"),
    [
        ("a100x4_nvlink_pairs", 2 * GIB, 400 * MIB),
        ("a100x4_nvlink_pairs", 20 * GIB, 400 * MIB),
        ("mi300x_container_4_of_8", 10 * GIB, 300 * MIB),
        ("strix_halo_64g_carveout", 16 * GIB, 1 * GIB),
        ("mi250x_8gcd_2socket", 8 * GIB, 12 * MIB),
        ("slurm_h100_2_of_8", 10 * GIB, 600 * MIB),
    ],
    ids=["a100-2GiB", "a100-20GiB", "mi300x-10GiB", "strix-16GiB", "mi250x-8GiB", "slurm-10GiB"],
)
def test_fit_under_a_cap_on_a_recorded_machine_never_places_more_than_the_usable_free(
    machine: str, cap: int, used: int
) -> None:
    """Each card holds 1 GiB layers up to cap - used - its reserve, the rest stay on the CPU: it fits."""
    layers = 60
    result = _fit(machine, f"all={cap // MIB}MiB", layers)
    per_card = (cap - used - RESERVE) // GIB  # docs/budgets.md: usable free = free - (total - cap)
    memory = result["memory"]
    assert isinstance(memory, list)
    gpus = [m for m in memory if m["backend"] != "cpu"]
    assert gpus and all(m["total"] <= cap - used - RESERVE for m in gpus)
    placed = [len(p["layers"]) for p in result["placement"]]  # type: ignore[attr-defined]
    assert placed and all(n <= per_card for n in placed)
    # As many as the cards have room for: the planner fills them before it leaves a layer on the CPU.
    cards = len({m["id"] for m in gpus})
    assert sum(placed) == min(layers, cards * per_card)
    assert sum(placed) + len(result["cpu_layers"]) == layers  # type: ignore[arg-type]
    assert result["fits"] is True
