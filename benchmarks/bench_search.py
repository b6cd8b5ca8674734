"""Search throughput: problems/s of enumerator + PRM (nsprm) at beam width 1, 4 and 8 on one core, and where the
time goes (generation, verification, PRM scoring), measured in one run on the same problems.

One core: torch uses one thread and the search runs in this process (lock-step over the batch). The PRM is the
cached CSP checkpoint (pcr_ray.prm.checkpoints.ensure_checkpoint; trained on first use). Writes
benchmarks/results/bench_search.json.

    .venv/bin/python benchmarks/bench_search.py [--problems 8] [--cap 48] [--max-gold-steps 4] [--int8]
"""

from __future__ import annotations

import argparse
import math
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from _machine import machine_info, write_result  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--problems", type=int, default=8)
    ap.add_argument("--cap", type=int, default=48, help="enumerated candidates per beam and step")
    ap.add_argument("--checkpoint", default=None, help="PRM checkpoint (default: the cached csp one)")
    ap.add_argument("--max-gold-steps", type=int, default=4)
    ap.add_argument("--beams", type=int, nargs="+", default=[1, 4, 8])
    ap.add_argument("--int8", action="store_true", help="ONNX Runtime int8 PRM")
    ap.add_argument("--seed", type=int, default=5)
    args = ap.parse_args()

    import torch

    torch.set_num_threads(1)
    from pcr_ray.data.physics import generate_problems
    from pcr_ray.generators.enumerate import EnumeratorGenerator
    from pcr_ray.prm.checkpoints import ensure_checkpoint
    from pcr_ray.prm.scorer import PRMScorer
    from pcr_ray.search import SearchConfig, SearchProblem, run_search

    ck = args.checkpoint or ensure_checkpoint("csp")
    scorer = PRMScorer.from_checkpoint(ck, int8=args.int8, runtime="onnx" if args.int8 else "torch", max_batch=64,
                                       max_length=160)
    pool = [p for p in generate_problems(400, seed=args.seed) if p.gold_steps and p.gold_steps <= args.max_gold_steps]
    problems = [SearchProblem.from_problem(p, givens="gold") for p in pool[: args.problems]]
    scorer.score([("warm up", "x = mul(x=a, y=b) [m]")])
    rows = []
    for beam in args.beams:
        cfg = SearchConfig(method="nsprm", beam_width=beam, max_steps=6)
        gen = EnumeratorGenerator(cap=args.cap)
        t0 = time.perf_counter()
        res = run_search(problems, gen, scorer, cfg)
        wall = time.perf_counter() - t0
        gen_s = sum(r.gen_s for r in res)
        ver_s = sum(r.verify_s for r in res)
        prm_s = sum(r.prm_s for r in res)
        other = max(0.0, wall - gen_s - ver_s - prm_s)
        correct = sum(r.answer_value is not None and r.gold_value is not None and math.isclose(
            r.answer_value, r.gold_value, rel_tol=1e-4) for r in res)
        row = {"beam_width": beam, "problems": len(res), "wall_s": round(wall, 3),
               "problems_per_s": round(len(res) / wall, 4),
               "share": {"generation": round(gen_s / wall, 4), "verification": round(ver_s / wall, 4),
                         "prm": round(prm_s / wall, 4), "other": round(other / wall, 4)},
               "candidates": sum(r.n_proposed for r in res), "verified": sum(r.n_verified for r in res),
               "prm_pairs": sum(r.n_prm_calls for r in res), "acc": round(correct / len(res), 4)}
        rows.append(row)
        print(f"B={beam}: {row['problems_per_s']:.3f} problems/s  gen {row['share']['generation']:.1%}  verify "
              f"{row['share']['verification']:.1%}  PRM {row['share']['prm']:.1%}  ({row['prm_pairs']} PRM pairs, "
              f"acc {row['acc']:.2f})")
    base = rows[0]["problems_per_s"]
    for r in rows:
        r["speed_vs_first"] = round(r["problems_per_s"] / base, 3) if base else None
    write_result("bench_search", {"machine": machine_info(), "checkpoint": str(ck), "int8": args.int8, "cap": args.cap,
                                  "torch_threads": torch.get_num_threads(), "max_gold_steps": args.max_gold_steps,
                                  "rows": rows})


if __name__ == "__main__":
    main()
