"""First-error benchmark on unit-bearing traces (docs/first_error_bench.md): the verifier, the PRM and the two together.

Builds the benchmark (pcr_ray.negatives.first_error) from generated physics problems and GSM8K test gold traces,
writes it as a parquet, scores every step of every trace with the PRM, chooses the PRM's threshold on the
validation split (alone, and for the combined rule), and reports ProcessBench's F1 on the test split: the
harmonic mean of the accuracy on traces with an error (earliest wrong step exactly) and on correct traces
("no error"), with 95% Wilson intervals, by data source and by how the error was planted (CSP / random).
The PRM is the quick CSP checkpoint the tests train (pcr_ray.prm.checkpoints; trained if missing) unless
--checkpoint names another. Writes <cache>/first_error/<name>.json and the parquet beside it (or into --out).

    python -m pcr_ray.bench.first_error [--physics 400] [--gsm8k 400] [--seed 0] [--out DIR]
    python benchmarks/bench_first_error.py ... [--results]     # from a checkout: also benchmarks/results/
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any

from pcr_ray.bench.dry_run import add_dry_run, dry_run
from pcr_ray.bench.records import git_revision, machine_info
from pcr_ray.configs import to_plain
from pcr_ray.core.trace import parse_trace
from pcr_ray.data.physics import generate_problems
from pcr_ray.data.readers import load_dataset
from pcr_ray.evaluate import compose_config
from pcr_ray.negatives.first_error import (
    BENCH_COLUMNS,
    BenchConfig,
    best_threshold,
    build_bench,
    combined_prediction,
    score_predictions,
    threshold_prediction,
    verifier_prediction,
)
from pcr_ray.paths import cache_dir
from pcr_ray.pipeline.stats import wilson
from pcr_ray.prm.build import build_scorer
from pcr_ray.prm.checkpoints import ensure_checkpoint
from pcr_ray.search.scoring import pair_for


def load_problems(n_physics: int, physics_seed: int, n_gsm8k: int) -> list[Any]:
    probs = list(generate_problems(n=n_physics, seed=physics_seed, split="heldout")) if n_physics else []
    if n_gsm8k:
        probs += [p for p in load_dataset("gsm8k_test") if p.gold_trace][:n_gsm8k]
    return probs


def write_parquet(items: list[Any], path: Path) -> Path:
    import pyarrow as pa  # heavy: pyarrow
    import pyarrow.parquet as pq  # heavy: pyarrow

    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [it.to_record() for it in items]
    pq.write_table(pa.Table.from_pylist(rows).select(list(BENCH_COLUMNS)), path)
    return path


def step_scores(items: list[Any], checkpoint: Path | None, int8: bool, prm_overrides: list[str] | None = None
                ) -> tuple[list[list[float]], float, int]:
    """The PRM's score of every step of every trace (its prefix as context, claimed values shown). With
    prm_overrides (e.g. ["prm=qwen_math_prm_7b", "prm.device=cuda"]) the scorer is the one that config builds."""
    from pcr_ray.prm.scorer import PRMScorer  # heavy: torch

    if prm_overrides:
        scorer = build_scorer(to_plain(compose_config(list(prm_overrides)))["prm"])
    else:
        scorer = PRMScorer.from_checkpoint(checkpoint, int8=int8, runtime="onnx" if int8 else "torch")
    pairs: list[tuple[str, str]] = []
    spans: list[tuple[int, int]] = []
    for it in items:
        trace, _ = parse_trace(json.loads(it.trace_json))
        start = len(pairs)
        for t, step in enumerate(trace.steps):
            pairs.append(pair_for(it.text, trace.givens, trace.steps[:t], step, with_values=True))
        spans.append((start, len(pairs)))
    t0 = time.perf_counter()
    flat = scorer.score(pairs)
    dt = time.perf_counter() - t0
    return [flat[a:b] for a, b in spans], dt, len(pairs)


def scored(items: list[Any], preds: list[int]) -> dict[str, Any]:
    s = score_predictions([it.label for it in items], preds)
    d = s.to_dict()
    d["acc_error_ci95"] = list(wilson(s.hits_error, s.n_error))
    d["acc_correct_ci95"] = list(wilson(s.hits_correct, s.n_correct))
    return d


def breakdown(items: list[Any], preds: list[int]) -> dict[str, Any]:
    """The score on all test items, by data source, and (accuracy on errors) by how the error was planted."""
    out = {"all": scored(items, preds)}
    for src in sorted({it.source for it in items}):
        sub = [(it, p) for it, p in zip(items, preds, strict=True) if it.source == src]
        out[f"source={src}"] = scored([it for it, _ in sub], [p for _, p in sub])
    for how in ("csp", "random"):
        sub = [(it, p) for it, p in zip(items, preds, strict=True) if it.error_source == how]
        d = scored([it for it, _ in sub], [p for _, p in sub])
        out[f"errors={how}"] = {k: d[k] for k in ("n_error", "hits_error", "acc_error", "acc_error_ci95")}
    return out


def main(argv: list[str] | None = None, results_dir: Path | None = None) -> int:
    """The benchmark's command line; `--results` writes results_dir/<name>.json too (a checkout's
    benchmarks/results/, which benchmarks/bench_first_error.py passes)."""
    ap = argparse.ArgumentParser(prog="python -m pcr_ray.bench.first_error", description=__doc__.split("\n\n")[0])
    ap.add_argument("--physics", type=int, default=400, help="generated physics problems")
    ap.add_argument("--physics-seed", type=int, default=2027, help="the physics generator's seed (not an eval seed)")
    ap.add_argument("--gsm8k", type=int, default=400, help="GSM8K test problems with a gold trace (the first N)")
    ap.add_argument("--seed", type=int, default=0, help="the benchmark's seed (which traces get which error)")
    ap.add_argument("--checkpoint", default=None, help="PRM checkpoint (default: the quick CSP PRM, trained if "
                    "missing)")
    ap.add_argument("--prm", nargs="+", default=None, metavar="OVERRIDE",
                    help="score with the PRM these config overrides name, e.g. --prm prm=qwen_math_prm_7b "
                         "prm.device=cuda (an off-the-shelf causal-LM PRM); default: --checkpoint")
    ap.add_argument("--fp32", action="store_true", help="score in fp32 (default: ONNX Runtime int8, as the demo)")
    ap.add_argument("--name", default="bench_first_error", help="result name")
    ap.add_argument("--out", default=None, help="folder for the JSON and parquet (default: <cache>/first_error)")
    ap.add_argument("--results", action="store_true",
                    help="also write benchmarks/results/<name>.json (from a checkout: benchmarks/bench_first_error.py)")
    add_dry_run(ap)
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the PRM backbones load from the local cache
    if args.results and results_dir is None:
        ap.error("--results writes a checkout's benchmarks/results/: run benchmarks/bench_first_error.py")
    if args.dry_run:
        prm = to_plain(compose_config(list(args.prm)))["prm"] if args.prm else None
        return dry_run(__file__, {**vars(args), "prm_config": prm})

    t_all = time.perf_counter()
    out_dir = Path(args.out) if args.out else cache_dir() / "first_error"
    problems = load_problems(args.physics, args.physics_seed, args.gsm8k)
    t0 = time.perf_counter()
    items = build_bench(problems, BenchConfig(seed=args.seed))
    build_s = time.perf_counter() - t0
    parquet = write_parquet(items, out_dir / f"{args.name}.parquet")
    if args.prm:
        ck = None
    elif args.checkpoint:
        ck = Path(args.checkpoint)
    else:
        ck = ensure_checkpoint("csp")
    scores, prm_s, n_pairs = step_scores(items, ck, int8=not args.fp32, prm_overrides=args.prm)
    verifier = [verifier_prediction(it.trace_json) for it in items]
    val = [i for i, it in enumerate(items) if it.split == "validation"]
    test = [i for i, it in enumerate(items) if it.split == "test"]
    labels_val = [items[i].label for i in val]
    th_prm, val_prm = best_threshold(labels_val, [scores[i] for i in val])
    th_both, val_both = best_threshold(labels_val, [scores[i] for i in val], [verifier[i] for i in val])
    test_items = [items[i] for i in test]
    preds = {
        "verifier": [verifier[i] for i in test],
        "prm": [threshold_prediction(scores[i], th_prm) for i in test],
        "verifier+prm": [combined_prediction(verifier[i], scores[i], th_both) for i in test],
    }
    counts = {
        "items": len(items), "problems": len(problems), "validation": len(val), "test": len(test),
        "with_error": sum(it.label >= 0 for it in items), "correct": sum(it.label < 0 for it in items),
        "by_source": {s: sum(it.source == s for it in items) for s in sorted({it.source for it in items})},
        "by_error_kind": {k: sum(it.error_kind == k for it in items)
                          for k in sorted({it.error_kind for it in items if it.error_kind})},
        "errors_passing_verifier": sum(it.label >= 0 and it.verifier_ok for it in items),
    }
    result = {
        "command": shlex.join([sys.executable, *sys.argv]),
        "git_revision": git_revision(),
        "machine": machine_info(),
        "note": "other jobs shared the machine; times are indicative only",
        "parquet": str(parquet),
        "checkpoint": str(ck) if ck else " ".join(args.prm),
        "prm_int8": not args.fp32,
        "seed": args.seed, "physics_seed": args.physics_seed,
        "counts": counts,
        "thresholds": {"prm": th_prm, "verifier+prm": th_both},
        "validation_f1": {"prm": val_prm.f1, "verifier+prm": val_both.f1},
        "test": {name: breakdown(test_items, p) for name, p in preds.items()},
        "seconds": {"build": round(build_s, 2), "prm_scoring": round(prm_s, 2), "pairs_scored": n_pairs,
                    "total": round(time.perf_counter() - t_all, 2)},
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{args.name}.json"
    path.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    print(f"wrote {path}")
    if args.results and results_dir is not None:
        results_dir.mkdir(parents=True, exist_ok=True)
        (results_dir / f"{args.name}.json").write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
        print(f"wrote {results_dir / (args.name + '.json')}")
    for name, d in result["test"].items():
        a = d["all"]
        print(f"{name:>13}: F1 {a['f1']:.3f}  acc(error) {a['acc_error']:.3f} ({a['n_error']})  "
              f"acc(correct) {a['acc_correct']:.3f} ({a['n_correct']})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
