"""Budgets (docs/budgets.md): the ``SEL=SIZE`` syntax, good and hostile; the Scout's ``reserve``,
``cap`` and ``prefer`` keywords and their variables; what a budget does to a device, to the
ranking, to ``fits:``, to the wire format and through a refresh."""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuscout import DeviceInfo, GpuscoutError, Scout, from_json, to_json
from gpuscout._discovery.budgets import (
    NOTE_PREFIX,
    BudgetError,
    Budgets,
    entries_from,
    from_settings,
    parse_entries,
    prefer_from,
)
from gpuscout._discovery.ranking import deciding_criterion, rank
from gpuscout._host.markers import hookimpl
from gpuscout._records.device import check_device
from gpuscout._records.fields import RecordError
from gpuscout._records.results import Entry
from gpuscout._selection.selectors import NoMatchError
from gpuscout.plugin import Context
from gpuscout.sizes import GIB, MIB
from gpuscout.testing import ScoutFactory, injected


def card(n: int, total_gib: int = 80, free_gib: float = 80, library: str = "CUDA", **kw: Any) -> DeviceInfo:
    """A discrete card ``n`` at PCI bus ``n+1``, ``total_gib`` GiB with ``free_gib`` GiB free."""
    return DeviceInfo(
        id=f"GPU-{n:04x}aaaa-0000",
        library=library,
        pci_id=f"0000:{n + 1:02x}:00.0",
        total_memory=total_gib * GIB,
        free_memory=int(free_gib * GIB),
        **kw,
    )


@pytest.fixture
def scout_on(scout_with: Callable[..., Scout]) -> Callable[..., Scout]:
    """A Scout over ``devices`` with budget keywords and an env."""

    def make(devices: Sequence[DeviceInfo], env: dict[str, str] | None = None, **budgets: Any) -> Scout:
        return scout_with(list(devices), env=env or {}, **budgets)

    return make


# -- the syntax ---------------------------------------------------------------------------------


def test_an_entry_list_reads_selectors_and_sizes_in_order() -> None:
    """``SEL=SIZE,SEL=SIZE`` gives each selector its size in bytes, as ``fits:`` reads sizes."""
    got = parse_entries("cuda:0=2GiB, all=1.5GB ,library=cuda=512MiB", "GPUSCOUT_CAP")
    assert [(e.selector, e.size) for e in got] == [
        ("cuda:0", 2 * GIB),
        ("all", 1_500_000_000),
        ("library=cuda", 512 * MIB),
    ]


def test_an_empty_list_is_no_entry() -> None:
    """An empty variable, or one of commas and spaces, holds no entry."""
    assert parse_entries("", "GPUSCOUT_CAP") == ()
    assert parse_entries(" , ,", "GPUSCOUT_CAP") == ()


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("=", "no selector"),
        ("cuda:0=", "no size"),
        ("=1GiB", "no selector"),
        ("cuda:0", "expected SEL=SIZE"),
        ("cuda:0=-1", "'-1': a size cannot be negative"),
        ("cuda:0=1e400", "'1e400': not a size; expected a number and a unit"),
        ("cuda:0=1", "'1': a size needs a unit, e.g. 1GiB or 1MiB; bytes are 1B"),
        ("cuda:0=nan GiB", "'nan GiB': not a size"),
        ("all=99999999999999999999999TiB", "larger than the largest size, 2**63-1 bytes"),
        ("all=8388608TiB", "larger than the largest size, 2**63-1 bytes"),
        ("all=17EiB", "'17EiB': unknown unit 'EiB'"),
        ("cuda:0='2GiB'", "\"'2GiB'\": not a size"),
        ("$(reboot)=1GiB", "unknown selector '$(reboot)'"),
        ("nope=1GiB", "unknown selector 'nope'"),
        ("best=1GiB", "depends on the ranking"),
        ("0=1GiB", "depends on the ranking"),
        ("fits:8GiB=1GiB", "depends on the ranking"),
        ("library==1GiB", "library= needs a name"),
        ("cuda:0=\uff12GiB", "'\\uff12GiB': not a size"),  # a fullwidth digit two
    ],
)
def test_a_malformed_entry_is_refused_naming_it(text: str, says: str) -> None:
    """Each malformed entry raises BudgetError naming the variable, the entry and what is wrong."""
    with pytest.raises(BudgetError) as caught:
        parse_entries(f"all=1GiB,{text}", "GPUSCOUT_CAP")
    message = str(caught.value)
    assert message.startswith(f"GPUSCOUT_CAP entry 2 {text!r}"), message
    assert says in message


