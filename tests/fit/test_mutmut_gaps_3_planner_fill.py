"""llama.cpp's fit as ``gpuscout._fit.llamacpp`` ports it (``common/fit.cpp``
``common_params_fit_impl``), rules found by mutmut's survivors (tests/MUTATION.md, "Fourth
mutmut round: the llama.cpp planner").

tests/fit/test_fit_plan_agreement.py holds the port to a floor (77 % of the 158 recorded
llama-fit-params decisions), so a change that breaks a few cases passes it. Here every recorded
case on a header-only model (tests/data/fit_plan, grown sparse: ready in milliseconds) whose
decision does not hinge on the estimate's last MiB is held exactly: gpuscout agrees with
llama.cpp on it, and with 8 MiB more or less free on every device it still gives the same
-c/-ngl/-ts/-ot (checked when the list was made). A change of the estimate that moves a case
by a few MiB leaves these as they are; a change of the algorithm does not.

Each test's docstring names, on its last line, the mutants it kills.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("fit_plan_bench_gaps3_fill", ROOT / "bench" / "fit_plan.py")
assert _spec and _spec.loader
bench: Any = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)
FIXTURE = bench.load()
CASES = {case["name"]: case for case in FIXTURE["cases"]}

#: The recorded cases on header-only models where gpuscout agrees with llama.cpp and the
#: decision is the same with 8 MiB more or less free per device.
STEADY = [
    "moe8-1dev", "mamba2-24-1dev", "hybrid24-2dev", "dense32-3dev-c-4096-fitt-512", "dense32-1dev",
    "dense32-1dev-fitc-8192", "dense32-1dev-fitc-16384", "dense16-1dev", "dense16-1dev-fitc-16384",
    "dense32-1dev-c-0-fitc-4096", "dense32-1dev-c-16384", "dense32-1dev-c-32768-fitt-2040",
    "dense32-1dev-c-32768-fitt-2048", "dense16-1dev-c-8192", "dense32-1dev-c-4096-fitt-1900_1800",
    "dense32-2dev-fitt-1500", "dense32-2dev-c-4096-fitt-1024_2040", "dense32-3dev-c-32768-fitt-1200",
    "dense32-3dev-c-4096-fitt-1024_2040_2040", "dense32-3dev-c-8192-fitt-1024_1024_2040",
    "dense16-2dev-c-32768", "dense16-3dev-c-65536-fitt-700", "moe8-1dev-c-32768-fitt-1800",
    "moe8-1dev-c-4096-fitt-1960", "moe24-1dev-c-4096-fitt-1900", "moe24-1dev-c-4096-fitt-2000",
    "moe24-1dev-c-4096-fa-off", "moe24-2dev", "moe24-3dev", "mamba2-24-1dev-fitt-1500-np-4",
    "mamba2-24-3dev-fitt-1800", "hybrid24-1dev", "hybrid24-1dev-fitt-1200",
    "hybrid24-1dev-c-32768-fitt-1500", "hybrid24-1dev-c-16384-fa-off", "hybrid24-2dev-fitt-1600",
    "dense32-1dev-c-8192-fa-off", "dense32-1dev-c-16384-np-4", "dense32-1dev-np-2",
    "dense16-1dev-np-4-c-32768-fitt-600", "dense32-1dev-np-4", "dense32-1dev-c-32768-ctk-q4_0-fa-on",
    "dense32-1dev-c-16384-nkvo", "dense32-2dev-sm-none-c-8192", "dense32-1dev-ngl-10-c-4096",
    "dense32-1dev-ngl-99-c-4096", "dense32-2dev-ts-1_1-c-4096", "dense32-2dev-ts-1_1-c-16384",
    "moe24-1dev-c-4096-ot-exps", "moe24-1dev-c-4096-ot-blk0-up", "dense32-2dev-sm-row-c-16384",
    "dense32-2dev-sm-tensor-c-16384", "dense32-0dev", "dense32-0dev-fitt-1000000",
]  # fmt: skip


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("gaps3-fill-models")


def decision(folder: Path, name: str, free_mib: int | None = None) -> tuple[dict[str, str], int]:
    """gpuscout's -c/-ngl/-ts/-ot for recorded case ``name`` and --print-args' exit code."""
    fixture = FIXTURE if free_mib is None else {**FIXTURE, "device_free_mib": free_mib}
    case = CASES[name]
    line, _, code = bench.decide(fixture, case, bench.materialize(FIXTURE, case["model"], folder))
    return bench.fitted(line), code


@pytest.mark.parametrize("name", STEADY)
def test_a_steady_recorded_decision_is_llama_cpps_own(folder: Path, name: str) -> None:
    """The -c, -ngl, -ts and -ot llama-fit-params printed (or its exit 1 where its fit gave up)
    for this case: every step of common_params_fit_impl as the case reaches it (the unchanged
    parameters, the context lowered by interpolation, the devices filled back to front by false
    position, a MoE model's dense-only layers turned full and its one partial layer overflowing
    up, gate or down to the next device or the CPU, and each give-up).
    Kills the llamacpp mutants named in tests/MUTATION.md's fourth round as killed by this file."""
    case = CASES[name]
    mine, code = decision(folder, name)
    if case["rc"]:
        assert code == 1, (name, mine)
    else:
        assert mine == bench.fitted(case["printed"]), (name, case["printed"])


