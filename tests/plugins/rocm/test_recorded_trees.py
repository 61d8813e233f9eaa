"""The ROCm plugin alone over recorded sysfs trees: every field of every record."""

from __future__ import annotations

from collections.abc import Callable

from gpuscout import DeviceInfo, Discovery, Scout
from gpuscout.sizes import GIB, MIB


def test_discrete_rx_7900_xtx_is_reported_field_by_field(
    devices: Callable[..., list[DeviceInfo]],
) -> None:
    """A 24 GiB gfx1100 card reads as one discrete ROCm device with its VRAM counters."""
    assert devices("rx7900xtx") == [
        DeviceInfo(
            id="GPU-6f3c9a1e2b4d5870",
            library="ROCm",
            name="ROCm0",
            description="AMD GPU gfx1100 [1002:744c]",
            filter_id="GPU-6f3c9a1e2b4d5870",
            integrated=False,
            pci_id="0000:0c:00.0",
            total_memory=25753026560,
            free_memory=25753026560 - 1411842048,
            compute_major=0x11,
            compute_minor=0x00,
            driver_major=6,
            driver_minor=10,
            gfx_target="gfx1100",
            uuid="GPU-6f3c9a1e2b4d5870",
        )
    ]


def test_discrete_card_prints_its_gfx_target_as_compute(
    devices: Callable[..., list[DeviceInfo]],
) -> None:
    """The seed's ``gfx%x%02x`` label of the record is the card's gfx target."""
    assert [d.compute for d in devices("rx7900xtx")] == ["gfx1100"]


def test_partitioned_mi300x_reports_each_kfd_node_as_a_device(
    devices: Callable[..., list[DeviceInfo]],
) -> None:
    """A CPX MI300X (one PCI device, eight KFD nodes) gives eight gfx942 devices in node order."""
    found = devices("mi300x_cpx")
    share = 192 * GIB // 8
    expected = []
    for p in range(8):
        uuid = f"GPU-{0x8D1E2C3A00000000 + 0x1000 * (p + 1) + p:016x}"
        expected.append(
            DeviceInfo(
                id=uuid,
                library="ROCm",
                name=f"ROCm{p}",
                description="AMD Instinct MI300X",
                filter_id=uuid,
                integrated=False,
                pci_id="0000:05:00.0",
                total_memory=share,
                free_memory=share - 2952790016 // 8,
                compute_major=0x9,
                compute_minor=0x42,
                gfx_target="gfx942",
                uuid=uuid,
                free_memory_unknown=True,
            )
        )
    assert found == expected


def test_partitions_survive_the_merge_as_separate_devices(
    discover: Callable[..., Discovery],
) -> None:
    """No partition is dropped as a duplicate of another, though all share the card's PCI id."""
    result = discover("mi300x_cpx")
    assert (len(result.devices), result.dropped) == (8, [])


def test_apu_780m_is_integrated_and_sized_as_hip_sees_its_carve_out(
    devices: Callable[..., list[DeviceInfo]],
) -> None:
    """A gfx1103 without board_info is an APU; its KFD bank (the 512 MiB carve-out) is HIP's pool."""
    (device,) = devices("apu_780m")
    assert device.evolve(notes=()) == DeviceInfo(
        id="0",
        library="ROCm",
        name="ROCm0",
        description="AMD GPU gfx1103 [1002:15bf]",
        filter_id="0",
        integrated=True,
        pci_id="0000:c4:00.0",
        total_memory=512 * MIB,
        free_memory=(512 - 192) * MIB,
        compute_major=0x11,
        compute_minor=0x03,
        gfx_target="gfx1103",
    )
    assert device.shared_memory is False  # the carve-out is not in the system's memory
    assert "no board_info" in device.notes[0]
    assert "BIOS carve-out, 512.0 MiB" in device.notes[1]


def test_mixed_box_reports_the_discrete_card_and_the_igpu_in_kfd_order(
    devices: Callable[..., list[DeviceInfo]],
) -> None:
    """An RX 7600 and a Raphael iGPU (an unsupported gfx1036, integrated by the seed's rule on
    this kernel, HIP's pool its 512 MiB carve-out) are both reported, in KFD order."""
    found = devices("mixed_apu_dgpu")
    assert [d.evolve(notes=()) for d in found] == [
        DeviceInfo(
            id="GPU-2a9e4c7b10f3d685",
            library="ROCm",
            name="ROCm0",
            description="AMD GPU gfx1102 [1002:7480]",
            filter_id="GPU-2a9e4c7b10f3d685",
            integrated=False,
            pci_id="0000:03:00.0",
            total_memory=8573157376,
            free_memory=8573157376 - 500 * MIB,
            compute_major=0x11,
            compute_minor=0x02,
            gfx_target="gfx1102",
            uuid="GPU-2a9e4c7b10f3d685",
        ),
        DeviceInfo(
            id="GPU-0000b2c41e5a7f09",
            library="ROCm",
            name="ROCm1",
            description="AMD GPU gfx1036 [1002:164e]",
            filter_id="GPU-0000b2c41e5a7f09",
            integrated=True,
            pci_id="0000:13:00.0",
            total_memory=512 * MIB,
            free_memory=(512 - 34) * MIB,
            compute_major=0x10,
            compute_minor=0x36,
            gfx_target="gfx1036",
            uuid="GPU-0000b2c41e5a7f09",
        ),
    ]
    assert "seed's size rule" in found[1].notes[0]


def test_mixed_box_ranks_the_discrete_card_first(discover: Callable[..., Discovery]) -> None:
    """The discovery puts the discrete card before the iGPU although the iGPU has more memory."""
    assert [d.gfx_target for d in discover("mixed_apu_dgpu").devices] == ["gfx1102", "gfx1036"]


