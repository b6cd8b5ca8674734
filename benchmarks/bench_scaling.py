"""The compute-scaling curve: accuracy, pass@N, PRM calls and tokens against the budget N, per method.

Runs `pcr-ray evaluate experiment=scaling` (40 generated physics problems, the symbolic enumerator, the quick CSP
PRM; best-of-n, PRM-weighted vote and majority vote read off one best_of_n run at the largest N, beam search and
DVTS run at each N; pcr_ray/pipeline/scaling.py) through the real pipeline on a local Ray, and writes the curves
with the run's wall time. The enumerator has no tokens: generator tokens are 0, PRM tokens are the PRM tokenizer's.

    .venv/bin/python benchmarks/bench_scaling.py [--problems 40] [--budgets 1 2 4 8 16] [--width 2] [--commit]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import machine_info, write_result  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--budgets", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    ap.add_argument("--width", type=int, default=2)
    ap.add_argument("--commit", action="store_true", help="also write benchmarks/results/bench_scaling.json")
    args = ap.parse_args()
    from pcr_ray.evaluate import compose_config, evaluate
    from pcr_ray.pipeline.ray_runtime import shutdown_ray
    from pcr_ray.pipeline.scaling import scaling_table

    n = args.problems
    with tempfile.TemporaryDirectory() as tmp:
        overrides = ["experiment=scaling", f"dataset.sources=[{{name: physics, limit: {n}, kwargs: {{n: {n}, "
                     f"seed: {args.seed}}}}}]", f"scaling.budgets=[{','.join(map(str, args.budgets))}]",
                     f"scaling.width={args.width}", f"run_dir={tmp}/run"]
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
    path = write_result("bench_scaling", result, commit=True if args.commit else None)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
