"""Device records: defaults, labels and invariants (the seed's DeviceInfo, DeviceID, SystemInfo)."""

from __future__ import annotations

import attrs
import pytest

from gpuscout import DeviceComparison, DeviceID, DeviceInfo, FlashAttention, SystemInfo


def test_every_field_defaults_to_the_go_zero_value() -> None:
    """A bare DeviceInfo holds '', 0, False and empty collections."""
    d = DeviceInfo()
    assert (d.id, d.library, d.name, d.description, d.filter_id, d.pci_id, d.gfx_target) == (
        "",
        "",
        "",
        "",
        "",
        "",
        "",
    )
    assert (d.total_memory, d.free_memory, d.compute_major, d.compute_minor) == (0, 0, 0, 0)
    assert (d.driver_major, d.driver_minor, d.nvidia_driver_major) == (0, 0, 0)
    assert d.integrated is False and d.library_path == () and d.runner_env_overrides == {}


def test_every_seed_field_is_keyword_constructible() -> None:
    """All seed fields, snake_case, are accepted by keyword."""
    d = DeviceInfo(
        id="GPU-1",
        library="CUDA",
        name="n",
        description="desc",
        filter_id="0",
        integrated=True,
        pci_id="0000:01:00.0",
        total_memory=10,
        free_memory=5,
        compute_major=8,
        compute_minor=9,
        driver_major=12,
        driver_minor=4,
        nvidia_driver_major=580,
        gfx_target="",
        library_path=["/lib/a", "/lib/b"],
        runner_env_overrides={"K": "V"},
    )
    assert d.library_path == ("/lib/a", "/lib/b") and d.runner_env_overrides == {"K": "V"}


@pytest.mark.parametrize(
    ("library", "major", "minor", "label"),
    [
        ("CUDA", 8, 9, "8.9"),
        ("CUDA", -1, -1, "-1.-1"),
        ("ROCm", 0x11, 0x00, "gfx1100"),
        ("ROCm", 0x9, 0x0A, "gfx90a"),
        ("rocm", 0x9, 0x42, "gfx942"),
        ("ROCM", 0x11, 0x51, "gfx1151"),
        ("Vulkan", 1, 3, "1.3"),
    ],
)
def test_compute_label_follows_the_seed(library: str, major: int, minor: int, label: str) -> None:
    """compute prints gfx%x%02x for ROCm in any case, else major.minor."""
    assert DeviceInfo(library=library, compute_major=major, compute_minor=minor).compute == label


def test_driver_label_is_major_dot_minor() -> None:
    """driver prints major.minor."""
    assert DeviceInfo(driver_major=12, driver_minor=4).driver == "12.4"


def test_device_id_pairs_id_and_library() -> None:
    """device_id is the DeviceID of the record."""
    assert DeviceInfo(id="0", library="Vulkan").device_id == DeviceID("0", "Vulkan")


def test_any_string_is_accepted_for_library_and_id() -> None:
    """Library and id are free text; pci_id keeps the case it was given."""
    d = DeviceInfo(id="weird id", library="SomeNewLib", pci_id="0000:C4:00.0")
    assert (d.id, d.library, d.pci_id) == ("weird id", "SomeNewLib", "0000:C4:00.0")


def test_negative_memory_is_rejected_with_the_field_name() -> None:
    """Memory sizes cannot be negative; the error names the field."""
    with pytest.raises(ValueError, match="free_memory"):
        DeviceInfo(free_memory=-1)


def test_records_are_frozen() -> None:
    """A record cannot be changed in place; evolve makes a changed copy."""
    d = DeviceInfo(id="0")
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        d.id = "1"  # type: ignore[misc]
    assert d.evolve(id="1").id == "1" and d.id == "0"


def test_device_info_is_hashable_despite_overrides() -> None:
    """Records with runner_env_overrides can go in sets."""
    a = DeviceInfo(id="0", runner_env_overrides={"A": "1"})
    assert len({a, DeviceInfo(id="0", runner_env_overrides={"A": "1"})}) == 1


def test_system_info_defaults_to_zeros() -> None:
    """SystemInfo() is all zeros."""
    assert SystemInfo() == SystemInfo(0, 0, 0)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (FlashAttention.AUTO, "Auto"),
        (FlashAttention.DISABLED, "Disabled"),
        (FlashAttention.ENABLED, "Enabled"),
    ],
)
def test_flash_attention_prints_like_the_seed(value: FlashAttention, text: str) -> None:
    """FlashAttention str() is Auto/Disabled/Enabled."""
    assert str(value) == text


def test_flash_attention_values_match_llama() -> None:
    """AUTO -1, DISABLED 0, ENABLED 1."""
    assert [int(v) for v in (FlashAttention.AUTO, FlashAttention.DISABLED, FlashAttention.ENABLED)] == [
        -1,
        0,
        1,
    ]


def test_device_comparison_has_the_three_outcomes() -> None:
    """UNIQUE, SAME_BACKEND, DUPLICATE in the seed's order."""
    assert [m.name for m in DeviceComparison] == ["UNIQUE", "SAME_BACKEND", "DUPLICATE"]
