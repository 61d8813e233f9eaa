"""Rules of the llama.cpp planner found by mutmut's survivors (tests/MUTATION.md, "Fourth mutmut
round: the llama.cpp planner"): the devices a llama.cpp build would use (``gpuscout._fit.ggml``,
llama.cpp's ``llama_prepare_model_devices``), the user's tensor overrides as llama.cpp's
argument parser builds them, and ``fit_llamacpp``'s decision and result (``gpuscout._fit.decide``).

Each test states a rule no other test stated; the mutants it kills are named in its docstring's
last line. Models are the recorded header-only files of tests/data/fit_plan (grown sparse) and
lavapipe as the Vulkan plugin reports it, as in tests/fit/test_fit_plan.py.
"""

from __future__ import annotations

import pytest

from gpuscout import DeviceInfo, GpuscoutError
from gpuscout._fit import llamacpp
from gpuscout._fit.decide import Request, distinct, user_overrides
from gpuscout._fit.ggml import DEFAULT_RANK, GgmlDevices, ggml_devices
from gpuscout._fit.oracle import CPU
from gpuscout._machine.context import GgmlOrder
from gpuscout.sizes import GIB


def gpu(i: int, library: str = "CUDA", **kw: object) -> DeviceInfo:
    """A discrete GPU of 24 GiB, id ``G<i>``."""
    fields: dict[str, object] = {
        "id": f"G{i}",
        "library": library,
        "name": f"card {i}",
        "total_memory": 24 * GIB,
        "free_memory": 20 * GIB,
    }
    fields.update(kw)
    return DeviceInfo(**fields)  # type: ignore[arg-type]


def visible(devices: object) -> dict[str, str]:
    """A stand-in for Scout.visible_env: names the devices' ids under their library's variable."""
    chosen = list(devices)  # type: ignore[call-overload]
    return {f"{chosen[0].library}_VISIBLE": ",".join(d.id for d in chosen)} if chosen else {}


# --- gpuscout._fit.ggml: the devices a llama.cpp build would use ---------------------------------


def test_a_plugins_order_names_the_devices_and_its_environment_selects_them() -> None:
    """A backend plugin's answer (``gpuscout_ggml_devices``) gives ggml's order and names; the
    devices are planned in that order, under those names, with the plugin's environment.
    (The rule the next tests build on; no survivor of its own.)"""
    devices = [gpu(0), gpu(1)]
    answer = GgmlOrder(0, ((1, "CUDA0"), (0, "CUDA1")), {"CUDA_VISIBLE_DEVICES": "G1,G0"})
    out = ggml_devices(devices, [("cuda", answer)], visible)
    assert [d.id for d in out.devices] == ["G1", "G0"]
    assert out.names == ("CUDA0", "CUDA1")
    assert dict(out.env) == {"CUDA_VISIBLE_DEVICES": "G1,G0"}
    assert out.left_out == ()


def test_positions_outside_the_candidates_are_ignored_and_an_empty_answer_claims_nothing() -> None:
    """An answer's positions index the candidates: one below 0 or past the last is dropped
    (position 0 and the last are kept); an answer left with none claims no device, so that
    library's devices are numbered by gpuscout's default (``<library><n>``, rank
    DEFAULT_RANK, the environment from visible_env).
    Kills ggml.x_ggml_devices__mutmut_6 (`<=`), _8 (`break` for `continue`)."""
    devices = [gpu(0), gpu(1), gpu(2, "ROCm")]
    cuda = GgmlOrder(
        0, ((-1, "CUDA9"), (0, "CUDA0"), (1, "CUDA1"), (3, "CUDA3")), {"CUDA_VISIBLE_DEVICES": "x"}
    )
    rocm = GgmlOrder(1, ((5, "ROCm0"),), {"HIP_VISIBLE_DEVICES": "never"})
    out = ggml_devices(devices, [("rocm", rocm), ("cuda", cuda)], visible)
    assert out.names == ("CUDA0", "CUDA1", "ROCm0")
    assert [d.id for d in out.devices] == ["G0", "G1", "G2"]
    assert dict(out.env) == {"CUDA_VISIBLE_DEVICES": "x", "ROCm_VISIBLE": "G2"}


def test_devices_no_plugin_orders_come_after_the_plugins_numbered_per_library() -> None:
    """Devices whose plugin gives no order are grouped by library, numbered from 0 in each
    (``Vulkan0``, ``Vulkan1``), placed at DEFAULT_RANK (after every built-in backend, before a
    plugin ranked later), and selected through visible_env for that library's devices alone.
    Kills ggml.x_ggml_devices__mutmut_17 to _27."""
    assert DEFAULT_RANK == 50
    devices = [gpu(0, "Vulkan"), gpu(1, "CUDA"), gpu(2, "Vulkan"), gpu(3, "Late")]
    late = GgmlOrder(DEFAULT_RANK + 1, ((3, "Late0"),), {"LATE": "3"})
    cuda = GgmlOrder(0, ((1, "CUDA0"),), {"CUDA_VISIBLE_DEVICES": "G1"})
    out = ggml_devices(devices, [("late", late), ("cuda", cuda)], visible)
    assert out.names == ("CUDA0", "Vulkan0", "Vulkan1", "Late0")
    assert [d.id for d in out.devices] == ["G1", "G0", "G2", "G3"]
    assert dict(out.env) == {"CUDA_VISIBLE_DEVICES": "G1", "Vulkan_VISIBLE": "G0,G2", "LATE": "3"}


