"""gfx target numbers, names and the seed's compute pair."""

from __future__ import annotations

import pytest

from gpuscout import DeviceInfo
from gpuscout.plugins.rocm import gfx


@pytest.mark.parametrize(("version", "name"), [
    (90010, "gfx90a"), (90012, "gfx90c"), (90402, "gfx942"), (100302, "gfx1032"),
    (110000, "gfx1100"), (110501, "gfx1151"), (90000, "gfx900"), (120001, "gfx1201"), (0, ""),
])
def test_kfd_version_names_its_target(version: int, name: str) -> None:
    """KFD's gfx_target_version becomes the target name (hex minor and stepping)."""
    assert gfx.target_name(version) == name


@pytest.mark.parametrize("version", [90010, 90402, 100302, 110000, 110501, 120001])
def test_compute_pair_prints_the_target_through_the_seed_label(version: int) -> None:
    """DeviceInfo.compute of the pair is the target name, as the seed prints ROCm compute."""
    major, minor = gfx.compute_pair(version)
    device = DeviceInfo(library="ROCm", compute_major=major, compute_minor=minor)
    assert device.compute == gfx.target_name(version)


def test_compute_major_is_the_decimal_major_read_as_hex() -> None:
    """gfx1151's major 11 is stored as 0x11 and its minor.stepping 5.1 as 0x51."""
    assert gfx.compute_pair(110501) == (0x11, 0x51)


@pytest.mark.parametrize(("name", "version"), [
    ("gfx942", 90402), ("gfx90a", 90010), ("gfx1151", 110501), ("GFX1100", 110000),
    ("gfx", 0), ("navi31", 0),
])
def test_target_name_parses_back(name: str, version: int) -> None:
    """amdsmi's target strings parse to KFD version numbers."""
    assert gfx.parse_target_name(name) == version


@pytest.mark.parametrize(("value", "version"), [
    ("11.0.0", 110000), ("10.3.0", 100300), ("9.4.2", 90402), (" 11.5.1 ", 110501),
    ("gfx1100", None), ("11.0", None), ("11.16.0", None), ("", None),
])
def test_hsa_override_values(value: str, version: int | None) -> None:
    """HSA_OVERRIDE_GFX_VERSION is decimal major.minor.stepping, anything else is ignored."""
    assert gfx.parse_override(value) == version
