"""Selectors and the package namespace after a new user's trial (issue 22): `fits:` never takes
an unknown free figure for a known one, echoes the size as written, and `dir(gpuscout)` shows
only the public names."""

from __future__ import annotations

from collections.abc import Callable

import pytest

import gpuscout
from gpuscout import DeviceInfo, Scout
from gpuscout._selection.selectors import NoMatchError
from gpuscout.sizes import GIB
from gpuscout.testing import CliRunner

UNKNOWN = DeviceInfo(
    id="GPU-unknown-0",
    library="CUDA",
    pci_id="0000:01:00.0",
    total_memory=2 * GIB,
    free_memory=2 * GIB,
    free_memory_unknown=True,
)
KNOWN = DeviceInfo(
    id="GPU-known-1", library="CUDA", pci_id="0000:02:00.0", total_memory=8 * GIB, free_memory=6 * GIB
)


def test_fits_does_not_match_a_device_whose_free_memory_is_unknown(scout_with: Callable[..., Scout]) -> None:
    """Free memory unknown, total 2 GiB: `fits:1GiB` matches nothing."""
    with pytest.raises(NoMatchError, match="free memory unknown"):
        scout_with([UNKNOWN]).select(["fits:1GiB"])


def test_fits_still_matches_the_devices_whose_free_memory_is_known(scout_with: Callable[..., Scout]) -> None:
    """Beside an unknown one, a known device that holds the size is selected alone."""
    assert [d.id for d in scout_with([UNKNOWN, KNOWN]).select(["fits:1GiB"])] == [KNOWN.id]


def test_a_device_with_unknown_free_memory_is_still_selected_by_id(scout_with: Callable[..., Scout]) -> None:
    """Other selectors reach it: the rule is about `fits:` alone."""
    assert [d.id for d in scout_with([UNKNOWN]).select(["GPU-unknown"])] == [UNKNOWN.id]


def test_fits_echoes_the_size_as_written_with_gib_in_parentheses(scout_with: Callable[..., Scout]) -> None:
    """`fits:24GB` says `24GB (22.4 GiB)`, not only the converted figure."""
    with pytest.raises(NoMatchError, match=r"no device has 24GB \(22\.4 GiB\) free"):
        scout_with([KNOWN]).select(["fits:24GB"])


def test_env_fits_on_an_unknown_device_exits_1_naming_why(gpuscout_cli: CliRunner) -> None:
    """Through the command line: exit 1, the error names the unknown free memory."""
    run = gpuscout_cli(["env", "fits:1GiB"], [UNKNOWN])
    assert run.code == 1, run.err
    err = run.err
    assert "fits:1GiB" in err and "free memory unknown" in err


def test_dir_of_the_package_shows_no_import_machinery() -> None:
    """No `TYPE_CHECKING`, `annotations`, `version` or private helper in `dir(gpuscout)`."""
    names = dir(gpuscout)
    for noise in ("TYPE_CHECKING", "annotations", "version", "_LAZY", "VERSION"):
        assert noise not in names


def test_dir_of_the_package_keeps_every_public_name() -> None:
    """Every name of the contract is listed and importable."""
    for name in (
        "Scout",
        "DeviceInfo",
        "DeviceID",
        "SystemInfo",
        "GPULayers",
        "GPULayersList",
        "DeviceComparison",
        "FlashAttention",
        "to_json",
        "from_json",
        "rank",
        "by_library",
        "by_performance",
        "library_paths",
        "Allocation",
        "LoadOperation",
        "LoadResult",
        "FitResult",
        "ModelError",
        "GpuscoutError",
        "__version__",
    ):
        assert name in dir(gpuscout) and getattr(gpuscout, name) is not None


def test_fits_writes_the_need_and_the_rooms_so_that_they_differ(scout_with: Callable[..., Scout]) -> None:
    """A need a few MiB above a card's room is not written as the same figure twice."""
    from gpuscout.sizes import GIB, MIB

    card = KNOWN.evolve(total_memory=40 * GIB, free_memory=20 * GIB + 457 * MIB)  # room: 20 GiB
    with pytest.raises(NoMatchError) as caught:
        scout_with([card]).select([f"fits:{20 * 1024 + 10}MiB"])
    assert "(20.01 GiB) free after its reserve" in str(caught.value)
    assert str(caught.value).endswith(": 20.00 GiB")
