"""Pure conversions of NVML values: PCI ids, CUDA and kernel driver versions."""

from __future__ import annotations

import pytest

from gpuscout.plugins.cuda.readings import cuda_version, kernel_driver_major, pci_location, text


@pytest.mark.parametrize(
    ("domain", "bus", "device", "bus_id", "expected"),
    [
        (0, 1, 0, "00000000:01:00.0", "0000:01:00.0"),
        (0, 0xC4, 0, "00000000:C4:00.0", "0000:c4:00.0"),
        (0xF, 1, 0, "0000000F:01:00.0", "000f:01:00.0"),
        (0x10000, 0x3B, 0x1F, "00010000:3B:1F.7", "10000:3b:1f.7"),
        (0, 2, 0, b"00000000:02:00.1", "0000:02:00.1"),
        (0, 2, 0, "", "0000:02:00.0"),
    ],
)
def test_pci_id_is_lower_case_with_at_least_four_domain_digits(
    domain: int, bus: int, device: int, bus_id: str | bytes, expected: str
) -> None:
    """NVML's integers become the contract's pci_id; the function comes from busId."""
    assert pci_location(domain, bus, device, bus_id).pci_id == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (12040, (12, 4)),
        (12080, (12, 8)),
        (13000, (13, 0)),
        (11040, (11, 4)),
        (12090, (12, 9)),
        (0, (0, 0)),
    ],
)
def test_cuda_driver_version_splits_into_major_and_minor(value: int, expected: tuple[int, int]) -> None:
    """12040 is CUDA 12.4."""
    assert cuda_version(value) == expected


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        ("580.126.09", 580),
        ("550.54.15", 550),
        ("470.256.02", 470),
        ("", 0),
        ("n/a", 0),
    ],
)
def test_kernel_driver_major_is_the_branch(version: str, expected: int) -> None:
    """The kernel driver's branch is the number before the first dot."""
    assert kernel_driver_major(version) == expected


def test_bytes_from_old_bindings_are_decoded() -> None:
    """Very old pynvml returned bytes for names; they read as str."""
    assert text(b"NVIDIA H200") == "NVIDIA H200"
