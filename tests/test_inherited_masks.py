"""`env` and `exec` under a mask the parent inherited (a Slurm job's CUDA_VISIBLE_DEVICES or
ROCR_VISIBLE_DEVICES): the job's visible devices are its whole universe, and the variables a
child is given name devices so that the child, inheriting everything else, sees exactly them.

`--verify` runs a real child process. NVIDIA: a four-GPU node composed of the recorded
h100_sxm_x2 and rtx4090_h100_pcie cards (tests/plugins/cuda/recorded/), replayed through
FakeNvmlRecorded in this process and, by a small driver script, in the child. AMD: the recorded
mi300x_cpx tree (tests/plugins/rocm/trees/), eight CPX partitions with a UUID each, which the
child's `gpuscout list --json --root TREE` reads itself.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import pathlib
import sys
from collections.abc import Callable
from typing import Any

import pytest

from gpuscout import Scout
from gpuscout.cli import main
from gpuscout.plugins.cuda import enumeration as nvml
from gpuscout.testing import CliRunner

TESTS = pathlib.Path(__file__).parent
CUDA_FAKES = TESTS / "plugins" / "cuda" / "conftest.py"
CPX = TESTS / "plugins" / "rocm" / "trees" / "mi300x_cpx"
# The node's GPUs in PCI bus order (CUDA_DEVICE_ORDER=PCI_BUS_ID): 01:00, 18:00, 2a:00, 41:00.
H100_2A = "GPU-a1d7e3b2-4f6c-4a8e-8d2b-6c9e1f3a5b07"
H100_PCIE = "GPU-e4b8d2f6-1a3c-4b9e-8f7d-3a6c9e2b5d18"
PARTITION_2, PARTITION_3 = "GPU-8d1e2c3a00003002", "GPU-8d1e2c3a00004003"


@functools.cache
def _cuda_fakes() -> Any:
    # --import-mode=importlib: the CUDA tests' conftest (FakeNvmlRecorded) is loaded by path.
    spec = importlib.util.spec_from_file_location("gpuscout_masks_cuda_fakes", CUDA_FAKES)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def four_gpu_node(no_permission: tuple[int, ...] = ()) -> dict[str, Any]:
    """NVML's answers on the composed node; GPUs at the bus numbers ``no_permission`` refuse
    their handle (NoPermission), as the device cgroup of a job leaves them."""
    fakes = _cuda_fakes()
    gpus = fakes.load_recording("h100_sxm_x2")["gpus"] + fakes.load_recording("rtx4090_h100_pcie")["gpus"]
    for gpu in gpus:
        if gpu["pci"]["bus"] in no_permission:
            gpu["handle"] = "NoPermission"
    return {
        "machine": "composed: 2 x H100 SXM + RTX 4090 + H100 PCIe",
        "composed": True,
        "driver": {"kernel": "550.54.15", "cuda": 12040},
        "gpus": gpus,
    }


#: The verification child: NVML replaced by the same recording, then `gpuscout list --json`.
CHILD = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("fakes", sys.argv[1])
fakes = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fakes)
from gpuscout import Scout
from gpuscout.cli import main
from gpuscout.plugins.cuda import enumeration as nvml
fake = fakes.FakeNvmlRecorded(json.loads(open(sys.argv[2]).read()))
nvml._load_nvml = lambda context: fake
sys.exit(main(["list", "--json"], scout_factory=lambda args: Scout(
    plugins=["cuda"], entry_points=False, platform="linux")))
"""


@pytest.fixture
def slurm_node(monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path) -> Callable[..., Scout]:
    """``slurm_node(cuda_visible, no_permission=())``: a Scout with the cuda plugin alone on the
    four-GPU node, in a job whose environment has CUDA_VISIBLE_DEVICES=``cuda_visible``; a
    `--verify` child replays the same node."""
    from gpuscout._selection import verify

    def make(cuda_visible: str, no_permission: tuple[int, ...] = ()) -> Scout:
        answers = four_gpu_node(no_permission)
        fake = _cuda_fakes().FakeNvmlRecorded(answers)
        monkeypatch.setattr(nvml, "_load_nvml", lambda context: fake)
        recording = tmp_path / "node.json"
        recording.write_text(json.dumps(answers))
        monkeypatch.setattr(
            verify, "child_command", lambda *a: [sys.executable, "-c", CHILD, str(CUDA_FAKES), str(recording)]
        )
        return Scout(
            plugins=["cuda"],
            entry_points=False,
            platform="linux",
            env={"CUDA_VISIBLE_DEVICES": cuda_visible, "CUDA_DEVICE_ORDER": "PCI_BUS_ID"},
        )

    return make


