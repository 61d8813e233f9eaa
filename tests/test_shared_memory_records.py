"""DeviceInfo.shared_memory: gpuscout's own wire key, checked at the border, omitted when False."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuscout import DeviceInfo, from_json, to_json
from gpuscout._records.device import check_device
from gpuscout._records.fields import RecordError
from gpuscout.errors import GpuscoutError


def test_shared_memory_is_on_the_wire_only_when_set() -> None:
    """``shared_memory`` is written as true when set and left out when False."""
    shared = DeviceInfo(id="GPU-1", library="CUDA", integrated=True, shared_memory=True)
    assert json.loads(to_json(shared))["shared_memory"] is True
    assert "shared_memory" not in json.loads(to_json(DeviceInfo(id="GPU-1", library="CUDA")))


@given(st.booleans(), st.booleans())
def test_a_shared_flag_round_trips_with_the_integrated_one(integrated: bool, shared: bool) -> None:
    """Any combination of ``integrated`` and ``shared_memory`` reads back equal."""
    device = DeviceInfo(id="0", library="Vulkan", integrated=integrated, shared_memory=shared)
    assert from_json(to_json([device]), list[DeviceInfo]) == [device]


@pytest.mark.parametrize("value", ['"true"', "1", "[]"])
def test_a_shared_flag_that_is_not_a_bool_is_refused_by_the_reader(value: str) -> None:
    """The reader is strict: ``"shared_memory": "true"`` or ``1`` is an error naming the key."""
    text = '[{"id": "0", "backend": "ROCm", "total_memory": 0, "shared_memory": ' + value + "}]"
    with pytest.raises(GpuscoutError, match="shared_memory"):
        from_json(text, list[DeviceInfo])


def test_a_plugin_s_shared_flag_that_is_not_a_bool_fails_at_the_border() -> None:
    """check_device refuses a non-bool ``shared_memory`` (a plugin that set it to 1), naming it."""
    bad = DeviceInfo(id="0")
    object.__setattr__(bad, "shared_memory", 1)  # past the constructor, as a careless plugin could
    with pytest.raises(RecordError, match=r"\.shared_memory: expected bool"):
        check_device(bad, "")
    assert check_device(DeviceInfo(id="0", shared_memory=True), "").shared_memory is True
