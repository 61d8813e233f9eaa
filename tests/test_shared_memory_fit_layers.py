"""``gpuscout fit --layers`` on a unified-memory machine: what the GPU holds and what stays on
the CPU come out of one pool (docs/shared-memory.md), on darwin too, where the reference planner
leaves the CPU's share unchecked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuscout.cli import main

M3_MAX = str(Path(__file__).parent / "machines" / "m3_max_macbook")
H200X8 = str(Path(__file__).parent / "machines" / "h200x8")


def _fit(capsys: pytest.CaptureFixture[str], machine: str, layers: str) -> tuple[int, dict[str, object]]:
    capsys.readouterr()
    code = main(["--replay", machine, "fit", "--layers", layers, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_layers_over_the_shared_pool_of_a_mac_do_not_fit(capsys: pytest.CaptureFixture[str]) -> None:
    """M3 Max, 48 GiB working set, 28 GiB free system memory: 40 GiB on Metal and 10.5 GiB on the
    CPU are 50.5 GiB from a 48 GiB pool (28 GiB free plus the working set's 20 GiB beyond it)."""
    code, document = _fit(capsys, M3_MAX, "10GiB,10GiB,10GiB,10GiB,10GiB,500MiB")
    assert (code, document["fits"]) == (1, False)
    assert any("more than the system memory they share (48.0 GiB)" in n for n in document["notes"])  # type: ignore[attr-defined]


def test_layers_within_the_shared_pool_fit_and_say_they_were_counted_together(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """20.5 GiB in all fits the same Mac, with the note that both shares were counted as one."""
    code, document = _fit(capsys, M3_MAX, "10GiB,10GiB,500MiB")
    assert (code, document["fits"]) == (0, True)
    assert any("counted together" in n for n in document["notes"])  # type: ignore[attr-defined]


def test_discrete_cards_get_no_shared_pool_note(capsys: pytest.CaptureFixture[str]) -> None:
    """h200x8's cards have memory of their own: no shared-memory note, the verdict as before."""
    code, document = _fit(capsys, H200X8, "10GiB,10GiB,500MiB")
    assert (code, document["fits"]) == (0, True)
    assert not any("shared" in n for n in document["notes"])  # type: ignore[attr-defined]
