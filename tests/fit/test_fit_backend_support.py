"""Which operations a device's ggml backend runs (``gpuscout_ggml_supports_op``), what ``-sm row``
needs of it (a split buffer type), and what the llama.cpp planner's oracle does with a refused
recurrent scan: ggml's scheduler runs it on the
host, its inputs copied there and its outputs back, and under pipeline parallelism every split
input is kept four times for the whole graph (tests/data/fit_plan/ssm_pp.json, recorded from
llama-fit-params on lavapipe)."""

from __future__ import annotations

import json
import shlex
import time
from pathlib import Path
from typing import Any

import pytest

from gpuscout import DeviceInfo, Scout
from gpuscout.plugin import for_library, ggml_cuda_supports_op, hookimpl
from gpuscout.plugins.vulkan.rules import supports_op as vulkan_supports_op

pytest.importorskip("gguf")
from tests.fit.test_fit_compute_rules import probes  # bench/fit_probes.py, loaded once

ROOT = Path(__file__).resolve().parents[2]
SSM_PP = json.loads((ROOT / "tests" / "data" / "fit_plan" / "ssm_pp.json").read_text())
MiB = 1 << 20
MAMBA2 = {"d_state": 128, "head_dim": 64, "n_head": 16, "n_group": 1, "mamba2": 1}


@pytest.mark.parametrize(
    ("params", "vulkan", "cuda"),
    [
        (MAMBA2, True, True),
        ({**MAMBA2, "d_state": 256}, True, True),
        ({**MAMBA2, "d_state": 64}, False, False),  # falcon-h1, granitehybrid: the host runs it
        ({**MAMBA2, "d_state": 96}, False, True),  # ggml-cuda has a 96 kernel, ggml-vulkan not
        ({**MAMBA2, "head_dim": 8}, False, False),  # head_dim must be a multiple of 16
        ({"d_state": 16, "head_dim": 1, "n_head": 1536, "n_group": 1, "mamba2": 0}, False, True),
        ({"d_state": 16, "head_dim": 1, "n_head": 1000, "n_group": 1, "mamba2": 0}, False, False),
    ],
)
def test_the_backends_judge_the_scan_as_their_supports_op_does(
    params: dict[str, int], vulkan: bool, cuda: bool
) -> None:
    """ggml-vulkan runs only Mamba2's scan with d_state 128 or 256; ggml-cuda (and HIP) adds 96
    and Mamba's d_state-16 scan over a multiple of 128 channels."""
    assert vulkan_supports_op("SSM_SCAN", params) is vulkan
    assert ggml_cuda_supports_op("SSM_SCAN", params) is cuda


def test_the_convolution_and_other_operations() -> None:
    """ggml-vulkan runs every f32 convolution; ggml-cuda needs channels in 128s; an operation
    neither judges is left to the device that holds its layer (None)."""
    assert vulkan_supports_op("SSM_CONV", {"channels": 1280}) is True
    assert ggml_cuda_supports_op("SSM_CONV", {"channels": 1280}) is True
    assert ggml_cuda_supports_op("SSM_CONV", {"channels": 1300}) is False
    assert vulkan_supports_op("MUL_MAT", {}) is None and ggml_cuda_supports_op("MUL_MAT", {}) is None


def _scout(**kw: Any) -> Scout:
    return Scout(entry_points=False, env={"VK_DRIVER_FILES": "/nonexistent"}, platform="linux", **kw)


def test_each_plugin_answers_for_its_own_devices_and_no_answer_means_supported() -> None:
    """The Scout asks the plugins (first answer wins): Vulkan refuses a d_state-64 scan, CUDA,
    ROCm and Metal judge their own devices, and a device no plugin judges runs the operation."""
    scout = _scout(plugins=["vulkan", "cuda", "rocm", "metal"])
    small = {**MAMBA2, "d_state": 64}
    assert scout.ggml_supports_op(DeviceInfo(id="0", library="Vulkan"), "SSM_SCAN", small) is False
    assert scout.ggml_supports_op(DeviceInfo(id="0", library="Vulkan"), "SSM_SCAN", MAMBA2) is True
    assert scout.ggml_supports_op(DeviceInfo(id="0", library="CUDA"), "SSM_SCAN", {**MAMBA2, "d_state": 96})
    assert not scout.ggml_supports_op(DeviceInfo(id="0", library="ROCm"), "SSM_SCAN", small)
    assert scout.ggml_supports_op(DeviceInfo(id="0", library="Metal"), "SSM_SCAN", small) is True
    assert scout.ggml_supports_op(DeviceInfo(id="0", library="Acme"), "SSM_SCAN", small) is True


class _RunsEveryScan:
    """A third-party plugin that says its Vulkan build runs every scan (registered last, so asked first)."""

    @staticmethod
    @for_library("Vulkan")
    def gpuscout_ggml_supports_op(device: DeviceInfo, op: str, params: Any) -> bool | None:
        return True if op == "SSM_SCAN" else None