def test_a_misspelled_selector_word_gets_a_did_you_mean() -> None:
    """``alll`` and ``libary=cuda`` are answered with ``all`` and ``library=cuda``."""
    with pytest.raises(BudgetError, match="did you mean 'all'"):
        parse_entries("alll=1GiB", "--cap")
    with pytest.raises(BudgetError, match="did you mean 'library=cuda'"):
        parse_entries("libary=cuda=1GiB", "--cap")


def test_a_huge_list_is_refused() -> None:
    """More than 256 entries is an attack or a mistake, refused before any is parsed."""
    with pytest.raises(BudgetError, match="257 entries, at most 256"):
        parse_entries(",".join(["all=1GiB"] * 257), "GPUSCOUT_RESERVE")


def test_a_mapping_takes_bytes_or_size_text() -> None:
    """A keyword's mapping holds ints of bytes or sizes as text; the entry text is shown in units."""
    got = entries_from({"all": 20 * GIB, "cuda:1": "1.5GiB", "cuda:2": 1000}, "cap")
    assert got == (
        Entry("all", 20 * GIB, "all=20GiB"),
        Entry("cuda:1", 3 * GIB // 2, "cuda:1=1.5GiB"),
        Entry("cuda:2", 1000, "cuda:2=1000B"),
    )


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ({"all": -1}, "expected bytes in 0..2**64"),
        ({"all": 2**65}, "expected bytes in 0..2**64"),
        ({"all": True}, "expected an int of bytes"),
        ({"all": 1.5}, "expected an int of bytes"),
        ({"all": None}, "expected an int of bytes"),
        ({1: GIB}, "a selector must be a str"),
        ({"best": GIB}, "depends on the ranking"),
        ({"all": "20"}, "cap['all']: '20': a size needs a unit, e.g. 20GiB or 20MiB; bytes are 20B"),
        (["all=1GiB"], "expected a mapping"),
        (20 * GIB, "expected a mapping"),
    ],
)
def test_a_bad_keyword_budget_is_refused(value: Any, says: str) -> None:
    """A keyword that is no mapping of selector to bytes raises BudgetError saying so."""
    with pytest.raises(BudgetError, match=re.escape(says)):
        entries_from(value, "cap")


def test_prefer_takes_a_list_and_refuses_a_bare_string() -> None:
    """``prefer`` is a list of selectors (commas inside split too); a bare str is refused."""
    assert prefer_from(["cuda:1", "cuda:0,library=rocm"], "prefer") == ("cuda:1", "cuda:0", "library=rocm")
    with pytest.raises(BudgetError, match="not a bare string"):
        prefer_from("cuda:1", "prefer")
    with pytest.raises(BudgetError, match="depends on the ranking"):
        prefer_from(["best"], "prefer")
    with pytest.raises(BudgetError, match="a selector must be a str"):
        prefer_from([b"cuda:0"], "prefer")


# -- the Scout's keywords and variables ---------------------------------------------------------


def test_the_variables_feed_the_budgets() -> None:
    """GPUSCOUT_CAP, GPUSCOUT_RESERVE and GPUSCOUT_PREFER are read from the Scout's env."""
    env = {"GPUSCOUT_CAP": "all=20GiB", "GPUSCOUT_RESERVE": "cuda:0=2GiB", "GPUSCOUT_PREFER": "cuda:1"}
    budgets = Scout(env=env, entry_points=False, plugins=[]).budgets
    assert [e.text for e in budgets.cap] == ["all=20GiB"]
    assert [e.text for e in budgets.reserve] == ["cuda:0=2GiB"]
    assert budgets.prefer == ("cuda:1",)


def test_a_keyword_wins_over_its_variable_and_only_its_own() -> None:
    """``cap=`` replaces GPUSCOUT_CAP (an empty mapping too); GPUSCOUT_RESERVE still counts."""
    env = {"GPUSCOUT_CAP": "all=20GiB", "GPUSCOUT_RESERVE": "all=1GiB"}
    budgets = from_settings(env, cap={})
    assert budgets.cap == ()
    assert [e.text for e in budgets.reserve] == ["all=1GiB"]


def test_a_malformed_variable_fails_the_scout_naming_it() -> None:
    """A Scout whose GPUSCOUT_RESERVE is malformed raises a GpuscoutError naming the variable."""
    with pytest.raises(GpuscoutError, match="GPUSCOUT_RESERVE entry 1 'cuda:0=2'"):
        Scout(env={"GPUSCOUT_RESERVE": "cuda:0=2"}, entry_points=False, plugins=[])