def test_equal_ranks_keep_the_plugins_order() -> None:
    """The registry order is by rank alone: two backends of one rank keep the order their
    plugins answered in.
    Kills ggml.x_ggml_devices__mutmut_28, _30."""
    devices = [gpu(0, "A"), gpu(1, "B")]
    b = GgmlOrder(5, ((1, "B0"),), {})
    a = GgmlOrder(5, ((0, "A0"),), {})
    assert ggml_devices(devices, [("b", b), ("a", a)], visible).names == ("B0", "A0")
    assert ggml_devices(devices, [("a", a), ("b", b)], visible).names == ("A0", "B0")


def test_a_device_seen_by_two_backends_is_used_once_by_the_first() -> None:
    """llama_prepare_model_devices skips a device whose id (the PCI address, compared without
    case) an earlier backend already gave: the CUDA card is used, its HIP twin is left out with
    a note naming both; a device without a PCI id is never deduplicated. The notes of twins
    and of integrated GPUs left out are both kept.
    Kills ggml.x_ggml_devices__mutmut_44, _46, _51, _52, _53, _54, _56 (_45, upper() for
    lower(), is equivalent: either folds the case)."""
    devices = [
        gpu(0, "CUDA", pci_id="0000:0a:00.0"),
        gpu(1, "ROCm", pci_id="0000:0A:00.0"),
        gpu(2, "ROCm"),
        gpu(3, "ROCm"),
    ]
    cuda = GgmlOrder(0, ((0, "CUDA0"),), {"CUDA_VISIBLE_DEVICES": "G0"})
    rocm = GgmlOrder(1, ((1, "ROCm0"), (2, "ROCm1"), (3, "ROCm2")), {"HIP_VISIBLE_DEVICES": "0,1,2"})
    out = ggml_devices(devices, [("cuda", cuda), ("rocm", rocm)], visible)
    assert out.names == ("CUDA0", "ROCm1", "ROCm2")
    assert out.left_out == ("ROCm0: the same device as CUDA0, which llama.cpp uses",)
    igpu = gpu(4, "Vulkan", integrated=True, name="iGPU")
    vulkan = GgmlOrder(2, ((4, "Vulkan0"),), {})
    both = ggml_devices([*devices, igpu], [("cuda", cuda), ("rocm", rocm), ("vulkan", vulkan)], visible)
    assert both.left_out == (  # the twin's note and the iGPU's, in that order
        "ROCm0: the same device as CUDA0, which llama.cpp uses",
        "Vulkan0 (iGPU): an integrated GPU, which llama.cpp uses only when there is no other GPU",
    )


def test_integrated_gpus_only_without_another_gpu_and_only_the_first_backends() -> None:
    """Integrated GPUs are used only when there is no other GPU, and then only those of the
    backend that listed the first one; beside a discrete GPU each is left out with a note.
    Kills ggml.x_ggml_devices__mutmut_38 to _41, _43, _58 to _61."""
    igpu_v = gpu(0, "Vulkan", integrated=True, name="Radeon 780M")
    igpu_v2 = gpu(1, "Vulkan", integrated=True, name="")
    igpu_o = gpu(2, "OpenCL", integrated=True)
    vulkan = GgmlOrder(2, ((0, "Vulkan0"), (1, "Vulkan1")), {"GGML_VK_VISIBLE_DEVICES": "0,1"})
    opencl = GgmlOrder(3, ((2, "GPUOpenCL"),), {"OCL": "2"})
    alone = ggml_devices([igpu_v, igpu_v2, igpu_o], [("vulkan", vulkan), ("opencl", opencl)], visible)
    assert alone.names == ("Vulkan0", "Vulkan1")
    assert dict(alone.env) == {"GGML_VK_VISIBLE_DEVICES": "0,1"}
    assert alone.left_out == ()
    card = gpu(3, "CUDA")
    cuda = GgmlOrder(0, ((3, "CUDA0"),), {"CUDA_VISIBLE_DEVICES": "G3"})
    beside = ggml_devices(
        [igpu_v, igpu_v2, igpu_o, card], [("vulkan", vulkan), ("opencl", opencl), ("cuda", cuda)], visible
    )
    assert beside.names == ("CUDA0",)
    assert dict(beside.env) == {"CUDA_VISIBLE_DEVICES": "G3"}
    assert beside.left_out == (
        "Vulkan0 (Radeon 780M): an integrated GPU, which llama.cpp uses only when there is no other GPU",
        "Vulkan1 (G1): an integrated GPU, which llama.cpp uses only when there is no other GPU",
    )


