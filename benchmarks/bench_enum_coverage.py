"""Gold-path coverage of the typed enumerator: the share of problems whose every gold step it offers, per setting.

For each generated physics problem (gold givens, up to --max-gold-steps steps) the gold trace is walked step by
step by mine-pairs' `gold_state` (the search's request at each gold prefix: k = cap, step mode, the problem's
target unit, seed 0), and a prefix counts as covered when it `offered` the gold step: one verified candidate
computes the next gold step's quantity (same dimension, value within 1e-3). A problem is covered when every
prefix is. This is the ceiling a cap and the enumerator options put on any PRM
along the gold path, measured without a search or a PRM (seconds). Each `--setting` is measured on the same
problems in the same run; the first is the reference. Writes <cache>/bench/NAME.json
(benchmarks/results/ too with PCR_RAY_BENCH_RESULTS=1).

    .venv/bin/python benchmarks/bench_enum_coverage.py --seeds 101 202 303 404 --per-seed 200 \
        --setting cap=48 --setting cap=96 --setting cap=48,head_share=0.9
    .venv/bin/python benchmarks/bench_enum_coverage.py --mix assumption --max-gold-steps 8 --setting cap=24
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from typing import Any

from _machine import add_dry_run, dry_run, machine_info, write_result

SETTING_KEYS = {"cap": int, "head_share": float, "head_per_op": int, "seed": int}


def parse_setting(text: str) -> dict[str, Any]:
    """`cap=48,head_share=0.9` -> {'cap': 48, 'head_share': 0.9}; unknown keys are an error naming the known."""
    out: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        if not sep or key not in SETTING_KEYS:
            raise SystemExit(f"--setting {text!r}: expected key=value pairs with keys {sorted(SETTING_KEYS)}")
        out[key] = SETTING_KEYS[key](value)
    return out


def offered(problem: dict[str, Any], cfg: Any, t: int) -> bool:
    """Whether the enumerator of `cfg` offers gold step t of `problem` at its gold prefix (mine-pairs' check)."""
    from pcr_ray.negatives.mined import gold_state

    state, why = gold_state(problem, cfg, t)
    if state is None and why != "no_candidates":
        raise ValueError(f"{problem['id']}: {why}")
    return bool(state is not None and state.offered)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, nargs="+", default=[101, 202, 303, 404], help="physics generator seeds")
    ap.add_argument("--per-seed", type=int, default=100, help="problems per seed")
    ap.add_argument("--max-gold-steps", type=int, default=4)
    ap.add_argument("--mix", default="core", help="physics template mix: core, assumption or all (docs/data.md)")
    ap.add_argument("--split", default="heldout", choices=["heldout", "train", "all"],
                    help="physics templates: the unseen ones (heldout, what evaluations draw), train or all")
    ap.add_argument("--setting", action="append", default=None,
                    help="enumerator options, e.g. cap=96,head_share=0.9 (repeatable; "
                         f"keys {sorted(SETTING_KEYS)}; default: cap=48 and cap=96)")
    ap.add_argument("--name", default="bench_enum_coverage")
    add_dry_run(ap)
    args = ap.parse_args()

    from pcr_ray.data.physics import generate_problems
    from pcr_ray.negatives.mined import MineConfig

    settings = [parse_setting(s) for s in (args.setting or ["cap=48", "cap=96"])]
    if args.dry_run:
        raise SystemExit(dry_run(__file__, {**vars(args), "settings": settings}))
    problems = []
    for seed in args.seeds:
        pool = [p for p in generate_problems(6 * args.per_seed, seed=seed, mix=args.mix, split=args.split)
                if p.gold_steps and p.gold_steps <= args.max_gold_steps]
        problems += pool[: args.per_seed]
    rows = [p.to_dict() for p in problems]
    out: dict[str, Any] = {"machine": machine_info(), "args": vars(args), "n_problems": len(problems), "settings": []}
    base = None
    for setting in settings:
        opts = {k: v for k, v in setting.items() if k not in ("cap", "seed")}
        cfg = MineConfig(cap=setting.get("cap", 48), seed=setting.get("seed", 0), generators={"physics": opts})
        t0 = time.perf_counter()
        covered, missed_ops, missed_depth = 0, Counter(), Counter()
        for row, p in zip(rows, problems, strict=True):
            miss = next((t for t in range(p.gold_steps or 0) if not offered(row, cfg, t)), None)
            if miss is None:
                covered += 1
            else:
                missed_ops[p.gold_trace["steps"][miss]["op"]] += 1
                missed_depth[miss + 1] += 1
        share = covered / max(1, len(problems))
        base = share if base is None else base
        row = {"setting": setting, "covered": covered, "share": round(share, 4),
               "vs_first_points": round(100 * (share - base), 1), "seconds": round(time.perf_counter() - t0, 1),
               "missed_at_step": dict(sorted(missed_depth.items())), "missed_ops": dict(missed_ops.most_common(10))}
        out["settings"].append(row)
        print(f"{str(setting):55s} covered {covered}/{len(problems)} ({share:.1%}, {row['vs_first_points']:+.1f} "
              f"points)  {row['seconds']:.0f} s  misses by step {row['missed_at_step']}  top ops "
              f"{list(missed_ops)[:4]}", flush=True)
    write_result(args.name, out)


if __name__ == "__main__":
    main()
