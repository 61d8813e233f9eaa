"""NVIDIA devices CUDA_VISIBLE_DEVICES hides: reported marked ``hidden_by``, dropped by the core.

Recorded machines: h100_sxm_x2 (two H100 SXM) and a100_mig (an A100 in MIG mode beside a plain
one), replayed through FakeNvmlRecorded; CUDA_DEVICE_ORDER=PCI_BUS_ID keeps the order probe
child away.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from gpuscout import DeviceInfo, Scout
from gpuscout.plugins.cuda.visibility import GpuSlot, hidden_units, one_process, visible_uuids

GPU0 = "GPU-5b2c8f41-7e0a-4c3d-9b1e-2f6a8d4c7e90"
GPU1 = "GPU-a1d7e3b2-4f6c-4a8e-8d2b-6c9e1f3a5b07"
BUS_ORDER = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}


@pytest.fixture
def h100s(
    fake_nvml: Callable[..., Any], cuda_scout: Callable[..., Scout], no_probe: None
) -> Callable[[str], Scout]:
    """``h100s(value)``: the two-H100 box with CUDA_VISIBLE_DEVICES=``value``."""
    fake_nvml("h100_sxm_x2")
    return lambda value: cuda_scout({**BUS_ORDER, "CUDA_VISIBLE_DEVICES": value})


def raw(scout: Scout) -> list[DeviceInfo]:
    return [d for _, d in scout.enumerate()]


def test_the_plugin_reports_the_hidden_gpu_after_the_visible_one(h100s: Callable[[str], Scout]) -> None:
    """CUDA_VISIBLE_DEVICES=0: GPU 0 visible, then GPU 1 marked with the setting that hides it."""
    assert [(d.id, d.hidden_by) for d in raw(h100s("0"))] == [(GPU0, ""), (GPU1, "CUDA_VISIBLE_DEVICES=0")]


def test_discovery_drops_the_hidden_gpu_naming_the_variable(h100s: Callable[[str], Scout]) -> None:
    """The hidden GPU is in ``dropped`` with the reason, not in ``devices``."""
    found = h100s("1").discover()
    assert ([d.id for d in found.devices], [(d.device.id, d.reason) for d in found.dropped]) == (
        [GPU1],
        [(GPU0, "hidden by CUDA_VISIBLE_DEVICES=1")],
    )


def test_no_dev_files_hides_every_gpu(h100s: Callable[[str], Scout]) -> None:
    """Slurm's NoDevFiles is an invalid first entry, which ends CUDA's list at once."""
    found = h100s("NoDevFiles").discover()
    assert (found.devices, [d.reason for d in found.dropped]) == (
        [],
        ["hidden by CUDA_VISIBLE_DEVICES=NoDevFiles"] * 2,
    )


def test_an_empty_value_hides_every_gpu_and_quotes_the_value(h100s: Callable[[str], Scout]) -> None:
    """Set but empty shows no GPU to CUDA; the reason shows the empty value quoted."""
    found = h100s("").discover()
    assert (found.devices, [d.reason for d in found.dropped]) == (
        [],
        ["hidden by CUDA_VISIBLE_DEVICES=''"] * 2,
    )


def test_a_uuid_value_hides_the_other_gpu(h100s: Callable[[str], Scout]) -> None:
    """A UUID prefix selects its GPU and hides the other."""
    found = h100s(GPU1[:12]).discover()
    assert [(d.device.id, d.reason) for d in found.dropped] == [
        (GPU0, f"hidden by CUDA_VISIBLE_DEVICES={GPU1[:12]}")
    ]


def test_unset_hides_nothing(
    fake_nvml: Callable[..., Any], cuda_scout: Callable[..., Scout], no_probe: None
) -> None:
    """Without CUDA_VISIBLE_DEVICES every GPU is visible and none is marked."""
    fake_nvml("h100_sxm_x2")
    assert [d.hidden_by for d in raw(cuda_scout(BUS_ORDER))] == ["", ""]


def test_a_mig_instance_left_out_by_the_one_instance_rule_says_why(
    fake_nvml: Callable[..., Any], cuda_scout: Callable[..., Scout], no_probe: None
) -> None:
    """Two MIG instances named: the second is hidden, and its setting names CUDA's rule."""
    recording = fake_nvml("a100_mig").recording
    migs = [m["uuid"] for g in recording["gpus"] for m in g.get("mig", ())]
    value = ",".join(migs[:2])
    hidden = {d.id: d.hidden_by for d in raw(cuda_scout({**BUS_ORDER, "CUDA_VISIBLE_DEVICES": value}))}
    assert (hidden[migs[0]], hidden[migs[1]]) == (
        "",
        f"CUDA_VISIBLE_DEVICES={value} (a CUDA process enumerates one MIG instance)",
    )


@pytest.mark.parametrize(
    "value",
    [
        "'\"'\"'",
        "$(rm -rf /)",
        "`id`",
        "0;1",
        "0\n1",
        "\x1b[2J0",
        "," * 10_000,
        "0," * 5_000,
        "GPU-" + "f" * 5_000,
        "MIG-" + "/" * 3_000,
        "٣",
        "0\x00",
    ],
)
def test_hostile_values_never_raise_and_keep_reasons_short(h100s: Callable[[str], Scout], value: str) -> None:
    """Quotes, shell syntax, control bytes and 10k-character lists give a discovery whose
    reasons stay under 300 characters."""
    found = h100s(value).discover()
    assert all(len(d.reason) < 300 for d in found.dropped)
    assert len(found.devices) + len(found.dropped) == 2


def test_a_long_value_is_cut_in_the_reason_with_its_length() -> None:
    """A 10,000-comma value shows its first 200 characters and says how long it is."""
    slots = [GpuSlot(GPU0)]
    value = "," * 10_000
    named = visible_uuids(value, slots)
    assert hidden_units(value, [GPU0], named, one_process(named, slots)) == {
        GPU0: "CUDA_VISIBLE_DEVICES=" + "," * 200 + "... (10000 characters)"
    }


def test_a_value_with_quotes_is_shown_single_quoted() -> None:
    """A value a shell would expand is shown in single quotes, each quote escaped."""
    value = "$(x)'0"
    assert hidden_units(value, [GPU0], [], []) == {GPU0: "CUDA_VISIBLE_DEVICES='$(x)'\\''0'"}
