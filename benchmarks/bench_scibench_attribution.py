"""Why the CPU NS-PRM search misses SciBench's worked-solution physics problems: every miss attributed to one cause.

The 34 problems of fund_sol, class_sol and thermo_sol have hand-written gold traces (pcr_ray/data/scibench_gold.jsonl).
Three searches run on them with the same settings (typed enumerator, beam search, nsprm):

- `extracted`: the PRM with the givens and target the extractor finds in the text (what the pipeline does);
- `gold_givens`: the PRM with the gold trace's givens and answer unit;
- `oracle`: the gold-path oracle (pcr_ray.search.gold_oracle) in the PRM's place, gold givens: the search's ceiling.

A problem `extracted` does not solve is attributed to the first cause that holds, in pipeline order:

1. `givens_not_in_text`: the solution needs a number the text does not state (the Sun's mass, a figure's angle);
2. `givens_extraction`: a gold given the text states is not extracted (value and dimension);
3. `target`: the extracted target is unknown or not of the answer's dimension;
4. `primitive`: the book's formula is not a registry primitive (the gold file's `missing_primitives`: the trace
   spells it out with arithmetic and literals such as 1/2) and the oracle does not solve the problem;
5. `search_ceiling`: the gold trace is longer than max_steps, or the oracle does not solve it (the enumerator does
   not offer a gold step, or the beam loses the gold path);
6. `ranking`: the oracle solves it with gold givens but the PRM does not;
7. `extracted_givens_other`: the PRM solves it with gold givens but not with the extracted ones (extra or
   differently read givens).

The book's misprinted answer (thermo_sol 14.4, flagged in the gold file) is graded against the gold trace's value.
Writes benchmarks/results/bench_scibench_attribution.json (with --results) and the cache copy.

    .venv/bin/python benchmarks/bench_scibench_attribution.py [--cap 48] [--beam 2] [--max-steps 8] \\
        [--checkpoint PATH] [--oracle-only] [--results]
"""

from __future__ import annotations

import argparse
import os
import time
from collections import Counter
from dataclasses import replace
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from _machine import add_dry_run, dry_run  # noqa: E402
from _provenance import save  # noqa: E402

CAUSES = ("givens_not_in_text", "givens_extraction", "target", "primitive", "search_ceiling", "ranking",
          "extracted_givens_other")


def _graded_problem(g: Any) -> Any:
    """The Problem to grade against: the book's answer, or the gold trace's value where the book is wrong."""
    from pcr_ray.core.units import unit_info
    from pcr_ray.core.verifier import verify

    if not g.book_error:
        return g.problem
    a = verify(g.problem.gold_trace).answer[0]
    return replace(g.problem, answer_value=unit_info(g.problem.answer_unit or "dimensionless").from_base(a.base))


def _solved(rows: list[Any], graded: list[Any]) -> list[bool]:
    from pcr_ray.grading import grade_problem

    return [bool(r.answer_value is not None and grade_problem(r.answer_value, p, pred_unit=r.answer_unit).correct)
            for r, p in zip(rows, graded, strict=True)]


def _extraction(g: Any, record: dict[str, Any]) -> dict[str, Any]:
    """Which gold givens the extractor misses, and whether its target has the answer's dimension."""
    from pcr_ray.core.trace import Given
    from pcr_ray.core.units import format_dims, unit_info
    from pcr_ray.data.givens import extract, given_matches

    ex = extract(g.problem.text)
    missed = [x["name"] for x in record["givens"] if x["in_text"]
              and not given_matches(Given(x["name"], float(x["value"]), x["unit"], ""), ex.givens)]
    want = unit_info(record["answer"][0]["unit"]).dims
    return {"not_in_text": [x["name"] for x in record["givens"] if not x["in_text"]], "missed": missed,
            "n_extracted": len(ex.givens), "target": ex.target.unit or (format_dims(ex.target.dims)
                                                                       if ex.target.known else None),
            "target_right": bool(ex.target.known and ex.target.dims == want)}


def _first_not_offered(g: Any, cap: int) -> int | None:
    """The first gold prefix at which the typed enumerator (cap) does not offer the gold step or answer."""
    from pcr_ray.negatives.mined import MineConfig, gold_state

    cfg = MineConfig(cap=cap, max_steps=64)
    row = g.problem.to_dict()
    for t in range(len(g.problem.gold_trace["steps"]) + 1):
        st, status = gold_state(row, cfg, t)
        if st is None and status == "no_candidates":
            continue  # only the gold action is valid here: it is offered
        if st is None or not st.offered:
            return t
    return None


