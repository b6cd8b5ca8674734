"""The layering rules of docs/development.md#layout, read from the source: which packages may import Ray or torch,
and that no module reaches another module's or object's private names (by import or by attribute)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from pcr_ray.bench.dry_run import imports_of

PKG = Path(__file__).resolve().parent.parent / "pcr_ray"

# folder or module (relative to pcr_ray/) -> top-level packages it must never import, anywhere in the file
FORBIDDEN: dict[str, set[str]] = {
    "core": {"ray", "torch", "transformers"},
    "negatives": {"ray", "torch", "transformers"},
    "grading.py": {"ray", "torch", "transformers"},
    "search": {"ray", "torch", "transformers"},
    "data": {"ray", "torch"},
    "prm": {"ray"},
    "generators": {"ray"},
    "sft": {"ray"},
    "baselines": {"ray", "torch"},
    "pipeline/records.py": {"ray"},
    "pipeline/search_batch.py": {"ray"},  # benchmarks/bench_one_backbone.py runs it where Ray is not installed
    "serve/app.py": {"ray"},
    "serve/models.py": {"ray", "torch"},
}
# the one module of a folder that is its Ray adapter
ALLOWED = {"data/ray_dataset.py", "sft/command.py"}


def _modules() -> list[Path]:
    return sorted(p for p in PKG.rglob("*.py") if "__pycache__" not in p.parts)


def _rules_for(rel: str) -> set[str]:
    banned: set[str] = set()
    for key, mods in FORBIDDEN.items():
        if rel == key or rel.startswith(key.rstrip("/") + "/"):
            banned |= mods
    return banned


def test_layers_import_only_what_they_may() -> None:
    bad = []
    for path in _modules():
        rel = path.relative_to(PKG).as_posix()
        banned = set() if rel in ALLOWED else _rules_for(rel)
        for line, mod, _ in imports_of(path):
            if mod.split(".")[0] in banned:
                bad.append(f"pcr_ray/{rel}:{line} imports {mod}")
    assert not bad, "layer rule broken (docs/development.md#layout):\n" + "\n".join(bad)


# Third-party private names the package must use, (file relative to pcr_ray/, name) -> why; nothing of pcr_ray's own
PRIVATE_ALLOWED: dict[tuple[str, str], str] = {
    ("core/units.py", "_units"): "pint: a parsed Unit's exponents, to refuse m**81 before pint builds it",
    ("core/units.py", "_is_multiplicative"): "pint: whether a unit has an offset (degC), which it exposes no other way",
    ("pipeline/actors.py", "_exit"): "os._exit: a fault-injection hook ends its worker at once, no cleanup",
    ("pipeline/evaluate_pipeline.py", "_exit"): "os._exit: the test hook that kills a search worker",
    ("prm/context_cache.py", "_version"): "torch: a tensor's in-place version counter, to tell a stale cached context",
    ("configs.py", "_get_node"): "omegaconf: a field's own node (node[key] returns a None-valued mapping as None, "
                                 "which cannot be opened to new keys)",
    ("configs.py", "_is_none"): "omegaconf: whether a node holds None (no public form in omegaconf 2.3)",
    ("prm/int8_rows.py", "_int_mm"): "torch._int_mm: the int8 matmul kernel, which has no public name",
    ("serve/deploy.py", "_get_global_client"): "ray.serve.context: the controller's client, to tell whether Serve runs",
    ("serve/deploy.py", "_private"): "ray.serve._private.constants: the controller's actor name and namespace, to wait "
                                     "until a stopped Serve's controller has exited",
}


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_uses(path: Path) -> list[tuple[int, str]]:
    """(line, what) of each private name a file reaches outside its own scope: `from m import _x`, a module path
    with a private part, and `obj._x` where obj is not `self` or `cls`."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.extend((node.lineno, a.name) for a in node.names if _private(a.name))
            out.extend((node.lineno, part) for part in node.module.split(".") if _private(part))
        elif isinstance(node, ast.Import):
            out.extend((node.lineno, part) for a in node.names for part in a.name.split(".") if _private(part))
        elif isinstance(node, ast.Attribute) and _private(node.attr):
            if not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                out.append((node.lineno, node.attr))
    return out


def test_no_private_names_cross_modules() -> None:
    bad, used = [], set()
    for path in _modules():
        rel = path.relative_to(PKG).as_posix()
        for line, name in private_uses(path):
            if (rel, name) in PRIVATE_ALLOWED:
                used.add((rel, name))
            else:
                bad.append(f"pcr_ray/{rel}:{line} uses {name}")
    assert not bad, "private names used across modules or objects (make them public or move them):\n" + "\n".join(bad)
    assert used == set(PRIVATE_ALLOWED), f"PRIVATE_ALLOWED lists names no longer used: {set(PRIVATE_ALLOWED) - used}"


def test_the_private_name_check_sees_each_form(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text("from pcr_ray.a import _b, c\nimport pcr_ray._d\nx = other._e\ny = self._f + cls._g\n"
                   "z = self.gen._h()\nw = obj.__class__\n")
    assert sorted(private_uses(src)) == [(1, "_b"), (2, "_d"), (3, "_e"), (5, "_h")]


@pytest.mark.parametrize("rule", sorted(FORBIDDEN))
def test_every_rule_names_a_real_place(rule: str) -> None:
    assert (PKG / rule).exists(), f"FORBIDDEN names pcr_ray/{rule}, which does not exist"
