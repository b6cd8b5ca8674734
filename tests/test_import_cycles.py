"""No import cycles between the package's modules, counting imports inside functions (a deferred import hides a
cycle, it does not remove it) and a package's import of every module of its folder (pcr_ray.registry)."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent / "pcr_ray"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    """ids of the nodes under `if TYPE_CHECKING:` (imports for annotations only, never run)."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", getattr(node.test, "attr", "")) == "TYPE_CHECKING":
            for child in node.body:
                skip |= {id(x) for x in ast.walk(child)}
    return skip


def import_graph() -> dict[str, set[str]]:
    """module -> the pcr_ray modules it imports (anywhere in the file); `from a.b import c` counts a.b, and a.b.c
    when c is a module; a package whose __init__ calls import_submodules imports each module of its folder."""
    paths = {_module_name(p): p for p in PKG.rglob("*.py") if "__pycache__" not in p.parts}
    graph: dict[str, set[str]] = {}
    for mod, path in paths.items():
        tree = ast.parse(path.read_text(), str(path))
        skip = _type_checking_nodes(tree)
        deps: set[str] = set()
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            if isinstance(node, ast.Import):
                deps |= {a.name for a in node.names if a.name in paths}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in paths:
                deps.add(node.module)
                deps |= {f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in paths}
        if path.name == "__init__.py" and "import_submodules(" in path.read_text():
            deps |= {m for m, p in paths.items() if p.parent == path.parent and p.name != "__init__.py"}
        deps.discard(mod)
        deps.discard("pcr_ray")
        graph[mod] = deps
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_checker_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_module_import_cycles() -> None:
    graph = import_graph()
    assert "pcr_ray.generators.enumerate" in graph["pcr_ray.generators"]  # the registries' imports are seen
    assert not cycles(graph), "modules that import each other (move what both need into a third):\n" + "\n".join(
        " <-> ".join(c) for c in cycles(graph))