def test_a_later_plugin_overrules_a_built_in_answer() -> None:
    """A plugin registered after the built-ins (``Scout(extra=...)``) is asked first."""
    scout = _scout(plugins=["vulkan", "mine"], extra=[("mine", _RunsEveryScan())])
    small = {**MAMBA2, "d_state": 64}
    assert scout.ggml_supports_op(DeviceInfo(id="0", library="Vulkan"), "SSM_SCAN", small) is True


def _compute(run: dict[str, Any], folder: Path, host_scan: bool = True) -> dict[str, float]:
    """gpuscout's compute buffer (MiB) per backend for one recorded run."""
    from gpuscout._fit.oracle import Oracle

    bench = probes._bench()
    fixture = bench.load()
    devices = len(run["env"]["GGML_VK_VISIBLE_DEVICES"].split(","))
    case = {
        "name": "ssm",
        "model": run["model"],
        "devices": devices,
        "env": run["env"],
        "options": run["options"],
    }
    model = bench.materialize(fixture, run["model"], folder)
    oracle, kw = probes.oracle_for(bench, fixture, case, model)
    assert isinstance(oracle, Oracle)
    if not host_scan:
        oracle.host_scan = frozenset()
    names = list(kw["names"])
    measured = oracle.measure(probes.config_of(shlex.join(run["options"]), names))
    out = {"Host": measured.usage[-1].graph / MiB}
    for u in measured.usage[:-1]:
        d = next(d for d in oracle.devices if (d.id, d.library) == (u.id, u.library))
        out[names[oracle.devices.index(d)]] = u.graph / MiB
    return out


