"""``fit_llamacpp``'s decision and result (``gpuscout._fit.decide``), rules found by mutmut's
survivors (tests/MUTATION.md, "Fourth mutmut round: the llama.cpp planner").

The decisions are held to what llama.cpp's llama-fit-params printed for the same model, options
and lavapipe devices (tests/data/fit_plan/cases.json, replayed by bench/fit_plan.py as
tests/fit/test_fit_plan_agreement.py does), only for cases where the two agree; the rest of a
FitResult (notes, usage rows, layer sizes) is gpuscout's own, as docs/fit.md states it. Models
are the recorded header-only files (grown sparse), so each is ready in milliseconds.

Each test's docstring names, on its last line, the mutants it kills.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import attrs
import pytest

from gpuscout import DeviceInfo, Scout, SystemInfo
from gpuscout._fit import estimate as est
from gpuscout._fit.errors import ModelError
from gpuscout._fit.model import read_model
from gpuscout._fit.placement import FitResult
from gpuscout._fit.reader import quant_sizes
from gpuscout.sizes import GIB, MIB

pytest.importorskip("gguf")
ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("fit_plan_bench_gaps3", ROOT / "bench" / "fit_plan.py")
assert _spec and _spec.loader
bench: Any = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)
FIXTURE = bench.load()
CASES = {case["name"]: case for case in FIXTURE["cases"]}
ROOMY = SystemInfo(total_memory=64 * GIB, free_memory=64 * GIB)
LLVMPIPE = "llvmpipe (LLVM 15.0.6, 256 bits)"


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("gaps3-models")


def model(folder: Path, name: str) -> str:
    """A recorded header-only model of cases.json, grown to its file size."""
    return str(bench.materialize(FIXTURE, name, folder))


def replay(folder: Path, name: str) -> tuple[str, int, FitResult]:
    """gpuscout's decision for recorded case ``name``: the argument line, the exit code
    ``--print-args`` gives, and the FitResult; llama.cpp's own answer is asserted equal."""
    case = CASES[name]
    line, _, code, result = bench.decide_full(
        FIXTURE, case, bench.materialize(FIXTURE, case["model"], folder)
    )
    if case["rc"]:
        assert code == 1, (name, line)
    else:
        mine, theirs = bench.fitted(line), bench.fitted(case["printed"])
        assert mine == theirs, (name, line, case["printed"])
    return line, code, result


def fit(path: str, visible: str = "0", **kw: Any) -> FitResult:
    """Scout.fit on lavapipe, listed as GGML_VK_VISIBLE_DEVICES ``visible`` says."""
    env = {"VK_DRIVER_FILES": "/nonexistent", "GGML_VK_VISIBLE_DEVICES": visible}
    scout = Scout(plugins=["vulkan"], entry_points=False, env=env, platform="linux")
    return scout.fit(path, devices=[bench.lavapipe(2048)], system=ROOMY, **kw)


def arg(result: FitResult, flag: str) -> str | None:
    args = list(result.args)
    return args[args.index(flag) + 1] if flag in args else None


def test_split_mode_none_keeps_only_the_main_gpu(folder: Path) -> None:
    """-sm none: llama.cpp keeps only the main GPU (the first ggml device): on two lavapipes
    dense32 at -c 8192 is -ngl 18 on Vulkan0 alone, as llama.cpp printed; no -ts, one GPU row.
    Kills decide.x_fit_llamacpp__mutmut_22 to _26."""
    _, _, result = replay(folder, "dense32-2dev-sm-none-c-8192")
    assert arg(result, "-dev") == "Vulkan0" and arg(result, "-ts") is None
    assert [(u.library, u.id) for u in result.usage] == [("Vulkan", "0"), ("cpu", "")]


def test_the_users_tensor_split_and_overrides_reach_llama_cpps_fit(folder: Path) -> None:
    """-ts and -ot are the user's: llama.cpp measures with them, keeps them when everything
    fits (-ts 1,1 at -c 4096; -ot exps=CPU), and gives up when it would have to move layers
    (-ts 1,1 at -c 16384; an -ot of one tensor that leaves the rest too big).
    Kills decide.x_fit_llamacpp__mutmut_79, _80, _104."""
    _, code, kept = replay(folder, "dense32-2dev-ts-1_1-c-4096")
    assert code == 0 and arg(kept, "-ts") == "1,1"
    _, _, split = replay(folder, "dense32-2dev-ts-1_1-c-16384")
    assert split.gave_up == "model_params::tensor_split already set by user"
    _, code, experts = replay(folder, "moe24-1dev-c-4096-ot-exps")
    assert code == 0 and arg(experts, "-ot") == "exps=CPU"
    _, _, one = replay(folder, "moe24-1dev-c-4096-ot-blk0-up")
    assert one.gave_up == "model_params::tensor_buft_overrides already set by user"


