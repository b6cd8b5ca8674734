"""Search throughput: problems/s of enumerator + PRM (nsprm) at beam width 1, 4 and 8 on one core, and where the
time goes (generation, verification, PRM scoring), measured in one run on the same problems.

One core: torch uses one thread and the search runs in this process (lock-step over the batch). The PRM is the
cached CSP checkpoint (pcr_ray.prm.checkpoints.ensure_checkpoint; trained on first use). The problems are
generated physics of the held-out templates (split="heldout": templates the PRM never trained on), their givens
extracted from the text (--givens extract, the default) or taken from the gold trace (--givens gold: oracle
givens); the JSON records which.
Writes <cache>/bench/bench_search.json (benchmarks/results/ too with PCR_RAY_BENCH_RESULTS=1).

    .venv/bin/python benchmarks/bench_search.py [--problems 8] [--cap 48] [--max-gold-steps 4] [--int8]
    .venv/bin/python benchmarks/bench_search.py --scorers pair-fp32 pair-int8 shared-fp32 shared-int8 --beams 4

--scorers compares PRM scorers in one run on the same problems (the share of search time in PRM scoring of each):
pair-fp32 (torch, batched), pair-int8 (ONNX Runtime int8, one pair per pass: the CPU default), shared-fp32 and
shared-int8 (the quick shared-context PRM, torch, each context encoded once; int8 per token).
"""

from __future__ import annotations

import argparse
import math
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from _machine import add_dry_run, dry_run, machine_info, write_result  # noqa: E402

# name -> (the quick PRM's attention, runtime, int8)
SCORERS = {"pair-fp32": ("pair", "torch", False), "pair-int8": ("pair", "onnx", True),
           "shared-fp32": ("shared_context", "torch", False), "shared-int8": ("shared_context", "torch", True)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--problems", type=int, default=8)
    ap.add_argument("--cap", type=int, default=48, help="enumerated candidates per beam and step")
    ap.add_argument("--checkpoint", default=None, help="PRM checkpoint (default: the cached csp one)")
    ap.add_argument("--max-gold-steps", type=int, default=4)
    ap.add_argument("--beams", type=int, nargs="+", default=[1, 4, 8])
    ap.add_argument("--int8", action="store_true", help="ONNX Runtime int8 PRM")
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--split", default="heldout", choices=["heldout", "train", "all"],
                    help="generated physics templates: heldout (unseen by the PRM's training, the default) | train")
    ap.add_argument("--givens", default="extract", choices=["extract", "gold"],
                    help="extract: from the problem text (the default) | gold: the gold trace's (oracle givens)")
    ap.add_argument("--name", default="bench_search", help="JSON file name (without .json)")
    ap.add_argument("--scorers", nargs="+", default=None, choices=sorted(SCORERS),
                    help="compare these PRM scorers (same problems, same run) instead of the one of --int8")
    add_dry_run(ap)
    args = ap.parse_args()
    if args.dry_run:
        raise SystemExit(dry_run(__file__, vars(args)))

    import torch

    torch.set_num_threads(1)
    from pcr_ray.data.physics import generate_problems
    from pcr_ray.generators.enumerate import EnumeratorGenerator
    from pcr_ray.prm.checkpoints import ensure_checkpoint
    from pcr_ray.prm.scorer import PRMScorer
    from pcr_ray.search import SearchConfig, SearchProblem, run_search

    pool = [p for p in generate_problems(400, seed=args.seed, split=args.split)
            if p.gold_steps and p.gold_steps <= args.max_gold_steps]
    problems = [SearchProblem.from_problem(p, givens=args.givens) for p in pool[: args.problems]]
    if args.scorers:
        scorers = {}
        for name in args.scorers:
            attention, runtime, int8 = SCORERS[name]
            ck = ensure_checkpoint("csp", attention=attention)
            scorers[name] = (ck, PRMScorer.from_checkpoint(ck, int8=int8, runtime=runtime, max_batch=64,
                                                           cache_size=0))
    else:
        ck = args.checkpoint or ensure_checkpoint("csp")
        scorers = {"int8" if args.int8 else "fp32": (ck, PRMScorer.from_checkpoint(
            ck, int8=args.int8, runtime="onnx" if args.int8 else "torch", max_batch=64, max_length=160))}
    rows = []
    for name, (ck, scorer) in scorers.items():
        scorer.score([("warm up", "x = mul(x=a, y=b) [m]")])
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
            pairs = sum(r.n_prm_calls for r in res)
            row = {"scorer": name, "checkpoint": str(ck), "beam_width": beam, "problems": len(res),
                   "wall_s": round(wall, 3), "problems_per_s": round(len(res) / wall, 4),
                   "share": {"generation": round(gen_s / wall, 4), "verification": round(ver_s / wall, 4),
                             "prm": round(prm_s / wall, 4), "other": round(other / wall, 4)},
                   "candidates": sum(r.n_proposed for r in res), "verified": sum(r.n_verified for r in res),
                   "prm_pairs": pairs, "prm_pairs_per_s": round(pairs / prm_s, 1) if prm_s else None,
                   "acc": round(correct / len(res), 4)}
            rows.append(row)
            print(f"{name} B={beam}: {row['problems_per_s']:.3f} problems/s  gen {row['share']['generation']:.1%}  "
                  f"verify {row['share']['verification']:.1%}  PRM {row['share']['prm']:.1%}  ({pairs} PRM pairs, "
                  f"{row['prm_pairs_per_s']} pairs/s, acc {row['acc']:.2f})", flush=True)
    base = rows[0]["problems_per_s"]
    for r in rows:
        r["speed_vs_first"] = round(r["problems_per_s"] / base, 3) if base else None
    givens = "gold (oracle)" if args.givens == "gold" else "extract"
    write_result(args.name, {"machine": machine_info(), "givens": givens, "split": args.split, "seed": args.seed,
                             "scorers": list(scorers), "int8": args.int8, "cap": args.cap,
                                  "torch_threads": torch.get_num_threads(), "max_gold_steps": args.max_gold_steps,
                                  "rows": rows})


if __name__ == "__main__":
    main()