@pytest.mark.parametrize("run", SSM_PP["runs"], ids=lambda r: f"{r['model']}_" + "_".join(r["options"][2:]))
def test_recurrent_models_under_pipeline_parallelism(
    run: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Every layer offloaded over several devices: a scan the device refuses adds its copied
    inputs (host) and outputs (device) four times; a recurrent-only block after another on the
    device before has its tail run here, the input projection copied in four times."""
    mine = _compute(run, tmp_path_factory.mktemp("ssm"))
    for device, theirs in run["compute_mib"].items():
        # within 8 MiB; without the rules 17-124 MiB low (falcon-h1's Host 26 against 150.67)
        assert abs(mine[device] - theirs) <= 8, (device, mine, theirs)


def test_the_scan_copies_follow_the_plugins_answer(tmp_path: Path) -> None:
    """The oracle counts the host scan's copies only on devices whose backend refuses the
    scan: told that lavapipe runs it, falcon-h1's first device holds 34 MiB less."""
    run = next(r for r in SSM_PP["runs"] if r["model"] == "falcon-h1" and r["options"][-1] == "4,1")
    refused = _compute(run, tmp_path)["Vulkan0"]
    accepted = _compute(run, tmp_path, host_scan=False)["Vulkan0"]
    assert abs(refused - run["compute_mib"]["Vulkan0"]) <= 4
    assert refused - accepted == pytest.approx(4 * 4 * (2 + 0.25), abs=0.01)  # 4 blocks x 4 x (y + state)


def test_row_split_needs_a_split_buffer_and_vulkan_has_none(tmp_path: Path) -> None:
    """-sm row loads the weights into the backend's split buffer type: ggml-vulkan has none, so
    llama.cpp fails to load the model (llama-fit-params: "device Vulkan0 does not support split
    buffers") and the fit gives up, exit 1, on one device or three; not a fit."""
    from gpuscout.cli._commands import fit as fit_cli
    from tests.fit.test_fit_plan import ROOMY, _parse, lavapipe, vulkan_scout

    bench = probes._bench()
    model = bench.materialize(bench.load(), "llama-gqa", tmp_path)
    for visible in ("0", "0,0,0"):
        result = fit_cli.fit_model(
            vulkan_scout(visible), str(model), [lavapipe()], ROOMY, _parse(["-sm", "row"])
        )
        assert (
            result.gave_up == "failed to load model: device Vulkan0 does not support split buffers (-sm row)"
        )
        assert not result.fits
    layer = fit_cli.fit_model(vulkan_scout("0,0"), str(model), [lavapipe()], ROOMY, _parse([]))
    assert not layer.gave_up and layer.fits and "-sm" not in layer.args


def test_row_split_on_cuda_is_planned_and_written_out(tmp_path: Path) -> None:
    """ggml-cuda has a split buffer type: -sm row is planned, and the command says -sm row."""
    from tests.fit.test_fit_plan import ROOMY

    bench = probes._bench()
    model = bench.materialize(bench.load(), "llama-gqa", tmp_path)
    cards = [
        DeviceInfo(
            id=f"GPU-{k}",
            library="CUDA",
            name="NVIDIA RTX A4000",
            total_memory=16 << 30,
            free_memory=15 << 30,
            compute_major=8,
            compute_minor=6,
        )
        for k in "ab"
    ]
    scout = Scout(plugins=["cuda"], entry_points=False, env={})
    result = scout.fit(str(model), devices=cards, system=ROOMY, split_mode="row")
    args = list(result.args)
    assert not result.gave_up and result.fits
    assert args[args.index("-sm") + 1] == "row" and args[args.index("-dev") + 1] == "CUDA0,CUDA1"


class _Hostile:
    """A third-party plugin whose op-support answer hangs, raises or is not a bool."""

    def __init__(self, how: str) -> None:
        self.how = how
        self.calls = 0

    @hookimpl
    def gpuscout_ggml_supports_op(self, device: DeviceInfo, op: str, params: Any) -> Any:
        self.calls += 1
        if self.how == "hangs":
            time.sleep(30)
        if self.how == "raises":
            raise SystemExit(3)
        return "yes"


@pytest.mark.parametrize(("how", "status"), [("hangs", "timeout"), ("raises", "failed"), ("lies", "failed")])
def test_a_hostile_op_support_answer_is_contained(how: str, status: str) -> None:
    """An answer that hangs, raises (SystemExit too) or is no bool is reported and treated as
    no answer: the built-in Vulkan answer decides, and a hanging one is asked only once."""
    plugin = _Hostile(how)
    scout = _scout(plugins=["vulkan", "bad"], extra=[("bad", plugin)], hook_timeout=0.2)
    small = {**MAMBA2, "d_state": 64}
    start = time.monotonic()
    for _ in range(3):
        assert scout.ggml_supports_op(DeviceInfo(id="0", library="Vulkan"), "SSM_SCAN", small) is False
    assert time.monotonic() - start < 2.0
    report = next(r for r in scout.reports if r.name == "bad")
    assert str(report.status) == status and "gpuscout_ggml_supports_op" in report.error
    assert plugin.calls == (1 if how == "hangs" else 3)


ATTN_PP = json.loads((ROOT / "tests" / "data" / "fit_plan" / "attn_pp.json").read_text())


@pytest.mark.parametrize("run", ATTN_PP["runs"], ids=lambda r: f"{r['model']}_" + "_".join(r["options"][-4:]))
def test_attention_left_to_the_host_under_pipeline_parallelism(
    run: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """KQ scores over a device's largest allocation send the attention to the host; with every
    layer offloaded over several devices each block's Q, K and V are kept four times on the
    host and its output four times on the device (one device: no pipeline, no copies)."""
    mine = _compute(run, tmp_path_factory.mktemp("attn"))
    theirs = run["compute_mib"]
    # the host within 4 MiB; without the copies 79-578 MiB low (qwen3 -ts 0,1: 162 against 740.12)
    assert abs(mine["Host"] - theirs["Host"]) <= 4, (mine, theirs)
    for device, value in theirs.items() - {("Host", theirs["Host"])}:
        # the devices 1-24 MiB high in llama.cpp; without the output's copies 9-64 MiB lower still
        assert 0 <= value - mine[device] <= 25, (device, mine, theirs)


MOE_OFFLOAD = json.loads((ROOT / "tests" / "data" / "fit_plan" / "moe_offload.json").read_text())


def test_host_experts_are_copied_to_the_first_gpu_one_weight_at_a_time(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Experts an override leaves on the CPU run on the first GPU: a block there holds its
    expert phase and one expert weight at a time, a block elsewhere only the products of the
    tensors moved, and two rows more when it runs blocks of its own. Before, the whole phase and
    the gate and up weights together: every one of these 24 runs 3-49 MiB high (moe24's up and
    gate on the host: 92 MiB against 43.06)."""
    off = []
    for run in MOE_OFFLOAD["runs"]:
        mine = _compute(run, tmp_path_factory.mktemp("moe"))
        off.append(round(mine["Vulkan0"] - run["compute_mib"]["Vulkan0"], 2))
    # moe8 -ts 1,2 (10 high) and -ub 1024 (12 low) are the two left far off
    assert all(abs(d) <= 12.5 for d in off), off
    assert sum(abs(d) <= 2.5 for d in off) >= 22, off


OFFLOAD_ATTENTION = json.loads((ROOT / "tests" / "data" / "fit_plan" / "offload_attention.json").read_text())


@pytest.mark.parametrize(
    "run", OFFLOAD_ATTENTION["runs"], ids=lambda r: f"{r['model']}_" + "_".join(r["options"])
)
def test_a_host_blocks_attention_on_the_first_gpu_holds_its_rows_too(
    run: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A host block's attention run on the first GPU: the masks, the block's K and V copied in
    and the attention phase with its rows (before, without the rows: 3.5-10 MiB low on three
    of these four runs)."""
    mine = _compute(run, tmp_path_factory.mktemp("offload"))
    assert abs(mine["Vulkan0"] - run["compute_mib"]["Vulkan0"]) <= 2, (mine, run["compute_mib"])
