"""gpuscout fit: model sizes from small GGUF files written here, and the command's output."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from gpuscout.cli import main
from gpuscout.model import KV_TYPES, ModelError, model_sizes
from gpuscout.records import DeviceInfo
from gpuscout.testing import injected, scout_of

gguf = pytest.importorskip("gguf")
np = pytest.importorskip("numpy")

GiB = 1 << 30


def write_model(path: Path, *, arch: str = "llama", blocks: int = 2, heads: int = 8,
                kv_heads: int | list[int] = 2, embd: int = 64, ctx: int = 128) -> Path:
    w = gguf.GGUFWriter(str(path), arch)
    w.add_block_count(blocks)
    w.add_context_length(ctx)
    w.add_embedding_length(embd)
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    w.add_tensor("token_embd.weight", np.ones((16, embd), dtype=np.float32))
    for i in range(blocks):
        w.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(embd, dtype=np.float32))  # F32
        w.add_tensor(f"blk.{i}.attn_q.weight", np.ones((embd, embd), dtype=np.float16))  # F16
        q8 = gguf.quantize(np.ones((embd, embd), dtype=np.float32), gguf.GGMLQuantizationType.Q8_0)
        w.add_tensor(f"blk.{i}.ffn_up.weight", q8, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    w.add_tensor("output_norm.weight", np.ones(embd, dtype=np.float32))
    w.add_tensor("output.weight", np.ones((16, embd), dtype=np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def block_bytes(embd: int = 64) -> int:
    return embd * 4 + embd * embd * 2 + (embd * embd // 32) * 34


def factory(*devices: DeviceInfo):  # type: ignore[no-untyped-def]
    return lambda args: scout_of(injected(devices))


GPU = DeviceInfo(id="GPU-0", library="CUDA", name="CUDA0", total_memory=24 * GiB,
                 free_memory=20 * GiB)


def test_block_sizes_are_the_tensors_written(tmp_path: Path) -> None:
    reader = gguf.GGUFReader(str(write_model(tmp_path / "m.gguf")))
    sizes = model_sizes(reader)
    assert sizes.architecture == "llama" and sizes.blocks == 2
    assert list(sizes.layer_weights) == [block_bytes()] * 2
    assert sizes.output_weights == 64 * 4 + 16 * 64 * 2
    assert sizes.input_weights == 16 * 64 * 4
    assert sizes.layers() == [block_bytes() + sizes.kv_cache_per_layer[0]] * 2 + [sizes.output_weights]


def test_kv_cache_for_grouped_query_attention(tmp_path: Path) -> None:
    reader = gguf.GGUFReader(str(write_model(tmp_path / "m.gguf", heads=8, kv_heads=2, ctx=128)))
    head = 64 // 8
    assert list(model_sizes(reader).kv_cache_per_layer) == [128 * 2 * head * 2 * 2] * 2
    q8 = model_sizes(reader, ctx=256, kv_type="q8_0").kv_cache_per_layer[0]
    assert q8 == int(256 * 2 * head * 2 * KV_TYPES["q8_0"])


def test_kv_heads_per_layer_array(tmp_path: Path) -> None:
    reader = gguf.GGUFReader(str(write_model(tmp_path / "m.gguf", kv_heads=[1, 4])))
    assert list(model_sizes(reader).kv_cache_per_layer) == [128 * 1 * 8 * 2 * 2, 128 * 4 * 8 * 2 * 2]


def test_unknown_architecture_is_a_model_error(tmp_path: Path) -> None:
    reader = gguf.GGUFReader(str(write_model(tmp_path / "m.gguf")))
    with pytest.raises(ModelError, match="unknown architecture 'llama'"):
        model_sizes(reader, architectures={"gpt2"})


@pytest.mark.parametrize("content", [b"not a gguf file at all" * 4, None, "unknown"])
def test_bad_files_exit_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                        content: object) -> None:
    path = write_model(tmp_path / "m.gguf", arch="llama")
    if content is None:  # truncated
        path.write_bytes(path.read_bytes()[:100])
    elif content == "unknown":
        data = path.read_bytes().replace(b"llama", b"zzzzz")
        path.write_bytes(data)
    else:
        assert isinstance(content, bytes)
        path.write_bytes(content)
    assert main(["fit", str(path)], scout_factory=factory(GPU)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("gpuscout: error: ") and str(path) in err


def test_without_gguf_says_how_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    path = write_model(tmp_path / "m.gguf")
    monkeypatch.setitem(sys.modules, "gguf", None)
    assert main(["fit", str(path)], scout_factory=factory(GPU)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install 'gpuscout[gguf]'" in err


def test_json_shape_with_injected_devices(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_model(tmp_path / "m.gguf")
    assert main(["fit", str(path), "--json"], scout_factory=factory(GPU)) == 0
    doc = json.loads(capsys.readouterr().out)
    assert set(doc) == {"model", "placement", "cpu_layers", "fits"}
    assert set(doc["model"]) == {"path", "architecture", "blocks", "layer_weights",
                                 "output_weights", "kv_cache_per_layer", "graph"}
    assert doc["model"]["blocks"] == 2 and doc["model"]["layer_weights"] == [block_bytes()] * 2
    assert type(doc["model"]["kv_cache_per_layer"]) is int and doc["model"]["kv_cache_per_layer"] > 0
    assert doc["placement"] == [{"id": "GPU-0", "backend": "CUDA", "layers": [0, 1, 2]}]
    assert doc["cpu_layers"] == [] and doc["fits"] is True


def test_layers_without_a_model(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fit", "--layers", "100MiB,100MiB,50MiB", "--json"], scout_factory=factory(GPU)) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["model"]["architecture"] == "" and doc["model"]["blocks"] == 2
    assert doc["model"]["layer_weights"] == [100 << 20] * 2 and doc["model"]["output_weights"] == 50 << 20
    assert doc["placement"][0]["layers"] == [0, 1, 2]


def test_no_gpu_leaves_every_layer_on_the_cpu(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fit", "--layers", "100MiB,100MiB", "--json"], scout_factory=factory()) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["placement"] == [] and doc["cpu_layers"] == [0, 1]


def test_text_output(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fit", "--layers", "100MiB,100MiB,50MiB"], scout_factory=factory(GPU)) == 0
    out = capsys.readouterr().out
    assert "CUDA GPU-0  layers 0-2" in out and "CPU  layers -" in out and out.endswith("fits\n")


def test_model_and_layers_together_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fit"], scout_factory=factory(GPU)) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_the_memory_summary_is_a_table_on_a_terminal_and_lines_in_a_pipe(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Weights, cache and graph per device and in total: rich table when drawn for a terminal
    (--color always draws it anywhere), plain lines in a pipe; JSON never carries it."""
    argv = ["fit", "--layers", "100MiB,100MiB,50MiB"]
    assert main([*argv, "--color", "always"], scout_factory=factory(GPU)) == 0
    drawn = capsys.readouterr().out
    assert "Memory" in drawn and "\x1b[" in drawn and "total memory" in drawn
    assert main(argv, scout_factory=factory(GPU)) == 0
    plain = capsys.readouterr().out
    assert "\x1b[" not in plain and "  total memory 250.0 MiB" in plain
    assert plain.rstrip().endswith(("fits", "does not fit"))
