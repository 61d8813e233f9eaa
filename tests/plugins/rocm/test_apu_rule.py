"""The APU rule (what the HSA runtime's APU flag follows from in sysfs) and an APU's HIP pool."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuscout.plugins.rocm.apu import ApuFacts, apu_memory, apu_rule, seed_rule
from gpuscout.sizes import GIB, MIB

#: ttm.pages_limit=25165824 (4 KiB pages): the 96 GiB GTT ceiling of noamsto/nix-amd-ai#42.
PAGES = 25165824
GTT_96 = PAGES * 4096
STRIX = 110501  # gfx1151


def test_a_kfd_node_with_cpu_cores_is_an_apu() -> None:
    """ROCr's APU node (NumCPUCores > 0 on a GPU node) is an APU whatever the board files say."""
    assert apu_rule(ApuFacts(cpu_cores=4, board_info=True, vram_total=GIB))[0] is True


def test_board_info_means_discrete() -> None:
    """amdgpu hides board_info exactly on APUs: a card showing it is discrete."""
    assert apu_rule(ApuFacts(gfx_version=STRIX, board_info=True, vram_total=512 * MIB, gtt_total=GTT_96)) == (
        False,
        "",
    )


def test_a_kfd_bank_equal_to_the_gtt_ceiling_above_the_carve_out_is_an_apu() -> None:
    """apu_prefer_gtt (only for AMD_IS_APU) makes KFD's local memory the GTT ceiling."""
    facts = ApuFacts(gfx_version=103500, vram_total=512 * MIB, gtt_total=16 * GIB, bank=16 * GIB)
    integrated, how = apu_rule(facts)
    assert integrated and "apu_prefer_gtt" in how


def test_a_vram_vendor_means_discrete() -> None:
    """mem_info_vram_vendor names VRAM chips an APU does not have."""
    assert apu_rule(ApuFacts(gfx_version=STRIX, vram_vendor=True, vram_total=24 * GIB))[0] is False


def test_a_96_gib_carve_out_without_board_files_is_an_apu() -> None:
    """A gfx1151 with a 96 GiB carve-out (the seed's rule says discrete) is an APU."""
    facts = ApuFacts(gfx_version=STRIX, vram_total=96 * GIB, gtt_total=GTT_96, bank=96 * GIB)
    assert seed_rule(facts) is False
    integrated, how = apu_rule(facts)
    assert integrated and "board_info" in how


def test_an_old_target_without_board_files_falls_back_to_the_seed_rule_and_says_so() -> None:
    """gfx1036 on a kernel that may predate board_info: the seed's size rule, named in the note."""
    small = ApuFacts(gfx_version=100306, vram_total=512 * MIB, gtt_total=16 * GIB, bank=512 * MIB)
    integrated, how = apu_rule(small)
    assert integrated and "seed's size rule" in how
    assert apu_rule(ApuFacts(gfx_version=100306, vram_total=8 * GIB, gtt_total=16 * GIB))[0] is False


def test_no_amdgpu_directory_is_never_an_apu() -> None:
    """Without the device's counters (no vram total) nothing says APU, even on gfx11."""
    assert apu_rule(ApuFacts(gfx_version=110000))[0] is False


def test_a_gtt_backed_pool_is_the_gtt_ceiling_shared_and_capped_by_system_free() -> None:
    """4 GiB carve-out, pages_limit 25165824: HIP's 98304 MiB, system memory, free <= system free."""
    facts = ApuFacts(
        gfx_version=STRIX,
        vram_total=4 * GIB,
        gtt_total=GTT_96,
        gtt_used=GIB,
        bank=GTT_96,
        ttm_pages_limit=PAGES,
    )
    total, free, shared, note = apu_memory(facts, system_free=80 * GIB)
    assert (total, free, shared) == (98304 * MIB, 80 * GIB, True)
    assert "ttm.pages_limit 25165824" in note


def test_a_carve_out_pool_is_not_shared_and_ignores_system_free() -> None:
    """A 96 GiB carve-out is HIP's pool: its own bytes, out of MemTotal already, free not capped."""
    facts = ApuFacts(gfx_version=STRIX, vram_total=96 * GIB, vram_used=GIB, gtt_total=GTT_96, bank=96 * GIB)
    total, free, shared, note = apu_memory(facts, system_free=20 * GIB)
    assert (total, free, shared) == (96 * GIB, 95 * GIB, False)
    assert "carve-out" in note and "Vulkan" in note


def test_without_a_kfd_bank_the_pool_is_the_one_the_kernel_picks() -> None:
    """No bank (mem_banks not recorded): GTT when the carve-out is below it, else the carve-out."""
    small = ApuFacts(gfx_version=STRIX, vram_total=4 * GIB, gtt_total=GTT_96)
    total, free, shared, note = apu_memory(small, system_free=80 * GIB)
    assert (total, free, shared) == (98304 * MIB, 80 * GIB, True)
    assert "no KFD memory bank" in note
    big = ApuFacts(gfx_version=STRIX, vram_total=96 * GIB, vram_used=GIB, gtt_total=GTT_96)
    assert apu_memory(big, system_free=20 * GIB)[:3] == (96 * GIB, 95 * GIB, False)


sizes = st.one_of(st.none(), st.integers(0, 2**64 - 1))


@given(sizes, sizes, sizes, sizes, st.integers(0, 2**64 - 1), st.integers(0, 2**64 - 1))
def test_hostile_counters_never_give_free_above_total_or_out_of_range(
    vram: int | None, vram_used: int | None, gtt: int | None, gtt_used: int | None, bank: int, system: int
) -> None:
    """Any counters (huge, used above total): 0 <= free <= total <= 2**64-1; a GTT pool within system free."""
    facts = ApuFacts(vram_total=vram, vram_used=vram_used, gtt_total=gtt, gtt_used=gtt_used, bank=bank)
    total, free, shared, _ = apu_memory(facts, system)
    assert 0 <= free <= total <= 2**64 - 1
    if shared and system:
        assert free <= system


@pytest.mark.parametrize("gfx", [90402, 110000, 120001])
def test_targets_only_new_kernels_drive_trust_a_missing_board_info(gfx: int) -> None:
    """gfx94x, gfx11 and gfx12 without board files are APUs."""
    assert apu_rule(ApuFacts(gfx_version=gfx, vram_total=GIB, gtt_total=GIB))[0] is True
