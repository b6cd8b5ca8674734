"""Search accuracy on seen and unseen physics templates, with extracted and with oracle givens (docs/results.md).

Runs the demo's search setup (`experiment=demo`, three methods; --experiment and --overrides pick another, e.g. the
fine-tuned generator of `experiment=one_backbone`) on N generated physics problems of the `heldout` templates (no
learned part trained on them) and N of the `train` templates (the quick PRM and the fine-tunes trained on other
seeds of them), once per givens mode, through `pcr-ray evaluate` as a user runs it; then reports Acc@1 with its 95%
Wilson interval per (split, givens, method), paired McNemar tests between methods and between givens modes, and
the first 30 unseen problems (the physics part of `make demo`). Writes <cache>/bench/<--name>.json
(benchmarks/results/ too with PCR_RAY_BENCH_RESULTS=1); the runs go to --run-root.

    PCR_RAY_DATA=/path/to/data .venv/bin/python benchmarks/bench_seen_unseen.py [--n 100] [--givens extract gold]
        [--experiment one_backbone --overrides generator=vllm_sft_tiny --name seen_unseen_sft]
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _machine import add_dry_run, dry_run, machine_info, write_result

METHODS = ("nsprm", "prm_only", "verifier_only")
SPLIT_LABELS = {"train": "seen templates (the learned parts trained on them; other seeds)",
                "heldout": "unseen templates (no learned part trained on them)"}
GIVENS_LABELS = {"extract": "extracted from the problem text", "gold": "gold (oracle) givens"}
DEMO_PHYSICS = 30  # make demo's generated physics problems: the first 30 of the heldout split, seed 0


SETUPS = {"demo": ("experiment=demo restricted to generated physics and three methods: typed enumerator (cap 24) for "
                   "nsprm and verifier_only, type-blind enumerator for prm_only, beam 2, up to 5 steps, 1 backtrack; "
                   "the quick PRM (`pcr_ray.prm.checkpoints.ensure_checkpoint`)"),
          "one_backbone": ("experiment=one_backbone restricted to generated physics and three methods: the fine-tuned "
                           "generator proposes every step (k=4, beam 2, up to 6 steps, one retry), the quick PRM "
                           "ranks them")}


def command(n: int, seed: int, givens: str, run_dir: Path, experiment: str = "demo",
            overrides: tuple[str, ...] = ()) -> list[str]:
    """The `pcr-ray evaluate` command of one givens mode (docs/results.md, Seen and unseen templates)."""
    sources = ",".join(f"{{name:physics,limit:{n},kwargs:{{n:{n},seed:{seed},split:{split}}}}}"
                       for split in ("heldout", "train"))
    return ["pcr-ray", "evaluate", f"experiment={experiment}", f"methods=[{','.join(METHODS)}]",
            f"dataset.sources=[{sources}]", f"pipeline.givens={givens}", *overrides, f"run_dir={run_dir}"]


def cells(rows: list[dict[str, Any]], givens: str) -> list[dict[str, Any]]:
    """Acc@1 and its Wilson interval per split and method."""
    from pcr_ray.pipeline.stats import wilson

    out = []
    for split in ("heldout", "train"):
        for m in METHODS:
            rs = [r for r in rows if r["template_split"] == split and r["method"] == m]
            k = sum(bool(r["correct"]) for r in rs)
            lo, hi = wilson(k, len(rs))
            out.append({"split": split, "givens": givens, "method": m, "n": len(rs), "correct": k,
                        "acc": round(k / len(rs), 4) if rs else None, "ci95": [round(lo, 4), round(hi, 4)],
                        "errors": sum(bool(r.get("error")) for r in rs)})
    return out


def index_of(problem_id: str) -> int:
    """A generated problem's index in its sequence (ids are physics/<seed>/<index>/<template>)."""
    return int(problem_id.split("/")[2])


