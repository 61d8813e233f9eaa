"""The mutation script judges a mutant by behavioural tests only: the mutation list's own
consistency test (tests/test_mutate_script.py, which fails whenever a listed snippet is missing
from its module) never counts as a catch (issue 35)."""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path

import pytest

from tests.test_mutate_script import RULE, TEST, mutate

# Fails for any mutant of the listed line, as the real one does for any listed snippet.
CONSISTENCY = textwrap.dedent("""\
    from pathlib import Path

    def test_the_listed_snippet_is_in_its_module():
        assert "need <= free" in (Path(__file__).parent.parent / "core" / "rule.py").read_text()
    """)

MUTATIONS = textwrap.dedent("""\
    MUTATIONS = [
        ("core/rule.py", "need <= free", "free >= need", ("tests",), "equivalent; a folder"),
        ("core/rule.py", "need <= free", "free >= need",
         ("tests/test_mutate_script.py", "tests/test_rule.py"), "equivalent; named"),
        ("core/rule.py", "need <= free", "need < free", ("tests/test_mutate_script.py",), "only it"),
        ("core/rule.py", "need <= free", "need < free", ("tests",), "a real bug; a folder"),
    ]
    """)


@pytest.fixture
def fake_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A git repository with a rule, its behavioural test and a consistency test of the list."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    repo = tmp_path / "repo"
    (repo / "core").mkdir(parents=True)
    (repo / "tests").mkdir()
    (repo / "core" / "__init__.py").write_text("")
    (repo / "core" / "rule.py").write_text(RULE)
    (repo / "tests" / "test_rule.py").write_text(TEST)
    (repo / "tests" / "test_mutate_script.py").write_text(CONSISTENCY)
    (tmp_path / "mutations.py").write_text(MUTATIONS)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", "-c", "commit.gpgsign=false"]
    subprocess.run([*git, "init", "-q"], cwd=repo, check=True)
    subprocess.run([*git, "add", "core", "tests"], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "fake"], cwd=repo, check=True)
    return repo


def test_the_lists_consistency_test_never_catches_a_mutant(fake_repo: Path) -> None:
    """An equivalent rewrite of a listed line survives whether the consistency test is named or
    sits in a named folder; a mutation whose only test it is runs nothing and is not counted
    ("baseline"); a real bug is still caught by the behavioural test."""
    out = fake_repo.parent / "report.json"
    mutate.main(
        [
            "--repo",
            str(fake_repo),
            "--mutations",
            str(fake_repo.parent / "mutations.py"),
            "--package",
            "fakescout",
            "--timeout",
            "60",
            "--json",
            str(out),
        ]
    )
    report = json.loads(out.read_text())
    assert [o["status"] for o in report["outcomes"]] == ["survived", "survived", "baseline", "caught"]
    assert (report["caught"], report["counted"]) == (1, 3)


def test_the_consistency_test_the_script_leaves_out_is_the_projects() -> None:
    """The name the script leaves out is the project's consistency test of scripts/mutations.py."""
    repo = Path(__file__).resolve().parent.parent
    assert mutate.CONSISTENCY_TESTS == ("tests/test_mutate_script.py",)
    assert all((repo / name).is_file() for name in mutate.CONSISTENCY_TESTS)
