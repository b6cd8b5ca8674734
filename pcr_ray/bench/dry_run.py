"""A benchmark's `--dry-run`: every import it makes (in functions too) resolves, its plan is printed, nothing runs."""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

OK = "dry run ok"  # the line a dry run that found nothing broken ends with (tests/test_benchmarks.py reads it)


def add_dry_run(ap: argparse.ArgumentParser) -> None:
    """The `--dry-run` flag, worded the same in every benchmark."""
    ap.add_argument("--dry-run", action="store_true", help="parse the arguments, compose the config and check that "
                    "every import resolves; print the plan, build no model, run nothing")


def imports_of(path: Path) -> list[tuple[int, str, list[str]]]:
    """(line, module, names taken from it) of every absolute import in a file, nested ones included."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.extend((node.lineno, a.name, []) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append((node.lineno, node.module, [a.name for a in node.names if a.name != "*"]))
    return out


def _own(module: str, here: Path) -> bool:
    """Whether `module` is this project's: pcr_ray, or a module beside the script (benchmarks/_machine.py)."""
    top = module.split(".")[0]
    return top == "pcr_ray" or (here / f"{top}.py").exists()


def broken_imports(path: str | Path) -> tuple[list[str], list[str]]:
    """(broken, absent) imports of a script: the project's modules and names that do not resolve (a bug), and the
    third-party packages not installed in this environment (optional ones: llama.cpp, vLLM, atheris)."""
    path = Path(path).resolve()
    broken, absent = [], set()
    for line, module, names in imports_of(path):
        where = f"{path.name}:{line}"
        if not _own(module, path.parent):
            if importlib.util.find_spec(module.split(".")[0]) is None:
                absent.add(module.split(".")[0])
            continue
        try:
            mod = importlib.import_module(module)
        except Exception as exc:  # noqa: BLE001 - any failure to import is what the dry run reports
            broken.append(f"{where}: import {module}: {type(exc).__name__}: {exc}")
            continue
        for name in names:
            if hasattr(mod, name):
                continue
            try:
                importlib.import_module(f"{module}.{name}")
            except ImportError:
                broken.append(f"{where}: {module} has no {name}")
    return broken, sorted(absent)


def dry_run(script: str | Path, plan: Mapping[str, Any] | None = None, also: Sequence[str | Path] = ()) -> int:
    """What `--dry-run` does once a script has parsed its arguments (and composed its config): check the imports
    of the script and of the modules in `also` (the package module it runs), print the plan; 0 when nothing is
    broken, else 1 with each broken import named."""
    broken, absent = [], []
    for path in (script, *also):
        b, a = broken_imports(path)
        broken += b
        absent += a
    print(json.dumps({"script": Path(script).name, "plan": dict(plan or {}), "not_installed_here": sorted(set(absent))},
                     indent=1, default=str))
    if broken:
        print("broken imports:\n  " + "\n  ".join(broken), file=sys.stderr)
        return 1
    print(OK)
    return 0
