"""gpuscout.plugin.drm_vram: the VRAM a DRM kernel driver (xe, i915 backports) publishes in
sysfs for a PCI device, read through the Context, for any plugin that finds such a GPU."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpuscout.plugin import Context, drm_vram
from gpuscout.sizes import GIB
from gpuscout.testing import FIFO, Symlink, write_tree

PCI = "/sys/bus/pci/devices"


def _ctx(tmp_path: Path, files: dict[str, Any]) -> Context:
    return Context(env={}, platform="linux", root=str(write_tree(tmp_path, files)))


def test_xe_tiles_are_summed(tmp_path: Path) -> None:
    """Two xe tiles' physical_vram_size_bytes add up to the card's VRAM."""
    ctx = _ctx(
        tmp_path,
        {
            f"{PCI}/0000:4d:00.0/tile0/physical_vram_size_bytes": "68719476736\n",
            f"{PCI}/0000:4d:00.0/tile1/physical_vram_size_bytes": "68719476736\n",
        },
    )
    found = drm_vram(ctx, "0000:4d:00.0")
    assert found is not None and found[0] == 128 * GIB and "tile1" in found[1]


def test_i915_lmem_total_bytes_on_the_card_device_is_read(tmp_path: Path) -> None:
    """intel-gpu-i915-backports' lmem_total_bytes under drm/cardN counts when xe has no tiles."""
    ctx = _ctx(tmp_path, {f"{PCI}/0000:03:00.0/drm/card1/lmem_total_bytes": "17163091968\n"})
    assert drm_vram(ctx, "0000:03:00.0") == (17163091968, f"{PCI}/0000:03:00.0/drm/card1/lmem_total_bytes")


@pytest.mark.parametrize(
    "content",
    ["", "0\n", "-1\n", "16 GiB\n", "$(reboot)\n", "99999999999999999999999\n", b"\xff\xfe", FIFO],
    ids=["empty", "zero", "negative", "words", "shell", "huge", "non-utf8", "fifo"],
)
def test_a_hostile_vram_file_is_ignored(tmp_path: Path, content: Any) -> None:
    """Anything but a positive number below 2**64 is no figure."""
    ctx = _ctx(tmp_path, {f"{PCI}/0000:03:00.0/tile0/physical_vram_size_bytes": content})
    assert drm_vram(ctx, "0000:03:00.0") is None


def test_a_tile_that_links_to_a_folder_without_the_file_holds_no_figure(tmp_path: Path) -> None:
    """A tile entry linking elsewhere (a tree spoiled by hand) gives no figure."""
    ctx = _ctx(tmp_path, {f"{PCI}/0000:03:00.0/tile0": Symlink("/proc/self")})
    assert drm_vram(ctx, "0000:03:00.0") is None


def test_xe_tiles_win_over_i915_lmem_total_bytes(tmp_path: Path) -> None:
    """With both xe's tiles and a lmem_total_bytes, the tiles are the figure."""
    ctx = _ctx(
        tmp_path,
        {
            f"{PCI}/0000:03:00.0/tile0/physical_vram_size_bytes": f"{16 * GIB}\n",
            f"{PCI}/0000:03:00.0/drm/card0/lmem_total_bytes": f"{8 * GIB}\n",
        },
    )
    assert drm_vram(ctx, "0000:03:00.0") == (16 * GIB, f"{PCI}/0000:03:00.0/tile0/physical_vram_size_bytes")


def test_a_device_without_the_files_has_no_figure(tmp_path: Path) -> None:
    """An integrated GPU or mainline i915 publishes neither file: None."""
    ctx = _ctx(tmp_path, {f"{PCI}/0000:00:02.0/vendor": "0x8086\n"})
    assert drm_vram(ctx, "0000:00:02.0") is None


def test_at_most_eight_tiles_are_read(tmp_path: Path) -> None:
    """A tree with twelve tiles counts the first eight (sorted by name) and no more."""
    files = {f"{PCI}/0000:03:00.0/tile{n}/physical_vram_size_bytes": f"{GIB}\n" for n in range(12)}
    found = drm_vram(_ctx(tmp_path, files), "0000:03:00.0")
    assert found is not None and found[0] == 8 * GIB
