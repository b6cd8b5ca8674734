"""The quick PRM's recipe: first-use training time against pairwise accuracy on templates it never saw, by budget.

Each budget of --budgets trains the quick recipe (`pcr_ray.prm.checkpoints.ensure_checkpoint`: CSP pairs from the
`train` templates and GSM8K train, the shared-context MiniLM, the listwise loss, one epoch) into a scratch cache,
timed end to end as `pcr-ray solve`'s first call pays it (pairs made, model trained, checkpoint written). Every
checkpoint, and each --checkpoint given (e.g. the cached quick PRM), is scored on the same pairs: CSP pairs of
generated physics problems of the `heldout` templates (never trained on), pairwise accuracy with its 95% interval.
Writes <cache>/bench/bench_quick_prm.json (benchmarks/results/ too with PCR_RAY_BENCH_RESULTS=1).

    .venv/bin/python benchmarks/bench_quick_prm.py [--budgets 1500 3000] [--checkpoint DIR ...]
        [--eval-problems 300] [--eval-pairs 1500]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from _machine import add_dry_run, dry_run, machine_info, write_result

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def heldout_pairs(n_problems: int, n_pairs: int, seed: int) -> list[dict[str, Any]]:
    """CSP pairs (every split: no problem of these templates is trained on) of heldout-template physics problems."""
    from pcr_ray.data.physics import generate_problems
    from pcr_ray.negatives.pairs import KIND_GROUPS, PairConfig, pairs_from_problems
    from pcr_ray.prm.checkpoints import select_pairs

    problems = [p.to_dict() for p in generate_problems(n_problems, seed=seed, split="heldout") if p.gold_trace]
    rows = pairs_from_problems(problems, PairConfig(kinds=KIND_GROUPS["csp"], seed=seed))
    return list(select_pairs(rows, n_pairs, seed))


def pair_wins(checkpoint: Path, pairs: list[dict[str, Any]]) -> list[bool]:
    """For each pair, whether the checkpoint scores its positive step above its negative (fp32)."""
    from pcr_ray.prm.scorer import PRMScorer

    sc = PRMScorer.from_checkpoint(checkpoint)
    pos = sc.score([(r["context"], r["pos_step"]) for r in pairs])
    neg = sc.score([(r["context"], r["neg_step"]) for r in pairs])
    return [p > n for p, n in zip(pos, neg, strict=True)]


def pairwise(pairs: list[dict[str, Any]], wins: list[bool]) -> dict[str, Any]:
    """Pairwise accuracy (the positive step scored above the negative) with its Wilson interval, overall and by kind."""
    from pcr_ray.pipeline.stats import wilson

    by_kind: dict[str, list[bool]] = {}
    for r, w in zip(pairs, wins, strict=True):
        by_kind.setdefault(str(r["kind"]), []).append(w)
    lo, hi = wilson(sum(wins), len(wins))
    kinds = {k: {"pairwise_acc": round(sum(v) / len(v), 4), "pairs": len(v)} for k, v in sorted(by_kind.items())}
    return {"pairwise_acc": round(sum(wins) / len(wins), 4), "ci95": [round(lo, 4), round(hi, 4)], "pairs": len(wins),
            "by_kind": kinds}


def train(budget: int, cache: Path) -> tuple[Path, float, dict[str, Any]]:
    """The quick recipe at `budget` train pairs in the scratch cache: (checkpoint, seconds, its recorded training)."""
    import json

    from pcr_ray.prm.checkpoints import ensure_checkpoint

    before = os.environ.get("PCR_RAY_CACHE")
    os.environ["PCR_RAY_CACHE"] = str(cache)
    try:
        t0 = time.perf_counter()
        path = ensure_checkpoint("csp", budget_pairs=budget)
        seconds = time.perf_counter() - t0
    finally:  # the record goes to the user's cache, not the scratch one
        if before is None:
            os.environ.pop("PCR_RAY_CACHE", None)
        else:
            os.environ["PCR_RAY_CACHE"] = before
    meta = json.loads((path / "prm.json").read_text())
    return path, seconds, {k: meta.get(k) for k in ("train", "metrics") if k in meta}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--budgets", type=int, nargs="*", default=[1500, 3000], help="train pairs of each recipe trained")
    ap.add_argument("--checkpoint", nargs="*", default=[], help="trained checkpoints scored beside them")
    ap.add_argument("--eval-problems", type=int, default=300, help="heldout-template physics problems")
    ap.add_argument("--eval-pairs", type=int, default=1500, help="pairs scored (a hash-ranked subset)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the evaluation problems and pairs")
    ap.add_argument("--name", default="bench_quick_prm", help="the result's file name")
    ap.add_argument("--install", action="store_true",
                    help="copy each trained checkpoint into the user's cache (the default budget's is then the "
                         "quick PRM `pcr-ray solve` uses)")
    add_dry_run(ap)
    args = ap.parse_args()
    if args.dry_run:
        raise SystemExit(dry_run(__file__, vars(args)))
    pairs = heldout_pairs(args.eval_problems, args.eval_pairs, args.seed)
    print(f"{len(pairs)} heldout-template pairs")
    runs: list[dict[str, Any]] = []
    for ck in args.checkpoint:
        runs.append({"checkpoint": str(Path(ck).resolve()), **pairwise(pairs, pair_wins(Path(ck), pairs))})
        print(runs[-1]["checkpoint"], runs[-1]["pairwise_acc"], runs[-1]["ci95"])
    with tempfile.TemporaryDirectory(prefix="bench-quick-prm-") as tmp:
        for budget in args.budgets:
            path, seconds, meta = train(budget, Path(tmp) / f"cache_{budget}")
            if args.install:
                from pcr_ray.paths import cache_dir
                from pcr_ray.prm.checkpoints import install_checkpoint

                print(f"installed {install_checkpoint(path, cache_dir() / 'prm' / path.name)}")
            runs.append({"budget_pairs": budget, "train_s": round(seconds, 1), **meta,
                         **pairwise(pairs, pair_wins(path, pairs))})
            print(f"budget {budget}: {seconds:.0f} s, pairwise {runs[-1]['pairwise_acc']} {runs[-1]['ci95']}")
    out = write_result(args.name, {"machine": machine_info(), "eval": {"problems": args.eval_problems,
                                                                      "pairs": len(pairs), "split": "heldout",
                                                                      "seed": args.seed}, "runs": runs})
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