def env_of(
    scout: Scout, selector: str, capsys: pytest.CaptureFixture[str], *options: str
) -> tuple[int, dict[str, str]]:
    """`gpuscout env --format json [options] selector` with ``scout``: status and variables."""
    code = main(["env", "--format", "json", *options, selector], scout_factory=lambda args: scout)
    out = capsys.readouterr().out
    return code, json.loads(out) if out else {}


# -- NVIDIA: a Slurm job given GPUs 2 and 3 of four ----------------------------------------------


def test_a_job_given_gpus_2_and_3_lists_exactly_those_two(slurm_node: Callable[..., Scout]) -> None:
    """CUDA_VISIBLE_DEVICES=2,3 leaves the two cards at 2a:00 and 41:00."""
    found = slurm_node("2,3").discover()
    assert sorted(d.id for d in found.devices) == sorted([H100_2A, H100_PCIE])


def test_the_env_of_the_jobs_second_gpu_names_its_uuid(
    slurm_node: Callable[..., Scout], capsys: pytest.CaptureFixture[str]
) -> None:
    """The child gets the UUID, never "1" or "3", which CUDA would read within its own list."""
    assert env_of(slurm_node("2,3"), H100_PCIE[:12], capsys) == (0, {"CUDA_VISIBLE_DEVICES": H100_PCIE})


def test_verify_passes_for_the_jobs_second_gpu(
    slurm_node: Callable[..., Scout], capsys: pytest.CaptureFixture[str]
) -> None:
    """A real child started with the job's environment plus the selection sees that GPU alone."""
    assert main(["env", "--verify", H100_PCIE[:12]], scout_factory=lambda args: slurm_node("2,3")) == 0
    assert "verified: the child sees exactly the 1 selected device: " in capsys.readouterr().err


def test_a_job_whose_cgroup_hides_gpus_0_and_1_renumbers_from_0(slurm_node: Callable[..., Scout]) -> None:
    """With the device cgroup refusing the other GPUs Slurm writes CUDA_VISIBLE_DEVICES=0,1:
    the job's 0 and 1 are the cards at 2a:00 and 41:00."""
    found = slurm_node("0,1", no_permission=(0x01, 0x18)).discover()
    assert sorted(d.id for d in found.devices) == sorted([H100_2A, H100_PCIE])


def test_verify_passes_in_a_job_whose_cgroup_renumbers_its_gpus(
    gpuscout_cli: CliRunner, slurm_node: Callable[..., Scout]
) -> None:
    """Named by UUID, the job's second GPU is the same in a child whatever the numbering."""
    scout = slurm_node("0,1", no_permission=(0x01, 0x18))
    run = gpuscout_cli(["env", "--verify", H100_PCIE[:12]], scout=scout)
    assert run.code == 0, run.err
    assert "verified" in run.err


# -- AMD: a Slurm job with AMD gres (ROCR_VISIBLE_DEVICES=2,3) -----------------------------------


def cpx(env: dict[str, str]) -> Scout:
    """The ROCm plugin alone over the MI300X CPX tree, in an environment holding ``env``."""
    return Scout(plugins=["rocm"], entry_points=False, platform="linux", root=CPX, env=env)


def verify_cpx(env: dict[str, str], selector: str) -> int:
    """`gpuscout --plugins rocm --root CPX env --verify selector` in a job with ``env``; the
    child is the real `python -m gpuscout list --json` reading the tree."""
    return main(
        ["--plugins", "rocm", "--root", str(CPX), "env", "--verify", selector],
        scout_factory=lambda args: cpx(env),
    )


JOB = {"ROCR_VISIBLE_DEVICES": "2,3"}


def test_a_job_given_partitions_2_and_3_lists_exactly_those_two() -> None:
    """ROCR_VISIBLE_DEVICES=2,3 leaves KFD GPUs 2 and 3."""
    assert sorted(d.id for d in cpx(JOB).discover().devices) == [PARTITION_2, PARTITION_3]


