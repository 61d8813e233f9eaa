"""Rules of the fit verdict and usage found by mutmut's survivors (tests/MUTATION.md, "Automatic
mutants (mutmut)", second round; the estimate's are in test_mutmut_gaps_2_estimate.py).

Each test states a rule of a module that no other test stated; the mutant it kills is named in
its docstring's last line.
"""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from gpuscout import DeviceInfo, SystemInfo
from gpuscout._fit import estimate as est
from gpuscout._fit.hparams import Hparams
from gpuscout._fit.usage import Usage, device_graph, split_ops, too_big
from gpuscout._fit.verdict import shared_verdict, verdict
from gpuscout._records.layers import GPULayers, GPULayersList
from gpuscout.sizes import GIB, MIB, human_bytes, sizes_apart

ROOMY = SystemInfo(total_memory=64 * GIB, free_memory=64 * GIB)


def hparams(**changes: Any) -> Hparams:
    """A small dense llama: 2 blocks of 64 wide, 4 heads (2 KV) of 16, n_ff 256, vocab 1000."""
    base = Hparams(
        arch="llama",
        n_layer=2,
        n_embd=64,
        n_ctx_train=4096,
        n_vocab=1000,
        n_head=(4, 4),
        n_head_kv=(2, 2),
        n_ff=(256, 256),
        head_k=16,
        head_v=16,
        head_k_swa=16,
        head_v_swa=16,
        n_swa=0,
        swa=(False, False),
        kv_layers=(True, True),
        recurrent=(False, False),
        mla=False,
        n_embd_r=0,
        n_embd_s=0,
        n_expert=0,
        n_expert_used=0,
        n_ff_exp=0,
    )
    return attrs.evolve(base, **changes)


def card(max_allocation: int = 0, **kw: Any) -> DeviceInfo:
    return DeviceInfo(
        id="GPU-0",
        library="CUDA",
        name="CUDA0",
        total_memory=24 * GIB,
        free_memory=20 * GIB,
        max_allocation=max_allocation,
        **kw,
    )


# -- usage.device_graph: the compute buffer the placement plans a device with ---------------------


def _graph_without_flash_attention() -> tuple[Hparams, est.Graph]:
    h = hparams()
    opts = est.Options(ctx=4096, flash_attn=False)
    return h, est.graph(h, est.context(h, opts), opts, device=True)


def test_a_device_that_cannot_hold_a_blocks_kq_scores_is_planned_without_that_attention() -> None:
    """The compute buffer the placement counts for a device leaves out the attention of blocks
    whose KQ scores exceed its largest allocation (ggml runs those on the CPU).
    Kills gpuscout._fit.usage.x_device_graph__mutmut_5 (the device not passed to split_ops) and
    x_split_ops__mutmut_5, _6, _10 (the attention over the limit)."""
    h, g = _graph_without_flash_attention()
    assert g.scores[0] > 0
    unlimited = device_graph(g, {0, 1}, h.n_layer, card(), h)
    small = device_graph(g, {0, 1}, h.n_layer, card(max_allocation=g.scores[0] - 1), h)
    assert small < unlimited
    assert small == max(g.rest)


def test_the_compute_buffer_of_the_device_holding_the_output_layer_counts_the_logits() -> None:
    """A device that holds the output layer is planned with the head's logits in its compute
    buffer; the same blocks without the output layer need less.
    Kills gpuscout._fit.usage.x_device_graph__mutmut_14 (the head never counted)."""
    h = hparams(n_vocab=32000)
    opts = est.Options(ctx=4096)
    g = est.graph(h, est.context(h, opts), opts, device=True)
    with_head = device_graph(g, {0, 1, h.n_layer}, h.n_layer, card(), h)
    without = device_graph(g, {0, 1}, h.n_layer, card(), h)
    assert with_head > without
    assert with_head >= g.logits + g.head_rest


# -- usage.too_big and usage.split_ops: what a device's largest allocation leaves to the host ------


def test_a_tensor_is_too_big_only_past_a_known_largest_allocation() -> None:
    """A tensor is too big for a device only when the device has a largest allocation (> 0) and
    the tensor is over it: exactly that many bytes fit, no device or no limit never refuses, and a
    limit of 1 byte is a limit like any other.
    Kills gpuscout._fit.usage.x_too_big__mutmut_3 (``1 <``) and _14 (``<=``)."""
    assert too_big(1000, card(max_allocation=999)) is True
    assert too_big(999, card(max_allocation=999)) is False
    assert too_big(2, card(max_allocation=1)) is True
    assert too_big(10**15, card()) is False
    assert too_big(10**15, None) is False


