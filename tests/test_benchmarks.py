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
TIMEOUT_S = 300  # a hang guard: a dry run takes seconds
SEP = "=== dry run ==="
# One interpreter per script runs it as `python SCRIPT --help`, then as `python SCRIPT ... --dry-run` (the second
# run finds the first's imports loaded: half the cost of two processes).
DRIVER = f"""
import os, runpy, sys
script, no_ray, *dry = sys.argv[1:]
sys.path.insert(0, os.path.dirname(script))
if no_ray == "1":
    sys.modules["ray"] = None
for argv in ([script, "--help"], [script, *dry, "--dry-run"]):
    sys.argv = argv
    try:
        runpy.run_path(script, run_name="__main__")
        code = 0
    except SystemExit as exc:
        code = exc.code or 0
    sys.stdout.flush()
    print("{SEP}", code, flush=True)
"""


def _run(name: str) -> dict[str, tuple[int, str]]:
    """{'help': (exit status, stdout), 'dry-run': (...)} of one script; stderr is kept in 'stderr'."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    args = [str(BENCH / name), "1" if name in NO_RAY else "0", *REQUIRED.get(name, []), *EXTRA.get(name, [])]
    res = subprocess.run([sys.executable, "-c", DRIVER, *args], cwd=REPO, env=env, capture_output=True, text=True,
                         timeout=TIMEOUT_S)
    parts = res.stdout.split(SEP)
    codes = [int(p.split("\n", 1)[0]) for p in parts[1:]]
    out = {"stderr": (res.returncode, res.stderr)}
    for i, key in enumerate(("help", "dry-run")):
        out[key] = (codes[i] if i < len(codes) else res.returncode, parts[i].split("\n", 1)[-1] if i else parts[0])
    return out


@cache
def _runs() -> dict[str, dict[str, tuple[int, str]]]:
    """Every script's runs, in parallel, once for the whole module."""
    with ThreadPoolExecutor(max(2, min(8, os.cpu_count() or 2))) as pool:
        return dict(zip(SCRIPTS, pool.map(_run, SCRIPTS), strict=True))


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
    else:
        assert "pcr-ray" in tokens, f"{path.name}: the command names neither a script nor pcr-ray: {command}"
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
