"""Every benchmark script runs: `--help` and `--dry-run` (arguments, config, every import it makes), and every
committed result names the command that made it, with a script and flags that exist."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path

import pytest

from pcr_ray.bench.dry_run import OK, broken_imports
from pcr_ray.cli import COMMANDS

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "benchmarks"
SCRIPTS = sorted(p.name for p in BENCH.glob("*.py") if 'if __name__ == "__main__"' in p.read_text())
# arguments a script cannot go without, given to its dry run
REQUIRED = {"bench_answer_vote.py": ["run_a", "run_b"], "bench_sft.py": ["generate"],
            "bench_prm_ensemble.py": ["--checkpoints", "ck_a", "ck_b"]}
# the dry runs that also exercise their options: the fine-tune recipe, a GPU's overrides, an evaluate override
EXTRA = {"bench_one_backbone.py": ["--train", "tiny_gpu", "--model", "/nonexistent/sft", "--device", "cuda",
                                   "--batch-sequences", "512", "grading.mode=scibench"]}
# scripts that must run where Ray is not installed: `import ray` fails in their runs
NO_RAY = {"bench_one_backbone.py"}
TIMEOUT_S = 600  # a hang guard: a dry run takes seconds
SEP = "=== dry run ==="
# Scripts run in a few interpreters (half the scripts each, and one with `import ray` failing for NO_RAY), each
# script as `python SCRIPT --help`, then as `python SCRIPT ... --dry-run`, one after another: the imports the
# scripts share (pcr_ray, torch) are paid once per interpreter, not once per script.
DRIVER = f"""
import json, os, runpy, sys
jobs, no_ray = json.loads(sys.argv[1]), sys.argv[2] == "1"
if no_ray:
    sys.modules["ray"] = None
for script, dry in jobs:
    sys.path.insert(0, os.path.dirname(script))
    for part, argv in (("help", [script, "--help"]), ("dry-run", [script, *dry, "--dry-run"])):
        sys.argv = argv
        try:
            runpy.run_path(script, run_name="__main__")
            code = 0
        except SystemExit as exc:
            code = exc.code or 0
        except BaseException as exc:  # a crash of one script is its failure, not the others'
            import traceback
            traceback.print_exc()
            code = f"{{type(exc).__name__}}"
        sys.stdout.flush()
        sys.stderr.flush()
        print("{SEP}", os.path.basename(script), part, code, flush=True)
        print("{SEP}", os.path.basename(script), part, code, file=sys.stderr, flush=True)
