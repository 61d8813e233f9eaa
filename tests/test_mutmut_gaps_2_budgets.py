"""Rules of budgets (gpuscout._discovery.budgets) found by mutmut's survivors (tests/MUTATION.md,
"Automatic mutants (mutmut)", second round).

Each test states a rule that no other test stated; the mutant it kills is named in its
docstring's last line.
"""

from __future__ import annotations

import pytest

from gpuscout import DeviceInfo
from gpuscout._discovery.budgets import (
    MAX_ENTRIES,
    NOTE_PREFIX,
    BudgetError,
    Budgets,
    Entry,
    entries_from,
    from_settings,
    keep_budget,
    parse_entries,
    prefer_from,
    prefer_text,
)
from gpuscout.sizes import GIB


def _refusal(call: object) -> str:
    with pytest.raises(BudgetError) as caught:
        call()  # type: ignore[operator]
    return str(caught.value)


def test_a_selector_of_60_characters_is_quoted_whole_and_a_longer_one_cut() -> None:
    """A budget message quotes a selector of up to 60 characters whole; a longer one is cut to 60
    and its length said.
    Kills gpuscout._discovery.budgets.x__shown__mutmut_1 and _5 (the limit)."""
    whole = "fits:" + "x" * 55
    assert _refusal(lambda: prefer_from([whole], "prefer")).startswith(f"prefer selector {whole!r}: ")
    cut = whole + "x"
    assert _refusal(lambda: prefer_from([cut], "prefer")).startswith(
        f"prefer selector {cut[:60]!r}... (61 characters): "
    )


def test_a_misspelt_numa_selector_is_offered_the_numa_spelling() -> None:
    """An unknown ``KEY=N`` selector close to ``numa=`` is answered with "did you mean 'numa=N'".
    Kills gpuscout._discovery.budgets.x__did_you_mean__mutmut_12 and _13."""
    assert "did you mean 'numa=0'?" in _refusal(lambda: entries_from({"nuam=0": 1}, "cap"))


def test_budget_text_errors_name_where_the_text_came_from() -> None:
    """A ``SEL=SIZE,...`` text given to a Scout keyword is read with that keyword's name, so an
    error names it and the entry.
    Kills gpuscout._discovery.budgets.x_entries_from__mutmut_2 (the name not passed on)."""
    assert _refusal(lambda: entries_from("all=1GiB,x", "cap")).startswith(
        "cap entry 2 'x': expected SEL=SIZE"
    )


def test_a_budget_of_the_wrong_type_is_refused_with_its_type() -> None:
    """A cap or reserve that is neither text nor a mapping is refused, naming its type.
    Kills gpuscout._discovery.budgets.x_entries_from__mutmut_7."""
    assert _refusal(lambda: entries_from(5, "cap")).endswith("or 'SEL=SIZE,...' text, got int")


def test_a_budget_mapping_may_hold_max_entries_and_no_more() -> None:
    """A budget mapping of exactly MAX_ENTRIES entries is accepted ("at most"); one more is
    refused, saying how many it had and the limit.
    Kills gpuscout._discovery.budgets.x_entries_from__mutmut_10 (``>=``) and _11 (no message)."""
    full = {f"cuda:{i}": GIB for i in range(MAX_ENTRIES)}
    assert len(entries_from(full, "cap")) == MAX_ENTRIES
    over = {**full, f"cuda:{MAX_ENTRIES}": GIB}
    assert _refusal(lambda: entries_from(over, "cap")) == (
        f"cap: {MAX_ENTRIES + 1} entries, at most {MAX_ENTRIES} allowed"
    )


@pytest.mark.parametrize(("value", "kind"), [(5, "int"), (b"cuda:0", "bytes"), ({"cuda:0": 1}, "dict")])
def test_a_prefer_that_is_not_a_list_of_selectors_is_refused_with_its_type(value: object, kind: str) -> None:
    """``prefer`` must be an iterable of selectors: a number, bytes or a mapping is refused by type.
    Kills gpuscout._discovery.budgets.x_prefer_from__mutmut_1, _3 and _4."""
    assert (
        _refusal(lambda: prefer_from(value, "prefer")) == f"prefer: expected a list of selectors, got {kind}"
    )


def test_prefer_errors_name_where_the_list_came_from() -> None:
    """An error in a prefer list names the keyword it came from.
    Kills gpuscout._discovery.budgets.x_prefer_from__mutmut_9 (the name not passed on)."""
    assert _refusal(lambda: prefer_from(["fits:1"], "prefer")).startswith("prefer selector 'fits:1': ")


@pytest.mark.parametrize(
    ("budgets", "truth"),
    [
        (Budgets(), False),
        (Budgets(cap=(Entry("all", GIB, "all=1GiB"),)), True),
        (Budgets(reserve=(Entry("all", GIB, "all=1GiB"),)), True),
        (Budgets(prefer=("cuda:0",)), True),
    ],
)
def test_budgets_are_true_when_any_of_cap_reserve_or_prefer_is_set(budgets: Budgets, truth: bool) -> None:
    """Budgets are "set" (true) when any one of cap, reserve and prefer holds something.
    Kills gpuscout._discovery.budgets.xǁBudgetsǁ__bool____mutmut_1..3."""
    assert bool(budgets) is truth


