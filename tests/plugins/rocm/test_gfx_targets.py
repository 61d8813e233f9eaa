"""gfx target numbers, names and the seed's compute pair."""

from __future__ import annotations

import pytest

from gpuscout import DeviceInfo
from gpuscout.plugins.rocm import gfx


@pytest.mark.parametrize(
    ("version", "name"),
    [
        (90010, "gfx90a"),
        (90012, "gfx90c"),
        (90402, "gfx942"),
        (100302, "gfx1032"),
        (110000, "gfx1100"),
        (110501, "gfx1151"),
        (90000, "gfx900"),
        (120001, "gfx1201"),
        (0, ""),
    ],
)
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


@pytest.mark.parametrize(
    ("name", "version"),
    [
        ("gfx942", 90402),
        ("gfx90a", 90010),
        ("gfx1151", 110501),
        ("GFX1100", 110000),
        ("gfx", 0),
        ("navi31", 0),
    ],
)
def test_target_name_parses_back(name: str, version: int) -> None:
    """amdsmi's target strings parse to KFD version numbers."""
    assert gfx.parse_target_name(name) == version


@pytest.mark.parametrize(
    ("value", "version"),
    [
        ("11.0.0", (11, 0, 0)),
        ("10.3.0", (10, 3, 0)),
        ("9.4.2", (9, 4, 2)),
        (" 11.5.1", (11, 5, 1)),
        ("+11.0.0", (11, 0, 0)),
        ("11. 0.0", (11, 0, 0)),
        ("11.16.0", (11, 16, 0)),
        ("63.255.255", (63, 255, 255)),
        ("0.0.0", (0, 0, 0)),
        ("11.4294967296.0", (11, 0, 0)),
        ("11.-4294967295.0", (11, 1, 0)),
        ("11.0.0 ", None),
        ("11.0.0\n", None),
        ("11 .0.0", None),
        ("11.0", None),
        ("11.0.0.0", None),
        ("", None),
        ("gfx1100", None),
        ("0x11.0.0", None),
        ("64.0.0", None),
        ("11.256.0", None),
        ("11.0.256", None),
        ("11.-1.0", None),
        ("11.99999999999999999999.0", None),
        ("\u0661\u0661.0.0", None),
    ],
)
def test_hsa_override_values(value: str, version: tuple[int, int, int] | None) -> None:
    """An override reads as libhsakmt's ``sscanf("%u.%u.%u%c") == 3`` with major <= 63 and
    minor, stepping <= 255 (glibc %u: leading space and sign, strtoul wrap, cut to 32 bits)."""
    assert gfx.parse_override(value) == version


@pytest.mark.parametrize(
    ("version", "name", "compute"),
    [
        ((11, 0, 0), "gfx1100", (0x11, 0x00)),
        ((9, 0, 10), "gfx90a", (0x9, 0x0A)),
        ((11, 15, 15), "gfx11ff", (0x11, 0xFF)),
        ((11, 16, 0), "", (-1, 0)),
        ((11, 0, 255), "", (-1, 0)),
        ((0, 0, 0), "", (-1, 0)),
    ],
)
def test_a_version_above_one_hex_digit_has_no_target_name(
    version: tuple[int, int, int],
    name: str,
    compute: tuple[int, int],
) -> None:
    """Minor and stepping above 15 (which libhsakmt accepts) have no gfx name and an unknown
    compute pair, instead of colliding with another target."""
    assert (gfx.version_name(version), gfx.version_compute(version)) == (name, compute)
