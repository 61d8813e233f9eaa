"""The test suite's own style (STYLE.md, "Tests"): every test function pytest collects, in
tests/ and in examples/*/tests, carries a docstring stating the rule it checks.

The files are read with ``ast``, never imported: a test is a module-level ``test*`` function or a
``test*`` method of a ``Test*`` class, as pytest collects them by default.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def suite_files(repo: Path) -> Iterator[Path]:
    """Every ``test_*.py`` under tests/ and examples/*/tests, in a stable order."""
    yield from sorted(repo.glob("tests/**/test_*.py"))
    yield from sorted(repo.glob("examples/*/tests/**/test_*.py"))


def _tests(tree: ast.Module) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    functions = (ast.FunctionDef, ast.AsyncFunctionDef)
    for node in tree.body:
        if isinstance(node, functions) and node.name.startswith("test"):
            yield node
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            yield from (m for m in node.body if isinstance(m, functions) and m.name.startswith("test"))


def without_docstring(repo: Path) -> list[str]:
    """``path:line name`` of each test function in ``repo`` that has no docstring."""
    missing = []
    for path in suite_files(repo):
        tree = ast.parse(path.read_bytes(), filename=str(path))
        for node in _tests(tree):
            if not (ast.get_docstring(node) or "").strip():
                missing.append(f"{path.relative_to(repo)}:{node.lineno} {node.name}")
    return missing


def test_every_test_function_has_a_docstring() -> None:
    """Every test function in tests/ and examples/*/tests has a docstring stating its rule."""
    assert sum(1 for _ in suite_files(REPO)) > 100  # the walk sees the suite
    missing = without_docstring(REPO)
    assert missing == [], "tests without a docstring:\n" + "\n".join(missing)


def test_a_test_without_a_docstring_is_named_by_file_and_line(tmp_path: Path) -> None:
    """The check names each undocumented test, method or empty docstring by its file and line."""
    (tmp_path / "tests" / "cli").mkdir(parents=True)
    (tmp_path / "tests" / "cli" / "test_a.py").write_text(
        "def helper():\n    pass\n\n\n"
        "def test_documented():\n    '''It holds.'''\n\n\n"
        "def test_bare():\n    assert True\n\n\n"
        "async def test_async_bare():\n    pass\n\n\n"
        "def test_blank():\n    '''  '''\n\n\n"
        "class TestGroup:\n    def test_method(self):\n        pass\n\n"
        "    def helper(self):\n        pass\n\n\n"
        "class Other:\n    def test_not_collected(self):\n        pass\n"
    )
    (tmp_path / "examples" / "kit" / "tests").mkdir(parents=True)
    (tmp_path / "examples" / "kit" / "tests" / "test_b.py").write_text("def test_x():\n    pass\n")
    (tmp_path / "tests" / "helpers.py").write_text("def test_not_a_test_file():\n    pass\n")
    assert without_docstring(tmp_path) == [
        "tests/cli/test_a.py:9 test_bare",
        "tests/cli/test_a.py:13 test_async_bare",
        "tests/cli/test_a.py:17 test_blank",
        "tests/cli/test_a.py:22 test_method",
        "examples/kit/tests/test_b.py:1 test_x",
    ]
