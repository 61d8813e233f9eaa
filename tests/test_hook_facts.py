"""The one table of hook facts (``gpuscout._host.hookspecs.HOOKS``): it matches the specs pluggy reads
and the README's hook table, and the host, the Scout, ``for_library`` and ``check_plugin`` act
on it."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import attrs
import pluggy
import pytest

import gpuscout._host.hookspecs as hookspecs
from gpuscout import DeviceInfo, hookimpl
from gpuscout._host.hookfacts import HookFacts
from gpuscout._host.hookspecs import HOOKS
from gpuscout._host.markers import PROJECT
from gpuscout.plugin import for_library
from gpuscout.testing import check_plugin, scout_of

README = Path(__file__).resolve().parent.parent / "README.md"
MINE = DeviceInfo(id="0", library="Mine")


def _specs() -> pluggy.PluginManager:
    manager = pluggy.PluginManager(PROJECT)
    manager.add_hookspecs(hookspecs)
    return manager


def _function(hook: str, params: str, body: str = "return ANSWER", answer: Any = None) -> Any:
    """A function named ``hook`` taking ``params`` whose body is ``body``."""
    namespace: dict[str, Any] = {}
    exec(f"def {hook}({params}):\n    {body}\n", {"ANSWER": answer}, namespace)
    return namespace[hook]


class Card:
    """Reports one device of library "Mine" and shows it to a child."""

    @hookimpl
    def gpuscout_enumerate(self, context: Any) -> list[DeviceInfo]:
        return [MINE]

    @hookimpl
    def gpuscout_visible_env(self, selection: Any, context: Any) -> Any:
        return [(i, "MINE_VISIBLE", d.id) for i, d in enumerate(selection) if d.library == "Mine"]


def _card_answering(hook: str, answer: Any) -> Any:
    """A ``Card`` whose ``hook`` (with the spec's arguments) answers ``answer``."""
    function = _function(hook, ", ".join(("self", *HOOKS[hook].args)), answer=answer)
    return type(f"Answers_{hook}", (Card,), {hook: hookimpl(function)})()


def test_every_hookspec_has_facts_and_every_fact_names_a_hookspec() -> None:
    """HOOKS has one entry per hook pluggy finds in the module, with its arguments and firstresult."""
    manager = _specs()
    specs = {name for name in dir(hookspecs) if manager.parse_hookspec_opts(hookspecs, name)}
    assert specs == set(HOOKS)
    for name, facts in HOOKS.items():
        caller = getattr(manager.hook, name)
        assert caller.spec is not None
        assert (facts.name, facts.args) == (name, tuple(caller.spec.argnames)), name
        assert facts.firstresult is caller.spec.opts["firstresult"], name


def test_each_hooks_facts_agree_with_each_other() -> None:
    """A guard names an argument of its hook, a foreign-declining hook takes a device first, and
    a pure hook is bounded by hook_timeout."""
    for name, facts in HOOKS.items():
        assert isinstance(facts, HookFacts)
        assert not facts.guard or facts.guard == facts.args[0], name
        assert not facts.declines_foreign or facts.args[0] == "device", name
        assert not facts.pure or facts.timeout == "hook_timeout", name
        assert facts.expected and facts.returns and facts.label, name


_GUARD_CELL = {"device": "when `device` is yours", "devices": "when one of `devices` is yours", "": "no"}


def _readme_hook_rows() -> list[list[str]]:
    """The cells of each row of the README's hook table, header first."""
    lines = README.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| hook | returns |"))
    rows: list[list[str]] = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows


def test_the_readme_hook_table_matches_the_facts_row_by_row() -> None:
    """Each README row is its hook's signature, returns, firstresult, timeout and guard, in order."""
    header, rule, *rows = _readme_hook_rows()
    assert header == ["hook", "returns", "firstresult", "bounded by", "`for_library`"]
    assert all(re.fullmatch(r"-+", cell) for cell in rule)
    expected = [
        [
            f"`{f.signature}`",
            f.returns,
            "yes" if f.firstresult else "no",
            f"`{f.timeout}`",
            _GUARD_CELL[f.guard],
        ]
        for f in HOOKS.values()
    ]
    for row, want in zip(rows, expected, strict=True):
        assert row == want


@pytest.mark.parametrize("hook", [h for h in HOOKS if h != "gpuscout_enumerate"])
def test_an_answer_of_the_wrong_type_is_refused_in_the_tables_words(hook: str) -> None:
    """An answer that fails every check fails the plugin with the hook's ``expected`` words."""
    problems = check_plugin(_card_answering(hook, [{}]))
    words = f"{hook}: returned list [{{}}], expected {HOOKS[hook].expected}"
    assert any(p.startswith(words) for p in problems), problems


def test_the_host_reads_the_words_of_a_refused_answer_from_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """Changing a hook's check and words in the table changes what the Scout accepts and says."""
    hook = "gpuscout_flash_attention"
    scout = scout_of(("card", _card_answering(hook, "yes")))
    assert scout.flash_attention(MINE) is False
    assert "expected bool or None" in next(r for r in scout.reports if r.name == "card").error
    # The table itself, changed for this test (HOOKS is a read-only view of it).
    monkeypatch.setitem(
        hookspecs._HOOKS, hook, attrs.evolve(HOOKS[hook], check=lambda v: v == "yes", expected="a yes")
    )
    assert scout.flash_attention(MINE) is True
    other = scout_of(("card", _card_answering(hook, "no")))
    assert other.flash_attention(MINE) is False
    assert "expected a yes" in next(r for r in other.reports if r.name == "card").error


@pytest.mark.parametrize("hook", list(HOOKS))
def test_for_library_guards_exactly_the_hooks_whose_facts_name_a_guard(hook: str) -> None:
    """for_library decorates a hook with a guard, calling it only for its library, and refuses
    the others."""
    facts = HOOKS[hook]
    function = _function(hook, ", ".join(facts.args), answer=True)
    if not facts.guard:
        with pytest.raises(TypeError, match="cannot guard"):
            for_library("Mine")(function)
        return
    guarded = for_library("Mine")(function)
    foreign = DeviceInfo(id="0", library="Other")
    arguments = {
        "device": MINE,
        "devices": [MINE],
        "other": MINE,
        "context": None,
        "op": "SSM_SCAN",
        "params": {},
    }
    assert guarded(**{a: arguments[a] for a in facts.args}) is True
    arguments.update(device=foreign, devices=[foreign])
    assert guarded(**{a: arguments[a] for a in facts.args}) is None


def test_check_plugin_asks_each_foreign_declining_hook_about_a_foreign_device() -> None:
    """A plugin answering every hook for every library is told so for the hooks whose facts say
    they must decline another library's device, and for no other."""
    members: dict[str, Any] = {}
    for name, facts in HOOKS.items():
        if facts.declines_foreign:
            members[name] = hookimpl(_function(name, ", ".join(("self", *facts.args)), answer=True))
    problems = check_plugin(type("Greedy", (Card,), members)())
    blamed = sorted(p.split(" ", 1)[0] for p in problems if "which is not its own" in p)
    assert blamed == sorted(members)


class SlowRules(Card):
    """Answers a refresh and a flash attention question, each after 0.3 s."""

    @hookimpl
    def gpuscout_refresh(self, devices: Any, context: Any) -> Any:
        time.sleep(0.3)
        return [d.evolve(free_memory=1) for d in devices if d.library == "Mine"]

    @hookimpl
    def gpuscout_flash_attention(self, device: DeviceInfo) -> bool | None:
        time.sleep(0.3)
        return True


def test_a_hook_is_bounded_by_the_timeout_its_facts_name() -> None:
    """With hook_timeout 0.1 s and enumerate_timeout 5 s, a 0.3 s refresh (enumerate_timeout)
    answers and a 0.3 s flash attention (hook_timeout) overruns."""
    assert HOOKS["gpuscout_refresh"].timeout == "enumerate_timeout"
    assert HOOKS["gpuscout_flash_attention"].timeout == "hook_timeout"
    scout = scout_of(("slow", SlowRules()), hook_timeout=0.1, enumerate_timeout=5.0)
    assert [d.free_memory for d in scout.refresh([MINE])] == [1]
    assert scout.flash_attention(MINE) is False
    report = next(r for r in scout.reports if r.name == "slow")
    assert (str(report.status), report.error.split(" ", 1)[0]) == ("timeout", "gpuscout_flash_attention")
