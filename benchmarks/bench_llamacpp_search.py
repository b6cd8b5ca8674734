"""The real LLM path on CPU: SmolLM2-135M (llama.cpp, JSON-schema grammar) proposing steps for nsprm search.

On --problems generated physics problems of the held-out templates (--split heldout, the default), their givens
extracted from the text (--givens extract, the default; --givens gold: the gold trace's, oracle givens; the JSON
records which): how many raw outputs parse, how many pass the verifier, on first asks and on retries (which
carry the verifier's diagnostics), how many beams a retry rescued, and the answers. Also the same with
constrained decoding off (--also-unconstrained), to show what the grammar buys.
SmolLM2-135M is weak at math: this measures the plumbing, not a solver. Writes <cache>/bench/bench_llamacpp_search.json
(benchmarks/results/ too with PCR_RAY_BENCH_RESULTS=1).

    .venv/bin/python benchmarks/bench_llamacpp_search.py [--problems 20] [--k 4] [--also-unconstrained]
"""

from __future__ import annotations

import argparse
import math
import os
import time
from collections import Counter
from typing import Any

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from _machine import add_dry_run, dry_run, machine_info, write_result  # noqa: E402


def _stats(rows: list[Any]) -> dict[str, Any]:
    tot: Counter = Counter()
    rejects: Counter = Counter()
    for r in rows:
        tot.update(r.round_stats)
        rejects.update(r.reject_codes)

    def frac(a: str, b: str) -> float:
        return round(tot[a] / tot[b], 4) if tot[b] else 0.0

    correct = sum(r.answer_value is not None and r.gold_value is not None and math.isclose(
        r.answer_value, r.gold_value, rel_tol=1e-4) for r in rows)
    return {
        "problems": len(rows),
        "first": {"candidates": tot["first_proposed"], "parsed": frac("first_parsed", "first_proposed"),
                  "verified": frac("first_verified", "first_proposed"), "asks": tot["first_asks"],
                  "asks_with_a_valid_candidate": frac("first_asks_ok", "first_asks")},
        "retry": {"candidates": tot["retry_proposed"], "parsed": frac("retry_parsed", "retry_proposed"),
                  "verified": frac("retry_verified", "retry_proposed"), "asks": tot["retry_asks"],
                  "asks_with_a_valid_candidate": frac("retry_asks_ok", "retry_asks")},
        "beams_rescued_by_retry": tot["retry_asks_ok"],
        "asks_valid_after_retries": round((tot["first_asks_ok"] + tot["retry_asks_ok"]) / tot["first_asks"], 4)
        if tot["first_asks"] else 0.0,
        "reject_codes": dict(rejects.most_common()),
        "answered": sum(r.answer_value is not None for r in rows), "correct": correct,
        "stop_reasons": dict(Counter(r.stop_reason for r in rows)),
        "s_per_problem": round(sum(r.wall_s for r in rows) / max(1, len(rows)), 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--problems", type=int, default=20)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--beam", type=int, default=2)
    ap.add_argument("--max-steps", type=int, default=4)
    ap.add_argument("--max-retries", type=int, default=2)
    ap.add_argument("--schema-level", default="ops")
    ap.add_argument("--also-unconstrained", action="store_true")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--split", default="heldout", choices=["heldout", "train", "all"],
                    help="generated physics templates: heldout (unseen by training, the default) | train")
    ap.add_argument("--givens", default="extract", choices=["extract", "gold"],
                    help="extract: from the problem text (the default) | gold: the gold trace's (oracle givens)")
    add_dry_run(ap)
    args = ap.parse_args()
    if args.dry_run:
        raise SystemExit(dry_run(__file__, vars(args)))

    from pcr_ray.data.physics import generate_problems
    from pcr_ray.generators.llamacpp import LlamaCppGenerator
    from pcr_ray.prm.checkpoints import ensure_checkpoint
    from pcr_ray.prm.scorer import PRMScorer
    from pcr_ray.search import SearchConfig, SearchProblem, run_search

    scorer = PRMScorer.from_checkpoint(ensure_checkpoint("csp"), runtime="onnx", int8=True, max_length=160)
    pool = [p for p in generate_problems(200, seed=args.seed, split=args.split) if p.gold_steps and p.gold_steps <= 3]
    problems = [SearchProblem.from_problem(p, givens=args.givens) for p in pool[: args.problems]]
    cfg = SearchConfig(method="nsprm", beam_width=args.beam, k=args.k, max_steps=args.max_steps,
                       max_retries=args.max_retries)
    out: dict[str, Any] = {"machine": machine_info(), "args": vars(args), "split": args.split,
                           "givens": "gold (oracle)" if args.givens == "gold" else "extract", "runs": {}}
    modes = [True, False] if args.also_unconstrained else [True]
    for constrained in modes:
        gen = LlamaCppGenerator(schema_level=args.schema_level, constrained=constrained)
        t0 = time.perf_counter()
        rows = run_search(problems, gen, scorer, cfg)
        st = _stats(rows)
        st["wall_s"] = round(time.perf_counter() - t0, 1)
        st["generator"] = {**gen.identity, **gen.stats.to_dict()}
        key = "constrained" if constrained else "unconstrained"
        out["runs"][key] = st
        print(f"{key}: first asks: {st['first']['parsed']:.1%} parsed, {st['first']['verified']:.1%} verified, "
              f"{st['first']['asks_with_a_valid_candidate']:.1%} of asks with a valid candidate; retries: "
              f"{st['retry']['asks']} asks, {st['beams_rescued_by_retry']} rescued; valid after retries "
              f"{st['asks_valid_after_retries']:.1%}; answered {st['answered']}/{st['problems']}, correct "
              f"{st['correct']}; top rejections {list(st['reject_codes'].items())[:4]}", flush=True)
    write_result("bench_llamacpp_search", out)


if __name__ == "__main__":
    main()
