"""The shape of the installed package (docs/architecture.md): each subpackage imports only the
ones below it (``ALLOWED``), no import cycle among modules or subpackages, the package root
never imported by a core module, at most 15 modules at the root, none over 450 lines, no
``_private`` name taken from another subpackage, every module public by the README's API
section or private by its name, and built-in plugins written as a third party would write them
(importing only ``gpuscout``, ``gpuscout.plugin`` and their own subpackage).

The graph is read from the installed package's source with ``ast``. Every import is an edge:
one inside a function (it runs as surely, only later) and one under ``if TYPE_CHECKING:`` (a
type checker follows it, and a circle there is a circle in the design) alike.
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


def _imports(module: str, path: Path) -> set[str]:
    """The gpuscout modules ``module`` imports, resolved to modules where a name is one."""
    tree = ast.parse(path.read_text(), str(path))
    is_package = path.name == "__init__.py"
    out: set[str] = set()

    def visit(node: ast.AST) -> None:
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


# -- the house: subpackages by job (docs/architecture.md) -----------------------------------------

#: What each part of the package may import, besides itself: the layers of docs/architecture.md,
#: written down. A part is a subpackage (``_records``, ``cli``, ``plugins.cuda``, ...) or a module
#: at the root (``scout``, ``errors``, ...). ``gpuscout`` is the package root, whose lazy names
#: reach everything and which nothing in the package imports.
BASE = {"errors", "sizes", "log", "version", "_suggest"}
ALLOWED: dict[str, set[str]] = {
    "errors": set(),
    "sizes": {"errors"},
    "log": set(),
    "version": set(),
    "_suggest": set(),
    "_records": BASE,
    "_machine": BASE | {"_records"},
    "_host": BASE | {"_records", "_machine"},
    "plugin": BASE | {"_records", "_machine", "_host"},
    "_selection": BASE | {"_records", "_machine", "_host"},
    "runner": BASE | {"_records", "_machine", "_host"},
    "_discovery": BASE | {"_records", "_machine", "_host", "_selection", "runner"},
    "_layout": BASE | {"_records"},
    "load": BASE | {"_records", "_layout"},
    "_fit": BASE | {"_records", "_machine", "_layout", "_discovery"},
    "_recording": BASE | {"_records", "_machine"},
    "_scout_models": BASE | {"_records", "_discovery", "_layout", "_fit", "load"},
    "scout": BASE
    | {"_records", "_machine", "_host", "_selection", "_discovery", "_fit", "_recording", "_scout_models"},
    "cluster": BASE | {"_records", "_machine", "_host", "scout"},
    "cli": BASE
    | {
        "_records",
        "_machine",
        "_host",
        "_selection",
        "_discovery",
        "_layout",
        "_fit",
        "_recording",
        "runner",
        "cluster",
        "scout",
    },
    "testing": BASE | {"_records", "_machine", "_host", "plugin", "scout", "cli"},
    "__main__": {"cli"},
    "gpuscout": BASE | {"_records", "_machine", "_host", "_discovery", "_fit", "scout", "load"},
    **{f"plugins.{p}": {"plugin"} for p in ("cuda", "rocm", "metal", "vulkan")},
    "plugins": set(),
}

#: The public modules: the README's API section lists each, with its names. Every other module
#: is private, by a ``_`` at the start of its own name or of a package above it, or as a module
#: inside a built-in plugin (whose only public name is the plugin, loaded by name).
PUBLIC = {
    "gpuscout",
    "gpuscout.__main__",
    "gpuscout.plugin",
    "gpuscout.testing",
    "gpuscout.scout",
    "gpuscout.errors",
    "gpuscout.sizes",
    "gpuscout.log",
    "gpuscout.version",
    "gpuscout.load",
    "gpuscout.cli",
    "gpuscout.runner",
    "gpuscout.cluster",
    "gpuscout.cluster.ray",
    "gpuscout.cluster.inventory",
    "gpuscout.cluster.nfd",
    "gpuscout.plugins",
    "gpuscout.plugins.cuda",
    "gpuscout.plugins.rocm",
    "gpuscout.plugins.metal",
    "gpuscout.plugins.vulkan",
}


def _part(module: str) -> str:
    """The part of the package ``module`` belongs to (a key of ``ALLOWED``)."""
    parts = module.split(".")[1:]
    if not parts:
        return "gpuscout"
    if parts[0] == "plugins":
        return ".".join(parts[:2])
    return parts[0]


def _all_imports(path: Path) -> list[tuple[int, str, str]]:
    """``(line, module, name)`` for every ``from gpuscout... import name`` in ``path``."""
    out: list[tuple[int, str, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").startswith("gpuscout"):
            out.extend((node.lineno, node.module or "", alias.name) for alias in node.names)
    return out


def test_every_part_of_the_package_is_written_down() -> None:
    """Each subpackage and root module has its allowed imports in ``ALLOWED``: a new one is
    placed in the layers on purpose, not by accident."""
    assert {_part(m) for m in MODULES} <= ALLOWED.keys()


@pytest.mark.parametrize("module", sorted(MODULES))
def test_a_module_imports_only_the_layers_below_its_own(module: str) -> None:
    """A module imports its own part and the parts ``ALLOWED`` names for it (lazy and
    TYPE_CHECKING imports included)."""
    part = _part(module)
    foreign = sorted(m for m in GRAPH[module] if _part(m) != part and _part(m) not in ALLOWED[part])
    assert foreign == [], f"{module} ({part}) imports {foreign}: not below it in ALLOWED"


def test_the_layers_have_no_circle() -> None:
    """``ALLOWED`` itself is a hierarchy: no part may reach back to itself through others."""

    def reach(part: str, seen: frozenset[str]) -> None:
        for below in ALLOWED[part]:
            assert below not in seen, f"{below} reaches back to itself through {sorted(seen)}"
            reach(below, seen | {below})

    for part in ALLOWED:
        reach(part, frozenset({part}))


def test_no_import_cycles_at_all() -> None:
    """With lazy and TYPE_CHECKING imports counted, no module reaches back to itself (the
    package root aside, which is checked below)."""
    assert _cycles(set(MODULES) - {"gpuscout"}) == []


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_private_name_is_taken_from_another_part(module: str) -> None:
    """A ``_name`` is private to its part: another part never imports it."""
    part = _part(module)
    taken = [
        f"line {line}: {source}.{name}"
        for line, source, name in _all_imports(MODULES[module])
        if name.startswith("_") and f"{source}.{name}" not in MODULES and _part(source) != part
    ]
    assert taken == [], f"{module} takes private names of other parts: {taken}"


def test_the_root_holds_only_the_public_face() -> None:
    """At most 15 modules at the package root (packages not counted), and each one public or
    private by its name."""
    root = sorted(m for m, p in MODULES.items() if m.count(".") == 1 and p.name != "__init__.py")
    assert len(root) + 1 <= 15, root  # + the root's own __init__
    assert all(m in PUBLIC or m.split(".")[-1].startswith("_") for m in root), root


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_module_is_over_450_lines(module: str) -> None:
    """A module a reader can hold in their head: at most 450 lines."""
    lines = MODULES[module].read_text().count("\n")
    assert lines <= 450, f"{module} has {lines} lines"


def test_every_module_is_public_or_private_by_its_name() -> None:
    """A module not listed in the README's API section (``PUBLIC``) is private by its path."""
    unclear = sorted(
        m
        for m in MODULES
        if m not in PUBLIC
        and not any(p.startswith("_") for p in m.split(".")[1:])
        and not m.startswith("gpuscout.plugins.")
    )
    assert unclear == []


def test_the_readme_lists_every_public_module() -> None:
    """The README's API section names each public module once (the contract tests check the
    names inside them)."""
    readme = (Path(__file__).parent.parent / "README.md").read_text()
    section = readme.split("## Python API", 1)[1].split("\n## ", 1)[0]
    missing = sorted(m for m in PUBLIC if f"`{m}`" not in section)
    assert missing == []
