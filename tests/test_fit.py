"""gpuscout fit and Scout.fit: sizes from small GGUF files written here, placement, verdict, CLI."""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from gpuscout import DeviceInfo, GpuscoutError, Scout, SystemInfo
from gpuscout._fit.errors import ModelError
from gpuscout.sizes import GIB, MIB
from gpuscout.testing import CliRunner

if TYPE_CHECKING:
    from gguf import GGUFWriter

gguf = pytest.importorskip("gguf")
np = pytest.importorskip("numpy")

ROOMY = SystemInfo(total_memory=64 * GIB, free_memory=64 * GIB)


def finish(w: GGUFWriter, path: Path) -> Path:
    """Write the writer's header, metadata and tensors, and close it."""
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def write_model(
    path: Path,
    *,
    arch: str = "llama",
    blocks: int = 2,
    heads: int = 8,
    kv_heads: int | list[int] = 2,
    embd: int = 64,
    ctx: int = 4096,
    tied: bool = False,
    vocab: int = 16,
) -> Path:
    w = gguf.GGUFWriter(str(path), arch)
    w.add_block_count(blocks)
    w.add_context_length(ctx)
    w.add_embedding_length(embd)
    w.add_feed_forward_length(4 * embd)
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    w.add_tensor("token_embd.weight", np.ones((vocab, embd), dtype=np.float32))
    for i in range(blocks):
        w.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(embd, dtype=np.float32))
        w.add_tensor(f"blk.{i}.attn_q.weight", np.ones((embd, embd), dtype=np.float16))
    w.add_tensor("output_norm.weight", np.ones(embd, dtype=np.float32))
    if not tied:
        w.add_tensor("output.weight", np.ones((vocab, embd), dtype=np.float16))
    return finish(w, path)


