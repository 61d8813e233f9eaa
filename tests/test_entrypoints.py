"""Entry-point discovery without importlib.metadata, checked against it."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import pytest

from gpuscout._host.entrypoints import entry_points, parse_entry_points


def test_an_ini_group_is_read_line_by_line() -> None:
    """Only the named section's ``name = value`` lines are returned, comments skipped."""
    text = (
        "[console_scripts]\nx = a:b\n\n[gpuscout]\n# a comment\nacme = acme_plugin\n"
        " other=pkg.mod:obj \n[gpuscout.extra]\nno = no\n"
    )
    assert parse_entry_points(text, "gpuscout") == [("acme", "acme_plugin"), ("other", "pkg.mod:obj")]


@pytest.mark.parametrize("group", ["console_scripts", "pytest11", "gpuscout"])
def test_the_scan_agrees_with_importlib_metadata(group: str) -> None:
    """For this environment's distributions the scan finds what importlib.metadata finds."""
    ours = sorted((e.name, e.value) for e in entry_points(group))
    theirs = sorted((e.name, e.value) for e in importlib.metadata.entry_points(group=group))
    assert ours == theirs


def write_dist(site: Path, folder: str, name: str, version: str, eps: str) -> None:
    dist = site / folder
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\nName: not-a-header\n"
    )
    (dist / "entry_points.txt").write_text(eps)


def test_the_first_distribution_on_the_path_wins(tmp_path: Path) -> None:
    """A distribution installed in two path folders counts once, from the first."""
    write_dist(tmp_path / "a", "acme_gpu-2.0.dist-info", "acme-gpu", "2.0", "[gpuscout]\nacme = x\n")
    write_dist(tmp_path / "b", "acme_gpu-1.0.dist-info", "acme-gpu", "1.0", "[gpuscout]\nacme = y\n")
    found = entry_points("gpuscout", [str(tmp_path / "a"), str(tmp_path / "b")])
    assert [(e.name, e.value, e.distribution, e.version) for e in found] == [("acme", "x", "acme-gpu", "2.0")]


def test_missing_folders_and_files_are_skipped(tmp_path: Path) -> None:
    """Absent path entries and dist-info folders without entry points give nothing."""
    (tmp_path / "bare-1.0.dist-info").mkdir()
    assert entry_points("gpuscout", [str(tmp_path / "missing"), str(tmp_path)]) == []


def test_an_entry_point_loads_a_module_attribute() -> None:
    """load() imports the module and follows the attribute path."""
    from gpuscout._host.entrypoints import EntryPoint

    assert EntryPoint("j", "json:dumps").load()([1]) == "[1]"