OLD = DeviceInfo(
    id="GPU-0",
    library="CUDA",
    total_memory=24 * GIB,
    free_memory=20 * GIB,
    usable_memory=10 * GIB,
    notes=(f"{NOTE_PREFIX}cap all=10GiB", "driver note"),
)


def test_a_refresh_keeps_the_budget_and_its_note_but_not_other_notes() -> None:
    """A refreshed record keeps the old record's usable total and budget note; the old record's
    other notes are not carried over.
    Kills gpuscout._discovery.budgets.x_keep_budget__mutmut_2 and _6."""
    new = DeviceInfo(id="GPU-0", library="CUDA", total_memory=24 * GIB, free_memory=18 * GIB)
    kept = keep_budget(OLD, new)
    assert (kept.usable_memory, kept.free_memory, kept.notes) == (
        10 * GIB,
        18 * GIB,
        (f"{NOTE_PREFIX}cap all=10GiB",),
    )


def test_a_refresh_with_the_same_usable_total_still_keeps_the_budget_note() -> None:
    """A refreshed record that already has the usable total still gets the budget note back.
    Kills gpuscout._discovery.budgets.x_keep_budget__mutmut_5 (``or``)."""
    new = DeviceInfo(
        id="GPU-0", library="CUDA", total_memory=24 * GIB, free_memory=18 * GIB, usable_memory=10 * GIB
    )
    assert keep_budget(OLD, new).notes == (f"{NOTE_PREFIX}cap all=10GiB",)


def test_a_refresh_that_changes_nothing_of_the_budget_returns_the_new_record_itself() -> None:
    """When the refreshed record already carries the budget (same usable total, the note there)
    it is returned as it is, not rebuilt.
    Kills gpuscout._discovery.budgets.x_keep_budget__mutmut_7 (``and notes``)."""
    new = OLD.evolve(free_memory=18 * GIB)
    assert keep_budget(OLD, new) is new


GRAMMAR = "all, library=NAME, numa=N, LIBRARY:INDEX, PCI id, ID/UUID (or a prefix of 4+)"


@pytest.mark.parametrize(
    ("budget", "message"),
    [
        ({5: 1}, "cap[5]: a selector must be a str, got int"),
        ({" ": 1}, f"cap[' ']: empty selector; expected one of: {GRAMMAR}"),
        (
            {"cuda:0,cuda:1": 1},
            "cap['cuda:0,cuda:1']: selector 'cuda:0,cuda:1' holds a comma: one selector per entry",
        ),
        (
            {"best": 1},
            "cap['best']: selector 'best' depends on the ranking or on free memory, which budgets "
            f"change; name the device instead: {GRAMMAR}",
        ),
        (
            {"nuam=0": 1},
            f"cap['nuam=0']: unknown selector 'nuam=0'; did you mean 'numa=0'?; expected one of: {GRAMMAR}",
        ),
        ({"all": 1.5}, "cap['all']: expected an int of bytes or a size such as '20GiB', got 1.5"),
        ({"all": -1}, "cap['all']: expected bytes in 0..2**64, got -1"),
    ],
)
def test_each_bad_budget_entry_is_refused_with_its_place_and_reason(
    budget: dict[object, object], message: str
) -> None:
    """A budget entry that cannot be used (a selector that is not a str, empty, with a comma, one
    that depends on the ranking or is unknown; a size that is not bytes or out of range) is
    refused with the entry's place in the keyword and the reason, exactly.
    Kills gpuscout._discovery.budgets.x_check_selector__mutmut_3, _6, _10, _12, _13, _25..27 and
    x_entries_from__mutmut_17, _37, _43."""
    assert _refusal(lambda: entries_from(budget, "cap")) == message


def test_a_selector_of_max_selector_characters_is_accepted_and_a_longer_one_refused() -> None:
    """A selector may be MAX_SELECTOR (1000) characters long; one more is refused as too long.
    Kills gpuscout._discovery.budgets.x_check_selector__mutmut_7 (``>=``) and _8 (no message)."""
    longest = "GPU-" + "a" * 996
    assert entries_from({longest: 1}, "cap")[0].selector == longest
    assert _refusal(lambda: entries_from({longest + "a": 1}, "cap")).endswith(
        "... (1001 characters) is too long: at most 1000 characters"
    )


def test_budget_sizes_run_from_0_to_2_to_the_64_inclusive() -> None:
    """A budget of 0 bytes and one of 2**64 bytes are both accepted (the range is inclusive).
    Kills gpuscout._discovery.budgets.x_entries_from__mutmut_39..41."""
    assert [e.size for e in entries_from({"all": 0, "cuda:0": 2**64}, "cap")] == [0, 2**64]


def test_a_size_written_with_spaces_is_recorded_with_single_spaces() -> None:
    """A size given as text is recorded in the entry's text with its words joined by one space.
    Kills gpuscout._discovery.budgets.x_entries_from__mutmut_32."""
    assert entries_from({"all": "20  GiB"}, "cap")[0].text == "all=20 GiB"