def test_a_cap_keeps_the_total_and_gains_the_usable_figure(scout_on: Callable[..., Scout]) -> None:
    """cap all=20GiB on an 80 GiB card: total stays 80 GiB, usable_memory is 20 GiB, and a note
    names the budget."""
    (device,) = scout_on([card(0)], cap={"all": 20 * GIB}).discover().devices
    assert device.total_memory == 80 * GIB
    assert device.usable_memory == 20 * GIB
    assert device.usable_free == 20 * GIB
    assert device.notes == (f"{NOTE_PREFIX}cap all=20GiB: usable 20.0 GiB of 80.0 GiB",)


def test_usable_is_the_cap_less_the_reserve(scout_on: Callable[..., Scout]) -> None:
    """cap all=20GiB and reserve cuda:0=2GiB: cuda:0 has 18 GiB usable, the other card 20."""
    found = scout_on([card(0), card(1)], cap={"all": 20 * GIB}, reserve={"cuda:0": 2 * GIB}).discover()
    usable = {d.pci_id: d.usable_memory for d in found.devices}
    assert usable == {"0000:01:00.0": 18 * GIB, "0000:02:00.0": 20 * GIB}
    first = next(d for d in found.devices if d.pci_id == "0000:01:00.0")
    assert first.notes[-1].endswith("cap all=20GiB, reserve cuda:0=2GiB: usable 18.0 GiB of 80.0 GiB")


def test_memory_in_use_counts_against_a_cap(scout_on: Callable[..., Scout]) -> None:
    """A card with 10 of 80 GiB in use under a 20 GiB cap has 10 GiB usable free, not 20: a
    model loaded before counts, or a second load would pass the cap."""
    (device,) = scout_on([card(0, free_gib=70)], cap={"all": 20 * GIB}).discover().devices
    assert device.free_memory == 70 * GIB
    assert device.usable_free == 10 * GIB


def test_a_reserve_comes_off_free_memory(scout_on: Callable[..., Scout]) -> None:
    """reserve all=2GiB on a card with 30 GiB free leaves 28 GiB usable free of 78 GiB."""
    (device,) = scout_on([card(0, free_gib=30)], reserve={"all": 2 * GIB}).discover().devices
    assert (device.usable_memory, device.usable_free) == (78 * GIB, 28 * GIB)


def test_the_smallest_cap_and_the_largest_reserve_hold(scout_on: Callable[..., Scout]) -> None:
    """Several entries on one device: each holds, so the smallest cap and the largest reserve."""
    scout = scout_on(
        [card(0)], cap="all=20GiB,cuda:0=30GiB,library=cuda=10GiB", reserve="cuda:0=1GiB,all=3GiB,cuda:0=2GiB"
    )
    (device,) = scout.discover().devices
    assert device.usable_memory == 7 * GIB
    applied = scout.discover().budgets.applied[device.device_id]
    assert (applied.cap and applied.cap.text, applied.reserve and applied.reserve.text) == (
        "library=cuda=10GiB",
        "all=3GiB",
    )


def test_a_reserve_above_the_cap_leaves_nothing_usable(scout_on: Callable[..., Scout]) -> None:
    """reserve 30 GiB under a 20 GiB cap: usable 0, written as 0 (not left out), nothing placed."""
    (device,) = scout_on([card(0)], cap={"all": 20 * GIB}, reserve={"all": 30 * GIB}).discover().devices
    assert device.usable_memory == 0
    assert device.usable_free == 0
    assert '"usable_memory":0' in to_json(device)


def test_a_cap_above_the_total_changes_nothing_on_the_wire(scout_on: Callable[..., Scout]) -> None:
    """A 200 GiB cap on an 80 GiB card leaves usable_memory unset (off the wire); the note says so."""
    (device,) = scout_on([card(0)], cap={"all": 200 * GIB}).discover().devices
    assert device.usable_memory is None
    assert "usable_memory" not in to_json(device)
    assert device.notes[-1].endswith("usable 80.0 GiB of 80.0 GiB")


def test_a_budget_appends_to_the_notes(scout_on: Callable[..., Scout]) -> None:
    """A plugin's note stays first; the budget's sentence is appended after it."""
    (device,) = scout_on([card(0, notes=("PCIe Gen3 x4 of Gen4 x16",))], cap={"all": GIB}).discover().devices
    assert device.notes[0] == "PCIe Gen3 x4 of Gen4 x16"
    assert device.notes[1].startswith(NOTE_PREFIX)