#: Two blocks: block 1's KQ scores (50 bytes) are over a 20-byte limit, block 0's (5) are not; the
#: logits are 4 bytes for each of the 1000 vocabulary entries (one token).
SMALL_GRAPH = est.Graph(
    masks=0,
    attention=(10, 10),
    scores=(5, 50),
    core=(0, 0),
    rest=(1, 1),
    logits=4000,
    head_rest=0,
    embeddings=0,
)


def test_split_ops_leaves_attention_and_head_over_the_limit_to_the_host() -> None:
    """A device holding both blocks and the output layer runs the attention of the blocks whose
    KQ scores it can allocate and every block's other phase; the attention over its limit, and
    the head when the logits are over it, fall back to the host.
    Kills gpuscout._fit.usage.x_split_ops__mutmut_27..29 (the head left to the host)."""
    h = hparams()
    assert split_ops(SMALL_GRAPH, {2, 1, 0}, 2, card(max_allocation=20), h) == ([0], [0, 1], False, [1], True)
    assert split_ops(SMALL_GRAPH, {2, 1, 0}, 2, card(), h) == ([0, 1], [0, 1], True, [], False)


def test_split_ops_gives_no_head_to_a_device_without_the_output_layer() -> None:
    """A device that holds only blocks runs no head and moves none to the host.
    Kills gpuscout._fit.usage.x_split_ops__mutmut_13, _14 (the head's test of the output layer)."""
    assert split_ops(SMALL_GRAPH, {1, 0}, 2, card(), hparams()) == ([0, 1], [0, 1], False, [], False)


def test_the_head_falls_back_when_a_batchs_logits_are_over_the_limit_though_a_row_fits() -> None:
    """The head runs on the device only when the whole batch's logits fit its largest allocation;
    one row of them fitting is not enough.
    Kills gpuscout._fit.usage.x_split_ops__mutmut_17 (the logits checked against no device)."""
    h = hparams(n_vocab=100)
    assert split_ops(SMALL_GRAPH, {2}, 2, card(max_allocation=1000), h) == ([], [], False, [], True)


def test_a_device_that_holds_the_logits_exactly_keeps_the_head() -> None:
    """With one token per batch the logits are one row of n_vocab floats; a device whose largest
    allocation is exactly that runs the head.
    Kills gpuscout._fit.usage.x_split_ops__mutmut_21 and _26 (the row check)."""
    h = hparams()
    assert split_ops(SMALL_GRAPH, {2}, 2, card(max_allocation=h.n_vocab * 4), h)[2] is True


# -- verdict.verdict: the CPU side and every GPU's room --------------------------------------------

RESERVE = 100 * MIB
GPU_A = DeviceInfo(id="GPU-0", library="CUDA", name="CUDA0", total_memory=24 * GIB, free_memory=10 * GIB)
GPU_B = DeviceInfo(id="GPU-1", library="CUDA", name="CUDA1", total_memory=24 * GIB, free_memory=2 * GIB)
#: Two blocks and the output layer; block 0 (1 GiB) stays on the CPU, block 1 and the output on GPU-1.
SIZES = [1 * GIB, 100 * MIB, 10 * MIB]
LAYOUT = GPULayersList([GPULayers(id="GPU-1", library="CUDA", layers=[1, 2])])


def use(device: DeviceInfo | None, total: int) -> Usage:
    """A backend's usage of ``total`` bytes, all weights (the CPU's when ``device`` is None)."""
    if device is None:
        return Usage(id="", library="cpu", name="CPU", weights=total, kv_cache=0, graph=0)
    return Usage(id=device.id, library=device.library, name=device.name, weights=total, kv_cache=0, graph=0)


def judge(
    usage: list[Usage],
    system: SystemInfo = ROOMY,
    devices: tuple[DeviceInfo, ...] = (GPU_A, GPU_B),
    layout: GPULayersList = LAYOUT,
    platform: str = "linux",
) -> tuple[bool, list[str]]:
    notes: list[str] = []
    fits = verdict(layout, SIZES, devices, system, usage, lambda d: RESERVE, platform, -1, notes)
    return fits, notes


def test_every_gpu_is_judged_the_last_one_too() -> None:
    """The verdict checks every GPU's share, not only the first: a model that overflows the last
    GPU does not fit, and the note names that GPU, its need and its room after the reserve.
    Kills gpuscout._fit.verdict.x_verdict__mutmut_65/66 (``usage[:+1]``, ``usage[:-2]``) and
    _81 (the device's id for its name)."""
    room = GPU_B.free_memory - RESERVE
    fits, notes = judge([use(GPU_A, 1 * GIB), use(GPU_B, room + 1), use(None, 1 * GIB)])
    assert fits is False
    need, has = sizes_apart(room + 1, room)
    assert notes == [f"CUDA GPU-1 (CUDA1) needs {need} but has {has} free after its reserve"]


