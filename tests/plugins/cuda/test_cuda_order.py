"""CUDA_DEVICE_ORDER: which GPU an integer in CUDA_VISIBLE_DEVICES names, through the Scout."""

from __future__ import annotations

import pathlib
import sys
from typing import TYPE_CHECKING

from gpuscout import Context, Scout
from gpuscout.plugins.cuda import order
from gpuscout.plugins.cuda.readings import GpuReading, PciLocation

if TYPE_CHECKING:
    from tests.plugins.cuda.conftest import CudaScout, FakeNvml, RecordedProbe

RTX = "GPU-7c3e1a9d-2b5f-4e80-b6a4-d1f9c2e8a305"
H100 = "GPU-e4b8d2f6-1a3c-4b9e-8f7d-3a6c9e2b5d18"
#: What the probe child prints on that box when the driver puts the H100 (bus 0x41) first.
H100_FIRST = "0 65 0\n0 1 0\n"


def _ids(scout: Scout) -> list[str]:
    return [d.id for d in scout.discover().devices]


def _cuda_error(scout: Scout) -> str:
    return scout.discover().report("cuda").note


def test_pci_bus_id_order_indexes_by_pci_address(
    fake_nvml: FakeNvml, cuda_scout: CudaScout, no_probe: None
) -> None:
    """With PCI_BUS_ID, index 0 is the lowest PCI address and no probe runs."""
    fake_nvml("rtx4090_h100_pcie")
    env = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": "0"}
    assert _ids(cuda_scout(env)) == [RTX]


def test_same_model_box_uses_pci_order_without_a_probe(
    fake_nvml: FakeNvml, cuda_scout: CudaScout, no_probe: None
) -> None:
    """FASTEST_FIRST on identical GPUs is PCI order; the driver is not asked."""
    fake_nvml("h100_sxm_x2")
    ids = _ids(cuda_scout({"CUDA_VISIBLE_DEVICES": "1"}))
    assert ids == ["GPU-a1d7e3b2-4f6c-4a8e-8d2b-6c9e1f3a5b07"]


def test_mixed_box_learns_fastest_first_from_the_probe(
    fake_nvml: FakeNvml, cuda_scout: CudaScout, recorded_probe: RecordedProbe
) -> None:
    """FASTEST_FIRST on mixed GPUs indexes in the order the driver probe printed."""
    fake_nvml("rtx4090_h100_pcie")
    recorded_probe(0, H100_FIRST)
    assert _ids(cuda_scout({"CUDA_VISIBLE_DEVICES": "0"})) == [H100]


def test_probe_timeout_stays_inside_the_enumerate_deadline(
    fake_nvml: FakeNvml, cuda_scout: CudaScout, recorded_probe: RecordedProbe
) -> None:
    """The probe gets what the plugin's deadline leaves, less a margin."""
    fake_nvml("rtx4090_h100_pcie")
    timeouts = recorded_probe(0, H100_FIRST)
    cuda_scout({"CUDA_VISIBLE_DEVICES": "0"}, enumerate_timeout=2.0).discover()
    assert len(timeouts) == 1 and 0 < timeouts[0] <= 2.0 - order.PROBE_MARGIN


def test_failed_probe_falls_back_to_pci_order_with_a_note(
    fake_nvml: FakeNvml, cuda_scout: CudaScout, recorded_probe: RecordedProbe
) -> None:
    """A probe that cannot init CUDA leaves PCI order and says so in the report."""
    fake_nvml("rtx4090_h100_pcie")
    recorded_probe(3, "error: cuInit returned 999\n")
    scout = cuda_scout({"CUDA_VISIBLE_DEVICES": "0"})
    assert _ids(scout) == [RTX]
    assert "PCI order used: the CUDA driver probe failed: error: cuInit returned 999" in (_cuda_error(scout))


def test_real_probe_without_libcuda_reports_the_missing_library(tmp_path: pathlib.Path) -> None:
    """The real child on this driverless machine cannot load libcuda and exits non-zero."""
    context = Context(env={"PATH": "/usr/bin:/bin"}, platform="linux")
    status, output = order.run_probe(context, timeout=30.0)
    assert (status, output.startswith("error: cannot load libcuda.so.1")) == (2, True)


