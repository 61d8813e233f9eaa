"""The seed's rule for the ordinal variable when the user set ROCR_VISIBLE_DEVICES, pinned."""

from __future__ import annotations

import pytest

from gpuscout.plugins.rocm.rules import linux_ordinal_variable


@pytest.mark.parametrize("numeric", ["HIP_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL", "CUDA_VISIBLE_DEVICES"])
def test_a_set_rocr_visible_devices_needs_no_ordinal_variable(numeric: str) -> None:
    """With ROCR_VISIBLE_DEVICES set, ROCr renumbers the devices itself: no variable needs the
    child's ordinal, even where another one holds a numeric list; with it unset (or empty), that
    list's variable does (HIP's in CUDA's place)."""
    assert linux_ordinal_variable({"ROCR_VISIBLE_DEVICES": "0", numeric: "1"}) == ""
    want = "HIP_VISIBLE_DEVICES" if numeric == "CUDA_VISIBLE_DEVICES" else numeric
    assert linux_ordinal_variable({numeric: "1"}) == want
    assert linux_ordinal_variable({"ROCR_VISIBLE_DEVICES": "", numeric: "1"}) == want
