"""Recorded NVML answers of real cards through a Scout that holds only the cuda plugin."""

from __future__ import annotations

import pathlib
from typing import TYPE_CHECKING

from gpuscout import DeviceInfo
from gpuscout.sizes import GIB, MIB

if TYPE_CHECKING:
    from tests.plugins.cuda.conftest import CudaScout, FakeNvml, RecordedProbe, Recording

#: The CUDA driver probe on a DGX Spark: domain 15, bus 1, device 0, INTEGRATED 1 (llama.cpp#17537).
GB10_PROBE = "15 1 0 1\n"


def test_h100_sxm_pair_is_reported_field_by_field(
    fake_nvml: FakeNvml, cuda_scout: CudaScout, no_probe: None
) -> None:
    """Two H100 SXM cards give two records from NVML, totals less v2's reserved (cudaMemGetInfo)."""
    fake_nvml("h100_sxm_x2")
    found = cuda_scout().discover()
    by_id = {d.id: d for d in found.devices}
    assert by_id["GPU-5b2c8f41-7e0a-4c3d-9b1e-2f6a8d4c7e90"] == DeviceInfo(
        id="GPU-5b2c8f41-7e0a-4c3d-9b1e-2f6a8d4c7e90",
        library="CUDA",
        name="NVIDIA H100 80GB HBM3",
        description="NVIDIA H100 80GB HBM3",
        filter_id="GPU-5b2c8f41-7e0a-4c3d-9b1e-2f6a8d4c7e90",
        uuid="GPU-5b2c8f41-7e0a-4c3d-9b1e-2f6a8d4c7e90",
        integrated=False,
        pci_id="0000:18:00.0",
        total_memory=85520809984 - 555745280,
        free_memory=84964016128,
        compute_major=9,
        compute_minor=0,
        driver_major=12,
        driver_minor=4,
        nvidia_driver_major=550,
    )
    assert by_id["GPU-a1d7e3b2-4f6c-4a8e-8d2b-6c9e1f3a5b07"].pci_id == "0000:2a:00.0"
    assert by_id["GPU-a1d7e3b2-4f6c-4a8e-8d2b-6c9e1f3a5b07"].free_memory == 60129542144


def test_h100_pair_report_is_ok_without_notes(
    fake_nvml: FakeNvml, cuda_scout: CudaScout, no_probe: None
) -> None:
    """A clean enumeration reports status ok, two devices and no error text."""
    fake_nvml("h100_sxm_x2")
    report = cuda_scout().discover().report("cuda")
    assert (report.status, report.devices, report.note) == ("ok", 2, "")


def test_nvml_is_shut_down_after_enumeration(
    fake_nvml: FakeNvml, cuda_scout: CudaScout, no_probe: None
) -> None:
    """Every nvmlInit is matched by nvmlShutdown."""
    fake = fake_nvml("h100_sxm_x2")
    cuda_scout().discover()
    assert (fake.inits, fake.open_sessions) == (1, 0)


def test_h200_is_reported_field_by_field(fake_nvml: FakeNvml, cuda_scout: CudaScout, no_probe: None) -> None:
    """One H200 gives 143771 MiB less v2's 585 MiB reserved (ggml, ollama#18201), CUDA 12.8."""
    fake_nvml("h200")
    (device,) = cuda_scout().discover().devices
    assert device == DeviceInfo(
        id="GPU-0e9f4a6b-3c21-4d7e-a5f8-9b2d6e1c4a37",
        library="CUDA",
        name="NVIDIA H200",
        description="NVIDIA H200",
        filter_id="GPU-0e9f4a6b-3c21-4d7e-a5f8-9b2d6e1c4a37",
        uuid="GPU-0e9f4a6b-3c21-4d7e-a5f8-9b2d6e1c4a37",
        pci_id="0000:19:00.0",
        total_memory=143771 * MIB - 613416960,
        free_memory=150140354560,
        compute_major=9,
        compute_minor=0,
        driver_major=12,
        driver_minor=8,
        nvidia_driver_major=570,
    )