def test_a_gpu_share_of_exactly_its_room_fits() -> None:
    """A GPU's share may take all of its free memory less its reserve ("at most"): exactly that
    many bytes fit.
    Kills gpuscout._fit.verdict.x_verdict__mutmut_77 (``>=``)."""
    room = GPU_B.free_memory - RESERVE
    assert judge([use(GPU_A, 0), use(GPU_B, room), use(None, 1 * GIB)]) == (True, [])


def test_a_gpu_whose_reserve_exceeds_its_free_memory_is_said_to_have_none_free() -> None:
    """When a GPU's reserve is more than its free memory, the shortfall note says it has 0 bytes
    free, not a negative figure nor 1.
    Kills gpuscout._fit.verdict.x_verdict__mutmut_86 (``max(room, 1)`` in the note)."""
    tiny = attrs.evolve(GPU_B, free_memory=10 * MIB)
    fits, notes = judge([use(GPU_A, 0), use(tiny, 1), use(None, 1 * GIB)], devices=(GPU_A, tiny))
    assert fits is False
    assert notes == ["CUDA GPU-1 (CUDA1) needs 1 B but has 0 B free after its reserve"]


def test_a_gpu_with_unknown_free_memory_is_placed_against_its_reported_figure_with_a_note() -> None:
    """A GPU whose free memory is unknown is judged against the figure its driver reports, and
    the verdict says so, naming the device and that figure.
    Kills gpuscout._fit.verdict.x_verdict__mutmut_71..76 (the note's text and name)."""
    unknown = attrs.evolve(GPU_B, free_memory_unknown=True)
    fits, notes = judge([use(GPU_A, 0), use(unknown, 1), use(None, 1 * GIB)], devices=(GPU_A, unknown))
    assert fits is True
    assert notes == [
        f"CUDA GPU-1 (CUDA1): free memory unknown; placed against the {human_bytes(2 * GIB)} its "
        "driver reports instead (what the runtime uses too), so the verdict may be optimistic"
    ]


def test_the_cpu_share_may_fill_free_system_memory_exactly() -> None:
    """The CPU's share is the larger of the layers left on it and its own usage, and it fits when
    that is exactly the free system memory (no swap).
    Kills gpuscout._fit.verdict.x_verdict__mutmut_8 (the placed layers for the unplaced), _14
    (``max(1, ...)``), _15 (the unplaced layers counted twice) and _44 (``require_full=True``)."""
    exact = SystemInfo(total_memory=64 * GIB, free_memory=SIZES[0])
    assert judge([use(GPU_A, 0), use(GPU_B, 0), use(None, SIZES[0])], system=exact) == (True, [])
    over = SystemInfo(total_memory=64 * GIB, free_memory=SIZES[0] - 1)
    assert judge([use(GPU_A, 0), use(GPU_B, 0), use(None, SIZES[0])], system=over)[0] is False


@pytest.mark.parametrize(("swap", "said"), [(0, ""), (1, " plus 1 B of swap")])
def test_a_cpu_share_over_free_system_memory_is_said_with_both_figures(swap: int, said: str) -> None:
    """A CPU share over free system memory (plus swap, off darwin) does not fit; the note gives the
    share and the free memory, and says "plus swap" only when there is swap.
    Kills gpuscout._fit.verdict.x_verdict__mutmut_47..52 (the note)."""
    system = SystemInfo(total_memory=64 * GIB, free_memory=512 * MIB, free_swap=swap)
    fits, notes = judge([use(GPU_A, 0), use(GPU_B, 0), use(None, SIZES[0])], system=system)
    assert fits is False
    assert notes == [
        "the CPU's share ({}) is more than free system memory ({}{})".format(
            *sizes_apart(SIZES[0], 512 * MIB, swap)[:2], said
        )
    ]


def test_unknown_system_memory_leaves_the_cpu_share_unchecked() -> None:
    """System memory of 0 total and 0 free is unknown: the CPU's share is not checked (it fits
    whatever its size) and the verdict says so.
    Kills gpuscout._fit.verdict.x_verdict__mutmut_16, _17 (the initial verdict) and _19..26 (the test
    for unknown and its note)."""
    fits, notes = judge([use(GPU_A, 0), use(GPU_B, 0), use(None, SIZES[0])], system=SystemInfo())
    assert (fits, notes) == (True, ["system memory unknown: the CPU's share is not checked"])


def test_known_total_system_memory_with_nothing_free_is_checked() -> None:
    """Only both figures at 0 make system memory unknown: a known total with 0 bytes free is
    checked, and a CPU share does not fit in it.
    Kills gpuscout._fit.verdict.x_verdict__mutmut_18 (``or``)."""
    fits, notes = judge(
        [use(GPU_A, 0), use(GPU_B, 0), use(None, SIZES[0])], system=SystemInfo(total_memory=GIB)
    )
    assert fits is False
    share, free = sizes_apart(SIZES[0], 0)
    assert notes == [f"the CPU's share ({share}) is more than free system memory ({free})"]


