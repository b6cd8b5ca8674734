"""Pairwise accuracy of PRM checkpoints alone and of every logit-averaged combination of them, on one pair split.

Each checkpoint scores the split's verifier-passing pairs once (the same 300 pairs per kind `eval-prm
limit_per_kind=300` takes); a combination's score is the mean of its members' standardized logits. Use it to
ask whether combining training rounds ranks better than the best round alone (select on `validation`, confirm
on `test`). Logits are cached under .cache/ensemble/ (one file per checkpoint and split). Writes <cache>/bench/NAME.json
(benchmarks/results/ too with PCR_RAY_BENCH_RESULTS=1).

    .venv/bin/python benchmarks/bench_prm_ensemble.py --split validation \
        --checkpoints .cache/prm_full/csp2 .cache/prm_full/csp3 .cache/prm_full/csp5 .cache/prm_full/csp7
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import os
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from _machine import add_dry_run, dry_run, machine_info, write_result  # noqa: E402

KINDS = ("principle_swap", "variable_substitution", "alternative_step", "answer_timing")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoints", nargs="+", required=True)
    ap.add_argument("--split", default="test", choices=["train", "validation", "test"])
    ap.add_argument("--limit-per-kind", type=int, default=300)
    ap.add_argument("--name", default=None, help="result name (default: bench_prm_ensemble_SPLIT)")
    add_dry_run(ap)
    args = ap.parse_args()
    if args.dry_run:
        raise SystemExit(dry_run(__file__, vars(args)))

    import numpy as np

    from pcr_ray.paths import cache_dir
    from pcr_ray.pipeline.eval_prm import distinct_texts, read_split, select_pairs
    from pcr_ray.pipeline.make_pairs import default_pairs_dir
    from pcr_ray.prm.scorer import PRMScorer

    df = select_pairs(read_split(default_pairs_dir(), args.split, False), KINDS, args.limit_per_kind)
    texts = distinct_texts(df)
    pairs = list(zip(texts["context"], texts["step"], strict=True))
    digest = hashlib.sha1("\n".join(c + "\t" + s for c, s in pairs).encode()).hexdigest()[:12]
    index = {p: i for i, p in enumerate(pairs)}
    i_pos = np.array([index[(c, s)] for c, s in zip(df["context"], df["pos_step"], strict=True)])
    i_neg = np.array([index[(c, s)] for c, s in zip(df["context"], df["neg_step"], strict=True)])
    kinds = df["kind"].to_numpy()

    store = cache_dir() / "ensemble"
    store.mkdir(parents=True, exist_ok=True)
    logits: dict[str, Any] = {}
    for ck in args.checkpoints:
        name = Path(ck).name
        f = store / f"{name}_{args.split}_{digest}.npy"
        if not f.exists():
            t0 = time.perf_counter()
            np.save(f, np.asarray(PRMScorer.from_checkpoint(ck, max_batch=64).logits(pairs)))
            print(f"scored {len(pairs)} texts with {ck} in {time.perf_counter() - t0:.0f} s", flush=True)
        z = np.load(f)
        logits[name] = (z - z.mean()) / (z.std() or 1.0)

    def accuracy(score: Any) -> dict[str, float]:
        won = score[i_pos] > score[i_neg]
        out = {k: round(100 * float(won[kinds == k].mean()), 1) for k in KINDS if (kinds == k).any()}
        return {**out, "all": round(100 * float(won.mean()), 1)}

    combos: dict[str, dict[str, float]] = {}
    for r in range(1, len(logits) + 1):
        for members in itertools.combinations(logits, r):
            combos["+".join(members)] = accuracy(sum(logits[m] for m in members) / len(members))
    for label, acc in sorted(combos.items(), key=lambda kv: kv[1]["all"]):
        print(f"{label:50s} all {acc['all']:5.1f}%  " + "  ".join(f"{k} {acc[k]:.1f}" for k in KINDS if k in acc))
    write_result(args.name or f"bench_prm_ensemble_{args.split}",
                 {"machine": machine_info(), "split": args.split, "pairs": int(len(df)), "texts": len(pairs),
                  "checkpoints": args.checkpoints, "accuracy": combos})


if __name__ == "__main__":
    main()