def test_the_env_of_the_jobs_second_partition_names_its_uuid(capsys: pytest.CaptureFixture[str]) -> None:
    """ROCR_VISIBLE_DEVICES gets the UUID (ROCr reads it among all KFD GPUs) and nothing else."""
    assert env_of(cpx(JOB), PARTITION_3, capsys) == (0, {"ROCR_VISIBLE_DEVICES": PARTITION_3})


def test_verify_passes_for_the_jobs_second_partition(capsys: pytest.CaptureFixture[str]) -> None:
    """A real child over the tree, with the job's environment plus the selection, sees it alone."""
    assert verify_cpx(JOB, PARTITION_3) == 0
    assert "verified" in capsys.readouterr().err


def test_an_inherited_hip_index_alone_would_leave_the_child_no_gpu() -> None:
    """Why HIP_VISIBLE_DEVICES must be rewritten: under ROCR_VISIBLE_DEVICES=<one UUID> the
    job's HIP_VISIBLE_DEVICES=1 asks for the second GPU of a one-GPU list, and HIP sees none."""
    assert cpx({"ROCR_VISIBLE_DEVICES": PARTITION_3, "HIP_VISIBLE_DEVICES": "1"}).discover().devices == []


def test_an_inherited_hip_index_is_replaced_by_the_childs_ordinal(capsys: pytest.CaptureFixture[str]) -> None:
    """ROCR_VISIBLE_DEVICES=2,3 and HIP_VISIBLE_DEVICES=1 show partition 3; its env overrides
    HIP_VISIBLE_DEVICES with 0, the partition's place in the child's ROCr list."""
    job = {**JOB, "HIP_VISIBLE_DEVICES": "1"}
    assert env_of(cpx(job), PARTITION_3, capsys) == (
        0,
        {"ROCR_VISIBLE_DEVICES": PARTITION_3, "HIP_VISIBLE_DEVICES": "0"},
    )


def test_verify_passes_with_an_inherited_hip_index(capsys: pytest.CaptureFixture[str]) -> None:
    """The child with HIP_VISIBLE_DEVICES rewritten sees partition 3, as the parent did."""
    assert verify_cpx({**JOB, "HIP_VISIBLE_DEVICES": "1"}, PARTITION_3) == 0
    assert "verified" in capsys.readouterr().err


def test_an_inherited_cuda_list_that_hip_reads_is_shadowed_by_hip_ordinals(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """HIP reads CUDA_VISIBLE_DEVICES when its own is unset (Slurm may set both): the child gets
    HIP_VISIBLE_DEVICES=0, which HIP reads instead, and CUDA's list is left to CUDA."""
    job = {**JOB, "CUDA_VISIBLE_DEVICES": "1"}
    assert env_of(cpx(job), PARTITION_3, capsys) == (
        0,
        {"ROCR_VISIBLE_DEVICES": PARTITION_3, "HIP_VISIBLE_DEVICES": "0"},
    )


def test_verify_passes_with_an_inherited_cuda_list_that_hip_reads(capsys: pytest.CaptureFixture[str]) -> None:
    """The child sees partition 3 although it inherits CUDA_VISIBLE_DEVICES=1."""
    assert verify_cpx({**JOB, "CUDA_VISIBLE_DEVICES": "1"}, PARTITION_3) == 0
    assert "verified" in capsys.readouterr().err


def test_an_inherited_gpu_device_ordinal_gets_the_childs_ordinal(capsys: pytest.CaptureFixture[str]) -> None:
    """GPU_DEVICE_ORDINAL=1 (OpenCL's, and HIP's by ROCm's docs) would name a GPU past the
    child's one: it is rewritten to 0 too."""
    job = {**JOB, "GPU_DEVICE_ORDINAL": "1"}
    assert env_of(cpx(job), PARTITION_3, capsys) == (
        0,
        {"ROCR_VISIBLE_DEVICES": PARTITION_3, "GPU_DEVICE_ORDINAL": "0"},
    )


def test_two_partitions_get_ordinals_in_selection_order(capsys: pytest.CaptureFixture[str]) -> None:
    """Both of the job's partitions under an inherited HIP list: HIP_VISIBLE_DEVICES=0,1."""
    job = {**JOB, "HIP_VISIBLE_DEVICES": "0,1"}
    code, env = env_of(cpx(job), "all", capsys)
    assert (code, env["HIP_VISIBLE_DEVICES"], sorted(env["ROCR_VISIBLE_DEVICES"].split(","))) == (
        0,
        "0,1",
        [PARTITION_2, PARTITION_3],
    )
