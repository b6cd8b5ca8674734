"""Pairwise accuracy by negative kind on problems no PRM trained on: GSM8K test and generated physics of the
`heldout` templates, every verifier-passing kind (CSP, the word-problem kinds, the search-matched kinds).

Pairs are made from the gold traces of --gsm8k GSM8K test problems (a random sample of those that convert, --seed)
and --physics heldout-template problems; each kind keeps at most --per-kind pairs (a hash-ranked subset), so a
rare kind is not drowned by a common one. Each checkpoint (default: the quick PRM, trained on first use) scores
every pair in fp32; a pair is right when the gold step outscores the negative. Writes
<cache>/bench/NAME.json (benchmarks/results/ too with PCR_RAY_BENCH_RESULTS=1).

    .venv/bin/python benchmarks/bench_pair_kinds.py [--checkpoint DIR ...] [--gsm8k 300] [--physics 300]
        [--per-kind 400]
"""

from __future__ import annotations

import argparse
import os
import random
from pathlib import Path
from typing import Any

from _machine import add_dry_run, dry_run, machine_info, write_result
from bench_quick_prm import pair_wins, pairwise

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def kind_pairs(problems: list[dict[str, Any]], per_kind: int, seed: int) -> list[dict[str, Any]]:
    """Every verifier-passing pair of `problems`, at most `per_kind` of each kind."""
    from pcr_ray.negatives.csp import CSP_KINDS
    from pcr_ray.negatives.pairs import PairConfig, pairs_from_problems
    from pcr_ray.negatives.search_pairs import SEARCH_KINDS
    from pcr_ray.negatives.word import WORD_KINDS
    from pcr_ray.prm.checkpoints import select_pairs

    rows = pairs_from_problems(problems, PairConfig(kinds=CSP_KINDS + WORD_KINDS + SEARCH_KINDS, seed=seed),
                               processes=os.cpu_count() or 1)
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_kind.setdefault(r["kind"], []).append(r)
    return [r for _, rs in sorted(by_kind.items()) for r in select_pairs(rs, per_kind, seed)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoint", nargs="*", default=[], help="checkpoints to score (default: the quick PRM)")
    ap.add_argument("--gsm8k", type=int, default=300, help="GSM8K test problems (a random sample, --seed)")
    ap.add_argument("--physics", type=int, default=300, help="heldout-template physics problems")
    ap.add_argument("--per-kind", type=int, default=400, help="pairs of each kind (a hash-ranked subset)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the problems' sample and of the pairs")
    ap.add_argument("--name", default="bench_pair_kinds", help="the result's file name")
    add_dry_run(ap)
    args = ap.parse_args()
    if args.dry_run:
        raise SystemExit(dry_run(__file__, vars(args)))
    from pcr_ray.data.physics import generate_problems
    from pcr_ray.data.readers import load_dataset
    from pcr_ray.prm.checkpoints import ensure_checkpoint

    sets: dict[str, list[dict[str, Any]]] = {}
    if args.gsm8k:
        gsm = [p.to_dict() for p in load_dataset("gsm8k_test") if p.gold_trace]
        random.Random(args.seed).shuffle(gsm)
        sets["gsm8k_test"] = gsm[: args.gsm8k]
    if args.physics:
        sets["physics_heldout"] = [p.to_dict() for p in generate_problems(args.physics, seed=args.seed,
                                                                          split="heldout") if p.gold_trace]
    checkpoints = [Path(c) for c in args.checkpoint] or [ensure_checkpoint("csp")]
    out: dict[str, Any] = {"machine": machine_info(), "args": vars(args), "runs": []}
    for name, problems in sets.items():
        pairs = kind_pairs(problems, args.per_kind, args.seed)
        for ck in checkpoints:
            res = pairwise(pairs, pair_wins(ck, pairs))
            out["runs"].append({"data": name, "problems": len(problems), "checkpoint": str(ck.resolve()), **res})
            kinds = ", ".join(f"{k} {v['pairwise_acc']:.1%} ({v['pairs']})" for k, v in res["by_kind"].items())
            print(f"{name} {ck.name}: {res['pairwise_acc']:.1%} {res['ci95']} | {kinds}", flush=True)
    write_result(args.name, out)


if __name__ == "__main__":
    main()