def test_a_budget_for_no_device_is_reported_not_fatal(scout_on: Callable[..., Scout]) -> None:
    """cap cuda:5 on a one-card machine changes nothing and is listed as unmatched."""
    found = scout_on([card(0)], cap={"cuda:5": GIB}).discover()
    assert found.devices[0].usable_memory is None
    assert found.budgets.unmatched == ("cap 'cuda:5' matches no device",)


def test_an_ambiguous_budget_selector_fails_the_discovery(scout_on: Callable[..., Scout]) -> None:
    """An id prefix that matches two devices raises BudgetError naming the entry."""
    scout = scout_on([card(0), card(1)], cap={"GPU-00": GIB})
    with pytest.raises(BudgetError, match=r"cap 'GPU-00'.*ambiguous"):
        scout.discover()


def test_a_plugin_reported_usable_total_is_the_base_of_a_budget(scout_on: Callable[..., Scout]) -> None:
    """A card whose plugin says 94.97 of 96 GiB is usable: a 2 GiB reserve comes off 94.97."""
    usable = int(94.97 * GIB)
    (device,) = (
        scout_on([card(0, total_gib=96, free_gib=96, usable_memory=usable)], reserve="all=2GiB")
        .discover()
        .devices
    )
    assert device.usable_memory == usable - 2 * GIB


# -- ranking -------------------------------------------------------------------------------------


def test_prefer_ranks_its_devices_first_in_its_order(scout_on: Callable[..., Scout]) -> None:
    """prefer cuda:2,cuda:0 puts those two first, in that order, before the card with the most
    free memory; the others follow in the usual order."""
    devices = [card(0, free_gib=10), card(1, free_gib=70), card(2, free_gib=20), card(3, free_gib=50)]
    found = scout_on(devices, prefer=["cuda:2", "cuda:0"]).discover()
    assert [d.pci_id[5:7] for d in found.devices] == ["03", "01", "02", "04"]


def test_prefer_comes_before_discrete_over_integrated(scout_on: Callable[..., Scout]) -> None:
    """A user's order beats the rules of thumb: a preferred integrated GPU ranks first."""
    apu = card(0, library="Vulkan", integrated=True, free_gib=4)
    found = scout_on([card(1), apu], prefer=["library=vulkan"]).discover()
    assert found.devices[0].library == "Vulkan"


def test_without_prefer_the_ranking_is_the_usual_one(scout_on: Callable[..., Scout]) -> None:
    """An empty prefer list (or one matching nothing) changes no place."""
    devices = [card(0, free_gib=10), card(1, free_gib=70)]
    plain = scout_on(devices).discover().devices
    assert scout_on(devices, prefer=["cuda:7"]).discover().devices == plain
    assert [d.pci_id for d in plain] == ["0000:02:00.0", "0000:01:00.0"]


def test_ranking_orders_by_free_memory_under_the_budget(scout_on: Callable[..., Scout]) -> None:
    """A card capped to 8 GiB ranks after one with 20 GiB free, though its own free is larger."""
    found = scout_on([card(0, free_gib=70), card(1, free_gib=20)], cap={"cuda:0": 8 * GIB}).discover()
    assert [d.pci_id for d in found.devices] == ["0000:02:00.0", "0000:01:00.0"]


# -- fits: ---------------------------------------------------------------------------------------


def test_fits_uses_the_usable_figure(scout_on: Callable[..., Scout]) -> None:
    """fits:24GiB takes no card capped to 20 GiB; the error names the budget."""
    scout = scout_on([card(0), card(1)], cap={"cuda:0": 20 * GIB})
    assert [d.pci_id for d in scout.select(["fits:24GiB"])] == ["0000:02:00.0"]
    with pytest.raises(NoMatchError, match="under its budget"):
        scout.select(["fits:85GiB"])


# -- records and the wire ------------------------------------------------------------------------


def test_usable_memory_round_trips_on_the_wire() -> None:
    """A record with usable_memory reads back equal; one without has no such key."""
    device = card(0, usable_memory=20 * GIB)
    assert from_json(to_json(device), DeviceInfo) == device
    assert "usable_memory" not in to_json(card(0))


def test_the_wire_refuses_a_usable_figure_of_the_wrong_type() -> None:
    """``"usable_memory": "5"`` is an error naming the key."""
    with pytest.raises(GpuscoutError, match="usable_memory"):
        from_json('{"id": "a", "usable_memory": "5"}', DeviceInfo)


