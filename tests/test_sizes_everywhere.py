"""One size rule, one wording: a bad size is refused with the same reason by ``fits:``, the
budgets (``--cap``/``--reserve``, GPUSCOUT_CAP, ``Scout(cap=...)``) and ``fit --layers``, each
saying where it was written (gpuscout.sizes.parse_size)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from gpuscout import DeviceInfo, Scout
from gpuscout._discovery.budgets import BudgetError
from gpuscout._selection.selectors import SelectionError
from gpuscout.sizes import GIB, SizeError, parse_size
from gpuscout.testing import CliRunner

CARD = DeviceInfo(id="GPU-aaaa0000", library="CUDA", uuid="GPU-aaaa0000", total_memory=80 * GIB)

BAD = ["20", "1.5", "-1GiB", "1e9GiB", "nan", "20 PiB", "8388608TiB", "'2GiB'", "2 0GiB", "\uff12GiB"]


def reason(text: str) -> str:
    """What gpuscout.sizes says is wrong with ``text``."""
    with pytest.raises(SizeError) as caught:
        parse_size(text, what="")
    return caught.value.reason


@pytest.mark.parametrize("text", BAD)
def test_fits_refuses_a_bad_size_naming_the_selector(text: str, scout_with: Callable[..., Scout]) -> None:
    """``fits:SIZE`` says ``selector 'fits:SIZE': REASON``."""
    with pytest.raises(SelectionError) as caught:
        scout_with([CARD]).select([f"fits:{text}"])
    assert str(caught.value) == f"selector {f'fits:{text}'!r}: {reason(text)}"


@pytest.mark.parametrize("text", BAD)
def test_a_scout_cap_refuses_a_bad_size_naming_the_entry(text: str) -> None:
    """``Scout(cap=...)``, as a mapping or as text, says where and then the same reason."""
    with pytest.raises(BudgetError) as mapping:
        Scout(cap={"all": text}, env={})
    assert str(mapping.value) == f"cap['all']: {reason(text)}"
    with pytest.raises(BudgetError) as written:
        Scout(cap=f"all={text}", env={})
    assert str(written.value) == f"cap entry 1 {f'all={text}'!r}: {reason(text)}"


@pytest.mark.parametrize("text", BAD)
def test_the_reserve_variable_refuses_a_bad_size_naming_it(text: str) -> None:
    """GPUSCOUT_RESERVE names itself and the entry, then the same reason."""
    with pytest.raises(BudgetError) as caught:
        Scout(env={"GPUSCOUT_RESERVE": f"cuda:0={text}"})
    assert str(caught.value) == f"GPUSCOUT_RESERVE entry 1 {f'cuda:0={text}'!r}: {reason(text)}"


@pytest.mark.parametrize("text", BAD)
def test_list_cap_exits_2_with_the_same_reason(text: str, gpuscout_cli: CliRunner) -> None:
    """``gpuscout list --cap all=SIZE`` is a usage error of one line with the reason."""
    code, out, err = gpuscout_cli(["list", "--cap", f"all={text}"], [CARD])
    assert (code, out, err.count("\n")) == (2, "", 1)
    assert f"argument --cap: --cap entry 1 {f'all={text}'!r}: {reason(text)}" in err


@pytest.mark.parametrize("text", BAD)
def test_fit_layers_exits_2_with_the_same_reason(text: str, gpuscout_cli: CliRunner) -> None:
    """``gpuscout fit --layers 1GiB,SIZE`` names the size by its place, then the reason."""
    code, out, err = gpuscout_cli(["fit", "--layers", f"1GiB,{text}"], [CARD], builtins=False)
    assert (code, out, err.count("\n")) == (2, "", 1)
    assert f"argument --layers: --layers size 2: {reason(text)}" in err


@pytest.mark.parametrize("text", BAD)
def test_env_fits_exits_2_with_the_same_reason(text: str, gpuscout_cli: CliRunner) -> None:
    """``gpuscout env fits:SIZE`` is exit 2, one line, with the reason."""
    code, out, err = gpuscout_cli(["env", f"fits:{text}"], [CARD])
    assert (code, out) == (2, "")
    assert err == f"gpuscout: error: selector {f'fits:{text}'!r}: {reason(text)}\n"


def test_a_bare_number_reads_the_same_hint_everywhere(gpuscout_cli: CliRunner) -> None:
    """``24`` is refused by each, with the spellings it could mean."""
    hint = "'24': a size needs a unit, e.g. 24GiB or 24MiB; bytes are 24B"
    assert hint in gpuscout_cli(["list", "--cap", "all=24"], [CARD]).err
    assert hint in gpuscout_cli(["list", "--reserve", "all=24"], [CARD]).err
    assert hint in gpuscout_cli(["fit", "--layers", "24"], [CARD], builtins=False).err
    assert hint in gpuscout_cli(["env", "fits:24"], [CARD]).err


def test_bytes_are_written_with_b_everywhere(
    scout_with: Callable[..., Scout], gpuscout_cli: CliRunner
) -> None:
    """``4096B`` is read by ``fits:``, a cap and ``fit --layers`` alike."""
    card = CARD.evolve(free_memory=40 * GIB)
    assert scout_with([card]).select(["fits:4096B"]) == [card]
    assert Scout(cap={"all": "4096B"}, env={}).budgets.cap[0].size == 4096
    run = gpuscout_cli(["fit", "--layers", "4096B,4096B", "--json"], [card], builtins=False)
    assert run.code == 0, run.err
