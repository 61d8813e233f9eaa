"""The shape of the installed package: no import cycles among the core's modules, the package
root never imported by a core module, and built-in plugins written as a third party would write
them (importing only ``gpuscout``, ``gpuscout.plugin`` and their own subpackage).

The graph is read from the installed package's source with ``ast``: imports inside functions
count (they run as surely, only later); imports under ``if TYPE_CHECKING:`` do not.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

import gpuscout


def _modules() -> dict[str, Path]:
    """Every module of the installed package, by dotted name, with its source file."""
    base = Path(gpuscout.__file__).resolve().parent
    found: dict[str, Path] = {}
    for path in sorted(base.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        parts = list(path.relative_to(base).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(["gpuscout", *parts])] = path
    plugins = importlib.util.find_spec("gpuscout.plugins")
    assert plugins is not None and plugins.submodule_search_locations
    for location in plugins.submodule_search_locations:
        root = Path(location).resolve()
        for path in sorted(root.rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(["gpuscout", "plugins", *parts])] = path
    return found


MODULES = _modules()


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(module: str, path: Path) -> set[str]:
    """The gpuscout modules ``module`` imports, resolved to modules where a name is one."""
    tree = ast.parse(path.read_text(), str(path))
    is_package = path.name == "__init__.py"
    out: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for statement in node.orelse:
                visit(statement)
            return
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                here = module.split(".") if is_package else module.split(".")[:-1]
                base = ".".join(here[: len(here) - node.level + 1])
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                out.add(sub if sub in MODULES else target)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return {m for m in out if m == "gpuscout" or m.startswith("gpuscout.")}


GRAPH = {m: _imports(m, p) for m, p in MODULES.items()}
CORE = {m for m in MODULES if not m.startswith("gpuscout.plugins")}


def _cycles(nodes: set[str]) -> list[list[str]]:
    """Strongly connected components of more than one module (or a module importing itself)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(GRAPH[v] & nodes):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in GRAPH[v]:
                found.append(sorted(component))

    for v in sorted(nodes):
        if v not in index:
            strong(v)
    return found


def test_the_graph_sees_the_whole_package() -> None:
    """A sanity check that the walk finds what the cycle test relies on."""
    assert {
        "gpuscout.scout",
        "gpuscout._host.calls",
        "gpuscout.plugin",
        "gpuscout.plugins.cuda",
        "gpuscout.plugins.rocm.sysfs",
    } <= MODULES.keys()
    assert "gpuscout.plugin" in GRAPH["gpuscout.plugins.cuda"]
    assert "gpuscout._host.hookspecs" in GRAPH["gpuscout._host.calls"]


def test_no_import_cycles_among_core_modules() -> None:
    """The core's modules, the package root aside, import each other without cycles."""
    # The package root re-exports the core, so any edge into it would be a cycle: those are
    # checked by the next test; here the root is left out so the rest can be judged.
    assert _cycles(CORE - {"gpuscout"}) == []


@pytest.mark.parametrize("module", sorted(CORE - {"gpuscout"}))
def test_a_core_module_never_imports_the_package_root(module: str) -> None:
    """No core module imports the package root gpuscout."""
    assert "gpuscout" not in GRAPH[module], f"{module} imports the package root 'gpuscout'"


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m.startswith("gpuscout.plugins.")))
def test_built_in_plugins_reach_only_the_public_surface(module: str) -> None:
    """A built-in plugin imports only gpuscout, gpuscout.plugin and its own subpackage."""
    own = ".".join(module.split(".")[:3])
    allowed = {"gpuscout", "gpuscout.plugin"}
    foreign = sorted(
        m for m in GRAPH[module] if m not in allowed and m != own and not m.startswith(own + ".")
    )
    assert foreign == [], f"{module} imports internals a third party cannot rely on: {foreign}"


def test_no_import_cycles_inside_a_built_in_plugin() -> None:
    """The modules of the built-in plugins import each other without cycles."""
    assert _cycles({m for m in MODULES if m.startswith("gpuscout.plugins")}) == []


def test_importing_the_package_loads_nothing_until_a_name_is_used() -> None:
    """``import gpuscout`` (paid by the pytest kit in every project, and by every submodule)
    loads neither pluggy nor attrs; each exported name still resolves to what it was."""
    import subprocess
    import sys

    code = (
        "import sys, gpuscout; print(sorted(m for m in ('pluggy', 'attr', 'cattrs', "
        "'structlog', 'gpuscout.scout') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    import gpuscout._discovery.ranking  # a submodule loaded first must not shadow a lazy name

    for name in gpuscout.__all__:
        assert getattr(gpuscout, name) is not None, name
    assert callable(gpuscout.rank) and gpuscout.rank([]) == []
    assert set(gpuscout.__all__) <= set(dir(gpuscout))
    assert not any(m.rsplit(".", 1)[-1] in gpuscout.__all__ for m in MODULES), (
        "a submodule named like an exported name would shadow it once imported"
    )
