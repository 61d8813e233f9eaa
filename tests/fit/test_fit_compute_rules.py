"""The compute-buffer rules the llama.cpp planner's oracle follows, each held to the breakdown
llama.cpp's own fit printed (``--fit-print``, recorded in tests/data/fit_plan/cases.json) for
the case that shows it, through bench/fit_probes.py's replay of that decision."""

from __future__ import annotations

import importlib.util
import json
import shlex
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("gguf")
ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("fit_probes_bench", ROOT / "bench" / "fit_probes.py")
assert _spec and _spec.loader
probes: Any = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(probes)
MiB = 1 << 20


@pytest.fixture(scope="module")
def replay(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Rows of bench/fit_probes.py for one recorded case (models written once per module)."""
    bench = probes._bench()
    fixture = bench.load()
    by_name = {c["name"]: c for c in fixture["cases"]}
    folder = tmp_path_factory.mktemp("fit-rules")

    def rows(name: str) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = probes.rows(fixture, by_name[name], folder, bench)
        return found

    return rows


def compute(rows: list[dict[str, Any]], device: str) -> tuple[float, int]:
    """gpuscout's and llama.cpp's compute buffer (MiB) of ``device`` at llama.cpp's decision."""
    row = next(r for r in rows if r["kind"] == "print" and r["device"] == device)
    return row["mine"][2], row["theirs"][2]


def test_a_gpu_that_runs_no_attention_holds_no_mask(replay: Any) -> None:
    """A GPU that runs no attention (every KQ left on the host) holds no attention mask."""
    mine, theirs = compute(replay("llama-gqa-1dev-c-32768-fitt-2000-fa-off"), "Vulkan0")
    assert abs(mine - theirs) < 2, (mine, theirs)  # 13 MiB; with the 64 MiB mask: 78


def test_a_gpu_holds_only_the_masks_of_the_attention_it_runs(replay: Any) -> None:
    """A GPU holds only the masks of the attention kinds it runs (gemma2: the window's, not the full one)."""
    mine, theirs = compute(replay("gemma2-1dev-c-16384-fitt-1990-fa-off"), "Vulkan0")
    assert abs(mine - theirs) < 2, (mine, theirs)  # 34 MiB; with the full mask too: 66


FA_AUTO = json.loads((ROOT / "tests" / "data" / "fit_plan" / "fa_auto.json").read_text())["runs"]


def _as_case(run: dict[str, Any]) -> dict[str, Any]:
    """A recorded fa_auto.json run in cases.json's shape (for bench/fit_probes.py)."""
    devices = len(run["env"]["GGML_VK_VISIBLE_DEVICES"].split(","))
    rows = [{"device": d, "model_mib": m, "context_mib": c, "compute_mib": x} for d, m, c, x in run["rows"]]
    return {
        "name": f"{run['model']}-{devices}dev-" + "-".join(o.lstrip("-") for o in run["options"]),
        "group": "fa-auto",
        "model": run["model"],
        "devices": devices,
        "env": run["env"],
        "options": run["options"],
        "rc": 0,
        "printed": shlex.join(run["options"]),
        "fit_print_args": run["options"],
        "fit_print": rows,
        "trace": {"probes": []},
    }


@pytest.mark.parametrize("run", FA_AUTO, ids=lambda r: f"{r['model']}-{'_'.join(r['options'][2:])}")
def test_fa_auto_turns_off_when_a_host_attention_block_precedes_a_recurrent_block_on_a_gpu(
    run: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """-fa auto is off exactly when a host attention block is followed by a recurrent-only block on a GPU."""
    bench = probes._bench()
    fixture = bench.load()
    case = _as_case(run)
    folder = tmp_path_factory.mktemp("fa-auto")
    model = bench.materialize(fixture, case["model"], folder)
    oracle, kw = probes.oracle_for(bench, fixture, case, model)
    measured = oracle.measure(probes.config_of(shlex.join(run["options"]), list(kw["names"])))
    assert measured.fa_off == (run["fa"] == "disabled")
    for row in probes.rows(fixture, case, folder, bench):
        if row["device"] != "Host":
            mine, theirs = row["mine"][2], row["theirs"][2]
            # without the rule the disabled runs are 80-95 MiB low (FA-on figures)
            assert abs(mine - theirs) <= 20, (row["device"], mine, theirs)


def test_a_host_attention_before_a_recurrent_block_runs_where_that_block_runs(replay: Any) -> None:
    """A host attention block before a recurrent-only block runs with that block, not on the first GPU."""
    rows = replay("hybrid24-3dev-fitt-1700")
    probe = next(
        r
        for r in rows
        if r["kind"] == "probe" and r["layers"] == [[0, 0, "MOE"], [0, 0, "MOE"], [7, 0, "MOE"]]
    )
    mine, theirs = probe["mine"][0], probe["theirs"][0]
    assert abs(mine - theirs) <= 20, (mine, theirs)  # 55 MiB; with block 17's attention on Vulkan0: 162


@pytest.mark.parametrize("name", ["granitehybrid-1dev-fitt-2020", "falcon-h1-1dev-fitt-2030"])
def test_a_host_recurrent_block_lends_the_first_gpu_its_feed_forward_not_its_scan(
    replay: Any, name: str
) -> None:
    """The first GPU holds a host recurrent block's feed-forward phase; its scan runs on the host."""
    probe = next(r for r in replay(name) if r["kind"] == "probe" and r["layers"] == [[0, 0, "MOE"]])
    mine, theirs = probe["mine"][0], probe["theirs"][0]
    assert abs(mine - theirs) <= 3, (mine, theirs)  # 15 and 14 MiB; with the scan phase: 21 and 21


def test_a_block_whose_experts_stay_on_the_host_runs_them_on_the_first_gpu_not_its_own(replay: Any) -> None:
    """A device whose blocks' experts all stay on the host holds no expert phase for them."""
    mine, theirs = compute(replay("moe8-3dev-c-8192-fitt-1960"), "Vulkan1")
    assert abs(mine - theirs) <= 5, (mine, theirs)  # 15 MiB; with the expert phase on Vulkan1: 38


SCAN = json.loads((ROOT / "tests" / "data" / "fit_plan" / "scan_devices.json").read_text())


def _compute_of(run: dict[str, Any], model_name: str, folder: Path) -> dict[str, float]:
    """gpuscout's compute buffer (MiB) per device for a recorded llama-fit-params run."""
    bench = probes._bench()
    fixture = bench.load()
    case = {**_as_case({**run, "model": model_name, "fa": "enabled", "rows": []}), "fit_print": []}
    model = bench.materialize(fixture, model_name, folder)
    oracle, kw = probes.oracle_for(bench, fixture, case, model)
    names = list(kw["names"])
    measured = oracle.measure(probes.config_of(shlex.join(run["options"]), names))
    by_key = {(u.id, u.library): u for u in measured.usage[:-1]}
    out = {}
    for device in run["compute_mib"]:
        if device == "Host":  # llama.cpp's Vulkan_Host line: the CPU backend's compute buffer
            out[device] = measured.usage[-1].graph / MiB
            continue
        d = oracle.devices[names.index(device)]
        out[device] = by_key[(d.id, d.library)].graph / MiB
    return out


@pytest.mark.parametrize("run", SCAN["runs"], ids=lambda r: "_".join(r["options"][2:]))
def test_the_output_gpu_after_the_first_holds_a_smaller_scan_phase(
    run: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """mamba2-24's output-layer GPU, when not the first, holds one d_inner tensor fewer in its scan phase."""
    mine = _compute_of(run, SCAN["model"], tmp_path_factory.mktemp("scan"))
    for device, theirs in run["compute_mib"].items():
        assert abs(mine[device] - theirs) <= 1.5, (
            device,
            mine,
            theirs,
        )  # 51.73 against 59.6 without the rule


HEAD = json.loads((ROOT / "tests" / "data" / "fit_plan" / "head_devices.json").read_text())


@pytest.mark.parametrize("run", HEAD["runs"], ids=lambda r: "_".join(r["options"][2:]))
def test_the_output_gpu_after_the_first_holds_the_logits_and_one_row(
    run: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The output GPU after the first holds the logits and one row (four more under pipeline parallelism)."""
    mine = _compute_of(run, HEAD["model"], tmp_path_factory.mktemp("head"))
    for device, theirs in run["compute_mib"].items():
        assert abs(mine[device] - theirs) <= 1.5, (device, mine, theirs)  # 74.5 and 92.5 without the rule


LAST_FFN = json.loads((ROOT / "tests" / "data" / "fit_plan" / "last_ffn.json").read_text())


@pytest.mark.parametrize("run", LAST_FFN["runs"], ids=lambda r: "_".join([r["model"], *r["options"][1::2]]))
def test_the_gpu_holding_the_last_block_holds_four_rows_beside_its_feed_forward(
    run: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A lone GPU that holds a model's last block holds that block's feed-forward (gate, up and
    their product) and four rows when n_ff is over twice n_embd; a GPU holding only earlier
    blocks, or the last one among two or three GPUs, two (last_ffn.json)."""
    mine = _compute_of(run, run["model"], tmp_path_factory.mktemp("last"))
    for device, theirs in run["compute_mib"].items():
        # without the rule 57 / 60 / 61 / 68 on one device; with four rows for every block,
        # 132 and 166 on the first of two devices; with four rows on any GPU holding the last
        # block, qwen2-bias's Vulkan1 65.5 and 177.5; with four rows whatever n_ff, qwen3 11
        assert abs(mine[device] - theirs) <= run.get("within_mib", 1.5), (device, mine, theirs)


NOFLASH = json.loads((ROOT / "tests" / "data" / "fit_plan" / "attn_noflash.json").read_text())


@pytest.mark.parametrize("run", NOFLASH["runs"], ids=lambda r: r["model"])
def test_without_flash_attention_a_gpu_holds_q_once_when_q_is_as_wide_as_n_embd(
    run: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Without flash attention a GPU's own block holds its KQ scores, K and V twice, three rows
    and Q once when Q is as wide as n_embd, three times when it is wider (attn_noflash.json)."""
    mine = _compute_of(run, run["model"], tmp_path_factory.mktemp("noflash"))
    for device, theirs in run["compute_mib"].items():
        # without the rule 138, 42.5, 81, 49 and 43 (Q three times); Q once for qwen3: 43
        assert abs(mine[device] - theirs) <= 1.0, (device, mine, theirs)


ABORT = json.loads((ROOT / "tests" / "data" / "fit_plan" / "cache_abort.json").read_text())


@pytest.mark.parametrize("run", ABORT["runs"], ids=lambda r: "_".join(r["options"]))
def test_a_cache_tensor_over_the_largest_allocation_aborts_llama_cpp(
    run: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """llama.cpp's first dry run with a cache tensor over a GPU's largest allocation aborts (no
    decision: gpuscout gives up, exit 1, naming the tensor); otherwise llama.cpp's decision
    (cache_abort.json)."""
    bench = probes._bench()
    fixture = bench.load()
    model = bench.materialize(fixture, ABORT["model"], tmp_path_factory.mktemp("abort"))
    case = {"name": "abort", "devices": 1, "options": run["options"], "env": {"GGML_VK_VISIBLE_DEVICES": "0"}}
    line, _, code, result = bench.decide_full(fixture, case, model)
    if run["rc"]:
        assert code == 1 and result.gave_up.startswith("llama.cpp aborts before its fit decides")
        assert (
            "block 0's cache tensor (256 MiB) is over Vulkan0's largest allocation (128 MiB)"
            in result.gave_up
        )
    else:
        assert code == 0 and not result.gave_up
        assert bench.fitted(line) == bench.fitted(run["printed"])


def test_a_head_run_on_the_first_gpu_from_host_weights_has_its_output_weight_copied_in(replay: Any) -> None:
    """The head op-offloaded to the first GPU holds a copy of the output weight beside the logits."""
    probe = next(
        r
        for r in replay("llama-wide-1dev-fitt-1920")
        if r["kind"] == "probe" and r["layers"] == [[0, 0, "MOE"]]
    )
    mine, theirs = probe["mine"][0], probe["theirs"][0]
    assert abs(mine - theirs) <= 6, (mine, theirs)  # 93 MiB; without the 17.6 MiB Q4_K copy: 75


def test_a_placement_that_turns_fa_auto_off_says_only_that(tmp_path: Path) -> None:
    """hybrid24 -c 4096 -ngl 19 on one lavapipe: the decision runs with -fa off, and its notes say
    "flash attention auto: off for this placement" without the devices' "auto: on" beside it."""
    from gpuscout.cli._commands import fit as fit_cli
    from tests.fit.test_fit_plan import ROOMY, _parse, lavapipe, vulkan_scout

    bench = probes._bench()
    model = bench.materialize(bench.load(), "hybrid24", tmp_path)
    result = fit_cli.fit_model(
        vulkan_scout("0"), str(model), [lavapipe()], ROOMY, _parse(["-c", "4096", "-ngl", "19"])
    )
    args = list(result.args)
    assert args[args.index("-fa") + 1] == "off" and not result.flash_attn
    flash = [n for n in result.notes if n.startswith("flash attention")]
    assert len(flash) == 1 and flash[0].startswith("flash attention auto: off for this placement")


TIED = json.loads((ROOT / "tests" / "data" / "fit_plan" / "tied_head.json").read_text())


@pytest.mark.parametrize("run", TIED["runs"], ids=lambda r: "_".join(r["options"][2:]))
def test_a_head_whose_weight_the_gpu_cannot_hold_runs_on_the_host(
    run: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The head runs on the host when its output weight (here the tied 170 MiB embeddings) is over
    the device's largest allocation, even where the logits alone would fit it: the weight stays in
    host memory and ggml-vulkan does not take a product whose weight it cannot hold."""
    mine = _compute_of(run, TIED["model"], tmp_path_factory.mktemp("tied"))
    for device, theirs in run["compute_mib"].items():
        # Vulkan0 within 1 MiB (2.7-10.9); with the head on the GPU it was 65-130 MiB and the
        # host's 1-3
        assert abs(mine[device] - theirs) <= 1.0, (device, mine, theirs)


PP_HEAD = json.loads((ROOT / "tests" / "data" / "fit_plan" / "pp_head.json").read_text())


@pytest.mark.parametrize("run", PP_HEAD["runs"], ids=lambda r: "_".join(r["options"][1::2]))
def test_the_output_gpu_that_runs_attention_keeps_its_masks_under_the_logits(
    run: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Under pipeline parallelism the output layer's GPU after the first, when it runs attention
    too, holds the logits on top of the masks and their three more copies, and eight rows."""
    mine = _compute_of(run, PP_HEAD["model"], tmp_path_factory.mktemp("pphead"))
    for device, theirs in run["compute_mib"].items():
        assert abs(mine[device] - theirs) <= 1.0, (device, mine, theirs)  # Vulkan1: 72.5 without the rule
