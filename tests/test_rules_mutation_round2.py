"""Rules of the core that the second mutation round (tests/MUTATION.md) found no test stating."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuscout._discovery.merge import is_better
from gpuscout._selection.selectors import NoMatchError, SelectionError, select_devices
from gpuscout.sizes import GIB
from tests.test_rules_mutation_core import NoReserve, card


def test_library_variants_are_compared_only_within_one_prefix() -> None:
    """The seed's IsBetter: cuda_v13 is newer than cuda_v12, but a variant of another prefix
    (rocm_v7 against cuda_v12) is never "better", whatever its number."""
    v12 = card(0, library_path=("/lib/ollama", "/lib/ollama/cuda_v12"))
    v13 = card(0, library_path=("/lib/ollama", "/lib/ollama/cuda_v13"))
    other = card(0, library_path=("/lib/ollama", "/lib/ollama/rocm_v7"))
    assert (is_better(v12, v13), is_better(v12, other), is_better(other, v12)) == (True, False, False)


@pytest.mark.parametrize("written", ["00000000:C4:00.0", "0000:c4:00.0", "c4:00.0", "000000:c4:00.0"])
def test_a_pci_id_selects_its_card_however_many_digits_its_domain_has(written: str) -> None:
    """nvidia-smi writes the domain with 8 digits (00000000:C4:00.0), lspci with 4 or none:
    each names the card whose PCI id is 0000:c4:00.0 (docs/selection.md, "a PCI id")."""
    there = card(0, pci_id="0000:c4:00.0")
    elsewhere = card(1, pci_id="0000:01:00.0")
    assert select_devices(NoReserve(), [elsewhere, there], written) == [there]
    with pytest.raises(NoMatchError):
        select_devices(NoReserve(), [elsewhere, there], "00000001:c4:00.0")


def test_an_id_that_names_two_devices_is_ambiguous_not_a_union() -> None:
    """Two records of different libraries carrying one UUID (left unmerged): naming it exactly
    is ambiguous, a SelectionError listing both, never both selected."""
    uuid = "GPU-8f1c2a34-5b6d-7e8f-9a0b-1c2d3e4f5a6b"
    cuda = card(0, uuid=uuid)
    other = card(1, library="Vulkan", uuid=uuid)
    with pytest.raises(SelectionError, match="ambiguous: it matches 2 devices") as error:
        select_devices(NoReserve(), [cuda, other], uuid.lower())
    assert not isinstance(error.value, NoMatchError)


def test_a_plugins_usable_memory_may_equal_the_total_but_not_exceed_it() -> None:
    """At the plugin border usable_memory is at most total_memory: equal passes as it is, one
    byte more is a RecordError naming the field."""
    from gpuscout._records.device import check_device
    from gpuscout._records.fields import RecordError

    assert check_device(card(0, usable_memory=24 * GIB)).usable_memory == 24 * GIB
    with pytest.raises(RecordError, match=r"\.usable_memory: .* more than total_memory"):
        check_device(card(0, usable_memory=24 * GIB + 1))


def test_usable_total_is_never_above_the_total_even_on_a_hand_made_record() -> None:
    """A host may build a record whose usable_memory exceeds its total (no border check on its
    own records): usable_total is still at most the total, and usable free at most free."""
    d = card(0, total_memory=8 * GIB, free_memory=6 * GIB, usable_memory=16 * GIB)
    assert (d.usable_total, d.usable_free) == (8 * GIB, 6 * GIB)


def test_a_directory_is_listed_up_to_max_dir_entries_and_refused_one_past(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder of exactly MAX_DIR_ENTRIES names is listed; one name more is not listed (None)
    and the note says why (the bound of Context.list_dir, here lowered to 3)."""
    import gpuscout._machine.context as context_module
    from gpuscout._machine.context import Context

    monkeypatch.setattr(context_module, "MAX_DIR_ENTRIES", 3)
    for name in ("a", "b", "c"):
        (tmp_path / "full" / name).mkdir(parents=True)
        (tmp_path / "over" / name).mkdir(parents=True)
    (tmp_path / "over" / "d").mkdir()
    ctx = Context(env={}, platform="linux", root=str(tmp_path))
    assert (ctx.list_dir("/full"), ctx.list_dir("/over")) == (["a", "b", "c"], None)
    assert any("more than 3 entries" in n for n in ctx.notes)


def test_a_budget_of_zero_bytes_is_a_budget_and_2_to_the_64_the_largest() -> None:
    """A budget's int size is bytes in 0..2**64 (docs/budgets.md): 0 and 2**64 are read, -1 and
    2**64 + 1 are a BudgetError naming the entry."""
    from gpuscout._discovery.budgets import BudgetError, entries_from

    assert [e.size for e in entries_from({"all": 0, "cuda:0": 2**64}, "reserve")] == [0, 2**64]
    for bad in (-1, 2**64 + 1):
        with pytest.raises(BudgetError, match=r"^reserve\['all'\]: expected bytes in 0\.\.2\*\*64"):
            entries_from({"all": bad}, "reserve")


def test_require_full_accepts_a_cpu_share_exactly_equal_to_free_memory() -> None:
    """verifyLayout with require_full: the CPU's share fails only when it is more than free
    system memory; exactly equal loads (LAYOUT.md step 6, "cpu > system free")."""
    from gpuscout import SystemInfo
    from gpuscout._layout.plan import verify_layout
    from gpuscout._records.layers import GPULayersList
    from gpuscout._records.memory import InsufficientMemoryError

    def verify(free: int) -> None:
        system = SystemInfo(total_memory=8 * GIB, free_memory=free, free_swap=0)
        verify_layout(
            GPULayersList(),
            [GIB, GIB],
            [],
            system,
            num_gpu=-1,
            require_full=True,
            graphs=None,
            platform="linux",
        )

    verify(2 * GIB)
    with pytest.raises(InsufficientMemoryError):
        verify(2 * GIB - 1)
