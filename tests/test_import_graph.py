"""The package's import graph has no cycle (a cycle is how modules start reaching into
each other's internals). Imports inside functions count too; imports under
``if TYPE_CHECKING:`` do not, since they never run.

Importing ``depthprune.a.b`` runs ``depthprune.a``'s ``__init__`` first, so an importer also depends on every
ancestor package of what it imports: the graph has those edges too. Above the modules, the rooms (the top-level
packages) form no cycle either, and the rules of docs/architecture.md hold: no room imports the CLI, and
``verify`` imports neither ``grid`` nor ``report``."""

from __future__ import annotations

import ast
from pathlib import Path

import depthprune

ROOT = Path(depthprune.__file__).resolve().parent


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imports_of(path: Path, modules: set[str]) -> set[str]:
    """Modules of the package that ``path`` imports (at any depth, TYPE_CHECKING excluded)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in modules else base)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text()))
    return {m for m in found if m in modules and m != name}


def ancestors(module: str) -> set[str]:
    """The packages below the root that importing ``module`` initialises first (``a.b.c`` -> ``a.b``; not ``a``)."""
    parts = module.split(".")
    return {".".join(parts[:i]) for i in range(2, len(parts))}


def with_ancestors(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """``graph`` with an edge from each importer to each ancestor package of what it imports, except its own."""
    out = {}
    for node, deps in graph.items():
        own = ancestors(node) | {node}
        out[node] = deps | {a for d in deps for a in ancestors(d) if a not in own and a in graph}
    return out


def import_graph() -> dict[str, set[str]]:
    paths = sorted(ROOT.rglob("*.py"))
    modules = {module_name(p) for p in paths}
    return with_ancestors({module_name(p): imports_of(p, modules) for p in paths})


def room(module: str) -> str:
    """The top-level package (or module) of the package that ``module`` is in."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def room_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for node, deps in graph.items():
        out.setdefault(room(node), set()).update(room(d) for d in deps if room(d) != room(node))
    return out


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a list of modules (first == last), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def dfs(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                cycle = dfs(nxt)
                if cycle:
                    return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = dfs(node)
            if cycle:
                return cycle
    return None


def test_the_cycle_finder_finds_a_planted_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a"}}) is None


def test_the_graph_sees_function_level_and_relative_imports(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import depthprune.cli\n"
                   "def f():\n    from depthprune import scoring\n    from . import models\n")
    modules = {"depthprune.scoring", "depthprune.models", "depthprune.cli", "depthprune"}
    global ROOT
    old, ROOT = ROOT, tmp_path.parent
    try:
        got = imports_of(src, modules)
    finally:
        ROOT = old
    assert "depthprune.scoring" in got and "depthprune.cli" not in got


def test_an_import_reaches_the_packages_above_the_module() -> None:
    """The circle the flat layout hid (evaluate -> lm_adapter -> objectives.base, whose package's __init__
    imports profiles, which imported evaluate) is a cycle only through objectives/__init__: the ancestor edge."""
    flat = {"d.evaluate": {"d.lm_adapter"}, "d.lm_adapter": {"d.objectives.base"}, "d.objectives.base": set(),
            "d.objectives": {"d.objectives.base", "d.profiles"}, "d.profiles": {"d.evaluate"}}
    assert find_cycle(flat) is None
    assert find_cycle(with_ancestors(flat)) == ["d.evaluate", "d.lm_adapter", "d.objectives", "d.profiles", "d.evaluate"]
    assert with_ancestors({"d.a.b": {"d.a.c"}, "d.a.c": set(), "d.a": set()})["d.a.b"] == {"d.a.c"}  # not its own


def test_the_package_import_graph_has_no_cycle() -> None:
    graph = import_graph()
    assert len(graph) > 20
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_the_rooms_import_each_other_without_a_cycle() -> None:
    rooms = room_graph(import_graph())
    cycle = find_cycle(rooms)
    assert cycle is None, "rooms in a cycle: " + " -> ".join(cycle)


def test_no_room_imports_the_cli_and_verify_imports_neither_grid_nor_report() -> None:
    graph = import_graph()
    into_cli = sorted(f"{m} -> {d}" for m, deps in graph.items() if room(m) != "cli"
                      for d in deps if room(d) == "cli")
    assert not into_cli, "the CLI maps the rooms' errors to exit codes; they do not import it: " + "; ".join(into_cli)
    verify_up = sorted(f"{m} -> {d}" for m, deps in graph.items() if room(m) == "verify"
                       for d in deps if room(d) in ("grid", "report"))
    assert not verify_up, "grid and report call verify, not the other way: " + "; ".join(verify_up)
