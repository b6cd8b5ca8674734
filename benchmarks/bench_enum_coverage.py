"""Gold-path coverage of the typed enumerator: the share of problems whose every gold step it offers, per setting.

For each generated physics problem (gold givens, up to --max-gold-steps steps) the gold trace is walked step by
step; at each gold prefix the enumerator is asked for its candidates (the search's request: k = cap, step
mode, the problem's target unit, seed 0), and the prefix counts as covered when one verified candidate computes
the next gold step's quantity (same dimension, value within the oracle's 2e-3: the gold-path oracle's match). A
problem is covered when every prefix is. This is the ceiling a cap and the enumerator options put on any PRM
along the gold path, measured without a search or a PRM (seconds). Each `--setting` is measured on the same
problems in the same run; the first is the reference. Writes benchmarks/results/NAME.json.

    .venv/bin/python benchmarks/bench_enum_coverage.py --seeds 101 202 303 404 --per-seed 200 \
        --setting cap=48 --setting cap=96 --setting cap=48,head_share=0.9,prefer_newest=true
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from typing import Any

from _machine import machine_info, write_result

SETTING_KEYS = {"cap": int, "head_share": float, "prefer_newest": lambda s: s.lower() in ("1", "true", "yes"),
                "head_per_op": int, "seed": int}


def parse_setting(text: str) -> dict[str, Any]:
    """`cap=48,head_share=0.9` -> {'cap': 48, 'head_share': 0.9}; unknown keys are an error naming the known."""
    out: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        if not sep or key not in SETTING_KEYS:
            raise SystemExit(f"--setting {text!r}: expected key=value pairs with keys {sorted(SETTING_KEYS)}")
        out[key] = SETTING_KEYS[key](value)
    return out


def gold_prefixes(problem: Any) -> tuple[Any, list[tuple[Any, Any, tuple[float, Any]]]]:
    """(SearchProblem, [(state before step t, steps before t, (base value, dims) of gold step t), ...])."""
    from pcr_ray.search import SearchProblem
    from pcr_ray.search_strategies.candidates import check_step_candidate
    from pcr_ray.trace import parse_trace
    from pcr_ray.verifier import VerifierState

    sp = SearchProblem.from_problem(problem, givens="gold")
    trace, errors = parse_trace(problem.gold_trace)
    if trace is None or errors:
        raise ValueError(f"{problem.id}: gold trace does not parse")
    state, _ = VerifierState.from_givens(sp.givens)
    out, done = [], []
    for step in trace.steps:
        res = check_step_candidate(state, step, strict=True)
        if not res.ok or res.step is None:
            raise ValueError(f"{problem.id}: gold step {step.op} does not verify")
        var = res.state.env[res.step.out.name]
        out.append((state, tuple(done), (var.base, var.dims)))
        state = res.state
        done.append(res.step)
    return sp, out


def offers(gen: Any, sp: Any, state: Any, prefix: tuple[Any, ...], gold: tuple[float, Any]) -> bool:
    """Whether one of the enumerator's verified candidates at this prefix computes the gold quantity."""
    from pcr_ray.generators.base import ProposalRequest
    from pcr_ray.search_strategies.candidates import check_step_candidate, parse_candidate
    from pcr_ray.search_strategies.gold_oracle import same_quantity

    req = ProposalRequest(sp.id, sp.text, sp.givens, prefix, k=gen.cap, mode="step", target_unit=sp.target_unit,
                          seed=0)
    for raw in gen.propose([req])[0]:
        parsed = parse_candidate(raw, len(prefix))
        if not parsed.ok or parsed.step is None:
            continue
        res = check_step_candidate(state, parsed.step, strict=True)
        if res.ok and res.step is not None:
            var = res.state.env[res.step.out.name]
            if same_quantity((var.base, var.dims), gold):
                return True
    return False


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, nargs="+", default=[101, 202, 303, 404], help="physics generator seeds")
    ap.add_argument("--per-seed", type=int, default=100, help="problems per seed")
    ap.add_argument("--max-gold-steps", type=int, default=4)
    ap.add_argument("--setting", action="append", default=None,
                    help="enumerator options, e.g. cap=96,head_share=0.9,prefer_newest=true (repeatable; "
                         f"keys {sorted(SETTING_KEYS)}; default: cap=48 and cap=96)")
    ap.add_argument("--name", default="bench_enum_coverage")
    args = ap.parse_args()

    from pcr_ray.data.physics import generate_problems
    from pcr_ray.generators.enumerate import EnumeratorGenerator

    settings = [parse_setting(s) for s in (args.setting or ["cap=48", "cap=96"])]
    problems = []
    for seed in args.seeds:
        pool = [p for p in generate_problems(6 * args.per_seed, seed=seed)
                if p.gold_steps and p.gold_steps <= args.max_gold_steps]
        problems += pool[: args.per_seed]
    walks = [gold_prefixes(p) for p in problems]
    out: dict[str, Any] = {"machine": machine_info(), "args": vars(args), "n_problems": len(problems), "settings": []}
    base = None
    for setting in settings:
        gen = EnumeratorGenerator(typed=True, answer_coverage="any", **setting)
        t0 = time.perf_counter()
        covered, missed_ops, missed_depth = 0, Counter(), Counter()
        for (sp, steps), p in zip(walks, problems, strict=True):
            miss = next((t for t, (state, prefix, gold) in enumerate(steps)
                         if not offers(gen, sp, state, prefix, gold)), None)
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
