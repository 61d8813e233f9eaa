"""On a recorded NVIDIA + Radeon machine whose user exported CUDA_VISIBLE_DEVICES=0, the ROCm
rule puts the Radeon's ordinal into HIP_VISIBLE_DEVICES (HIP reads it before CUDA's), so
``--isolate`` can hide CUDA with CUDA_VISIBLE_DEVICES= and a ``--verify`` child sees exactly the
selection, for either vendor (docs/selection.md, ``--isolate``)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from gpuscout.cli import main

TESTS = Path(__file__).parent
RADEON_TREE = TESTS / "plugins" / "rocm" / "trees" / "rx7900xtx"
NVIDIA_MACHINE = TESTS / "machines" / "docker_nvidia"


def _mixed(where: Path, env: dict[str, str]) -> Path:
    """A recording of an NVIDIA GPU (NVML answers) and a Radeon (KFD and amdgpu sysfs)."""
    shutil.copytree(RADEON_TREE, where / "root", symlinks=True)
    shutil.copytree(NVIDIA_MACHINE / "root", where / "root", symlinks=True, dirs_exist_ok=True)
    (where / "answers").mkdir()
    shutil.copy(NVIDIA_MACHINE / "answers" / "cuda.json", where / "answers" / "cuda.json")
    (where / "recording.json").write_text(json.dumps({"format": 1, "platform": "linux", "env": env}))
    return where


@pytest.mark.parametrize(
    "exported", [{"CUDA_VISIBLE_DEVICES": "0"}, {}], ids=["CUDA_VISIBLE_DEVICES=0", "none"]
)
@pytest.mark.parametrize("selector", ["rocm:0", "cuda:0"])
def test_isolate_verify_sees_exactly_one_vendors_card_on_a_mixed_machine(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], exported: dict[str, str], selector: str
) -> None:
    """env --isolate --verify for the Radeon or the NVIDIA GPU: exit 0, no "cannot hide"
    warning, and the child sees exactly the one card (the Radeon with CUDA_VISIBLE_DEVICES=0
    exported was exit 3: its ordinal was written into CUDA's variable)."""
    rec = _mixed(tmp_path / "rec", exported)
    assert main(["--replay", str(rec), "env", "--isolate", "--verify", "--format", "json", selector]) == 0
    captured = capsys.readouterr()
    assert "cannot hide" not in captured.err
    assert "the child sees exactly the 1 selected device: " in captured.err


def test_the_radeons_ordinal_never_goes_into_cuda_visible_devices(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without --isolate the Radeon's ordinal goes to HIP_VISIBLE_DEVICES and the exported
    CUDA_VISIBLE_DEVICES is left as the user set it (the CUDA runtime reads that variable too)."""
    rec = _mixed(tmp_path / "rec", {"CUDA_VISIBLE_DEVICES": "0"})
    assert main(["--replay", str(rec), "env", "--format", "json", "rocm:0"]) == 0
    chosen = json.loads(capsys.readouterr().out)
    assert "CUDA_VISIBLE_DEVICES" not in chosen
    assert chosen["HIP_VISIBLE_DEVICES"] == "0"