GPU = DeviceInfo(id="GPU-0", library="CUDA", total_memory=24 * GIB, free_memory=20 * GIB)


def test_of_two_equal_caps_on_a_device_the_first_one_holds() -> None:
    """When two caps of the same size match a device, the first listed is the one that holds
    (and that its note names).
    Kills gpuscout._discovery.budgets.xǁBudgetsǁapply__mutmut_23 (``<=``)."""
    caps = (Entry("all", GIB, "all=1GiB"), Entry("cuda:0", GIB, "cuda:0=1GiB"))
    devices, outcome = Budgets(cap=caps).apply([GPU])
    assert devices[0].notes == ("budget: cap all=1GiB: usable 1.0 GiB of 24.0 GiB",)
    assert outcome.applied[GPU.device_id].cap == caps[0]


def test_a_reserve_that_matches_no_device_is_said_as_a_reserve() -> None:
    """A reserve entry that matches no device is reported as "reserve '...' matches no device".
    Kills gpuscout._discovery.budgets.xǁBudgetsǁapply__mutmut_26 (the kind not passed on)."""
    _, outcome = Budgets(reserve=(Entry("cuda:5", GIB, "cuda:5=1GiB"),)).apply([GPU])
    assert outcome.unmatched == ("reserve 'cuda:5' matches no device",)


def test_of_two_equal_reserves_on_a_device_the_first_one_holds() -> None:
    """When two reserves of the same size match a device, the first listed is the one that holds.
    Kills gpuscout._discovery.budgets.xǁBudgetsǁapply__mutmut_33 (``>=``)."""
    reserves = (Entry("all", GIB, "all=1GiB"), Entry("cuda:0", GIB, "cuda:0=1GiB"))
    _, outcome = Budgets(reserve=reserves).apply([GPU])
    assert outcome.applied[GPU.device_id].reserve == reserves[0]


def test_a_prefer_selector_that_matches_no_device_is_said_as_a_prefer() -> None:
    """A prefer selector that matches no device is reported as "prefer '...' matches no device".
    Kills gpuscout._discovery.budgets.xǁBudgetsǁapply__mutmut_38, _41 and _42."""
    _, outcome = Budgets(prefer=("cuda:5",)).apply([GPU])
    assert outcome.unmatched == ("prefer 'cuda:5' matches no device",)


def test_budget_text_that_is_not_text_is_refused_with_its_type() -> None:
    """The SEL=SIZE text reader refuses anything that is not a str, naming where and the type.
    Kills gpuscout._discovery.budgets.x_parse_entries__mutmut_2 and _3."""
    assert (
        _refusal(lambda: parse_entries(5, "GPUSCOUT_CAP"))  # type: ignore[arg-type]
        == "GPUSCOUT_CAP: expected 'SEL=SIZE,...' text, got int"
    )


def test_budget_text_may_hold_max_entries() -> None:
    """SEL=SIZE text of exactly MAX_ENTRIES entries is accepted ("at most").
    Kills gpuscout._discovery.budgets.x_parse_entries__mutmut_8 (``>=``)."""
    text = ",".join(f"cuda:{i}=1GiB" for i in range(MAX_ENTRIES))
    assert len(parse_entries(text, "GPUSCOUT_CAP")) == MAX_ENTRIES


def test_prefer_text_errors_name_where_the_text_came_from() -> None:
    """An error in prefer text (the variable's or --prefer's) names where it came from.
    Kills gpuscout._discovery.budgets.x_prefer_text__mutmut_2."""
    assert _refusal(lambda: prefer_text("fits:1", "--prefer")).startswith("--prefer selector 'fits:1': ")


@pytest.mark.parametrize(
    ("settings", "start"),
    [
        ({"cap": {"best": 1}}, "cap['best']: "),
        ({"env": {"GPUSCOUT_CAP": "best=1GiB"}}, "GPUSCOUT_CAP entry 1 'best=1GiB': "),
        ({"reserve": {"best": 1}}, "reserve['best']: "),
        ({"env": {"GPUSCOUT_RESERVE": "best=1GiB"}}, "GPUSCOUT_RESERVE entry 1 'best=1GiB': "),
        ({"prefer": ["best"]}, "prefer selector 'best': "),
        ({"env": {"GPUSCOUT_PREFER": "best"}}, "GPUSCOUT_PREFER selector 'best': "),
    ],
)
def test_a_scouts_budget_errors_name_the_keyword_or_variable_they_came_from(
    settings: dict[str, object], start: str
) -> None:
    """A bad budget given to a Scout names where it came from: the keyword (cap, reserve, prefer)
    or, when the keyword is not given, the variable read instead.
    Kills gpuscout._discovery.budgets.x_from_settings__mutmut_10, _13, _14, _17, _28, _31, _32,
    _46 and their like for the variables."""
    settings = dict(settings)  # the parameter is shared by every run of the test in a session
    env = settings.pop("env", {})
    assert _refusal(lambda: from_settings(env, **settings)).startswith(start)  # type: ignore[arg-type]