def summarize(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Cells, methods paired within each split and givens mode, givens modes paired, and the demo's 30."""
    from pcr_ray.pipeline.stats import mcnemar_exact, paired_comparisons

    out: dict[str, Any] = {"cells": [c for g, rows in runs.items() for c in cells(rows, g)],
                           "paired_methods": {}, "paired_givens_extract_vs_gold": {}, "demo_physics_first30": {}}
    for g, rows in runs.items():
        for split in ("heldout", "train"):
            part = [r for r in rows if r["template_split"] == split]
            out["paired_methods"][f"{split}/{g}"] = paired_comparisons(part, METHODS)
            first = [r for r in part if index_of(r["problem_id"]) < DEMO_PHYSICS]
            out["demo_physics_first30"][f"{split}/{g}/first30"] = {
                m: sum(bool(r["correct"]) for r in first if r["method"] == m) for m in METHODS} | {
                "n": len({r["problem_id"] for r in first})}
    if {"extract", "gold"} <= set(runs):
        for split in ("heldout", "train"):
            for m in METHODS:
                right = {g: {r["problem_id"]: bool(r["correct"]) for r in runs[g]
                             if r["template_split"] == split and r["method"] == m} for g in ("extract", "gold")}
                common = sorted(set(right["extract"]) & set(right["gold"]))
                only_e = sum(right["extract"][p] and not right["gold"][p] for p in common)
                only_g = sum(right["gold"][p] and not right["extract"][p] for p in common)
                out["paired_givens_extract_vs_gold"][f"{split}/{m}"] = {
                    "n": len(common), "extract": sum(right["extract"][p] for p in common),
                    "gold": sum(right["gold"][p] for p in common), "only_extract": only_e, "only_gold": only_g,
                    "mcnemar_p": round(mcnemar_exact(only_e, only_g), 6)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=100, help="problems of each template split")
    ap.add_argument("--seed", type=int, default=0, help="seed of the generated problems")
    ap.add_argument("--givens", nargs="+", default=["extract", "gold"], choices=["extract", "gold"],
                    help="givens modes, one run each")
    ap.add_argument("--run-root", type=Path, default=None,
                    help="where the runs go (default <cache>/bench/<name>_runs)")
    ap.add_argument("--experiment", choices=sorted(SETUPS), default="demo", help="the search setup")
    ap.add_argument("--overrides", nargs="*", default=[], help="further `pcr-ray evaluate` overrides (e.g. "
                    "generator=vllm_sft_tiny)")
    ap.add_argument("--name", default="seen_unseen_templates", help="the result's file name")
    ap.add_argument("--note", default="", help="what the machine was doing besides")
    add_dry_run(ap)
    args = ap.parse_args()
    if args.dry_run:
        raise SystemExit(dry_run(__file__, vars(args)))
    from pcr_ray.paths import cache_dir
    from pcr_ray.prm.checkpoints import default_checkpoint_dir, trained_on

    root = args.run_root or cache_dir() / "bench" / f"{args.name}_runs"
    exe = str(Path(sys.executable).parent / "pcr-ray")
    runs: dict[str, list[dict[str, Any]]] = {}
    commands, wall = [], {}
    for g in args.givens:
        cmd = command(args.n, args.seed, g, root / g, args.experiment, tuple(args.overrides))
        commands.append(shlex.join(cmd))
        print(commands[-1], flush=True)
        t0 = time.perf_counter()
        subprocess.run([exe, *cmd[1:]], check=True)
        wall[g] = round(time.perf_counter() - t0, 1)
        import pyarrow.parquet as pq

        runs[g] = pq.read_table(root / g / "results.parquet").to_pylist()
    prm = default_checkpoint_dir()
    record = {"commands": commands, "command": shlex.join(["python", "benchmarks/bench_seen_unseen.py", *sys.argv[1:]]),
              "machine": machine_info() | ({"note": args.note} if args.note else {}),
              "setup": SETUPS[args.experiment] + "".join(f"; {o}" for o in args.overrides),
              "prm": {"checkpoint": str(prm), "trained_on": trained_on(prm)},
              "split_labels": SPLIT_LABELS, "givens_labels": GIVENS_LABELS, "wall_s": wall, **summarize(runs)}
    for c in record["cells"]:
        print(f"{c['split']:8s} {c['givens']:8s} {c['method']:14s} {c['correct']}/{c['n']} {c['ci95']}")
    print(json.dumps(record["demo_physics_first30"]))
    print(f"wrote {write_result(args.name, record)}")


if __name__ == "__main__":
    main()
