"""llama.cpp's fit (``gpuscout._fit.llamacpp.plan``, the port of ``common/fit.cpp``
``common_params_fit_impl``) driven by a scripted fake oracle, rule by rule (tests/MUTATION.md,
"Sixth mutmut round: the rest of the llama.cpp planner").

The recorded llama-fit-params cases (test_fit_plan.py, test_mutmut_gaps_3_planner_fill.py) settle
most searches at their first probe and hinge on the estimate's last MiB; here the memory of a
configuration is a small known function of it, so the decision each rule implies can be worked
out by hand. The fake model has ``n_layer`` blocks of named tensors and an output layer (layer
index ``n_layer``, the last of the ``n_layer + 1`` that ``-ngl`` counts). A layer lives on the
device llama.cpp's split gives it (the last ``-ngl`` layers on the GPUs, in the proportions of
``-ts``, or of the free memory when ``-ts`` is unset); a tensor override (``-ot``, matched with
``re.search`` as ``std::regex_search`` does, the first match winning) sends a tensor to its
buffer (a device index, or ``None`` for the CPU). Each device is charged its tensors, the KV
cache of its layers (``kv`` bytes per token and layer), optionally ``ctx_dev`` bytes per token
whatever its layers (a compute buffer), and nothing else; the host is charged the rest.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import pytest

from gpuscout._fit import llamacpp
from gpuscout._fit.oracle import Config, Oracle

MiB = 1 << 20
GiB = 1 << 30
U32 = 1 << 32

UP_EXPS, GATE_EXPS, DOWN_EXPS = "ffn_up_exps.weight", "ffn_gate_exps.weight", "ffn_down_exps.weight"


@dataclass(frozen=True)
class FakeMeasured:
    """The three fields of ``oracle.Measured`` that the fit reads."""

    devices: tuple[int, ...]
    models: tuple[int, ...]
    host: int


class FakeOracle:
    """``oracle.Oracle`` as ``llamacpp.plan`` uses it: ``devices``, ``free``, ``calls`` and
    ``measure(Config)``, over a model of ``n_layer`` blocks."""

    def __init__(
        self,
        free: Sequence[int],
        *,
        n_layer: int,
        attn: int,
        exps: int = 0,
        out: int = 0,
        kv: int = 0,
        ctx_dev: int = 0,
    ) -> None:
        self.devices = list(range(len(free)))
        self.free = list(free)
        self.calls = 0
        self.configs: list[Config] = []
        self.n_layer = n_layer
        self.out = out
        self.kv = kv
        #: Bytes per token on every device whatever its layers (a compute buffer).
        self.ctx_dev = ctx_dev
        self.tensors = [
            [(f"blk.{il}.attn_qkv.weight", attn)]
            + ([(f"blk.{il}.{name}", exps) for name in (UP_EXPS, GATE_EXPS, DOWN_EXPS)] if exps else [])
            for il in range(n_layer)
        ]

    def layer_devices(self, config: Config) -> list[int | None]:
        """Where each of the ``n_layer + 1`` layers goes (``llama_model_load``'s split)."""
        nd, total = len(self.free), self.n_layer + 1
        n_gpu = min(config.n_gpu_layers % U32, total) if nd else 0
        start = total - n_gpu
        weights = list(config.tensor_split[:nd]) or [float(f) for f in self.free]
        if not any(weights):
            weights = [float(f) for f in self.free]
        cum, acc = [], 0.0
        for w in weights:
            acc += w
            cum.append(acc / sum(weights))
        out: list[int | None] = []
        for il in range(total):
            if il < start:
                out.append(None)
                continue
            ratio = (il - start) / n_gpu
            out.append(next((k for k, c in enumerate(cum) if ratio < c), nd - 1))
        return out

    def measure(self, config: Config) -> Any:
        self.calls += 1
        self.configs.append(config)
        nd = len(self.free)
        where = self.layer_devices(config)
        dev = [0] * nd
        models = [0] * nd
        host = 0

        def charge(place: int | None, size: int, model: bool) -> None:
            nonlocal host
            if place is None:
                host += size
            else:
                dev[place] += size
                if model:
                    models[place] += size

        for il in range(self.n_layer):
            for name, size in self.tensors[il]:
                place = where[il]
                for pattern, buft in config.overrides:
                    if re.search(pattern, name):
                        place = buft
                        break
                charge(place, size, True)
            charge(where[il], config.n_ctx * self.kv, False)
        charge(where[self.n_layer], self.out, True)
        for k in range(nd):
            charge(k, config.n_ctx * self.ctx_dev, False)
        return FakeMeasured(tuple(dev), tuple(models), host)


def run(
    oracle: FakeOracle,
    *,
    margins: Sequence[int] | None = None,
    host_total: int = 64 * GiB,
    n_ctx: int | None = 8192,
    n_ctx_min: int = 4096,
    n_streams: int = 1,
    n_ctx_train: int = 32768,
    n_gpu_layers: int | None = None,
    tensor_split: Sequence[float] | None = None,
    overrides: Sequence[tuple[str, int | None]] | None = None,
    split_mode: str = "layer",
    n_expert: int = 0,
) -> llamacpp.Decision:
    nd = len(oracle.free)
    return llamacpp.plan(
        cast(Oracle, oracle),
        host_total=host_total,
        margins=list(margins) if margins is not None else [GiB] * max(nd, 1),
        n_ctx=n_ctx,
        n_ctx_min=n_ctx_min,
        n_streams=n_streams,
        n_ctx_train=n_ctx_train,
        n_gpu_layers=n_gpu_layers,
        tensor_split=tensor_split,
        overrides=overrides,
        split_mode=split_mode,
        n_expert=n_expert,
        n_layer=oracle.n_layer,
        names=[f"CUDA{k}" for k in range(nd)],
    )


Overrides = tuple[tuple[str, int | None], ...]


def settled(d: llamacpp.Decision) -> tuple[int, int, tuple[float, ...], Overrides, str]:
    return d.n_ctx, d.n_gpu_layers, d.tensor_split, d.overrides, d.failure


def moe(il: int) -> tuple[str, None]:
    return (llamacpp._FRACTION[llamacpp.MOE].format(il), None)


# --- margins_for --------------------------------------------------------------------------


def test_margins_for_fills_missing_entries_with_the_default() -> None:
    """``-fitt`` sets one margin for all devices, or the first entries of the per-device array
    (the rest keep the 1024 MiB default); with no device the host keeps one margin."""
    d = llamacpp.DEFAULT_MARGIN
    assert llamacpp.margins_for(3, None) == [d, d, d]
    assert llamacpp.margins_for(0, None) == [d]
    assert llamacpp.margins_for(2, 5) == [5, 5]
    assert llamacpp.margins_for(0, 5) == [5]
    assert llamacpp.margins_for(3, [7]) == [7, 7, 7]
    assert llamacpp.margins_for(3, [7, 8]) == [7, 8, d]
    assert llamacpp.margins_for(2, [7, 8, 9]) == [7, 8]
    assert llamacpp.margins_for(0, [7, 8]) == [7]


# --- step 1: nothing to change ------------------------------------------------------------


def test_nothing_changes_when_every_device_keeps_its_margin() -> None:
    """Step 1: the parameters as given are measured once; if every device keeps its margin free
    (here exactly: free - used == margin), nothing changes. An unset context is the training
    context times the sequences. One dry run for the fit, one for the result."""
    o = FakeOracle([4 * GiB], n_layer=5, attn=512 * MiB, out=512 * MiB, kv=0)
    d = run(o, n_ctx=None, n_streams=2, n_ctx_train=16384)
    assert settled(d) == (32768, -1, (), (), "")
    assert d.dry_runs == 2
    assert d.measured.devices == (3 * GiB,)
    # one byte less free: the device no longer keeps its margin, so the fit goes on
    o = FakeOracle([4 * GiB - 1], n_layer=5, attn=512 * MiB, out=512 * MiB, kv=0)
    assert settled(run(o, n_ctx=8192)) == (8192, 5, (), (), "")


def test_nothing_changes_per_device_not_in_sum() -> None:
    """Step 1 asks every device for its own margin, not the sum: with two devices whose total
    free memory is plenty, one device over its margin still sends the fit on (the split by
    free memory gives the first device one 512 MiB block, 1 byte too many; the fit fills the
    layers back to front, and the roomy last device takes all 5)."""
    o = FakeOracle([GiB + 512 * MiB - 1, 20 * GiB], n_layer=4, attn=512 * MiB, out=512 * MiB)
    d = run(o)
    assert settled(d) == (8192, 5, (0.0, 5.0), (), "")


def test_no_gpu_uses_the_hosts_total_memory() -> None:
    """With no device, step 1 compares the host's total memory less the one margin with the
    host's use; when the context cannot be lowered either, the fit throws "unable to fit model
    into system memory" and the parameters stay."""
    o = FakeOracle([], n_layer=4, attn=GiB, out=GiB)
    assert settled(run(o, host_total=6 * GiB)) == (8192, -1, (), (), "")
    d = run(o, host_total=6 * GiB - 1)
    assert settled(d) == (
        8192, -1, (), (), "was unable to fit model into system memory by reducing context",
    )  # fmt: skip


# --- step 2: the context ------------------------------------------------------------------


def test_context_interpolated_and_aligned_on_one_device() -> None:
    """Step 2: with the context unset, measure again at --fit-ctx and interpolate linearly
    between the two measurements to the free memory less the margin (C integer division), then
    round down to a multiple of 256 per sequence; with one device that is the answer.

    8 blocks of 256 MiB, 4096 B per token and layer (32 KiB a token): 3 GiB at 32768 tokens,
    2 GiB + 128 MiB at 4096. Free 3.5 GiB + 1 MiB, margin 1 GiB: 385 MiB over the low
    measurement of 896 MiB between them, 28672 * 385 / 896 = 12320 tokens more, 16416, rounded
    down to 16384."""
    o = FakeOracle([3 * GiB + 512 * MiB + MiB], n_layer=8, attn=256 * MiB, kv=4096)
    d = run(o, n_ctx=None)
    assert settled(d) == (16384, -1, (), (), "")
    assert [c.n_ctx for c in o.configs] == [32768, 4096, 16384]
    assert d.dry_runs == 3


def test_context_alignment_is_per_sequence() -> None:
    """Step 2 with 2 sequences: the range is 2 x (--fit-ctx, n_ctx_train) and the context is
    rounded down to a multiple of 512 (256 a sequence). 8192..65536 tokens, 2 GiB + 256 MiB to
    4 GiB; 1625.25 MiB over the low end: 57344 * 1625.25 / 1792 = 52008 more, 60200, rounded
    down to 59904 (a multiple of 256 would give 60160, of 1024 59392)."""
    o = FakeOracle([4953 * MiB + MiB // 4], n_layer=8, attn=256 * MiB, kv=4096)
    d = run(o, n_ctx=None, n_streams=2, n_ctx_min=4096, n_ctx_train=32768)
    assert d.n_ctx == 59904
    assert [c.n_ctx for c in o.configs] == [65536, 8192, 59904]


def test_context_rounding_never_below_fit_ctx() -> None:
    """Step 2's rounding is floored at --fit-ctx (times the sequences): with --fit-ctx 4100, a
    few tokens over it round down to 3840, and the fit takes 4100."""
    o = FakeOracle([3 * GiB + 129 * MiB], n_layer=8, attn=256 * MiB, kv=4096)
    d = run(o, n_ctx=None, n_ctx_min=4100)
    # 0.875 MiB over the 2176.125 MiB at 4100 tokens: 28668 x 0.875 / 895.875 = 28 more, 4128
    assert d.n_ctx == 4100
    assert d.n_gpu_layers == -1 and d.failure == ""


def test_context_floor_when_even_fit_ctx_does_not_fit_then_layers() -> None:
    """Step 2 sets the context to --fit-ctx first; when even that does not fit the device
    (the target is not over the low measurement) the context stays there and step 3 moves
    layers to the CPU: 1 GiB blocks with 512 MiB of KV each at 4096 tokens fill a 5 GiB target
    with 3 blocks (4.5 GiB) and the 0-byte output layer."""
    o = FakeOracle([6 * GiB], n_layer=8, attn=GiB, kv=128 * 1024)
    d = run(o, n_ctx=None)
    assert settled(d) == (4096, 4, (), (), "")


def test_context_not_lowered_when_user_set_or_train_context_is_small() -> None:
    """Step 2 runs only with the context unset (``-c`` 0 or missing) and a training context
    over --fit-ctx; otherwise the fit goes straight to the layers (here 2 blocks of 1 GiB, with
    their KV, fit a 3 GiB target next to the 0-byte output layer)."""
    o = FakeOracle([4 * GiB], n_layer=4, attn=GiB, kv=64 * 1024)
    # user context 8192: 512 MiB of KV per layer
    assert settled(run(o, n_ctx=8192)) == (8192, 3, (), (), "")
    # unset, but the training context is --fit-ctx: kept at 4096 (256 MiB per layer)
    o.configs.clear()
    d = run(o, n_ctx=None, n_ctx_train=4096)
    assert settled(d) == (4096, 3, (), (), "")
    # no second dry run at --fit-ctx: the first measurement, then step 3's
    assert [c.n_gpu_layers for c in o.configs[:2]] == [-1, 0]
    assert settled(run(o, n_ctx=0, n_ctx_train=2048)) == (2048, 3, (), (), "")


def test_context_on_several_devices_keeps_room_for_layers_then_fills() -> None:
    """Step 2 with several devices: the target is lowered by (devices + 1) x the model's
    bytes per GPU layer / 2 (dense) before interpolating, and the fit then goes on to step 3.

    Two devices of 4 GiB with a 3272 MiB margin each (824 MiB targets), 8 blocks of 256 MiB,
    4096 B per token and layer (128 MiB a block at 32768 tokens). The target, 8192 - 2 x 3272
    = 1648 MiB, less 3 x (2048 MiB / 8) / 2 = 384 MiB, is 1264 MiB: under the 2176 MiB at
    4096 tokens, so the context stays at --fit-ctx and step 3 fills 272 MiB blocks: the output
    and 3 blocks on the last device, 3 blocks on the first."""
    margin = 3 * GiB + 200 * MiB
    o = FakeOracle([4 * GiB, 4 * GiB], n_layer=8, attn=256 * MiB, kv=4096)
    d = run(o, n_ctx=None, margins=[margin, margin])
    assert settled(d) == (4096, 7, (3.0, 4.0), (), "")
    assert [c.n_ctx for c in o.configs[:2]] == [32768, 4096]


def test_context_on_several_devices_interpolates_and_goes_on() -> None:
    """As above, with room: the context is interpolated to the lowered target and, with
    several devices, the fit goes on to step 3 at that context (one device's shortcut does not
    apply). Two devices of 2401 MiB, 1 GiB margins: 5 blocks (1920 MiB) on the first, over.
    Target 4802 - 2048 - 384 = 2370 MiB, 194 MiB over the 2176 MiB at 4096 tokens: 28672 x 194
    / 896 = 6208 more, 10304, rounded down to 10240 (40 MiB of KV a block); then 296 MiB blocks
    in 1377 MiB targets: the output and 4 blocks on the last device, 4 on the first."""
    o = FakeOracle([2401 * MiB, 2401 * MiB], n_layer=8, attn=256 * MiB, kv=4096)
    d = run(o, n_ctx=None, margins=[GiB, GiB])
    assert settled(d) == (10240, 9, (4.0, 5.0), (), "")
    assert [c.n_ctx for c in o.configs[:2]] == [32768, 4096]


# --- step 3: the user-set aborts ------------------------------------------------------------


TIGHT = dict(n_layer=4, attn=GiB)


@pytest.mark.parametrize(
    ("kwargs", "failure"),
    [
        ({"n_gpu_layers": 3}, "n_gpu_layers already set by user to 3"),
        ({"n_gpu_layers": -1}, "n_gpu_layers already set by user to -1"),
        ({"tensor_split": (1.0, 1.0)}, "model_params::tensor_split already set by user"),
        ({"tensor_split": (0.0, 2.0)}, "model_params::tensor_split already set by user"),
        ({"split_mode": "row"}, "changing weight allocation for LLAMA_SPLIT_MODE_ROW not implemented"),
        ({"overrides": (("blk\\.0\\..*", None),)}, "model_params::tensor_buft_overrides already set by user"),
        ({"split_mode": "tensor"}, "llama_params_fit is not implemented for SPLIT_MODE_TENSOR"),
        (
            {"split_mode": "tensor", "n_gpu_layers": 2},
            "llama_params_fit is not implemented for SPLIT_MODE_TENSOR",
        ),
        ({"n_gpu_layers": 2, "tensor_split": (1.0, 1.0)}, "n_gpu_layers already set by user to 2"),
        ({"tensor_split": (1.0, 1.0), "split_mode": "row"}, "model_params::tensor_split already set by user"),
    ],
)
def test_user_settings_abort_the_fit(kwargs: dict[str, Any], failure: str) -> None:
    """Step 3 gives up (``common_params_fit_exception``; llama-fit-params exits 1) when the user
    fixed -ngl (any value, -1 too), a non-zero tensor split or a row split (with several
    devices), or tensor overrides, in that order; -sm tensor is refused before anything is
    measured. The parameters stay as the user gave them."""
    o = FakeOracle([GiB + 512 * MiB, GiB + 512 * MiB], **TIGHT)
    d = run(o, **kwargs)
    assert d.failure == failure
    assert d.n_ctx == 8192
    assert d.n_gpu_layers == kwargs.get("n_gpu_layers", -1)
    assert d.tensor_split == tuple(kwargs.get("tensor_split", ()))
    assert d.overrides == tuple(kwargs.get("overrides", ()))
    if kwargs.get("split_mode") == "tensor":
        assert d.dry_runs == 1  # only the result's


def test_single_device_ignores_split_and_row_mode() -> None:
    """With one device, a tensor split and a row split are not the user's allocation (llama.cpp
    checks them only with several devices), and an all-zero split is unset: the fit fills."""
    o = FakeOracle([3 * GiB], **TIGHT)
    for kwargs in ({"split_mode": "row"}, {"tensor_split": (3.0,)}):
        assert settled(run(o, **kwargs)) == (8192, 3, (), (), "")
    o = FakeOracle([2 * GiB, 2 * GiB], **TIGHT)
    d = run(o, tensor_split=(0.0, 0.0))
    assert d.failure == ""
    assert (d.n_gpu_layers, d.tensor_split) == (3, (1.0, 2.0))


def test_user_abort_keeps_the_lowered_context() -> None:
    """llama.cpp writes the lowered context into the parameters before step 3 throws, so with
    several devices and -ngl set by the user the result has the context step 2 set (here
    --fit-ctx: even 4096 tokens are over the target) and the user's -ngl."""
    o = FakeOracle([1280 * MiB, 1280 * MiB], n_layer=8, attn=128 * MiB, kv=4096)
    d = run(o, n_ctx=None, n_gpu_layers=99)
    assert settled(d) == (4096, 99, (), (), "n_gpu_layers already set by user to 99")


# --- step 3: dense fill back to front -------------------------------------------------------


def test_dense_fill_back_to_front_two_devices() -> None:
    """Step 3 for a dense model: the last device takes as many whole layers from the back (the
    output layer first) as fit its target, then the one before it, and the rest stay on the
    CPU; the search (false position) ends at the largest count that fits.

    40 blocks of 300 MiB and a 200 MiB output; targets 7 GiB and 5 GiB: the last device holds
    the output and 16 blocks (5000 MiB), the first 23 blocks (6900 MiB), one block on the CPU."""
    o = FakeOracle([8 * GiB, 6 * GiB], n_layer=40, attn=300 * MiB, out=200 * MiB)
    d = run(o)
    assert settled(d) == (8192, 40, (23.0, 17.0), (), "")
    assert d.measured.devices == (23 * 300 * MiB, 16 * 300 * MiB + 200 * MiB)


def test_dense_fill_three_devices_uneven_margins() -> None:
    """Step 3 with three devices and a margin each: device k's target is its free memory less
    its own margin."""
    o = FakeOracle([6 * GiB, 6 * GiB, 6 * GiB], n_layer=30, attn=500 * MiB, out=100 * MiB)
    d = run(o, margins=[GiB, 2 * GiB, 3 * GiB])
    # targets 5120, 4096, 3072 MiB: 10 blocks, 8 blocks, 6 blocks and the output (3100 > 3072: 5)
    assert settled(d) == (8192, 24, (10.0, 8.0, 6.0), (), "")


def test_dense_fill_single_device() -> None:
    """Step 3 on one device: -ngl alone (no tensor split), the largest number of layers that
    fit: 120 blocks of 70 MiB and a 35 MiB output in a 7168 MiB target: the output and 101
    blocks (7105 MiB); 102 (7175 MiB) do not fit."""
    o = FakeOracle([8 * GiB], n_layer=120, attn=70 * MiB, out=35 * MiB)
    d = run(o)
    assert settled(d) == (8192, 102, (), (), "")
    assert d.measured.devices == (101 * 70 * MiB + 35 * MiB,)


# --- steps 3 and 4: MoE -------------------------------------------------------------------

#: 8 blocks of a 256 MiB attention tensor and three 512 MiB expert tensors (1792 MiB a full
#: block, 256 MiB with its experts on the CPU), a 256 MiB output layer.
MOE8 = dict(n_layer=8, attn=256 * MiB, exps=512 * MiB, out=256 * MiB)
#: 16 blocks of 128 MiB attention and 3 x 300 MiB experts, a 100 MiB output layer.
MOE16 = dict(n_layer=16, attn=128 * MiB, exps=300 * MiB, out=100 * MiB)


def test_moe_without_surplus_keeps_experts_on_the_cpu() -> None:
    """Step 3 for a MoE model fills with the expert tensors on the CPU (one
    ``blk.N.ffn_(up|down|gate_up|gate)_(ch|)exps`` override a partial layer, after each device's
    full layers); step 4 runs only when the dense weights (every expert on the CPU) leave a
    surplus over the margins. Here they take 2304 MiB of 3328 MiB free with a 1 GiB margin:
    no surplus, and the last device's one full layer (set_ngl_tensor_split_tbo puts the full
    layers first) does not fit with its experts, so 6 blocks go to the CPU."""
    o = FakeOracle([3328 * MiB], **MOE8)
    d = run(o, n_expert=8)
    assert settled(d) == (8192, 3, (), (moe(7), moe(8)), "")
    assert o.configs[1].overrides == ((llamacpp.MOE_ALL, None),)
    # at a zero surplus step 4 makes no dry run
    assert d.dry_runs == 8
    # one byte of surplus: step 4 runs, finds no layer to convert, and its one more partial
    # layer overflows block 7's whole FFN (ATTN) instead of its experts only
    o = FakeOracle([3328 * MiB + 1], **MOE8)
    d = run(o, n_expert=8)
    attn7 = (llamacpp._FRACTION[llamacpp.ATTN].format(7), None)
    assert settled(d) == (8192, 3, (), (attn7, moe(8)), "")
    assert d.dry_runs == 12


@pytest.mark.parametrize(
    ("free", "kind", "used"),
    [
        (8 * GiB, llamacpp.ATTN, 6912),
        (8 * GiB + 300 * MiB, llamacpp.UP, 7424),
        (8 * GiB + 800 * MiB, llamacpp.GATE, 7936),
    ],
)
def test_moe_conversion_then_one_partial_layer(free: int, kind: int, used: int) -> None:
    """Step 4 on one device: with a surplus, dense-only layers become full layers at the front
    (false position over the number of full layers: 3 fit, 6912 MiB in a 7168 MiB target;
    4 would be 8448), then one more layer is tried with only its gate and down projections
    overflowing (UP: 512 MiB more), then only its down projection (GATE: 1024 MiB more); if UP
    does not fit the whole FFN overflows (ATTN). Each is kept only while strictly under the
    target; on the last device the overflow goes to the CPU."""
    o = FakeOracle([free], **MOE8)
    d = run(o, n_expert=8)
    first = (llamacpp._FRACTION[kind].format(3), None)
    assert settled(d) == (8192, 9, (), (first, *(moe(il) for il in range(4, 9))), "")
    assert d.measured.devices == (used * MiB,)


def test_moe_partial_layer_must_be_strictly_under_target() -> None:
    """Step 4's partial-layer tries need the device strictly under its target: with exactly
    7424 MiB free over the margin, UP (7424 MiB) is refused and ATTN (6912) kept."""
    o = FakeOracle([7424 * MiB + GiB], **MOE8)
    d = run(o, n_expert=8)
    assert d.overrides[0] == (llamacpp._FRACTION[llamacpp.ATTN].format(3), None)
    o = FakeOracle([7424 * MiB + GiB + 1], **MOE8)
    assert run(o, n_expert=8).overrides[0] == (llamacpp._FRACTION[llamacpp.UP].format(3), None)


def test_moe_two_devices_overflow_to_the_next_device() -> None:
    """Step 4 on two devices: the first device converts its layers and its partial layer
    overflows to the next device (buffer 1, not the CPU); the last device's partial layers keep
    their experts on the CPU. Targets 5120 MiB: the first device holds 2 full blocks and block
    2 with its down projection on device 1 (4864 MiB); the second 2 full blocks, blocks 5-7
    dense-only, the output and block 2's down projection (5120 MiB)."""
    o = FakeOracle([6 * GiB, 6 * GiB], **MOE8)
    d = run(o, n_expert=8)
    assert settled(d) == (
        8192, 9, (3.0, 6.0),
        ((llamacpp._FRACTION[llamacpp.GATE].format(2), 1), *(moe(il) for il in range(5, 9))),
        "",
    )  # fmt: skip
    assert d.measured.devices == (4864 * MiB, 5120 * MiB)
    assert d.dry_runs == 15


def test_moe_two_devices_uneven() -> None:
    """Step 4 with devices of different sizes (targets 7168 and 4096 MiB): the whole decision,
    both devices' partial layers with the down projection overflowing (to device 1, then to
    the CPU)."""
    o = FakeOracle([8 * GiB, 5 * GiB], **MOE16)
    d = run(o, n_expert=8)
    gate = llamacpp._FRACTION[llamacpp.GATE]
    assert settled(d) == (
        8192, 17, (7.0, 10.0),
        ((gate.format(6), 1), (gate.format(9), None), *(moe(il) for il in range(10, 17))),
        "",
    )  # fmt: skip
    assert d.measured.devices == (7230980096, 4143972352)
    assert d.dry_runs == 15


def test_moe_three_devices() -> None:
    """Step 4 front to back over three devices of 4 GiB targets: each converts and tries one
    partial layer, the first two overflowing to the next device, the last to the CPU."""
    o = FakeOracle([5 * GiB, 5 * GiB, 5 * GiB], **MOE16)
    d = run(o, n_expert=8)
    f = llamacpp._FRACTION
    assert settled(d) == (
        8192, 17, (4.0, 4.0, 9.0),
        (
            (f[llamacpp.GATE].format(3), 1), (f[llamacpp.UP].format(7), 2), (f[llamacpp.UP].format(10), None),
            *(moe(il) for il in range(11, 17)),
        ),
        "",
    )  # fmt: skip
    assert d.measured.devices == (3997171712, 3997171712, 4009754624)
    assert d.dry_runs == 20


def test_moe_surplus_is_summed_over_devices() -> None:
    """Step 4 runs when the dense weights' surplus over the margins, summed over all devices,
    is positive, even with one device under its margin. Margins 1 GiB and 7.5 GiB: with every
    expert on the CPU the free-memory split leaves the second device 512 MiB short and the
    first 5888 MiB over. Step 3 gives the second device the output layer only; step 4 then
    makes blocks 0-2 full on the first device (without it all 8 would stay dense-only)."""
    o = FakeOracle([8 * GiB, 8 * GiB], **MOE8)
    d = run(o, n_expert=8, margins=[GiB, 7680 * MiB])
    assert settled(d) == (8192, 9, (8.0, 1.0), tuple(moe(il) for il in range(3, 8)), "")
    assert d.measured.devices == (6656 * MiB, 256 * MiB)


def test_moe_conversion_skipped_when_last_device_holds_nothing() -> None:
    """Step 4 looks for the dense-only layers from the last device backwards; when the last
    device holds no layer (its margin is its whole memory) there are none to convert and step
    3's result stands: every layer on the first device, every expert on the CPU."""
    o = FakeOracle([8 * GiB, 2 * GiB], **MOE8)
    d = run(o, n_expert=8, margins=[GiB, 2 * GiB])
    assert settled(d) == (8192, 9, (9.0, 0.0), tuple(moe(il) for il in range(9)), "")
    assert d.measured.devices == (2304 * MiB, 0)
    assert d.dry_runs == 7


def test_moe_of_one_expert_is_a_moe() -> None:
    """The fit treats a model as MoE when it has any expert (``n_expert > 0``): one expert
    gives the same decision as eight, a dense model (no expert) another (4 whole blocks)."""
    one = run(FakeOracle([8 * GiB], **MOE8), n_expert=1)
    eight = run(FakeOracle([8 * GiB], **MOE8), n_expert=8)
    assert settled(one) == settled(eight)
    assert one.n_gpu_layers == 9
    dense = FakeOracle([8 * GiB], **MOE8)
    d = run(dense, n_expert=0)
    assert settled(d) == (8192, 4, (), (), "")
    # a dense model makes no dry run with the experts on the CPU
    assert all(c.overrides == () for c in dense.configs)
    assert d.dry_runs == 6


# --- step 2: the remaining rules ----------------------------------------------------------


def test_context_lowered_in_host_memory_without_gpu() -> None:
    """Step 2 without a GPU works on the host: its total memory less the one margin, and the
    host's use at both contexts. 3 GiB at 32768 tokens, 2176 MiB at 4096; 3585 MiB in all:
    16384 as on one device (the interpolation of test_context_interpolated_and_aligned_on_one_device),
    and with no device that is the answer."""
    o = FakeOracle([], n_layer=8, attn=256 * MiB, kv=4096)
    d = run(o, n_ctx=None, host_total=3 * GiB + 513 * MiB)
    assert settled(d) == (16384, -1, (), (), "")
    assert d.measured.host == 2 * GiB + 512 * MiB


def test_context_at_exactly_fit_ctx_target_goes_on_to_layers() -> None:
    """Step 2 interpolates only when the target is strictly over the use at --fit-ctx; at
    exactly that use the context stays at --fit-ctx and the fit goes on to step 3 (which here
    finds every layer fits: -ngl 9), instead of returning the context alone."""
    o = FakeOracle([2176 * MiB + GiB], n_layer=8, attn=256 * MiB, kv=4096)
    d = run(o, n_ctx=None)
    assert settled(d) == (4096, 9, (), (), "")


def test_context_not_lowered_at_zero_surplus() -> None:
    """Step 2 runs only when the free memory summed over the devices is short of the summed
    margins (a negative surplus); at exactly zero one device's overflow is left to step 3 at the
    full context. Two devices of 2560 MiB, 1 GiB margins, 3 GiB used: blocks of 384 MiB, 4 on
    the first device and the output and 4 on the last."""
    o = FakeOracle([2560 * MiB, 2560 * MiB], n_layer=8, attn=256 * MiB, kv=4096)
    d = run(o, n_ctx=None)
    assert settled(d) == (32768, 9, (4.0, 5.0), (), "")
    assert all(c.n_ctx == 32768 for c in o.configs)


def test_context_with_no_gpu_layer_keeps_the_whole_target() -> None:
    """Step 2 with several devices lowers the target by (devices + 1) x the model's bytes per
    GPU layer / 2, taken as 0 when no layer is on a GPU (-ngl 0: no division by zero). With a
    compute buffer of 4096 B per token on each device and nothing else: 256 MiB at 32768
    tokens, 32 MiB at 4096, a 200 MiB target: 28672 x 168 / 224 = 21504 more, 25600 (a byte
    less of target would give 25344). Then the user's -ngl stops the fit."""
    o = FakeOracle([GiB, GiB], n_layer=8, attn=256 * MiB, ctx_dev=4096)
    margin = GiB - 100 * MiB
    d = run(o, n_ctx=None, n_gpu_layers=0, margins=[margin, margin])
    assert settled(d) == (25600, 0, (), (), "n_gpu_layers already set by user to 0")


@pytest.mark.parametrize(("n_expert", "n_ctx"), [(0, 10240), (8, 18432)])
def test_context_room_for_layers_is_smaller_for_moe(n_expert: int, n_ctx: int) -> None:
    """Step 2's room kept for layers on several devices is (devices + 1) x bytes per layer / 2
    for a dense model and / 6 for a MoE model. test_context_on_several_devices_interpolates_and_goes_on's
    devices: 2370 MiB of target for the dense model (10240 tokens); 3 x 256 / 6 = 128 MiB for a
    MoE one, 2626 MiB, 450 MiB over the low end: 28672 x 450 / 896 = 14400 more, 18496, 18432
    (/ 7 would give 18944)."""
    o = FakeOracle([2401 * MiB, 2401 * MiB], n_layer=8, attn=256 * MiB, kv=4096)
    run(o, n_ctx=None, margins=[GiB, GiB], n_expert=n_expert)
    assert [c.n_ctx for c in o.configs[:3]] == [32768, 4096, n_ctx]


def test_moe_conversion_takes_every_dense_layer_when_they_fit_as_full_layers() -> None:
    """Step 4's first probe moves every dense-only layer to the device being filled (the last
    device keeps one, the output layer) as full layers; when that fits the search is skipped.
    MOE8 with a 4 GiB output layer, targets 16384 and 4096 MiB: step 3 leaves the output alone
    on the last device and 8 dense-only blocks on the first; step 4 makes all 8 full on the
    first (14336 MiB), and the one more layer it then tries (the output, 18432 MiB with it) does
    not fit: -ts 8,1, no override left."""
    o = FakeOracle([17 * GiB, 5 * GiB], n_layer=8, attn=256 * MiB, exps=512 * MiB, out=4 * GiB)
    d = run(o, n_expert=8)
    assert settled(d) == (8192, 9, (8.0, 1.0), (), "")
    assert d.measured.devices == (14336 * MiB, 4096 * MiB)
    assert d.dry_runs == 13


def test_dense_fill_gives_a_device_a_single_layer() -> None:
    """Step 3 gives a device whatever whole layers are left, one included: 8 blocks of 1 GiB
    and a 0-byte output, targets 1 and 7 GiB: the output and 7 blocks on the last device, the
    one block left on the first."""
    o = FakeOracle([2 * GiB, 8 * GiB], n_layer=8, attn=GiB)
    d = run(o)
    assert settled(d) == (8192, 9, (1.0, 8.0), (), "")
