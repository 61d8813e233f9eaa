"""Packaging: the import names, the command and the module entry point."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import gpuscout

REPO = Path(__file__).resolve().parent.parent


def _python(code: str, cwd: Path | str = "/") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, timeout=60)


@pytest.mark.parametrize("cwd", ["/", REPO], ids=["elsewhere", "repository root"])
@pytest.mark.parametrize("name", ["core", "plugins", "plugins.cuda"])
def test_the_source_folders_are_not_importable_top_level_names(name: str, cwd: Path) -> None:
    """`import core` / `import plugins` fail, even from the repository root."""
    result = _python(f"import {name}", cwd=cwd)
    assert result.returncode != 0
    assert "No module named" in result.stderr or "is not importable" in result.stderr


def test_every_builtin_plugin_imports_under_gpuscout() -> None:
    """Each vendor folder imports as gpuscout.plugins.<vendor>."""
    result = _python(
        "import gpuscout.plugins.cuda, gpuscout.plugins.rocm, "
        "gpuscout.plugins.metal, gpuscout.plugins.vulkan; print('ok')"
    )
    assert result.stdout.strip() == "ok", result.stderr


def test_python_dash_m_prints_the_version() -> None:
    """`python -m gpuscout --version` prints the package version."""
    result = subprocess.run(
        [sys.executable, "-m", "gpuscout", "--version"], capture_output=True, text=True, timeout=60
    )
    assert result.stdout.strip() == f"gpuscout {gpuscout.__version__}"


def test_package_ships_py_typed() -> None:
    """The package is marked as typed."""
    from importlib.resources import files

    assert files("gpuscout").joinpath("py.typed").is_file()


def test_import_loads_no_vendor_sdk_rich_or_http() -> None:
    """`import gpuscout` pulls in no vendor SDK, no rich, no HTTP code, no structlog, no cattrs."""
    result = _python(
        "import sys, gpuscout\n"
        "bad = [m for m in ('pynvml', 'amdsmi', 'Metal', 'rich', 'structlog', 'http.client', 'http.server',"
        " 'urllib.request', 'gpuscout.plugins.cuda', 'cattrs') if m in sys.modules]\n"
        "print(bad)"
    )
    assert result.stdout.strip() == "[]", result.stderr


def _loaded_after_cli(args: list[str], modules: tuple[str, ...]) -> list[str]:
    """Which of ``modules`` a fresh interpreter has loaded after ``gpuscout ARGS``."""
    result = _python(
        "import sys, io, contextlib\n"
        "from gpuscout.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    main({args!r})\n"
        f"print(' '.join(m for m in {modules!r} if m in sys.modules))"
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.split()


def test_a_quiet_json_listing_never_imports_rich_or_structlog() -> None:
    """`gpuscout list --json` with nothing to log loads neither rich nor structlog."""
    assert _loaded_after_cli(["list", "--json"], ("rich", "structlog", "pynvml", "amdsmi")) == []


def test_the_table_is_what_loads_rich() -> None:
    """Plain `gpuscout list` (the table) is where rich comes in."""
    assert _loaded_after_cli(["list", "--disable", "vulkan"], ("rich",)) == ["rich"]


def test_the_core_code_names_no_vendor() -> None:
    """No library name or vendor variable appears in core code (docstrings and comments aside)."""
    import ast
    from pathlib import Path

    vendor = ("CUDA", "ROCm", "Metal", "Vulkan", "VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL", "GGML_", "HSA_")
    core = Path(gpuscout.__file__).parent
    found = []
    for path in sorted(core.glob("*.py")):
        tree = ast.parse(path.read_text())
        docstrings = {
            id(n.body[0].value)
            for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and n.body
            and isinstance(n.body[0], ast.Expr)
            and isinstance(n.body[0].value, ast.Constant)
        }
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and id(node) not in docstrings
                and any(v == node.value or ("_" in v and v in node.value) for v in vendor)
            ):
                found.append(f"{path.name}:{node.lineno} {node.value!r}")
    assert found == []


def test_pyproject_lists_every_package_folder() -> None:
    """setuptools' ``packages.find`` names a package by its folder (``core.cli``), not by the
    import name the ``package-dir`` mapping gives it (``gpuscout.cli``), so pyproject.toml lists
    the packages by hand: the list is exactly the
    folders that hold an ``__init__.py``, so a new subpackage left out of it fails here, not in
    a wheel that lacks it."""
    import tomllib

    repo = Path(__file__).resolve().parent.parent
    listed = tomllib.loads((repo / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    found = set()
    for folder, name in (("core", "gpuscout"), ("plugins", "gpuscout.plugins")):
        for init in (repo / folder).rglob("__init__.py"):
            parts = init.parent.relative_to(repo / folder).parts
            found.add(".".join([name, *parts]))
    assert sorted(listed) == sorted(found)


def _quick_start_commands() -> list[str]:
    """The lines of each ```sh block in README.md's Quick start section."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Quick start\n", 1)[1].split("\n## ", 1)[0]
    return [block.split("\n", 1)[1].strip() for block in section.split("```sh")[1:]]


def test_the_quick_start_is_two_commands_install_and_list_then_test() -> None:
    """The Quick start shows two commands: one installs and runs `gpuscout list`, one the tests."""
    first, second = (command.split("```", 1)[0].strip() for command in _quick_start_commands())
    assert first.endswith(".venv/bin/gpuscout list") and "pip install" in first
    assert second.endswith(".venv/bin/pytest") and "'.[test]'" in second


def test_the_quick_start_install_gives_fit_its_gguf_extra() -> None:
    """The Quick start's first install names the `gguf` extra, which `fit MODEL.gguf` needs."""
    first = _quick_start_commands()[0].split("```", 1)[0]
    extras = first.split("pip install", 1)[1].split("&&", 1)[0]
    assert "gguf" in extras.split("[", 1)[1].split("]", 1)[0].split(",")


def test_ci_runs_the_readme_test_command_verbatim() -> None:
    """`.ci/run` ends with the Quick start's second command, as it is written there."""
    second = _quick_start_commands()[1].split("```", 1)[0].strip()
    lines = [line for line in (REPO / ".ci" / "run").read_text().splitlines() if line.strip()]
    assert lines[-1] == second
