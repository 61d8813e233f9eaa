"""``gpuscout exec --cpu-affinity``: the command runs on the CPUs local to the selected devices,
``--verify`` checks it in a child, and where the kernel gives no locality nothing changes."""

from __future__ import annotations

import json
import sys

import pytest

from gpuscout import DeviceInfo
from gpuscout._selection.affinity import allowed_cpus, supported
from gpuscout.testing import CliRunner

pytestmark = pytest.mark.skipif(not supported(), reason="this platform has no sched_setaffinity")

#: The command whose output says which CPUs it runs on.
SAY_CPUS = [
    sys.executable,
    "-c",
    "import os; print('cpus', ','.join(map(str, sorted(os.sched_getaffinity(0)))))",
]


def _allowed() -> frozenset[int]:
    cpus = allowed_cpus()
    assert cpus, "sched_getaffinity gave nothing"
    return cpus


def _cpus_line(out: str) -> str:
    return next(line for line in out.splitlines() if line.startswith("cpus "))


def _device(local_cpus: str, numa_node: int = 0) -> DeviceInfo:
    return DeviceInfo(
        id="GPU-aaaa1111",
        library="CUDA",
        uuid="GPU-aaaa1111",
        pci_id="0000:01:00.0",
        total_memory=8 << 30,
        numa_node=numa_node,
        local_cpus=local_cpus,
    )


def test_the_command_runs_on_its_device_s_local_cpus(gpuscout_cli: CliRunner) -> None:
    """With --cpu-affinity the child is pinned to the device's local CPU list, and stderr says so."""
    cpu = min(_allowed())
    run = gpuscout_cli(["exec", "--cpu-affinity", "--device", "cuda:0", "--", *SAY_CPUS], [_device(str(cpu))])
    assert run.code == 0, run.err
    assert _cpus_line(run.out) == f"cpus {cpu}"
    assert (
        f"gpuscout: CPU affinity {cpu} (NUMA node 0, local to 0=CUDA (GPU-aaaa1111, 0000:01:00.0))" in run.err
    )


def test_without_the_option_the_command_keeps_every_cpu(gpuscout_cli: CliRunner) -> None:
    """Affinity is asked for, never implied: plain exec leaves the CPUs as they are."""
    allowed = _allowed()
    run = gpuscout_cli(["exec", "--device", "cuda:0", "--", *SAY_CPUS], [_device(str(min(allowed)))])
    assert run.code == 0, run.err
    assert _cpus_line(run.out) == "cpus " + ",".join(map(str, sorted(allowed)))
    assert "CPU affinity" not in run.err


def test_no_locality_runs_the_command_unpinned_with_a_warning(gpuscout_cli: CliRunner) -> None:
    """No local CPU list: the command still runs, on every CPU, with a warning saying why."""
    allowed = _allowed()
    run = gpuscout_cli(["exec", "--cpu-affinity", "--", *SAY_CPUS], [_device("", -1)])
    assert run.code == 0, run.err
    assert _cpus_line(run.out) == "cpus " + ",".join(map(str, sorted(allowed)))
    assert "gpuscout: warning: CPU affinity unchanged: the kernel gives no CPU locality for 0=CUDA" in run.err


def test_local_cpus_outside_the_process_s_set_leave_it_unchanged(gpuscout_cli: CliRunner) -> None:
    """A device local to CPUs this process may not use (another cpuset) changes nothing."""
    outside = max(_allowed()) + 1
    run = gpuscout_cli(["exec", "--cpu-affinity", "--", *SAY_CPUS], [_device(str(outside))])
    assert run.code == 0, run.err
    assert f"the CPUs local to the selection ({outside}) are outside those this process may use" in run.err


def _child_sees(monkeypatch: pytest.MonkeyPatch, device: DeviceInfo) -> None:
    """The verification child lists ``device`` (a real child, printing a recorded answer)."""
    from gpuscout._records import encode as wire
    from gpuscout._selection import verify

    seen = json.dumps({"devices": wire.unstructure([device])})
    monkeypatch.setattr(verify, "child_command", lambda *a: [sys.executable, "-c", f"print({seen!r})"])


def test_verify_checks_the_cpus_in_a_real_child(
    gpuscout_cli: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--verify starts a child on the chosen CPUs and reports the CPUs it runs on."""
    cpu = min(_allowed())
    device = _device(str(cpu))
    _child_sees(monkeypatch, device)
    run = gpuscout_cli(["exec", "--cpu-affinity", "--verify", "--", *SAY_CPUS], [device])
    assert run.code == 0, run.err
    assert f"gpuscout: verified: the child runs on CPUs {cpu}, the ones chosen" in run.err
    assert _cpus_line(run.out) == f"cpus {cpu}"


def test_a_child_on_other_cpus_fails_verify_and_nothing_runs(
    gpuscout_cli: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When the check child runs elsewhere than chosen, exec exits 3 before the command starts."""
    from gpuscout._selection import verify

    cpu = min(_allowed())
    device = _device(str(cpu))
    _child_sees(monkeypatch, device)
    monkeypatch.setattr(verify, "child_cpus", lambda env, cpus, timeout=0: frozenset({cpu + 1}))
    run = gpuscout_cli(["exec", "--cpu-affinity", "--verify", "--", *SAY_CPUS], [device])
    assert run.code == 3
    assert f"MISMATCH: the child runs on CPUs {cpu + 1}, chosen were {cpu}" in run.err
    assert "cpus " not in run.out


def test_verify_with_the_affinity_unchanged_does_not_call_the_cpus_chosen(
    gpuscout_cli: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without locality the CPUs stay as they are: --verify calls them the process's own, not chosen."""
    from gpuscout._records.cpulist import cpulist

    device = _device("", numa_node=-1)
    _child_sees(monkeypatch, device)
    run = gpuscout_cli(["exec", "--cpu-affinity", "--verify", "--", *SAY_CPUS], [device])
    assert run.code == 0, run.err
    assert "CPU affinity unchanged" in run.err and "the ones chosen" not in run.err
    own = cpulist(_allowed())
    assert (
        f"gpuscout: verified: the child runs on CPUs {own}, this process's own (affinity unchanged)"
        in run.err
    )