def write_q4_model(path: Path, *, blocks: int) -> Path:
    """A llama model whose blocks are one Q4_0 64x64 matrix each (repackable on AVX2)."""
    w = gguf.GGUFWriter(str(path), "llama")
    for key, value in (
        ("block_count", blocks),
        ("context_length", 512),
        ("embedding_length", 64),
        ("attention.head_count", 4),
    ):
        w.add_uint32(f"llama.{key}", value)
    w.add_tensor("token_embd.weight", np.ones((16, 64), dtype=np.float32))
    for i in range(blocks):
        w.add_tensor(
            f"blk.{i}.attn_q.weight",
            np.zeros((64, 64 // 32 * 18), dtype=np.uint8),
            raw_dtype=gguf.GGMLQuantizationType.Q4_0,
        )
    w.add_tensor("output.weight", np.ones((16, 64), dtype=np.float32))
    return finish(w, path)


def block_bytes(embd: int = 64) -> int:
    return embd * 4 + embd * embd * 2


def gpu(i: int = 0, free: int = 20 * GIB, **kw: object) -> DeviceInfo:
    return DeviceInfo(
        **{  # type: ignore[arg-type]
            "id": f"GPU-{i}",
            "library": "CUDA",
            "name": f"CUDA{i}",
            "total_memory": 24 * GIB,
            "free_memory": free,
            "compute_major": 8,
            "compute_minor": 9,
            **kw,
        }
    )


def scout() -> Scout:
    return Scout(plugins=["cuda"], entry_points=False)


def test_block_weights_are_the_tensors_written(tmp_path: Path) -> None:
    """Each block's weights are its tensors' bytes; the output layer holds output and its norm."""
    result = scout().fit(write_model(tmp_path / "m.gguf"), devices=[], system=ROOMY, ctx=256, cpu_features=())
    assert list(result.model.layers.blocks) == [block_bytes()] * 2
    assert result.model.layers.output == 64 * 4 + 16 * 64 * 2
    assert result.model.layers.input == 16 * 64 * 4


def test_kv_cache_for_grouped_query_attention_is_padded_to_256_cells(tmp_path: Path) -> None:
    """ctx 300 becomes 512 cells; K and V rows are n_head_kv x head size, f16."""
    result = scout().fit(
        write_model(tmp_path / "m.gguf", heads=8, kv_heads=2),
        devices=[],
        system=ROOMY,
        ctx=300,
        cpu_features=(),
    )
    assert result.context.n_ctx == 512
    assert result.usage[-1].kv_cache == 2 * 512 * 2 * 8 * (2 + 2)


def test_k_and_v_cache_types_count_separately(tmp_path: Path) -> None:
    """q8_0 keys (34 bytes per 32) with f16 values."""
    result = scout().fit(
        write_model(tmp_path / "m.gguf", kv_heads=4),
        devices=[],
        system=ROOMY,
        ctx=256,
        cache_type_k="q8_0",
        cache_type_v="f16",
        flash_attn=True,
        cpu_features=(),
    )
    per_layer = 256 * (32 // 32 * 34 + 32 * 2)
    assert result.usage[-1].kv_cache == 2 * per_layer


def test_quantized_v_cache_without_flash_attention_is_refused(tmp_path: Path) -> None:
    """llama.cpp refuses a quantized V cache without flash attention; so does fit."""
    with pytest.raises(ModelError, match="flash"):
        scout().fit(
            write_model(tmp_path / "m.gguf"),
            devices=[],
            system=ROOMY,
            cache_type_v="q8_0",
            flash_attn=False,
            cpu_features=(),
        )


def test_parallel_sequences_share_the_context(tmp_path: Path) -> None:
    """--parallel 4 with ctx 8192: 2048 cells per sequence, 8192 in all, output buffer x4."""
    one = scout().fit(write_model(tmp_path / "m.gguf"), devices=[], system=ROOMY, ctx=8192, cpu_features=())
    four = scout().fit(
        one.model, planner="ollama", devices=[], system=ROOMY, ctx=8192, parallel=4, cpu_features=()
    )
    assert four.context.n_ctx_seq == 2048 and four.usage[-1].kv_cache == one.usage[-1].kv_cache
    assert four.usage[-1].output == 4 * one.usage[-1].output


def test_tied_output_is_counted_again_on_the_gpu_that_holds_it(tmp_path: Path) -> None:
    """Without output.weight the token embeddings are loaded a second time on the output's GPU."""
    result = scout().fit(
        write_model(tmp_path / "m.gguf", tied=True, vocab=4096),
        devices=[gpu()],
        system=ROOMY,
        ctx=256,
        cpu_features=(),
    )
    embedding = 4096 * 64 * 4
    assert result.placement[0].layers == [0, 1, 2]
    assert result.usage[0].weights == 2 * block_bytes() + 64 * 4 + embedding


def test_a_tensor_past_the_device_largest_allocation_stays_on_the_cpu(tmp_path: Path) -> None:
    """A tied output over max_allocation is not copied to the device (it stays mapped on the host)."""
    result = scout().fit(
        write_model(tmp_path / "m.gguf", tied=True, vocab=4096),
        devices=[gpu(max_allocation=MIB // 2)],
        system=ROOMY,
        ctx=256,
        cpu_features=(),
    )
    assert result.usage[0].weights == 2 * block_bytes() + 64 * 4


def test_a_small_model_lands_on_one_of_eight_gpus(tmp_path: Path) -> None:
    """Fewest GPUs first: a graph is reserved only where layers are, so one 24 GiB GPU takes it all."""
    devices = [gpu(i) for i in range(8)]
    result = scout().fit(
        write_model(tmp_path / "m.gguf"),
        devices=devices,
        system=ROOMY,
        ctx=2048,
        cpu_features=(),
        planner="ollama",
    )
    assert len(result.placement) == 1 and result.placement.sum() == 3
    assert len(result.usage) == 2  # the one GPU, then the CPU


def test_num_gpu_keeps_layers_off_the_integrated_gpu_while_the_discrete_has_room(tmp_path: Path) -> None:
    """--num-gpu N on a discrete + integrated box places every layer on the discrete one."""
    devices = [gpu(0), gpu(1, integrated=True, free=30 * GIB)]
    result = scout().fit(
        write_model(tmp_path / "m.gguf"), devices=devices, system=ROOMY, ctx=2048, num_gpu=3, cpu_features=()
    )
    assert [g.id for g in result.placement] == ["GPU-0"]


def test_repacked_cpu_weights_follow_the_cpu_features(tmp_path: Path) -> None:
    """Q4_0 matrices get a CPU_REPACK copy with AVX2 and none without, said in a note."""
    path = write_q4_model(tmp_path / "q.gguf", blocks=1)
    plain = scout().fit(path, planner="ollama", devices=[], system=ROOMY, cpu_features=())
    avx2 = scout().fit(path, planner="ollama", devices=[], system=ROOMY, cpu_features=["avx2"])
    assert avx2.usage[-1].weights - plain.usage[-1].weights == 64 * 64 // 32 * 18
    assert any("CPU_REPACK" in n for n in avx2.notes) and not any("CPU_REPACK" in n for n in plain.notes)


def test_a_context_past_training_is_said_in_a_note(tmp_path: Path) -> None:
    """--ctx above the model's context_length warns, as llama.cpp does."""
    result = scout().fit(
        write_model(tmp_path / "m.gguf", ctx=1024), devices=[], system=ROOMY, ctx=4096, cpu_features=()
    )
    assert any("trained for (1024)" in n for n in result.notes)


def test_the_verdict_uses_the_real_system_memory(tmp_path: Path) -> None:
    """With no GPU and 1 MiB of free RAM the model does not fit; with plenty it does."""
    path = write_model(tmp_path / "m.gguf")
    assert scout().fit(path, planner="ollama", devices=[], system=ROOMY, cpu_features=()).fits is True
    tight = SystemInfo(total_memory=MIB, free_memory=MIB)
    result = scout().fit(path, planner="ollama", devices=[], system=tight, cpu_features=())
    assert result.fits is False and any("free system memory" in n for n in result.notes)


def test_bad_arguments_are_gpuscout_errors(tmp_path: Path) -> None:
    """Scout.fit checks its arguments: a negative ctx, an unknown cache type, a bare string of flags,
    a model or projector that is no path, devices and system of the wrong kind."""
    path = write_model(tmp_path / "m.gguf")
    kw: Mapping[str, object]
    for kw in (
        {"ctx": -1},
        {"cache_type_k": "q9"},
        {"parallel": True},
        {"cpu_features": "avx2"},
        {"mmproj": 42},
        {"devices": "x"},
        {"system": {}},
    ):
        with pytest.raises(GpuscoutError):
            scout().fit(path, planner="ollama", **{"devices": [], "system": ROOMY, **kw})  # type: ignore[arg-type]
    for model in (42, None, ["m.gguf"]):
        with pytest.raises(GpuscoutError):
            scout().fit(model, planner="ollama", devices=[], system=ROOMY)


def test_json_has_the_contract_keys(gpuscout_cli: CliRunner, tmp_path: Path) -> None:
    """--json keeps model/placement/cpu_layers/fits and adds ctx, cache types, notes, memory, total."""
    path = write_model(tmp_path / "m.gguf")
    run = gpuscout_cli(
        ["fit", str(path), "--planner", "ollama", "--json", "--ctx", "1000"], [gpu()], builtins=False
    )
    assert run.code == 0, run.err
    doc = run.json()
    assert {
        "model",
        "placement",
        "cpu_layers",
        "fits",
        "ctx",
        "flash_attn",
        "cache_type_k",
        "cache_type_v",
        "notes",
        "memory",
        "total",
    } <= set(doc)
    assert doc["ctx"] == 1024 and doc["cache_type_k"] == doc["cache_type_v"] == "f16"
    assert type(doc["flash_attn"]) is bool and any("flash attention auto" in n for n in doc["notes"])
    assert doc["model"]["input_weights"] == 16 * 64 * 4 and doc["model"]["blocks"] == 2
    assert [m["backend"] for m in doc["memory"]] == ["CUDA", "cpu"] and doc["memory"][-1]["id"] == ""
    assert all(m["total"] == m["weights"] + m["kv_cache"] + m["graph"] for m in doc["memory"][:-1])
    assert doc["total"] == sum(m["total"] for m in doc["memory"])
    assert doc["placement"] == [{"id": "GPU-0", "backend": "CUDA", "layers": [0, 1, 2]}]


def test_kv_type_sets_both_and_flash_attn_off(gpuscout_cli: CliRunner, tmp_path: Path) -> None:
    """--kv-type sets both cache types; --flash-attn off is said in the JSON."""
    path = write_model(tmp_path / "m.gguf", kv_heads=4)
    on = gpuscout_cli(
        ["fit", str(path), "--planner", "ollama", "--json", "--kv-type", "q8_0", "--flash-attn", "on"],
        builtins=False,
    )
    assert on.code == 0 and on.json()["cache_type_k"] == on.json()["cache_type_v"] == "q8_0"
    off = gpuscout_cli(
        ["fit", str(path), "--planner", "ollama", "--json", "--flash-attn", "off"], builtins=False
    )
    assert off.code == 0 and off.json()["flash_attn"] is False


def test_does_not_fit_exits_1(gpuscout_cli: CliRunner) -> None:
    """A layer of 2**63-1 bytes is valid input that fits nowhere: exit 1, as grep says no match."""
    run = gpuscout_cli(["fit", "--layers", f"{(1 << 63) - 1}B,1B", "--json"], [gpu()], builtins=False)
    assert run.code == 1, run.err
    assert run.json()["fits"] is False


@pytest.mark.parametrize(
    "argv",
    [
        ["--ctx", "9" * 400],
        ["--layers", "1" + "0" * 400 + "B"],
        ["--layers", "\u0661\u0662\u0663B"],  # Arabic-Indic digits
        ["--ctx", "0"],
        ["--parallel", "-1"],
        ["--layers", f"{1 << 63}B"],
        ["--layers", "100MiB,100"],
    ],
)
def test_bad_numbers_exit_2_with_one_line(argv: list[str], gpuscout_cli: CliRunner) -> None:
    """Oversized, non-ASCII or out-of-range numbers are usage errors, never tracebacks."""
    code, _, err = gpuscout_cli(["fit", *argv], [gpu()], builtins=False)
    assert code == 2 and err.count("\n") == 1


@pytest.mark.parametrize("content", [b"not a gguf file at all" * 4, None, "unknown"])
def test_bad_files_exit_2_with_one_line(gpuscout_cli: CliRunner, tmp_path: Path, content: object) -> None:
    """Not GGUF, truncated, or an architecture name nobody knows with no block_count: one line."""
    path = write_model(tmp_path / "m.gguf")
    if content is None:
        path.write_bytes(path.read_bytes()[:100])
    elif content == "unknown":
        path.write_bytes(path.read_bytes().replace(b"llama.block_count", b"zzzzz.block_count"))
    else:
        assert isinstance(content, bytes)
        path.write_bytes(content)
    run = gpuscout_cli(["fit", str(path), "--planner", "ollama"], [gpu()], builtins=False)
    assert run.code == 2, run.err
    err = run.err
    assert err.count("\n") == 1 and err.startswith("gpuscout: error: ") and str(path) in err


def test_an_unknown_architecture_is_estimated_with_a_note(tmp_path: Path) -> None:
    """An architecture without rules of its own gets the generic rules, and a note says so."""
    result = scout().fit(
        write_model(tmp_path / "m.gguf", arch="brandnew"), devices=[], system=ROOMY, cpu_features=()
    )
    assert any("brandnew" in n and "generic" in n for n in result.notes)


def test_without_gguf_says_how_to_install(
    gpuscout_cli: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """fit MODEL without the gguf extra: one line naming the extra, exit 2."""
    path = write_model(tmp_path / "m.gguf")
    monkeypatch.setitem(sys.modules, "gguf", None)
    run = gpuscout_cli(["fit", str(path), "--planner", "ollama"], [gpu()], builtins=False)
    assert run.code == 2, run.err
    err = run.err
    assert err.count("\n") == 1 and "pip install 'gpuscout[gguf]'" in err


def test_layers_without_a_model(gpuscout_cli: CliRunner) -> None:
    """--layers plans given sizes: blocks, then the output layer."""
    run = gpuscout_cli(["fit", "--layers", "100MiB,100MiB,50MiB", "--json"], [gpu()], builtins=False)
    assert run.code == 0, run.err
    doc = run.json()
    assert doc["model"]["architecture"] == "" and doc["model"]["blocks"] == 2
    assert doc["model"]["layer_weights"] == [100 << 20] * 2 and doc["model"]["output_weights"] == 50 << 20
    assert doc["placement"][0]["layers"] == [0, 1, 2]


def test_no_gpu_leaves_every_layer_on_the_cpu(gpuscout_cli: CliRunner) -> None:
    """Without devices everything is the CPU's."""
    run = gpuscout_cli(["fit", "--layers", "100MiB,100MiB", "--json"], builtins=False)
    assert run.code == 0, run.err
    doc = run.json()
    assert doc["placement"] == [] and doc["cpu_layers"] == [0, 1]


def test_text_output_names_devices_as_list_does(gpuscout_cli: CliRunner, tmp_path: Path) -> None:
    """The text form names the device by the name list shows (ROCm1, not a position)."""
    card = DeviceInfo(id="GPU-x", library="ROCm", name="ROCm1", total_memory=24 * GIB, free_memory=20 * GIB)
    run = gpuscout_cli(
        ["fit", str(write_model(tmp_path / "m.gguf")), "--planner", "ollama"], [card], builtins=False
    )
    assert run.code == 0, run.err
    out = run.out
    assert "ROCm ROCm1 (GPU-x)  layers 0-2" in out and "ROCm0" not in out and out.endswith("fits\n")


def test_the_memory_summary_is_a_table_on_a_terminal_and_lines_in_a_pipe(
    gpuscout_cli: CliRunner, tmp_path: Path
) -> None:
    """Weights, cache and graph per device: a rich table when drawn (--color always), lines in a pipe."""
    argv = ["fit", str(write_model(tmp_path / "m.gguf")), "--planner", "ollama"]
    code, drawn, _ = gpuscout_cli([*argv, "--color", "always"], [gpu()], builtins=False)
    assert code == 0 and "Placement and memory" in drawn and "\x1b[" in drawn
    code, plain, _ = gpuscout_cli(argv, [gpu()], builtins=False)
    assert code == 0
    assert "\x1b[" not in plain and "  total memory " in plain and "CUDA GPU-0: weights" in plain


def write_projector(path: Path) -> Path:
    w = gguf.GGUFWriter(str(path), "clip")
    for key, value in (
        ("clip.vision.image_size", 224),
        ("clip.vision.patch_size", 14),
        ("clip.vision.embedding_length", 64),
        ("clip.vision.attention.head_count", 4),
    ):
        w.add_uint32(key, value)
    w.add_tensor("v.patch_embd.weight", np.ones((64, 588), dtype=np.float16))
    w.add_tensor("mm.0.weight", np.ones((64, 64), dtype=np.float32))
    return finish(w, path)


def test_a_projector_sits_on_the_first_gpu(gpuscout_cli: CliRunner, tmp_path: Path) -> None:
    """--mmproj: the projector's weights and its compute buffer are the first GPU's."""
    model, projector = write_model(tmp_path / "m.gguf"), write_projector(tmp_path / "p.gguf")
    plain = scout().fit(model, planner="ollama", devices=[gpu()], system=ROOMY, ctx=256, cpu_features=())
    with_p = scout().fit(
        model,
        planner="ollama",
        devices=[gpu()],
        system=ROOMY,
        ctx=256,
        mmproj=str(projector),
        cpu_features=(),
    )
    weights = 64 * 588 * 2 + 64 * 64 * 4
    assert with_p.usage[0].weights - plain.usage[0].weights == weights
    assert with_p.usage[0].graph > plain.usage[0].graph
    assert with_p.usage[-1].total == plain.usage[-1].total
    run = gpuscout_cli(
        ["fit", str(model), "--planner", "ollama", "--mmproj", str(projector), "--json"],
        [gpu()],
        builtins=False,
    )
    assert run.code == 0, run.err
    doc = run.json()
    assert doc["memory"][0]["weights"] == with_p.usage[0].weights


def test_a_projector_without_a_gpu_is_the_cpus(tmp_path: Path) -> None:
    """Without a GPU the projector's weights and graph are counted on the CPU."""
    model, projector = write_model(tmp_path / "m.gguf"), write_projector(tmp_path / "p.gguf")
    plain = scout().fit(model, planner="ollama", devices=[], system=ROOMY, ctx=256, cpu_features=())
    with_p = scout().fit(
        model, planner="ollama", devices=[], system=ROOMY, ctx=256, mmproj=str(projector), cpu_features=()
    )
    assert with_p.usage[-1].weights - plain.usage[-1].weights == 64 * 588 * 2 + 64 * 64 * 4


def test_num_gpu_takes_the_last_layers_output_first_as_llama_cpp_ngl(tmp_path: Path) -> None:
    """--num-gpu N is llama.cpp's -ngl N: the output layer and the N-1 blocks before it."""
    path = write_model(tmp_path / "m.gguf", blocks=4)
    result = scout().fit(
        path, planner="ollama", devices=[gpu()], system=ROOMY, ctx=256, num_gpu=3, cpu_features=()
    )
    assert [list(g.layers) for g in result.placement] == [[2, 3, 4]] and result.cpu_layers == (0, 1)


def test_a_gpu_in_use_turns_off_cpu_repacking(tmp_path: Path) -> None:
    """With a GPU present llama.cpp's host buffer comes before the repacking one: no CPU_REPACK."""
    path = write_q4_model(tmp_path / "q.gguf", blocks=2)
    alone = scout().fit(path, planner="ollama", devices=[], system=ROOMY, cpu_features=["avx2"])
    partial = scout().fit(
        path, planner="ollama", devices=[gpu()], system=ROOMY, num_gpu=1, cpu_features=["avx2"]
    )
    assert partial.cpu_layers == (0, 1)
    assert partial.usage[-1].weights < alone.usage[-1].weights
    assert not any("CPU_REPACK" in n for n in partial.notes)


def test_host_blocks_run_on_the_gpu_in_use(tmp_path: Path) -> None:
    """op_offload: with a GPU holding layers, the host's blocks compute on it; the host keeps
    only its staging buffer, the same as with every block offloaded."""
    path = write_model(tmp_path / "m.gguf", blocks=4)
    full = scout().fit(path, planner="ollama", devices=[gpu()], system=ROOMY, ctx=2048, cpu_features=())
    partial = scout().fit(
        path, planner="ollama", devices=[gpu()], system=ROOMY, ctx=2048, num_gpu=2, cpu_features=()
    )
    assert partial.cpu_layers == (0, 1, 2)
    assert partial.usage[-1].graph == full.usage[-1].graph
    assert partial.usage[0].graph == full.usage[0].graph


def test_a_device_selector_that_matches_nothing_exits_1(gpuscout_cli: CliRunner) -> None:
    """--device with a well-formed selector that matches no device: one line, exit 1, as env."""
    argv = ["fit", "--layers", "1MiB,1MiB", "--device", "library=rocm"]
    run = gpuscout_cli(argv, [gpu()], builtins=False)
    assert run.code == 1, run.err
    err = run.err
    assert err.count("\n") == 1 and "library=rocm" in err


def test_a_malformed_device_selector_exits_2(gpuscout_cli: CliRunner) -> None:
    """--device with a word that is no selector is a usage error."""
    argv = ["fit", "--layers", "1MiB,1MiB", "--device", "nonsense=="]
    run = gpuscout_cli(argv, [gpu()], builtins=False)
    assert run.code == 2, run.err
    assert run.err.count("\n") == 1


def test_a_gpu_holding_no_layer_still_gets_the_offloaded_compute(tmp_path: Path) -> None:
    """--num-gpu 0 with a GPU present: llama.cpp opens it and offloads batches to it, so it has
    a compute buffer (and nothing else) and the host keeps only its staging buffer."""
    path = write_model(tmp_path / "m.gguf", blocks=4)
    alone = scout().fit(path, planner="ollama", devices=[], system=ROOMY, ctx=2048, cpu_features=())
    none = scout().fit(
        path, planner="ollama", devices=[gpu()], system=ROOMY, ctx=2048, num_gpu=0, cpu_features=()
    )
    assert list(none.placement) == [] and none.cpu_layers == (0, 1, 2, 3, 4)
    card = none.usage[0]
    assert card.id == "GPU-0" and card.weights == card.kv_cache == 0 and card.graph > 0
    assert none.usage[-1].graph < alone.usage[-1].graph


def test_an_offloaded_host_attention_counts_its_kv_copy_on_the_gpu(tmp_path: Path) -> None:
    """A host block's attention run on the GPU reads that block's K and V: with a wide KV cache
    the GPU's compute buffer holds a copy of it, so it grows with the context."""
    path = write_model(tmp_path / "m.gguf", blocks=4, heads=8, kv_heads=8, embd=512)
    small = scout().fit(
        path, planner="ollama", devices=[gpu()], system=ROOMY, ctx=2048, num_gpu=2, cpu_features=()
    )
    large = scout().fit(
        path, planner="ollama", devices=[gpu()], system=ROOMY, ctx=32768, num_gpu=2, cpu_features=()
    )
    host_kv = large.usage[-1].kv_cache // 3  # one host block's K and V
    assert large.usage[0].graph - small.usage[0].graph >= host_kv - small.usage[-1].kv_cache // 3
    assert large.usage[0].graph > host_kv


def test_a_device_whose_free_memory_is_unknown_is_shown_as_unknown_free(
    gpuscout_cli: CliRunner, tmp_path: Path
) -> None:
    """fit's device row says "unknown free" (and a bar of "?"), never the stand-in figure."""
    path = write_model(tmp_path / "m.gguf")
    run = gpuscout_cli(
        ["fit", str(path), "--planner", "ollama"], [gpu(free_memory_unknown=True)], builtins=False
    )
    assert run.code == 0, run.err
    row = next(line for line in run.out.splitlines() if "GPU-0" in line)
    assert "unknown free" in row and re.search(r"\[\?+\]", row)
    assert "20.0 GiB free" not in row


def test_a_placement_on_a_device_of_unknown_free_memory_says_its_verdict_may_be_optimistic(
    tmp_path: Path,
) -> None:
    """The stand-in figure places the layers, as the runtime would, and a note says so."""
    result = scout().fit(
        write_model(tmp_path / "m.gguf"),
        devices=[gpu(free_memory_unknown=True)],
        system=ROOMY,
        ctx=256,
        cpu_features=(),
    )
    assert any("free memory unknown" in n and "optimistic" in n for n in result.notes)
    known = scout().fit(
        write_model(tmp_path / "k.gguf"), devices=[gpu()], system=ROOMY, ctx=256, cpu_features=()
    )
    assert not any("free memory unknown" in n for n in known.notes)
