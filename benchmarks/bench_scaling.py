"""The compute-scaling curve: accuracy, pass@N, PRM calls and tokens against the budget N, per method.

Runs `pcr-ray evaluate experiment=scaling` (40 generated physics problems of the unseen templates, extracted
givens, the symbolic enumerator, the quick CSP PRM; best-of-n, PRM-weighted vote and majority vote read off one
best_of_n run at the largest N, beam search and DVTS run at each N; pcr_ray/pipeline/scaling.py) through the real
pipeline on a local Ray, and writes the curves with the run's wall time. The enumerator has no tokens: generator
tokens are 0, PRM tokens are the PRM tokenizer's.

    .venv/bin/python benchmarks/bench_scaling.py [--problems 40] [--budgets 1 2 4 8 16] [--width 2] [--results]
    .venv/bin/python benchmarks/bench_scaling.py --from-run RUN_DIR [--budgets 1 2 4 8 16] [--results]

`--from-run` summarizes the shards of such a run (finished or cut short): best_of_n, weighted and majority at
every budget its best_of_n run covers, beam and DVTS at the budgets whose rows are all there; the JSON lists the
budgets left out and why.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import add_dry_run, dry_run, machine_info, write_result  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--budgets", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    ap.add_argument("--width", type=int, default=2)
    ap.add_argument("--results", action="store_true", help="also write benchmarks/results/bench_scaling.json")
    ap.add_argument("--run-dir", type=Path, default=None,
                    help="keep the run here (its shards feed --from-run's paired tests); default: a temporary folder")
    ap.add_argument("--from-run", type=Path, default=None, help="summarize this run directory's shards instead")
    ap.add_argument("--run-revision", default="", help="with --from-run: the git revision the run was made at")
    add_dry_run(ap)
    args = ap.parse_args()
    if args.dry_run:
        raise SystemExit(dry_run(__file__, vars(args)))
    if args.from_run is not None:
        return from_run(args)
    from pcr_ray.evaluate import compose_config, evaluate
    from pcr_ray.pipeline.ray_runtime import shutdown_ray
    from pcr_ray.pipeline.scaling import scaling_table

    n = args.problems
    with tempfile.TemporaryDirectory() as tmp:
        overrides = ["experiment=scaling", f"dataset.sources=[{{name: physics, limit: {n}, kwargs: {{n: {n}, "
                     f"seed: {args.seed}, split: heldout}}}}]", f"scaling.budgets=[{','.join(map(str, args.budgets))}]",
                     f"scaling.width={args.width}", f"run_dir={args.run_dir or Path(tmp) / 'run'}"]
        t0 = time.perf_counter()
        try:
            out = evaluate(compose_config(overrides))
        finally:
            shutdown_ray()
        wall = time.perf_counter() - t0
        metrics = json.loads((out / "metrics.json").read_text())
    curves = metrics["scaling"]
    print(scaling_table(curves))
    print(f"\n{metrics['n_problems']} problems, {wall:.0f} s wall")
    result = {"overrides": overrides[:-1], "problems": metrics["n_problems"], "wall_s": round(wall, 1),
              "scaling": curves, "prm": metrics.get("actors", {}) and next(
                  (v.get("identity", {}).get("checkpoint") for k, v in metrics["actors"].items()
                   if k.startswith("pcr-prm-")), None),
              "machine": machine_info()}
    write_result("bench_scaling", result, commit=True if args.results else None)
    return 0


def from_run(args: argparse.Namespace) -> int:
    """The curves of a run directory's shards: each method at the budgets it completed."""
    from omegaconf import OmegaConf

    from pcr_ray.pipeline.results import merge, read_results
    from pcr_ray.pipeline.scaling import SAMPLED, scaling_curves, scaling_table
    from pcr_ray.pipeline.stats import paired_comparisons, paired_table

    run = args.from_run.resolve()
    rows = read_results(merge(run)).to_pylist()
    problems = sorted({r["problem_id"] for r in rows})
    cfg = OmegaConf.load(run / "config.yaml")
    labels = {}
    for r in rows:
        labels.setdefault(r["method"], set()).add(r["problem_id"])
    complete = {k for k, v in labels.items() if len(v) == len(problems)}
    n_samples = max(int(k[len("samples_N"):]) for k in complete if k.startswith("samples_N"))
    curves: dict = {"methods": {}}
    left_out = {}
    for m in cfg.scaling.methods:
        done = [n for n in args.budgets if (n <= n_samples if m in SAMPLED else f"{m}_N{n}" in complete)]
        left_out.update({f"{m}_N{n}": "not finished" for n in args.budgets if n not in done})
        if done:
            part = scaling_curves(rows, {"budgets": done, "width": int(cfg.scaling.width), "methods": [m]},
                                  str(cfg.grading.mode))
            curves["methods"][m] = part["methods"][m]
            curves.update({k: v for k, v in part.items() if k not in ("methods", "budgets")})
    curves["budgets"] = sorted({p["n"] for pts in curves["methods"].values() for p in pts})
    print(scaling_table(curves))
    order = sorted(complete, key=lambda k: (k.split("_N")[0], int(k.split("_N")[1])))
    paired = {k: v for k, v in paired_comparisons([r for r in rows if r["method"] in complete], order).items()
              if v["a"].split("_N")[0] == v["b"].split("_N")[0] or v["a"].split("_N")[1] == v["b"].split("_N")[1]}
    print(paired_table(paired))
    wall = max(r["written_at"] for r in rows) - min(r["written_at"] for r in rows)
    result = {"run_dir_config": OmegaConf.to_container(cfg, resolve=True)["scaling"], "problems": len(problems),
              "dataset_sources": OmegaConf.to_container(cfg.dataset.sources, resolve=True),
              "givens": str(cfg.pipeline.givens),
              "generator_cap": int(cfg.generator.cap), "search": OmegaConf.to_container(cfg.search, resolve=True),
              "first_to_last_shard_s": round(wall, 1), "scaling": curves, "left_out": left_out,
              "paired": paired, "run_revision": args.run_revision or None,
              "machine": machine_info()}
    write_result("bench_scaling", result, commit=True if args.results else None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