def test_a_model_without_a_training_context_needs_a_context(folder: Path) -> None:
    """Without -c (or with -c 0) the context comes from the model's context_length; a model
    without one is refused with ModelError saying to give --ctx; a given -c needs none, and a
    training context of one token is still one.
    Kills decide.x_fit_llamacpp__mutmut_40, _41, _44, _45."""
    base = read_model(model(folder, "dense32"))
    untrained = attrs.evolve(base, hparams=attrs.evolve(base.hparams, n_ctx_train=0))
    for ctx in (None, 0):
        with pytest.raises(ModelError, match=r"^llama: the model has no context_length; give --ctx$"):
            fit(untrained, ctx=ctx)  # type: ignore[arg-type]
    assert fit(untrained, ctx=4096).args[:2] == ("-c", "4096")  # type: ignore[arg-type]
    one = attrs.evolve(base, hparams=attrs.evolve(base.hparams, n_ctx_train=1))
    assert fit(one).context.n_ctx >= 1  # type: ignore[arg-type]


def test_fa_auto_turned_off_by_a_placement_is_off_everywhere(folder: Path) -> None:
    """llama.cpp turns -fa auto off when a host attention block precedes a recurrent block on a
    GPU (hybrid24 at -ngl 19, tests/data/fit_plan/fa_auto.json): the result says off
    (``flash_attn`` False, ``-fa off``), the KV cache is sized as with -fa off, and one note says
    why in place of the devices' "auto: on".
    Kills decide.x_fit_llamacpp__mutmut_107, _123 to _125."""
    path = model(folder, "hybrid24")
    auto = fit(path, ctx=4096, num_gpu=19)
    off = fit(path, ctx=4096, num_gpu=19, flash_attn=False)
    assert auto.flash_attn is False and arg(auto, "-fa") == "off"
    assert auto.layer_sizes == off.layer_sizes
    fa = [n for n in auto.notes if n.startswith("flash attention")]
    assert fa == [
        "flash attention auto: off for this placement (llama.cpp schedules the attention of the last host "
        "block on the GPU that holds the next, recurrent, block and turns it off)"
    ]


def test_a_decided_flash_attention_is_handed_on(folder: Path) -> None:
    """-fa auto on devices that all support it is on: the result and ``-fa on`` say so.
    Kills decide.x_fit_llamacpp__mutmut_20, _245, _267."""
    result = fit(model(folder, "dense32"), ctx=4096)
    assert result.flash_attn is True and arg(result, "-fa") == "on"


def test_a_device_left_under_its_margin_is_named_with_the_margin(folder: Path) -> None:
    """Where llama.cpp's decision leaves a device less than its margin free (it gave up: -ngl
    fixed), a note names the device by ggml name and model and gives the margin in MiB.
    Kills decide.x_fit_llamacpp__mutmut_127, _129, _130."""
    _, _, result = replay(folder, "dense32-1dev-ngl-99-c-4096")
    assert (
        f"Vulkan0 ({LLVMPIPE}): llama.cpp's decision leaves less than the 1024 MiB margin free there "
        "(it checks a device only when it fills it)"
    ) in result.notes


def test_every_layer_off_the_devices_is_a_cpu_layer_the_output_too(folder: Path) -> None:
    """-ngl 0 keeps every block and the output layer on the CPU: cpu_layers is 0..n_layer.
    Kills decide.x_fit_llamacpp__mutmut_147."""
    result = fit(model(folder, "dense32"), ctx=4096, num_gpu=0)
    assert result.cpu_layers == tuple(range(result.model.hparams.n_layer + 1))