def test_probe_child_sees_every_gpu_in_default_order() -> None:
    """The child's env drops CUDA_VISIBLE_DEVICES and asks for FASTEST_FIRST."""
    env = order.probe_env({"CUDA_VISIBLE_DEVICES": "1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID", "HOME": "/root"})
    assert env == {"HOME": "/root", "CUDA_DEVICE_ORDER": "FASTEST_FIRST"}


def test_probe_output_is_parsed_to_pci_triples() -> None:
    """Each line 'domain bus device' is one CUDA ordinal; anything else is a failure."""
    assert order.parse_probe_output("0 65 0\n15 1 0\n") == [(0, 65, 0), (15, 1, 0)]
    assert order.parse_probe_output("error: cuInit returned 100\n") is None


def test_gpus_the_probe_missed_follow_in_pci_order() -> None:
    """A GPU absent from the probe (e.g. its MIG instances hidden) goes after the listed ones."""

    def gpu(bus: int) -> GpuReading:
        return GpuReading(
            index=bus, name=str(bus), uuid=f"GPU-{bus}", pci=PciLocation(0, bus, 0), memory=None
        )

    ordered = order.apply_probe_order([gpu(1), gpu(2), gpu(3)], [(0, 3, 0), (0, 3, 0)])
    assert [g.pci.bus for g in ordered] == [3, 1, 2]


def test_no_time_left_skips_the_probe_with_a_note() -> None:
    """An exhausted deadline gives PCI order at once and a note."""
    import time

    context = Context(env={}, platform=sys.platform, deadline=time.monotonic() - 1)
    gpus = [
        GpuReading(index=i, name=n, uuid=f"GPU-{i}", pci=PciLocation(0, 9 - i, 0), memory=None)
        for i, n in enumerate(("a", "b"))
    ]
    assert [g.uuid for g in order.cuda_order(gpus, context)] == ["GPU-1", "GPU-0"]
    assert "no time left" in context.notes[0]


def test_hidden_devices_are_not_reported_and_are_counted(
    fake_nvml: FakeNvml, cuda_scout: CudaScout, no_probe: None
) -> None:
    """CUDA_VISIBLE_DEVICES=0 on two GPUs reports one and notes one hidden."""
    fake_nvml("h100_sxm_x2")
    scout = cuda_scout({"CUDA_VISIBLE_DEVICES": "0"})
    assert len(scout.discover().devices) == 1
    assert _cuda_error(scout) == "1 NVIDIA device hidden by CUDA_VISIBLE_DEVICES"


def test_mig_uuid_in_visible_devices_selects_that_instance(
    fake_nvml: FakeNvml, cuda_scout: CudaScout, no_probe: None
) -> None:
    """A MIG id in CUDA_VISIBLE_DEVICES reports that instance alone."""
    fake_nvml("a100_mig")
    scout = cuda_scout({"CUDA_VISIBLE_DEVICES": "MIG-2a7b9e4d"})
    assert _ids(scout) == ["MIG-2a7b9e4d-8c13-5f6e-a0d2-7e4b1c9f3a58"]


def test_a_probe_line_that_is_not_decimal_numbers_is_named_in_the_note(
    fake_nvml: FakeNvml, cuda_scout: CudaScout, recorded_probe: RecordedProbe
) -> None:
    """A probe that exits 0 but prints a hex bus ('0x41') or other text leaves PCI order, and the
    note quotes that line (not the last one, which may be a good row)."""
    fake_nvml("rtx4090_h100_pcie")
    recorded_probe(0, "0 0x41 0 0\n0 1 0 0\n")
    scout = cuda_scout({"CUDA_VISIBLE_DEVICES": "0"})
    assert _ids(scout) == [RTX]
    note = _cuda_error(scout)
    assert "PCI order used: the CUDA driver probe printed '0 0x41 0 0', not 'domain bus device" in note
    assert "0 1 0 0" not in note
