"""CSP generation throughput (pairs/s on one core) next to the random perturbation generator, same traces, same run.

Corpus: GSM8K train gold traces (when the data is present), procedural physics traces (when the generator is
installed) and seeded random walks over the registry. Each gold trace is verified once (prepare_gold), then
all steps are perturbed; every CSP negative is verified in full (the guarantee), as in `pcr-ray make-pairs`.
Writes <cache>/bench/bench_csp.json
(benchmarks/results/ too with PCR_RAY_BENCH_RESULTS=1).

    .venv/bin/python benchmarks/bench_csp.py [--traces 400]
"""

from __future__ import annotations

import argparse
import itertools
import time

from _machine import add_dry_run, dry_run, machine_info, write_result

from pcr_ray.negatives.csp import CSPConfig, counterfactuals, prepare_gold, random_negatives


def corpus(n: int) -> dict[str, list]:
    out: dict[str, list] = {}
    try:
        from pcr_ray.data.readers import iter_gsm8k

        out["gsm8k"] = [p.gold_trace for p in itertools.islice(iter_gsm8k("train"), 2 * n) if p.gold_trace][:n]
    except Exception as exc:  # noqa: BLE001
        print(f"(no GSM8K traces: {exc})")
    try:
        from pcr_ray.data.physics import generate_problems

        out["physics"] = [p.gold_trace for p in generate_problems(n=n, seed=123) if p.gold_trace][:n]
    except Exception as exc:  # noqa: BLE001
        print(f"(no physics traces: {exc})")
    from tests.trace_factory import random_trace

    out["registry_walk"] = [random_trace(i).to_dict() for i in range(n)]
    return out


def measure(traces: list, fn, reps: int = 1) -> dict:
    golds = [prepare_gold(t) for t in traces]
    steps = sum(len(g.trace.steps) for g in golds)
    t0 = time.perf_counter()
    n = 0
    for _ in range(reps):
        for i, g in enumerate(golds):
            n += len(fn(g, str(i)))
    dt = time.perf_counter() - t0
    return {"traces": len(golds) * reps, "steps": steps * reps, "pairs": n, "seconds": round(dt, 3),
            "pairs_per_s": round(n / dt, 1), "steps_per_s": round(steps * reps / dt, 1)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--traces", type=int, default=400)
    add_dry_run(ap)
    args = ap.parse_args()
    if args.dry_run:
        raise SystemExit(dry_run(__file__, vars(args)))
    cfg = CSPConfig()
    results = {}
    for name, traces in corpus(args.traces).items():
        csp = measure(traces, lambda g, k: counterfactuals(g, key=k, config=cfg))
        rnd = measure(traces, lambda g, k: random_negatives(g, key=k))
        results[name] = {"csp": csp, "random": rnd,
                         "csp_pairs_per_gold_step": round(csp["pairs"] / max(csp["steps"], 1), 3)}
        print(f"{name:<14} CSP {csp['pairs_per_s']:>8} pairs/s ({csp['pairs']} pairs from {csp['traces']} traces, "
              f"{csp['steps_per_s']} gold steps/s)   random {rnd['pairs_per_s']:>8} pairs/s   "
              f"(random is {rnd['pairs_per_s'] / max(csp['pairs_per_s'], 1e-9):.1f}x faster per pair)")
    write_result("bench_csp", {"machine": machine_info(), "single_process": True, "config": {
        "max_per_kind": cfg.max_per_kind, "final_verify": cfg.final_verify, "traces": args.traces}, "results": results})


if __name__ == "__main__":
    main()