"""


def _run(names: list[str], no_ray: bool) -> dict[str, dict[str, tuple[int | str, str]]]:
    """{script: {'help': (exit status, stdout), 'dry-run': (...), 'stderr': (0, its stderr)}} of scripts run in one
    interpreter."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    jobs = [[str(BENCH / n), [*REQUIRED.get(n, []), *EXTRA.get(n, [])]] for n in names]
    res = subprocess.run([sys.executable, "-c", DRIVER, json.dumps(jobs), "1" if no_ray else "0"], cwd=REPO,
                         env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    out: dict[str, dict[str, tuple[int | str, str]]] = {n: {"stderr": (0, "")} for n in names}
    marker = re.compile(rf"^{SEP} (\S+) (\S+) (\S+)\n", re.M)
    for stream in ("stdout", "stderr"):
        text, start = getattr(res, stream), 0
        for m in marker.finditer(text):  # each run's output ends with its marker line
            name, part, code = m.groups()
            body, start = text[start:m.start()], m.end()
            if stream == "stdout":
                out[name][part] = (int(code) if code.lstrip("-").isdigit() else code, body)
            else:
                out[name]["stderr"] = (0, out[name]["stderr"][1] + body)
    for n in names:  # a script the interpreter never finished (it died): its runs fail with the interpreter's end
        for part in ("help", "dry-run"):
            out[n].setdefault(part, (res.returncode or "did not finish", res.stderr[-2000:]))
    return out


@cache
def _runs() -> dict[str, dict[str, tuple[int | str, str]]]:
    """Every script's runs, once for the whole module: three interpreters at once."""
    plain = [n for n in SCRIPTS if n not in NO_RAY]
    groups = [(plain[0::2], False), (plain[1::2], False), (sorted(NO_RAY), True)]
    with ThreadPoolExecutor(len(groups)) as pool:
        parts = pool.map(lambda g: _run(*g), groups)
    return {k: v for part in parts for k, v in part.items()}


def test_the_entry_points_are_found() -> None:
    assert "bench_one_backbone.py" in SCRIPTS and "fuzz_targets.py" in SCRIPTS
    assert "_machine.py" not in SCRIPTS


@pytest.mark.parametrize("name", SCRIPTS)
def test_help(name: str) -> None:
    code, out = _runs()[name]["help"]
    assert code == 0, _runs()[name]["stderr"][1][-2000:]
    assert "usage" in out.lower() and "--dry-run" in out


@pytest.mark.parametrize("name", SCRIPTS)
def test_dry_run(name: str) -> None:
    code, out = _runs()[name]["dry-run"]
    assert code == 0, (out[-1000:], _runs()[name]["stderr"][1][-2000:])
    assert out.rstrip().endswith(OK), out[-1000:]


def test_a_broken_import_fails_the_dry_run(tmp_path: Path) -> None:
    script = tmp_path / "bench_x.py"
    script.write_text("import json\n\n\ndef f():\n    from pcr_ray.sft.quick import no_such_name\n"
                      "    from pcr_ray.no_such_module import g\n    import no_such_package_anywhere\n")
    broken, absent = broken_imports(script)
    assert [b.split(": ")[1] for b in broken] == ["pcr_ray.sft.quick has no no_such_name",
                                                   "import pcr_ray.no_such_module"]
    assert absent == ["no_such_package_anywhere"]


def test_one_backbone_dry_run_composes_the_overrides() -> None:
    out = _runs()["bench_one_backbone.py"]["dry-run"][1]
    plan = json.loads(out[out.index('{\n "script"'):out.rindex(OK)])
    assert plan["plan"]["grading"] == "scibench" and plan["plan"]["train"]["gsm8k_train"] > 0
    assert plan["plan"]["methods"] and plan["plan"]["prms"] == ["default"]


def _results() -> list[Path]:
    return sorted((BENCH / "results").rglob("*.json"))


def _package_module(script: Path) -> list[Path]:
    """The script and the pcr_ray modules whose main it runs (bench_first_error.py: pcr_ray/bench/first_error.py)."""
    mods = re.findall(r"^from (pcr_ray\.bench\.\w+) import main$", script.read_text(), re.M)
    return [script, *(REPO / (m.replace(".", "/") + ".py") for m in mods)]


@pytest.mark.parametrize("path", _results(), ids=lambda p: p.relative_to(BENCH / "results").as_posix())
def test_each_result_names_the_command_that_made_it(path: Path) -> None:
    record = json.loads(path.read_text())
    command = record.get("command") if isinstance(record, dict) else None
    assert isinstance(command, str) and command.strip(), f"{path.name} records no `command`"
    tokens = shlex.split(command.split("  #")[0].replace("<", "'<").replace(">", ">'"))
    scripts = [t for t in tokens if t.endswith((".py", ".sh"))]
    if scripts:
        rel = re.sub(r"^.*?(?=(benchmarks|cluster|pcr_ray)/)", "", scripts[0])
        script = REPO / rel
        assert script.exists(), f"{path.name}: its command runs {scripts[0]}, which does not exist"
        source = "\n".join(p.read_text() for p in _package_module(script))
        flags = {t.split("=")[0] for t in tokens[tokens.index(scripts[0]) + 1:] if t.startswith("--")}
        gone = sorted(f for f in flags if f'"{f}"' not in source and f"{f} " not in source)
        assert not gone, f"{path.name}: {scripts[0]} no longer takes {gone}"
    elif "-m" in tokens:  # python -m pcr_ray.bench.<name>: a module of the package
        module = tokens[tokens.index("-m") + 1]
        assert (REPO / (module.replace(".", "/") + ".py")).exists(), f"{path.name}: no module {module}"
    else:
        assert "pcr-ray" in tokens, f"{path.name}: the command names neither a script, a module nor pcr-ray: {command}"
        sub = tokens[tokens.index("pcr-ray") + 1]
        assert sub in COMMANDS, f"{path.name}: no `pcr-ray {sub}`"


def test_seen_unseen_counts_each_cell_and_pairs_the_same_problems() -> None:
    """bench_seen_unseen's summary on made-up rows: per-cell counts, the demo's first 30, the givens modes paired."""
    sys.path.insert(0, str(BENCH))
    import bench_seen_unseen as b

    def rows(givens: str) -> list[dict]:
        out = []
        for split in ("heldout", "train"):
            for i in (3, 29, 30, 70):  # two of them among the demo's first 30
                for m in b.METHODS:
                    right = m == "nsprm" and (i < 30 or split == "train") and not (givens == "gold" and i == 3)
                    out.append({"problem_id": f"physics/0/{i}/t{i}", "template_split": split, "method": m,
                                "correct": right, "error": ""})
        return out

    s = b.summarize({"extract": rows("extract"), "gold": rows("gold")})
    cell = {(c["split"], c["givens"], c["method"]): c for c in s["cells"]}
    assert cell["heldout", "extract", "nsprm"]["correct"] == 2 and cell["heldout", "extract", "nsprm"]["n"] == 4
    assert cell["train", "extract", "nsprm"]["correct"] == 4 and cell["train", "gold", "nsprm"]["correct"] == 3
    assert cell["heldout", "gold", "verifier_only"]["correct"] == 0
    assert s["demo_physics_first30"]["heldout/extract/first30"] == {"nsprm": 2, "prm_only": 0, "verifier_only": 0,
                                                                    "n": 2}
    assert s["paired_givens_extract_vs_gold"]["heldout/nsprm"] == {
        "n": 4, "extract": 2, "gold": 1, "only_extract": 1, "only_gold": 0, "mcnemar_p": 1.0}
    assert s["paired_methods"]["train/extract"]["nsprm vs verifier_only"]["only_a"] == 4