def attribute(info: dict[str, Any], max_steps: int) -> tuple[str, list[str]]:
    """(the first cause, every cause that holds) of a problem the extracted-givens search did not solve."""
    causes = []
    if info["extraction"]["not_in_text"]:
        causes.append("givens_not_in_text")
    if info["extraction"]["missed"]:
        causes.append("givens_extraction")
    if not info["extraction"]["target_right"]:
        causes.append("target")
    if info["missing_primitives"] and not info["oracle"]:
        causes.append("primitive")
    if info["gold_steps"] > max_steps or not info["oracle"]:
        causes.append("search_ceiling")
    elif info.get("gold_givens") is False:
        causes.append("ranking")
    if not causes and info.get("gold_givens"):
        causes.append("extracted_givens_other")
    return (causes[0] if causes else "unattributed"), causes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--cap", type=int, default=48, help="typed enumerator candidates per beam and step")
    ap.add_argument("--wide-cap", type=int, default=512,
                    help="a second cap at which the gold path's offer is checked (the pipeline's default)")
    ap.add_argument("--beam", type=int, default=2)
    ap.add_argument("--max-steps", type=int, default=8)
    ap.add_argument("--checkpoint", default=None, help="PRM checkpoint (default: the cached csp one)")
    ap.add_argument("--oracle-only", action="store_true", help="no PRM: the oracle run and the upstream causes only")
    ap.add_argument("--problems", type=int, default=None, help="only the first N problems (a quick check)")
    ap.add_argument("--results", action="store_true", help="also write benchmarks/results/")
    add_dry_run(ap)
    args = ap.parse_args()
    if args.dry_run:
        raise SystemExit(dry_run(__file__, vars(args)))

    from pcr_ray.data.scibench_gold import load_scibench_gold, read_gold_records
    from pcr_ray.generators.enumerate import EnumeratorGenerator
    from pcr_ray.search import SearchConfig, SearchProblem, run_search
    from pcr_ray.search.gold_oracle import GoldPathScorer

    gold = load_scibench_gold()[: args.problems]
    records = {r["id"]: r for r in read_gold_records()}
    graded = [_graded_problem(g) for g in gold]
    cfg = SearchConfig(method="nsprm", beam_width=args.beam, max_steps=args.max_steps, aggregate="min")
    gen = EnumeratorGenerator(typed=True, cap=args.cap, answer_coverage="any")
    gold_sp = [SearchProblem.from_problem(g.problem, givens="gold") for g in gold]
    ext_sp = [SearchProblem.from_problem(g.problem, givens="extract") for g in gold]
    runs: dict[str, Any] = {}
    t0 = time.perf_counter()
    oracle_rows = run_search(gold_sp, gen, GoldPathScorer.from_problems([g.problem for g in gold]), cfg)
    runs["oracle"] = {"solved": _solved(oracle_rows, graded), "wall_s": round(time.perf_counter() - t0, 1)}
    checkpoint = None
    if not args.oracle_only:
        import torch

        torch.set_num_threads(1)
        from pcr_ray.prm.checkpoints import ensure_checkpoint
        from pcr_ray.prm.scorer import PRMScorer

        checkpoint = args.checkpoint or str(ensure_checkpoint("csp"))
        scorer = PRMScorer.from_checkpoint(checkpoint, int8=True, max_batch=64)
        for name, sps in (("gold_givens", gold_sp), ("extracted", ext_sp)):
            t0 = time.perf_counter()
            rows = run_search(sps, gen, scorer, cfg)
            runs[name] = {"solved": _solved(rows, graded), "wall_s": round(time.perf_counter() - t0, 1),
                          "answers": [[r.answer_value, r.answer_unit] for r in rows]}
    problems = []
    for k, g in enumerate(gold):
        info: dict[str, Any] = {"id": g.id, "gold_steps": g.problem.gold_steps, "book_error": g.book_error,
                                "missing_primitives": list(g.missing_primitives),
                                "extraction": _extraction(g, records[g.id]),
                                "first_not_offered": _first_not_offered(g, args.cap),
                                f"first_not_offered_cap{args.wide_cap}": _first_not_offered(g, args.wide_cap),
                                "oracle": runs["oracle"]["solved"][k]}
        if not args.oracle_only:
            info["gold_givens"] = runs["gold_givens"]["solved"][k]
            info["extracted"] = runs["extracted"]["solved"][k]
            info["extracted_answer"] = runs["extracted"]["answers"][k]
        if info.get("extracted"):
            info["cause"], info["causes"] = "solved", []
        else:
            info["cause"], info["causes"] = attribute(info, args.max_steps)
        problems.append(info)
        print(f"{g.id:30s} steps {g.problem.gold_steps:2d}  oracle {int(info['oracle'])}  "
              f"gold {info.get('gold_givens', '-')!s:5s} extracted {info.get('extracted', '-')!s:5s} "
              f"-> {info['cause']:24s} {','.join(info['causes'])}", flush=True)
    table = Counter(p["cause"] for p in problems)
    out = {"settings": {"cap": args.cap, "beam_width": args.beam, "max_steps": args.max_steps, "method": "nsprm",
                        "aggregate": "min", "generator": gen.identity, "checkpoint": checkpoint,
                        "oracle_only": args.oracle_only},
           "n": len(problems), "solved": {k: sum(v["solved"]) for k, v in runs.items()},
           "wall_s": {k: v["wall_s"] for k, v in runs.items()},
           "attribution": {c: table.get(c, 0) for c in ("solved", *CAUSES, "unattributed")},
           "causes_holding": {c: sum(c in p["causes"] for p in problems) for c in CAUSES},
           "gold_longer_than_max_steps": sum(p["gold_steps"] > args.max_steps for p in problems),
           "gold_step_not_offered": sum(p["first_not_offered"] is not None for p in problems),
           f"gold_step_not_offered_cap{args.wide_cap}": sum(p[f"first_not_offered_cap{args.wide_cap}"] is not None
                                                           for p in problems),
           "problems": problems}
    print({k: v for k, v in out.items() if k not in ("problems", "settings")})
    save("bench_scibench_attribution", out, args.results)


if __name__ == "__main__":
    main()