def test_the_usage_rows_are_each_device_that_holds_something_then_the_cpu(folder: Path) -> None:
    """FitResult.usage: a row for each device the decision puts memory on, in ggml's order, and
    the CPU's last (two lavapipes at -ts 1,1: Vulkan0, its second slot 0:Vulkan1, then cpu).
    Kills decide.x_fit_llamacpp__mutmut_153."""
    _, _, result = replay(folder, "dense32-2dev-ts-1_1-c-4096")
    assert [(u.library, u.id) for u in result.usage] == [
        ("Vulkan", "0"),
        ("Vulkan", "0:Vulkan1"),
        ("cpu", ""),
    ]


def test_a_context_past_the_training_one_is_noted(folder: Path) -> None:
    """llama.cpp warns when the context per sequence passes the training context: so does the
    result's note.
    Kills decide.x_fit_llamacpp__mutmut_159."""
    path = model(folder, "dense32")
    train = read_model(path).hparams.n_ctx_train
    result = fit(path, ctx=2 * train)
    assert (
        f"--ctx {2 * train} per sequence is more than the model was trained for ({train}); "
        "llama.cpp warns of a possible training context overflow"
    ) in result.notes


def test_a_layers_size_is_its_weights_plus_its_kv_cache(folder: Path) -> None:
    """layer_sizes: each block's weights plus its KV cache at the decided context, then the
    output layer's weights.
    Kills decide.x_fit_llamacpp__mutmut_175."""
    path = model(folder, "dense32")
    result = fit(path, ctx=8192, num_gpu=10)
    m = read_model(path)
    opts = est.Options(ctx=8192, flash_attn=result.flash_attn)
    kv = est.kv_bytes(m.hparams, result.context, opts, quant_sizes())
    n = m.hparams.n_layer
    assert result.layer_sizes == (*(m.layers.blocks[i] + kv[i] for i in range(n)), m.layers.output)
    assert all(k > 0 for k in kv)


def test_on_macos_swap_does_not_count_for_memory_shared_with_the_gpu(folder: Path) -> None:
    """docs/shared-memory.md: what sits on a shared-memory device and the CPU's share are
    counted together against one pool, plus free swap off macOS only: on darwin a Metal M3 with
    16 GiB of swap free is judged against its 1 GiB pool, and the note says it is more.
    Kills decide.x_fit_llamacpp__mutmut_194 (the platform not passed to the verdict)."""
    m3 = DeviceInfo(
        id="0", library="Metal", name="Apple M3", total_memory=GIB, free_memory=GIB, shared_memory=True
    )
    system = SystemInfo(total_memory=8 * GIB, free_memory=512 * MIB, free_swap=16 * GIB)
    scout = Scout(plugins=["metal"], entry_points=False, env={}, platform="darwin")
    result = scout.fit(model(folder, "dense32"), devices=[m3], system=system, ctx=4096, fit_target=0)
    assert arg(result, "-dev") == "MTL0" and result.fits is False
    assert any(n.endswith("is more than the system memory they share (1.0 GiB)") for n in result.notes)
    assert any(
        n.startswith("Metal 0 (Apple M3): memory shared") and n.endswith(" of 1.0 GiB)") for n in result.notes
    )


def test_no_cpu_offload_counts_tensors_when_only_tensors_stay_on_the_cpu(folder: Path) -> None:
    """--no-cpu-offload with every layer on the device but tensors overridden to the CPU (-cmoe:
    moe24's 24 x 3 expert tensors; -ot: one) refuses and counts the tensors, not layers.
    Kills decide.x_fit_llamacpp__mutmut_214, _222 to _227."""
    path = model(folder, "moe24")
    every = fit(path, ctx=4096, cpu_moe=True, no_cpu_offload=True)
    one = fit(path, ctx=4096, override_tensor=r"blk\.0\.ffn_up_exps=CPU", no_cpu_offload=True)
    assert every.cpu_layers == () and every.fits is False and one.fits is False
    spill = "would stay on the CPU; llama.cpp would spill {}, this fit refuses"
    assert f"--no-cpu-offload: 72 tensors {spill.format('them')}" in every.notes
    assert f"--no-cpu-offload: 1 tensor {spill.format('it')}" in one.notes


