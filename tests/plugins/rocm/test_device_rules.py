"""The pure record rules: the integrated-GPU rule and identity when a UUID is shared."""

from __future__ import annotations

import pytest

from gpuscout.plugins.rocm.devices import GpuFacts, build, is_integrated
from gpuscout.sizes import GIB


@pytest.mark.parametrize(
    ("vram", "gtt", "board", "integrated"),
    [
        (512 * 2**20, 16 * GIB, False, True),
        (4 * GIB, 16 * GIB, False, True),
        (4 * GIB + 1, 32 * GIB, False, False),
        (2 * GIB, 8 * GIB - 1, False, False),
        (3 * GIB, 11 * GIB, False, False),
        (512 * 2**20, 16 * GIB, True, False),
    ],
)
def test_integrated_rule(vram: int, gtt: int, board: bool, integrated: bool) -> None:
    """No board files, VRAM <= 4 GiB, GTT >= 8 GiB and GTT >= 4 x VRAM make an iGPU."""
    facts = GpuFacts(ordinal=0, vram_total=vram, gtt_total=gtt, board_files=board)
    assert is_integrated(facts) is integrated


def test_shared_uuid_falls_back_to_the_kfd_ordinal() -> None:
    """A UUID that another node also reports cannot select: id and filter_id are the ordinal."""
    device = build(GpuFacts(ordinal=3, unique_id=0xABC, gfx_version=90402), 0, unique=False)
    assert (device.id, device.filter_id, device.uuid) == ("3", "3", "GPU-0000000000000abc")


def test_unknown_memory_is_flagged() -> None:
    """A GPU whose device directory was not found reports zero memory, flagged unknown."""
    device = build(GpuFacts(ordinal=0, gfx_version=110000), 0)
    assert (device.total_memory, device.free_memory, device.free_memory_unknown) == (0, 0, True)