# -- verdict.shared_verdict: shared-memory devices and the CPU draw from one pool -----------------

APU_A = DeviceInfo(
    id="0", library="Vulkan", name="APU A", total_memory=8 * GIB, free_memory=GIB, shared_memory=True
)
APU_B = DeviceInfo(
    id="1", library="Vulkan", name="APU B", total_memory=8 * GIB, free_memory=GIB, shared_memory=True
)
#: The order of the usage list: a shared device, a dedicated one, a shared one, the CPU.
SHARED_DEVICES = (APU_A, GPU_A, APU_B)


def shared(cpu: int, a: int, b: int, system: SystemInfo, platform: str = "linux") -> tuple[bool, list[str]]:
    notes: list[str] = []
    usage = [use(APU_A, a), use(GPU_A, 5 * GIB), use(APU_B, b), use(None, cpu)]
    return shared_verdict(usage, SHARED_DEVICES, system, platform, notes), notes


def test_shared_devices_and_the_cpu_share_are_counted_together_against_free_memory_and_swap() -> None:
    """What every shared-memory device holds is added to the CPU's share (a dedicated GPU's is
    not) and judged against free system memory plus swap; both notes give the figures and name
    the shared devices.
    Kills gpuscout._fit.verdict.x_shared_verdict__mutmut_4..6, _10, _15, _17, _22..25, _27..30,
    _34, _36, _37, _39, _43 and _44."""
    system = SystemInfo(total_memory=16 * GIB, free_memory=GIB, free_swap=100 * MIB)
    host = 300 * MIB + 500 * MIB + 400 * MIB
    pool = GIB + 100 * MIB
    fits, notes = shared(300 * MIB, 500 * MIB, 400 * MIB, system)
    assert fits is False
    held, room = sizes_apart(host, pool)
    assert notes == [
        "Vulkan 0 (APU A), Vulkan 1 (APU B): memory shared with the system, so what it holds and "
        f"the CPU's share are counted together ({held} of {room})",
        f"the CPU's share plus what sits on shared-memory devices ({held}) is more than "
        f"the system memory they share ({room} with swap)",
    ]


def test_a_shared_pool_filled_exactly_fits() -> None:
    """The CPU's share plus the shared devices' may fill the pool exactly ("at most").
    Kills gpuscout._fit.verdict.x_shared_verdict__mutmut_31/32 (``<``, False)."""
    system = SystemInfo(total_memory=16 * GIB, free_memory=GIB)
    fits, notes = shared(GIB - 2 * MIB, MIB, MIB, system)
    assert fits is True
    assert len(notes) == 1


def test_on_darwin_swap_does_not_count_for_the_shared_pool() -> None:
    """On darwin the shared pool is free memory alone (no swap): a byte over it does not fit, and
    the note does not say "with swap"; off darwin the same swap makes it fit.
    Kills gpuscout._fit.verdict.x_shared_verdict__mutmut_16..20 and _35..42 (the darwin tests)."""
    system = SystemInfo(total_memory=16 * GIB, free_memory=GIB, free_swap=GIB)
    fits, notes = shared(GIB - 2 * MIB + 1, MIB, MIB, system, platform="darwin")
    assert fits is False
    assert notes[1] == (
        "the CPU's share plus what sits on shared-memory devices ({}) is more than "
        "the system memory they share ({})".format(*sizes_apart(GIB + 1, GIB))
    )
    assert shared(GIB - 2 * MIB + 1, MIB, MIB, system, platform="linux")[0] is True


def test_without_anything_on_shared_devices_the_pool_is_not_judged() -> None:
    """With nothing on a shared-memory device the shared verdict is "fits" and says nothing (the
    CPU's share alone is verify_layout's to judge).
    Kills gpuscout._fit.verdict.x_shared_verdict__mutmut_7/8 (``if on_shared``, False)."""
    assert shared(64 * GIB, 0, 0, SystemInfo(total_memory=GIB, free_memory=GIB)) == (True, [])


def test_the_verdict_judges_shared_memory_on_darwin_without_swap() -> None:
    """The verdict hands its platform to the shared-pool check: on darwin, what a shared-memory
    device and the CPU hold together must fit free memory alone, swap or not.
    Kills gpuscout._fit.verdict.x_verdict__mutmut_57 (the platform not passed on)."""
    system = SystemInfo(total_memory=16 * GIB, free_memory=GIB, free_swap=GIB)
    layout = GPULayersList([GPULayers(id="0", library="Vulkan", layers=[1, 2])])
    usage = [use(APU_A, 600 * MIB), use(None, 600 * MIB)]
    assert judge(usage, system=system, devices=(APU_A,), layout=layout, platform="darwin")[0] is False
    assert judge(usage, system=system, devices=(APU_A,), layout=layout, platform="linux")[0] is True
