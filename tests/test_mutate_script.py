"""The mutation script's machinery, on a tiny fake repository (not a mutation run of gpuscout)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "mutate.py"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpuscout_mutate_script", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


mutate = _script()

RULE = textwrap.dedent('''\
    def fits(need, free):
        """True when ``need`` bytes fit in ``free``."""
        return need <= free
    ''')

TEST = textwrap.dedent("""\
    from fakescout.rule import fits

    def test_equal_sizes_fit():
        assert fits(4, 4)

    def test_larger_need_does_not_fit():
        assert not fits(5, 4)
    """)

MUTATIONS = textwrap.dedent("""\
    T = ("tests/test_rule.py",)
    MUTATIONS = [
        ("core/rule.py", "need <= free", "need < free", T, "equal sizes no longer fit"),
        ("core/rule.py", "need <= free", "free >= need", T, "the same comparison, turned round"),
        ("core/rule.py", "need > free", "need >= free", T, "a snippet that is not there"),
    ]
    """)


@pytest.fixture
def fake_repo(tmp_path: Path) -> Path:
    """A git repository with a package in core/, a test of it and a committed mutation list."""
    repo = tmp_path / "repo"
    (repo / "core").mkdir(parents=True)
    (repo / "tests").mkdir()
    (repo / "core" / "__init__.py").write_text("")
    (repo / "core" / "rule.py").write_text(RULE)
    (repo / "tests" / "test_rule.py").write_text(TEST)
    (tmp_path / "mutations.py").write_text(MUTATIONS)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", "-c", "commit.gpgsign=false"]
    subprocess.run([*git, "init", "-q"], cwd=repo, check=True)
    subprocess.run([*git, "add", "core", "tests"], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "fake"], cwd=repo, check=True)
    return repo


@pytest.fixture(autouse=True)
def _bare_pytest(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fake repository's pytest runs load no installed plugins (faster, and none is needed)."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")


def _main(repo: Path, *extra: str) -> int:
    return int(
        mutate.main(
            [
                "--repo",
                str(repo),
                "--mutations",
                str(repo.parent / "mutations.py"),
                "--package",
                "fakescout",
                "--timeout",
                "60",
                *extra,
            ]
        )
    )


def test_mutations_are_caught_survive_or_are_stale(
    fake_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bug the tests notice is caught, an equivalent rewrite survives, a missing snippet is stale."""
    out = fake_repo.parent / "report.json"
    assert _main(fake_repo, "--json", str(out)) == 0
    statuses = [(o["id"], o["status"]) for o in json.loads(out.read_text())["outcomes"]]
    assert statuses == [("rule:1", "caught"), ("rule:2", "survived"), ("rule:3", "stale")]
    assert "overall: 1/2 caught (50.0 %)" in capsys.readouterr().out


def test_the_repository_is_left_unmutated(fake_repo: Path) -> None:
    """Mutations are planted in a copy; the repository's module is never written."""
    _main(fake_repo)
    assert (fake_repo / "core" / "rule.py").read_text() == RULE


def test_fail_under_exits_one_below_the_figure(fake_repo: Path) -> None:
    """``--fail-under`` turns a figure below it into exit status 1."""
    assert _main(fake_repo, "--fail-under", "90") == 1


def test_worktree_copies_uncommitted_tests(fake_repo: Path) -> None:
    """With ``--worktree`` an uncommitted test runs, and can catch what the committed ones miss."""
    (fake_repo / "tests" / "test_rule.py").write_text(
        TEST
        + textwrap.dedent("""
        def test_need_is_compared_with_free():
            import inspect
            from fakescout import rule
            assert "need <= free" in inspect.getsource(rule)
        """)
    )
    out = fake_repo.parent / "report.json"
    _main(fake_repo, "--worktree", "--only", "rule:2", "--json", str(out))
    assert [o["status"] for o in json.loads(out.read_text())["outcomes"]] == ["caught"]


def test_failing_baseline_is_reported_not_counted(fake_repo: Path) -> None:
    """Mutations whose tests fail unmutated are marked "baseline" and left out of the figure."""
    (fake_repo / "tests" / "test_rule.py").write_text(TEST + "\ndef test_broken():\n    assert False\n")
    out = fake_repo.parent / "report.json"
    _main(fake_repo, "--worktree", "--only", "rule:1", "--json", str(out))
    report = json.loads(out.read_text())
    assert [o["status"] for o in report["outcomes"]] == ["baseline"]
    assert report["counted"] == 0


def test_the_project_s_mutations_name_their_tests_as_paths_that_exist() -> None:
    """Every mutation of scripts/mutations.py quotes its module once and names test files or
    globs that match something, so a run never stops on a malformed entry or a moved file."""
    repo = SCRIPT.parent.parent
    listed = mutate.load_mutations(repo / "scripts" / "mutations.py")
    assert len(listed) >= 100
    for key, m in listed:
        assert (repo / m.path).read_text().count(m.original) == 1, f"{key} is stale"
        for pattern in m.tests:
            assert any(repo.glob(pattern)), f"{key}: {pattern!r} matches no test file"


def test_a_mutation_whose_tests_are_not_strings_is_refused_by_name(tmp_path: Path) -> None:
    """A nested tuple among the tests (``(*PLAN)`` written as ``PLAN``) stops the script with
    the entry's index, not with a TypeError deep in a worker."""
    listing = tmp_path / "mutations.py"
    listing.write_text('MUTATIONS = [("core/x.py", "a", "b", ("tests/t.py", ("tests/u.py",)), "d")]\n')
    with pytest.raises(SystemExit, match=r"MUTATIONS\[0\] \('core/x.py'\).*must be a str"):
        mutate.load_mutations(listing)