def test_rtx_4090_is_reported_field_by_field(fake_nvml: FakeNvml, cuda_scout: CudaScout) -> None:
    """The consumer card keeps its own name, memory and compute capability 8.9."""
    fake_nvml("rtx4090_h100_pcie")
    found = cuda_scout({"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}).discover()
    rtx = next(d for d in found.devices if "4090" in d.name)
    assert rtx == DeviceInfo(
        id="GPU-7c3e1a9d-2b5f-4e80-b6a4-d1f9c2e8a305",
        library="CUDA",
        name="NVIDIA GeForce RTX 4090",
        description="NVIDIA GeForce RTX 4090",
        filter_id="GPU-7c3e1a9d-2b5f-4e80-b6a4-d1f9c2e8a305",
        uuid="GPU-7c3e1a9d-2b5f-4e80-b6a4-d1f9c2e8a305",
        pci_id="0000:01:00.0",
        total_memory=24564 * MIB - 346292224,
        free_memory=25048121344,
        compute_major=8,
        compute_minor=9,
        driver_major=12,
        driver_minor=4,
        nvidia_driver_major=550,
    )


def test_gb10_takes_memory_from_the_system(
    fake_nvml: FakeNvml, cuda_scout: CudaScout, tmp_path: pathlib.Path, recorded_probe: RecordedProbe
) -> None:
    """The driver's INTEGRATED=1 GB10 gets MemTotal and MemAvailable (ggml's UMA rule), shared."""
    recorded_probe(0, GB10_PROBE)
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "meminfo").write_text(
        "MemTotal:       124908280 kB\nMemFree:         90000000 kB\n"
        "MemAvailable:   119000000 kB\nSwapFree:        16000000 kB\n"
    )
    fake_nvml("gb10")
    (device,) = cuda_scout(root=str(tmp_path)).discover().devices
    assert device == DeviceInfo(
        id="GPU-3f8a2d6c-9e1b-4c7a-8d5e-0b4f7a2c9e61",
        library="CUDA",
        name="NVIDIA GB10",
        description="NVIDIA GB10",
        filter_id="GPU-3f8a2d6c-9e1b-4c7a-8d5e-0b4f7a2c9e61",
        uuid="GPU-3f8a2d6c-9e1b-4c7a-8d5e-0b4f7a2c9e61",
        integrated=True,
        shared_memory=True,
        pci_id="000f:01:00.0",
        total_memory=124908280 * 1024,
        free_memory=119000000 * 1024,
        free_memory_unknown=False,
        compute_major=12,
        compute_minor=1,
        driver_major=13,
        driver_minor=0,
        nvidia_driver_major=580,
    ).evolve(notes=device.notes)
    assert "unified memory shared with the system" in device.notes[0]


def test_gb10_without_meminfo_marks_free_memory_unknown(
    fake_nvml: FakeNvml, cuda_scout: CudaScout, tmp_path: pathlib.Path, recorded_probe: RecordedProbe
) -> None:
    """With neither NVML nor /proc/meminfo figures the GB10 says its free memory is unknown."""
    recorded_probe(0, GB10_PROBE)
    fake_nvml("gb10")
    found = cuda_scout(root=str(tmp_path)).discover()
    (device,) = found.devices
    assert (device.integrated, device.total_memory, device.free_memory_unknown) == (True, 0, True)


def test_gpu_in_mig_mode_is_reported_as_its_instances(
    fake_nvml: FakeNvml, cuda_scout: CudaScout, no_probe: None
) -> None:
    """The MIG-enabled A100 yields its two MIG instances, the other A100 itself."""
    fake_nvml("a100_mig")
    ids = sorted(d.id for d in cuda_scout().discover().devices)
    assert ids == [
        "GPU-1b6f3d8e-2a4c-4e9b-9c5a-8d3f6b1e7a24",
        "MIG-2a7b9e4d-8c13-5f6e-a0d2-7e4b1c9f3a58",
        "MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f",
    ]


def test_mig_instance_is_reported_field_by_field(
    fake_nvml: FakeNvml, cuda_scout: CudaScout, no_probe: None
) -> None:
    """A MIG instance has its own id, name and memory, and the parent's compute and PCI id."""
    fake_nvml("a100_mig")
    found = cuda_scout().discover()
    mig = next(d for d in found.devices if d.id.startswith("MIG-c6d4"))
    assert mig == DeviceInfo(
        id="MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f",
        library="CUDA",
        name="NVIDIA A100-SXM4-40GB MIG 3g.20gb",
        description="NVIDIA A100-SXM4-40GB MIG 3g.20gb",
        filter_id="MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f",
        uuid="MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f",
        pci_id="0000:07:00.0",
        total_memory=20096 * MIB,
        free_memory=21059600384,
        compute_major=8,
        compute_minor=0,
        driver_major=12,
        driver_minor=2,
        nvidia_driver_major=535,
    )


def test_mig_instances_are_not_merged_as_duplicates(
    fake_nvml: FakeNvml, cuda_scout: CudaScout, no_probe: None
) -> None:
    """Two instances of one GPU both survive the core's merge."""
    fake_nvml("a100_mig")
    assert cuda_scout().discover().dropped == []


def test_old_driver_without_memory_v2_falls_back_to_v1(fake_nvml: FakeNvml, cuda_scout: CudaScout) -> None:
    """FunctionNotFound for memory info v2 reads v1 instead."""
    fake_nvml("gtx1080ti_old_driver")
    (device,) = cuda_scout().discover().devices
    assert (device.total_memory, device.free_memory, device.driver, device.compute) == (
        11264 * MIB,
        11542724608,
        "11.4",
        "6.1",
    )


def test_gpu_without_permission_is_skipped_with_a_note(
    fake_nvml: FakeNvml, cuda_scout: CudaScout, recording: Recording, no_probe: None
) -> None:
    """A GPU whose handle raises NoPermission is left out and named in the report."""
    data = recording("h100_sxm_x2")
    data["gpus"][1]["handle"] = "NoPermission"
    fake_nvml(data)
    found = cuda_scout().discover()
    report = found.report("cuda")
    assert [d.pci_id for d in found.devices] == ["0000:18:00.0"]
    assert report.status == "ok" and "NVML GPU 1 skipped" in report.note


def test_lost_gpu_is_skipped_with_a_note(
    fake_nvml: FakeNvml, cuda_scout: CudaScout, recording: Recording, no_probe: None
) -> None:
    """A GPU whose memory query raises GpuIsLost is left out; the other one is kept."""
    data = recording("h100_sxm_x2")
    data["gpus"][0]["memory_v2"] = {"error": "GpuIsLost"}
    fake_nvml(data)
    found = cuda_scout().discover()
    assert [d.pci_id for d in found.devices] == ["0000:2a:00.0"]


def test_nvml_init_failure_gives_no_devices_and_a_note(
    fake_nvml: FakeNvml, cuda_scout: CudaScout, recording: Recording
) -> None:
    """DriverNotLoaded from nvmlInit is a note naming NVML, not a failure."""
    data = recording("h200")
    data["init"] = "DriverNotLoaded"
    fake_nvml(data)
    found = cuda_scout().discover()
    report = found.report("cuda")
    assert (found.devices, report.status) == ([], "ok")
    assert report.note.startswith("NVML could not start")


def test_refresh_reads_free_memory_again(
    fake_nvml: FakeNvml, cuda_scout: CudaScout, recording: Recording, no_probe: None
) -> None:
    """Scout.refresh asks NVML again for the free memory of each CUDA device."""
    data = recording("h200")
    fake_nvml(data)
    scout = cuda_scout()
    devices = scout.discover().devices
    data["gpus"][0]["memory_v2"]["free"] = 100 * GIB
    (device,) = scout.refresh(devices)
    assert device.free_memory == 100 * GIB