def _projector(path: Path, mib: int) -> str:
    """A CLIP projector GGUF whose weights are about ``mib`` MiB (f32 zeros)."""
    import gguf
    import numpy as np

    w = gguf.GGUFWriter(str(path), "clip")
    for key, value in (
        ("clip.vision.image_size", 224),
        ("clip.vision.patch_size", 14),
        ("clip.vision.embedding_length", 64),
        ("clip.vision.attention.head_count", 4),
    ):
        w.add_uint32(key, value)
    w.add_tensor("v.patch_embd.weight", np.ones((64, 588), dtype=np.float16))
    w.add_tensor("mm.0.weight", np.zeros((mib * 256, 1024), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return str(path)


def test_a_projector_and_a_draft_model_take_room_in_every_dry_run(folder: Path) -> None:
    """docs/fit.md: the projector (--mmproj) is reserved on the first device in every dry run,
    and a draft model (-md) is measured on the same devices and added, as llama.cpp's
    common_fit_extra_model does: dense32 at -c 4096 is -ngl 21 alone, fewer layers with a
    100 MiB projector, none beside dense16 as its draft; the arguments name both files.
    Kills decide.x_fit_llamacpp__mutmut_52, _54, _61, _63, _247, _248, _256, _257."""
    path = model(folder, "dense32")
    projector = _projector(folder / "projector.gguf", 100)
    draft = model(folder, "dense16")
    alone = fit(path, ctx=4096)
    with_projector = fit(path, ctx=4096, mmproj=projector)
    with_draft = fit(path, ctx=4096, model_draft=draft)
    assert arg(alone, "-ngl") == "21"
    assert 0 < int(arg(with_projector, "-ngl") or 0) < 21 and arg(with_projector, "--mmproj") == projector
    assert arg(with_draft, "-ngl") == "0" and arg(with_draft, "-md") == draft


def test_without_a_gpu_the_cpu_features_decide_the_repacked_weights(folder: Path) -> None:
    """With no GPU llama.cpp repacks the matrices of its CPU_REPACK types when the CPU has AVX2
    (more with AVX-512): the host's share counts those copies; without the flags it does not.
    Kills decide.x_fit_llamacpp__mutmut_62."""
    path = model(folder, "dense32")
    scout = Scout(
        plugins=["vulkan"], entry_points=False, env={"VK_DRIVER_FILES": "/nonexistent"}, platform="linux"
    )
    flags = scout.fit(path, devices=[], system=ROOMY, ctx=4096, cpu_features=("avx2", "avx512f"))
    plain = scout.fit(path, devices=[], system=ROOMY, ctx=4096, cpu_features=())
    assert flags.usage[-1].total > plain.usage[-1].total


def test_the_result_carries_the_caches_memory_and_dry_runs_of_the_decision(folder: Path) -> None:
    """FitResult: the cache types asked for (-ctk/-ctv q8_0), the per-device memory breakdown
    of the decided placement (the lavapipe's, holding the 10 layers -ngl 10 gives it), and the
    dry runs llama.cpp's fit made: with -c and -ngl fixed and everything fitting, one of the
    given parameters, then the final measure.
    Kills decide.x_fit_llamacpp__mutmut_268, _269, _271, _280, _297."""
    result = fit(model(folder, "dense32"), ctx=4096, num_gpu=10, cache_type_k="q8_0", cache_type_v="q8_0")
    assert (result.cache_type_k, result.cache_type_v) == ("q8_0", "q8_0")
    assert arg(result, "-ctk") == "q8_0" and arg(result, "-ctv") == "q8_0"
    assert [g.id for g in result.memory.gpus] == ["0"]
    assert sum(1 for w in result.memory.gpus[0].weights if w) == 10
    assert result.dry_runs == 2


def test_a_device_left_exactly_its_margin_keeps_it(folder: Path) -> None:
    """common/fit.cpp keeps the parameters when every device has at least its margin free: a
    margin equal to what the decision leaves free is kept (no give-up, no note); one byte more
    and llama.cpp gives up (-ngl fixed) and the note says the margin is not left.
    Kills decide.x_fit_llamacpp__mutmut_133 (`>=`)."""
    path = model(folder, "dense32")
    used = fit(path, ctx=4096, num_gpu=10).usage[0].total
    exact = fit(path, ctx=4096, num_gpu=10, fit_target=2048 * MIB - used)
    over = fit(path, ctx=4096, num_gpu=10, fit_target=2048 * MIB - used + 1)
    assert exact.gave_up == "" and not any("margin free there" in n for n in exact.notes)
    assert over.gave_up == "n_gpu_layers already set by user to 10"
    assert any("margin free there" in n for n in over.notes)
