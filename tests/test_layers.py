"""The layering rules of DESIGN part 3, read from the source: which packages may import Ray or torch, and
that no module imports another module's private names."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

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
    "serve/app.py": {"ray"},
    "serve/models.py": {"ray", "torch"},
}
# the one module of a folder that is its Ray adapter
ALLOWED = {"data/ray_dataset.py", "sft/command.py"}


def _modules() -> list[Path]:
    return sorted(p for p in PKG.rglob("*.py") if "__pycache__" not in p.parts)


def _imports(path: Path) -> list[tuple[int, str, list[str]]]:
    """(line, module, imported names) of every import statement in a file, nested ones included."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.extend((node.lineno, a.name, []) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append((node.lineno, node.module, [a.name for a in node.names]))
    return out


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
        for line, mod, _ in _imports(path):
            if mod.split(".")[0] in banned:
                bad.append(f"pcr_ray/{rel}:{line} imports {mod}")
    assert not bad, "layer rule broken (DESIGN part 3):\n" + "\n".join(bad)


def test_no_private_names_cross_modules() -> None:
    bad = []
    for path in _modules():
        rel = path.relative_to(PKG).as_posix()
        for line, mod, names in _imports(path):
            if not mod.startswith("pcr_ray"):
                continue
            private = [n for n in names if n.startswith("_") and not n.startswith("__")]
            private += [part for part in mod.split(".") if part.startswith("_") and not part.startswith("__")]
            if private:
                bad.append(f"pcr_ray/{rel}:{line} imports {', '.join(private)} from {mod}")
    assert not bad, "private names used across modules (make them public or move them):\n" + "\n".join(bad)


@pytest.mark.parametrize("rule", sorted(FORBIDDEN))
def test_every_rule_names_a_real_place(rule: str) -> None:
    assert (PKG / rule).exists(), f"FORBIDDEN names pcr_ray/{rule}, which does not exist"