def test_one_device_listed_twice_is_two_slots_the_second_with_an_id_of_its_own() -> None:
    """GGML_VK_VISIBLE_DEVICES=0,0 makes one card two ggml devices; the planner gives the second
    the id ``0:Vulkan1`` so each slot has its own figures, and leaves distinct devices as they are.
    Kills decide.x_distinct__mutmut_10, _13."""
    card = gpu(0, "Vulkan", id="0")
    other = gpu(1, "Vulkan", id="1")
    twice = GgmlDevices(devices=(card, card, other), names=("Vulkan0", "Vulkan1", "Vulkan2"), env={})
    assert [d.id for d in distinct(twice)] == ["0", "0:Vulkan1", "1"]
    same_id = GgmlDevices(devices=(card, gpu(2, "CUDA", id="0")), names=("Vulkan0", "CUDA0"), env={})
    assert [d.id for d in distinct(same_id)] == ["0", "0"]  # one id, two libraries: two devices


# --- gpuscout._fit.decide.user_overrides: -ot, -cmoe, -ncmoe ------------------------------------


def test_override_entries_are_split_on_commas_and_name_a_buffer() -> None:
    """common/arg.cpp's -ot parser: each comma-separated ``PATTERN=BUFFER`` entry, in order;
    buffer ``CPU`` or a ggml device name (its index among the planner's devices); several -ot
    options append.
    Kills decide.x_user_overrides__mutmut_1, _2, _3, _21, _22, _23, _25, _26."""
    request = Request(override_tensor=(r"blk\.1\.=CPU,blk\.2\.=Vulkan1", r"output=Vulkan0"))
    assert user_overrides(request, ["Vulkan0", "Vulkan1"]) == [
        (r"blk\.1\.", CPU),
        (r"blk\.2\.", 1),
        ("output", 0),
    ]
    assert user_overrides(Request(), ["Vulkan0"]) == []


def test_an_override_is_cut_at_its_first_equals_sign() -> None:
    """The pattern runs to the first ``=``: ``a=b=CPU`` names the buffer ``b=CPU``, which no
    device is, so it is refused naming the known buffers.
    Kills decide.x_user_overrides__mutmut_6, _7, _28, _30, _32, _33."""
    with pytest.raises(GpuscoutError, match=r"unknown buffer type \(known: CPU, Vulkan0\)"):
        user_overrides(Request(override_tensor=("a=b=CPU",)), ["Vulkan0"])


@pytest.mark.parametrize("entry", ["=CPU", "blk", "blk="])
def test_an_override_needs_a_pattern_and_an_equals_sign(entry: str) -> None:
    """An entry without ``=`` or with an empty pattern is refused with the expected form; an
    empty buffer is an unknown one.
    Kills decide.x_user_overrides__mutmut_8 to _11."""
    want = "unknown buffer type" if entry == "blk=" else "expected PATTERN=BUFFER"
    with pytest.raises(GpuscoutError, match=want):
        user_overrides(Request(override_tensor=(entry,)), ["Vulkan0"])


def test_an_override_pattern_may_be_512_characters_but_not_513() -> None:
    """A pattern of MAX_PATTERN (512) characters is taken; one more is refused before it is
    compiled, as is a repeated group that itself repeats, whatever its length.
    Kills decide.x_user_overrides__mutmut_13, _15, _16, _17 (and _12, a timeout in the first run)."""
    taken = user_overrides(Request(override_tensor=("a" * 512 + "=CPU",)), [])
    assert taken == [("a" * 512, CPU)]
    with pytest.raises(GpuscoutError, match="at most 512 characters"):
        user_overrides(Request(override_tensor=("a" * 513 + "=CPU",)), [])
    with pytest.raises(GpuscoutError, match=r"and no repeated group that itself repeats, such as \(a\+\)\+$"):
        user_overrides(Request(override_tensor=("(a+)+=CPU",)), [])


def test_an_override_that_is_no_regular_expression_is_refused() -> None:
    """A pattern Python's re cannot compile is refused with the reason.
    Kills decide.x_user_overrides__mutmut_19."""
    with pytest.raises(GpuscoutError, match=r"--override-tensor '\(blk': not a regular expression: "):
        user_overrides(Request(override_tensor=("(blk=CPU",)), [])


def test_cpu_moe_and_n_cpu_moe_follow_the_tensor_overrides() -> None:
    """As llama.cpp's parser appends them: the -ot entries, then -cmoe's one pattern (every
    expert tensor to the CPU), then -ncmoe N's per-layer patterns for layers 0..N-1.
    Kills decide.x_user_overrides__mutmut_34, _38."""
    request = Request(override_tensor=("output=CPU",), cpu_moe=True, n_cpu_moe=2)
    assert user_overrides(request, []) == [
        ("output", CPU),
        (llamacpp.FFN_EXPS, CPU),
        (rf"blk\.0{llamacpp.FFN_EXPS}", CPU),
        (rf"blk\.1{llamacpp.FFN_EXPS}", CPU),
    ]
    assert user_overrides(Request(n_cpu_moe=0), []) == []