def test_the_steady_list_is_steady(folder: Path) -> None:
    """The claim STEADY rests on, for three of its cases (one dense split over three devices, the
    MoE conversion on two, a recurrent model): 8 MiB more or less per device, the same decision.
    (A guard of the list, no mutant of its own.)"""
    for name in ("dense32-3dev-c-32768-fitt-1200", "moe24-2dev", "mamba2-24-3dev-fitt-1800"):
        base = decision(folder, name)
        for delta in (-8, 8):
            assert decision(folder, name, FIXTURE["device_free_mib"] + delta) == base, (name, delta)


def test_c_integer_division_truncates_toward_zero() -> None:
    """fit.cpp's arithmetic is C++'s: integer division truncates toward zero (-7 / 2 is -3, not
    Python's -4), and the port's zero divisor gives 0 instead of a crash; uint32 values wrap.
    Kills the llamacpp.x__tdiv and x__u32 mutants named in tests/MUTATION.md."""
    from gpuscout._fit.llamacpp import _tdiv, _u32

    assert [_tdiv(7, 2), _tdiv(-7, 2), _tdiv(7, -2), _tdiv(-7, -2)] == [3, -3, -3, 3]
    assert [_tdiv(6, 3), _tdiv(-6, 3), _tdiv(0, 5), _tdiv(5, 0), _tdiv(1, 2)] == [2, -2, 0, 0, 0]
    assert [_tdiv(7, 1), _tdiv(-7, 1)] == [7, -7]
    assert [_u32(-1), _u32(1 << 32), _u32(5)] == [(1 << 32) - 1, 0, 5]


def test_the_margins_are_one_value_for_all_or_the_first_devices_then_the_default() -> None:
    """-fitt: one value (an int, or a list of one) for every device; a list sets the first
    devices and the rest keep 1024 MiB; a longer list is cut at the devices; with no device
    there is still one margin (the host's).
    Kills the llamacpp.x_margins_for mutants named in tests/MUTATION.md."""
    from gpuscout._fit.llamacpp import DEFAULT_MARGIN, margins_for

    assert DEFAULT_MARGIN == 1024 << 20
    assert margins_for(2, 7) == [7, 7]
    assert margins_for(0, 7) == [7]
    assert margins_for(3, [5]) == [5, 5, 5]
    assert margins_for(2, [1, 2, 3]) == [1, 2]
    assert margins_for(0, [1, 2]) == [1]
    assert margins_for(2, None) == [DEFAULT_MARGIN] * 2


def test_layer_counts_become_ngl_ts_and_the_partial_layers_overrides() -> None:
    """set_ngl_tensor_split_tbo: -ngl is the layers on all devices (counted from the back, the
    output layer included), -ts each device's count (only with more than one device), and each
    device's partial layers follow its full ones: the first overflows the tensors its kind names
    to the device's overflow buffer, the others keep their experts on the CPU.
    Kills the llamacpp.x__settings mutants named in tests/MUTATION.md."""
    from gpuscout._fit.llamacpp import GATE, UP, _Ngl, _settings
    from gpuscout._fit.oracle import CPU

    ngl = [_Ngl(n_layer=3, n_part=2, overflow=UP), _Ngl(n_layer=4, n_part=2, overflow=GATE)]
    total, split, ot = _settings(ngl, [1, CPU], 2, 8)
    assert (total, split) == (7, (3.0, 4.0))
    assert ot == (
        (r"blk\.3\.ffn_(gate|gate_up|down).*", 1),
        (r"blk\.4\.ffn_(up|down|gate_up|gate)_(ch|)exps", CPU),
        (r"blk\.7\.ffn_down.*", CPU),
        (r"blk\.8\.ffn_(up|down|gate_up|gate)_(ch|)exps", CPU),
    )
    assert _settings([_Ngl(n_layer=5)], [CPU], 1, 8) == (5, (), ())


def test_an_overflow_is_taken_only_below_both_targets() -> None:
    """A partial layer's overflow is kept only when its device and the next one (which the
    overflow fills; none after the last) are both strictly below their targets.
    Kills the llamacpp.x__below mutants named in tests/MUTATION.md."""
    from gpuscout._fit.llamacpp import _below

    assert _below([1, 1], [2, 2], 0) and _below([1, 1], [2, 2], 1)
    assert not _below([2, 1], [2, 2], 0)  # equal is not below
    assert not _below([1, 2], [2, 2], 0)  # the next device at its target
    assert _below([5, 1], [2, 2], 1) and not _below([1, 5], [9, 2], 1)
    assert _below([1, 1, 9], [2, 3, 0], 0)  # only k and k + 1
    assert not _below([1, 9, 1], [2, 3, 9], 0) and _below([9, 1, 1], [0, 2, 2], 1)