def test_the_border_refuses_a_usable_figure_above_the_total() -> None:
    """A plugin's record whose usable_memory exceeds its total fails at the border, naming it."""
    with pytest.raises(RecordError, match=r"\[0\]\.usable_memory: .* more than total_memory"):
        check_device(card(0, usable_memory=81 * GIB), "[0]")
    with pytest.raises(RecordError, match="usable_memory"):
        DeviceInfo(usable_memory=-1)


# -- refresh -------------------------------------------------------------------------------------


class FakeRefresher:
    """Answers every refresh with a fresh record of its own (no budget on it)."""

    def __init__(self, free: int) -> None:
        self.free = free

    @hookimpl
    def gpuscout_refresh(self, devices: Sequence[DeviceInfo], context: Context) -> list[DeviceInfo]:
        return [card(0, free_gib=self.free / GIB) for d in devices]


def test_a_refreshed_device_keeps_its_budget(gpuscout_scout: ScoutFactory) -> None:
    """After a refresh the device still has its usable_memory and its budget note, once."""
    scout = gpuscout_scout(
        injected([card(0)]), ("refresher", FakeRefresher(60 * GIB)), env={}, cap={"all": 20 * GIB}
    )
    (before,) = scout.discover().devices
    (after,) = scout.refresh([before])
    assert after.free_memory == 60 * GIB
    assert after.usable_memory == 20 * GIB
    assert after.usable_free == 0  # 20 GiB in use, all of the cap
    assert after.notes == before.notes


def test_budgets_apply_as_a_value() -> None:
    """Budgets.apply is a pure function of the devices: the input list is left as it was."""
    devices = [card(0)]
    out, outcome = Budgets(cap=(Entry("all", GIB, "all=1GiB"),)).apply(devices)
    assert devices[0].usable_memory is None
    assert out[0].usable_memory == GIB
    assert set(outcome.applied) == {devices[0].device_id}


@settings(max_examples=200)
@given(
    frees=st.lists(st.integers(0, 80), min_size=1, max_size=6),
    picks=st.lists(st.integers(0, 7), max_size=4),
)
def test_prefer_is_a_stable_partition_of_the_usual_ranking(frees: list[int], picks: list[int]) -> None:
    """Over random machines and prefer lists of ``cuda:N``: the ranked devices are grouped by the
    first selector each matches (unmatched last), each group in the usual order, and the
    explained criterion between two groups is ``prefer``."""
    devices = [card(i, free_gib=f) for i, f in enumerate(frees)]
    budgets = Budgets(prefer=tuple(f"cuda:{n}" for n in picks))
    kept, outcome = budgets.apply(devices)
    ranked = rank(kept, outcome.preference)
    usual = rank(kept)
    place = {d.device_id: picks.index(i) if i in picks else len(picks) for i, d in enumerate(devices)}
    assert ranked == sorted(usual, key=lambda d: place[d.device_id])
    for device, following in itertools.pairwise(ranked):
        if place[device.device_id] != place[following.device_id]:
            decided = deciding_criterion(device, following, outcome.preference)
            assert decided is not None and decided.name == "prefer"


@pytest.mark.parametrize(
    "text",
    [
        "\udcff=1GiB",
        "cuda:0=1GiB\x00",
        "cu\nda:0=1GiB",
        "all=" + "9" * 5000 + "GiB",
        "a" * 1_000_000 + "=1GiB",
    ],
    ids=["surrogate", "nul", "line-break-in-selector", "5000-digits", "megabyte-selector"],
)
def test_hostile_text_is_refused_with_a_short_message(text: str) -> None:
    """Undecodable bytes, NUL, line breaks, huge numbers and a megabyte selector each raise
    BudgetError whose message stays short (the entry is cut, never echoed whole)."""
    with pytest.raises(BudgetError) as caught:
        parse_entries(text, "GPUSCOUT_CAP")
    assert len(str(caught.value)) < 400


def test_a_megabyte_variable_of_commas_is_no_entry() -> None:
    """A variable of a million commas holds nothing, and reading it is quick."""
    assert parse_entries("," * 1_000_000, "GPUSCOUT_CAP") == ()


def test_an_entry_is_shown_on_one_line() -> None:
    """Spaces and line breaks in an entry (sizes allow them, as ``fits:``) become single spaces
    in the text that notes and explanations show."""
    (entry,) = parse_entries("cuda:0 =1\n GiB", "GPUSCOUT_CAP")
    assert (entry.size, entry.text) == (GIB, "cuda:0 =1 GiB")