def test_cpu_only_kfd_topology_gives_no_device_and_says_why(
    discover: Callable[..., Discovery],
) -> None:
    """A topology with only a CPU node yields zero devices and a note naming the KFD topology."""
    result = discover("cpu_only_kfd")
    report = result.report("rocm")
    assert (result.devices, report.status, "no KFD GPU nodes" in report.note) == ([], "ok", True)


def test_missing_kfd_topology_gives_no_device_and_says_why(
    discover: Callable[..., Discovery],
) -> None:
    """A root without /sys/class/kfd yields zero devices and a note about amdgpu."""
    result = discover("does-not-exist")
    report = result.report("rocm")
    assert (result.devices, "no KFD topology" in report.note) == ([], True)


def test_hsa_override_replaces_gfx_target_and_compute_on_every_device(
    devices: Callable[..., list[DeviceInfo]],
) -> None:
    """HSA_OVERRIDE_GFX_VERSION=11.0.0 makes both mixed-box GPUs report gfx1100."""
    found = devices("mixed_apu_dgpu", {"HSA_OVERRIDE_GFX_VERSION": "11.0.0"})
    assert [(d.gfx_target, d.compute_major, d.compute_minor, d.compute) for d in found] == [
        ("gfx1100", 0x11, 0, "gfx1100"),
        ("gfx1100", 0x11, 0, "gfx1100"),
    ]


def test_hsa_override_keeps_the_real_target_in_the_description(
    devices: Callable[..., list[DeviceInfo]],
) -> None:
    """The description still names the hardware's own target under an override."""
    found = devices("apu_780m", {"HSA_OVERRIDE_GFX_VERSION": "11.0.0"})
    assert [d.description for d in found] == ["AMD GPU gfx1103 [1002:15bf]"]


def test_malformed_hsa_override_leaves_no_device_and_names_it(
    rocm_scout: Callable[..., Scout],
) -> None:
    """An override that is not major.minor.stepping fails libhsakmt's topology init
    (topology.c ``topology_sysfs_get_node_props``): no device, and a note naming it."""
    scout = rocm_scout("rx7900xtx", {"HSA_OVERRIDE_GFX_VERSION": "gfx1030"})
    result = scout.discover()
    report = result.report("rocm")
    assert (result.devices, "HSA_OVERRIDE_GFX_VERSION='gfx1030'" in report.note) == ([], True)


def test_rocr_visible_devices_hides_the_other_gpu(
    devices: Callable[..., list[DeviceInfo]],
) -> None:
    """ROCR_VISIBLE_DEVICES=1 on the mixed box leaves only the iGPU, renamed ROCm0."""
    found = devices("mixed_apu_dgpu", {"ROCR_VISIBLE_DEVICES": "1"})
    assert [(d.name, d.gfx_target) for d in found] == [("ROCm0", "gfx1036")]


def test_rocr_uuid_prefix_then_hip_index_selects_from_the_survivors(
    devices: Callable[..., list[DeviceInfo]],
) -> None:
    """ROCR reorders by UUID prefix, then HIP_VISIBLE_DEVICES=1 picks the second survivor."""
    env = {"ROCR_VISIBLE_DEVICES": "GPU-0000b2c4,0", "HIP_VISIBLE_DEVICES": "1"}
    assert [d.id for d in devices("mixed_apu_dgpu", env)] == ["GPU-2a9e4c7b10f3d685"]


def test_empty_rocr_visible_devices_hides_every_gpu_and_says_so(
    discover: Callable[..., Discovery],
) -> None:
    """ROCR_VISIBLE_DEVICES set but empty leaves no device and a note counting the hidden ones."""
    result = discover("mixed_apu_dgpu", {"ROCR_VISIBLE_DEVICES": ""})
    report = result.report("rocm")
    assert (result.devices, report.note.startswith("2 of 2 AMD GPUs hidden")) == ([], True)


def test_cuda_visible_devices_filters_hip_when_hip_is_unset(
    devices: Callable[..., list[DeviceInfo]],
) -> None:
    """HIP falls back to CUDA_VISIBLE_DEVICES, so CUDA_VISIBLE_DEVICES=1 keeps only the iGPU."""
    found = devices("mixed_apu_dgpu", {"CUDA_VISIBLE_DEVICES": "1"})
    assert [d.gfx_target for d in found] == ["gfx1036"]


def test_gpu_device_ordinal_filters_nothing(devices: Callable[..., list[DeviceInfo]]) -> None:
    """GPU_DEVICE_ORDINAL is OpenCL's: HIP ignores it, so both GPUs stay visible."""
    found = devices("mixed_apu_dgpu", {"GPU_DEVICE_ORDINAL": "1"})
    assert len(found) == 2


def test_filter_id_of_a_partition_selects_it_in_a_child(
    rocm_scout: Callable[..., Scout],
) -> None:
    """The visibility env for one partition names its UUID, which ROCr resolves back to it."""
    scout = rocm_scout("mi300x_cpx")
    chosen = scout.discover().devices[5]
    env = scout.visible_env([chosen])
    child = rocm_scout("mi300x_cpx", env).discover().devices
    assert [d.id for d in child] == [chosen.id]


def test_refresh_rereads_free_memory(rocm_scout: Callable[..., Scout]) -> None:
    """``Scout.refresh`` answers the ROCm devices with their free memory read again."""
    scout = rocm_scout("rx7900xtx")
    found = scout.discover().devices
    stale = [found[0].evolve(free_memory=1)]
    assert scout.refresh(stale) == found
