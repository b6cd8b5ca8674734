"""Acc@1 of nsprm, prm_only, verifier_only and greedy side by side, with the enumerator and the MiniLM PRM on CPU.

Generated physics problems (up to --max-gold-steps steps) and a GSM8K test sample (problems whose calculator
annotations convert to a gold trace), searched from the givens extracted from the text (--givens extract) or from
the gold trace's givens and answer unit (--givens gold: oracle givens; the summary's `givens` and every method's
printed line say so). The four methods share one generator: the
type-blind enumerator, so that nsprm and prm_only differ by the verifier filter alone; the verifier-filtered
methods with the typed enumerator (an optimisation: constraints applied while enumerating) get their own rows. Reports
candidate counts and the PRM calls the verifier saved (prm_only's PRM forward passes minus nsprm's).
GSM8K uses the four arithmetic ops and the literals 2 and 100 (the ops and the most common constants of the
converted annotations); physics uses every primitive. Answer declarations are scored by the PRM like steps.
`prm_only` ranks with the conventional PRM (random-perturbation negatives), as the paper's PRM baseline does;
the other methods with the NS-PRM. Writes the summary to <cache>/bench/NAME.json (and, with --out DIR, to
DIR/NAME.json: a run folder's copy) and the per-problem records to <cache>/bench/NAME_records.jsonl (what
benchmarks/bench_answer_vote.py reads). From a checkout, `benchmarks/bench_search_methods.py` is the same command;
with PCR_RAY_BENCH_RESULTS=1 it also writes benchmarks/results/NAME.json.

    python -m pcr_ray.bench.search_methods [--physics 30] [--gsm8k 20] [--beam 2] \
        [--checkpoint .cache/prm/csp] [--baseline-checkpoint .cache/prm/random] [--name bench_search_methods] \
        [--generators blind typed] [--methods nsprm prm_only verifier_only greedy] [--givens extract|gold] \
        [--oracle | --gold-ranks]

--oracle puts the gold-path oracle in the NS-PRM's place (it scores by the gold trace): the ceiling of the
search settings, what a perfect PRM along the gold path would solve, from the givens --givens names (with
extracted givens it also counts what extraction loses). --gold-ranks lets the oracle drive the NS-PRM rows while
the NS-PRM scores the same candidates on the side: where it ranks the gold step among the verified candidates at
each gold prefix (first, within the beam, median), its share of the misses apart from the ceiling.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from pcr_ray.bench.dry_run import add_dry_run, dry_run
from pcr_ray.bench.records import machine_info, records_path, write_result
from pcr_ray.data.physics import generate_problems
from pcr_ray.data.readers import load_dataset
from pcr_ray.generators.enumerate import EnumeratorGenerator
from pcr_ray.grading import grade_problem
from pcr_ray.pipeline.metrics import ORACLE_GIVENS
from pcr_ray.prm.checkpoints import ensure_checkpoint
from pcr_ray.prm.ensemble import PRMEnsemble
from pcr_ray.search import SearchConfig, SearchProblem, run_search
from pcr_ray.search.gold_oracle import GoldPathScorer, GoldRankProbe

METHODS = ("nsprm", "prm_only", "verifier_only", "greedy")


def _problems(args: argparse.Namespace) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    phys = [p for p in generate_problems(600, seed=args.seed, split="heldout")
            if p.gold_steps and p.gold_steps <= args.max_gold_steps]
    if args.physics:
        out["physics"] = [(p, SearchProblem.from_problem(p, givens=args.givens)) for p in phys[: args.physics]]
    if args.gsm8k:
        try:
            gsm = [p for p in load_dataset("gsm8k_test", limit=4 * args.gsm8k + 200) if p.gold_trace]

            random.Random(args.seed).shuffle(gsm)
            out["gsm8k"] = [(p, SearchProblem.from_problem(p, givens=args.givens)) for p in gsm[: args.gsm8k]]
        except Exception as exc:  # noqa: BLE001
            print(f"(no GSM8K sample: {exc})")
    return out


def _generators(dataset: str, args: argparse.Namespace) -> dict[str, Any]:
    if dataset == "gsm8k":
        kw = {"ops": ("add", "sub", "mul", "div"), "literals": (2, 100), "answer_coverage": args.gsm8k_coverage,
              "out_units": "operands"}
    else:
        kw = {"answer_coverage": "any"}
    kw |= {"head_share": args.head_share, "seed": args.enum_seed}
    return {"blind": EnumeratorGenerator(typed=False, cap=args.blind_cap, **kw),
            "typed": EnumeratorGenerator(typed=True, cap=args.typed_cap, **kw)}


def _summ(rows: list[Any], golds: list[Any]) -> dict[str, Any]:
    correct = [bool(r.answer_value is not None and grade_problem(r.answer_value, g, pred_unit=r.answer_unit).correct)
               for r, g in zip(rows, golds, strict=True)]
    n = len(rows)
    by_h: dict[str, list[bool]] = {}
    for c, g in zip(correct, golds, strict=True):
        by_h.setdefault("short(<=3)" if (g.gold_steps or 0) <= 3 else "long(>3)", []).append(c)
    return {
        "n": n, "acc": round(sum(correct) / n, 4),
        "answered": round(sum(r.answer_value is not None for r in rows) / n, 4),
        "acc_by_horizon": {k: round(sum(v) / len(v), 4) for k, v in sorted(by_h.items())},
        "candidates": sum(r.n_proposed for r in rows), "parsed": sum(r.n_parsed for r in rows),
        "verified": sum(r.n_verified for r in rows), "prm_pairs": sum(r.n_scored for r in rows),
        "prm_forward": sum(r.n_prm_calls for r in rows),
        "stop_reasons": {s: sum(r.stop_reason == s for r in rows) for s in sorted({r.stop_reason for r in rows})},
        "silent_failures": sum(1 for r, c in zip(rows, correct, strict=True) if r.answer_value is not None and not c),
    }


def main(argv: list[str] | None = None, results_dir: Path | None = None) -> int:
    """The benchmark's command line; the summary also goes to results_dir/NAME.json when given (a checkout's
    benchmarks/results/: benchmarks/bench_search_methods.py passes it with PCR_RAY_BENCH_RESULTS=1)."""
    ap = argparse.ArgumentParser(prog="python -m pcr_ray.bench.search_methods", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--physics", type=int, default=30)
    ap.add_argument("--gsm8k", type=int, default=20)
    ap.add_argument("--max-gold-steps", type=int, default=4)
    ap.add_argument("--beam", type=int, default=2)
    ap.add_argument("--max-steps", type=int, default=6)
    ap.add_argument("--aggregate", default="min")
    ap.add_argument("--n-complete", type=int, default=1, help="answered traces collected before a problem stops")
    ap.add_argument("--stop", default="first", choices=["first", "best"],
                    help="first: stop at the first answered trace kept; best: only once no live beam scores above it")
    ap.add_argument("--answer-selection", default="best", choices=["best", "vote"],
                    help="which answered trace is returned: the best-scored, or weighted majority over answers")
    ap.add_argument("--blind-cap", type=int, default=128, help="type-blind candidates per beam and step")
    ap.add_argument("--typed-cap", type=int, default=48)
    ap.add_argument("--head-share", type=float, default=0.5,
                    help="beyond the cap, the share of it the enumerator takes in priority order (rest sampled)")
    ap.add_argument("--enum-seed", type=int, default=0,
                    help="the enumerator's seed (which candidates the sampled part of the cap holds)")
    ap.add_argument("--gsm8k-coverage", default="any", choices=["any", "all"])
    ap.add_argument("--fp32", action="store_true", help="score in fp32 (default: ONNX Runtime int8)")
    ap.add_argument("--bf16", action="store_true", help="score batched under bfloat16 autocast instead of int8 "
                    "(CPUs with AVX512-BF16 or AMX)")
    ap.add_argument("--device", default="cpu",
                    help="torch device of the PRM, e.g. cuda on a GPU node (scores in fp32 there, or bf16 with "
                         "--bf16: int8 is CPU-only)")
    ap.add_argument("--checkpoint", default=None, nargs="+",
                    help="NS-PRM checkpoint (default: the cached csp one); several: score by their mean logit "
                         "(pcr_ray.prm.ensemble, one forward pass per member)")
    ap.add_argument("--baseline-checkpoint", default=None,
                    help="conventional PRM for prm_only (default: the cached random one)")
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--methods", nargs="+", default=list(METHODS))
    ap.add_argument("--generators", nargs="+", default=["blind", "typed"], choices=["blind", "typed"],
                    help="enumerator modes to run (typed alone: the verifier-filtered rows only, a quick check)")
    ap.add_argument("--max-length", type=int, default=None,
                    help="PRM tokens per (context, candidate); longer contexts lose tokens from their start "
                         "(default: the length the checkpoint was trained at)")
    ap.add_argument("--givens", default="extract", choices=["extract", "gold"],
                    help="where the search's givens and asked unit come from: the problem text, or the gold trace "
                         "(an oracle ablation: labelled 'oracle givens')")
    ap.add_argument("--oracle", action="store_true",
                    help="score with the gold-path oracle instead of the NS-PRM (pcr_ray.search."
                         "gold_oracle): the ceiling of these search settings; prm_only keeps its PRM")
    ap.add_argument("--gold-ranks", action="store_true",
                    help="the oracle drives the NS-PRM rows while the NS-PRM scores the same candidates on the side: "
                         "each row reports the oracle's accuracy (the ceiling) and, in `gold_ranks`, where the NS-PRM "
                         "ranks the gold step (and answer) among the verified candidates at each gold prefix")
    ap.add_argument("--name", default="bench_search_methods", help="result name (<cache>/bench/NAME.json)")
    ap.add_argument("--out", default=None, help="a run folder: also write the summary to OUT/NAME.json "
                    "(pcr-ray listwise-rounds' last step)")
    add_dry_run(ap)
    args = ap.parse_args(argv)
    if args.oracle and args.gold_ranks:
        ap.error("--gold-ranks lets the oracle drive the search and keeps the NS-PRM to rank: leave out --oracle")
    if args.dry_run:
        return dry_run(__file__, vars(args))
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the PRM backbones load from the local cache

    from pcr_ray.prm.scorer import PRMScorer  # heavy: torch

    def load(path: Any) -> Any:
        return PRMScorer.from_checkpoint(path, int8=(q8 := not (args.fp32 or args.bf16) and args.device == "cpu"),
                                         runtime="onnx" if q8 else "torch",
                                         max_batch=64, device=args.device,
                                         max_length=args.max_length,
                                         bf16=args.bf16)

    # with --oracle the NS-PRM is not needed, and the conventional one only for prm_only rows
    cks = None if args.oracle else (args.checkpoint or [ensure_checkpoint("csp")])
    ck = None if cks is None else (cks[0] if len(cks) == 1 else " + ".join(str(c) for c in cks))
    bk = (args.baseline_checkpoint or ensure_checkpoint("random")) if "prm_only" in args.methods else None
    scorer = None
    if cks is not None:
        scorer = load(cks[0]) if len(cks) == 1 else PRMEnsemble([load(c) for c in cks])
    baseline_scorer = load(bk) if bk is not None else None
    out: dict[str, Any] = {"machine": machine_info(), "checkpoint": "gold_path_oracle" if args.oracle else str(ck),
                           "baseline_checkpoint": str(bk) if bk is not None else None,
                           "prm_identity": scorer.identity if scorer is not None else {"kind": "gold_path_oracle"},
                           "givens": args.givens, "args": vars(args), "datasets": {}}
    records = []
    for dataset, items in _problems(args).items():
        golds = [g for g, _ in items]
        problems = [sp for _, sp in items]
        gens = _generators(dataset, args)
        ns_scorer = GoldPathScorer.from_problems(golds, args.givens) if args.oracle else scorer
        res: dict[str, Any] = {}
        runs = [(m, g) for g in ("blind", "typed") if g in args.generators for m in args.methods
                if g == "blind" or m != "prm_only"]
        for method, gkey in runs:
            label = method if gkey == "blind" else f"{method} (typed enumerator)"
            cfg = SearchConfig(method=method, beam_width=args.beam, max_steps=args.max_steps,
                               aggregate=args.aggregate, n_complete=args.n_complete,
                               answer_selection=args.answer_selection, stop=args.stop)
            t0 = time.perf_counter()
            prm = (baseline_scorer if method == "prm_only" else ns_scorer) if cfg.uses_prm else None
            if args.gold_ranks and prm is not None and prm is scorer:
                prm = GoldRankProbe(GoldPathScorer.from_problems(golds, args.givens), scorer)
                label += " (oracle-driven)"
            rows = run_search(problems, gens[gkey], prm, cfg)
            wall = time.perf_counter() - t0
            summ = _summ(rows, golds)
            summ["wall_s"] = round(wall, 2)
            summ["s_per_problem"] = round(wall / max(1, len(rows)), 3)
            summ["generator"] = gens[gkey].identity
            if isinstance(prm, GoldRankProbe):
                summ["gold_ranks"] = prm.summary(args.beam)
            res[label] = summ
            records += [{"dataset": dataset, **r.to_record(), "method": label} for r in rows]
            shown = label + (f" ({ORACLE_GIVENS})" if args.givens == "gold" else "")
            print(f"{dataset:8s} {shown:26s} acc {summ['acc']:.3f}  answered {summ['answered']:.2f}  candidates "
                  f"{summ['candidates']:7d}  verified {summ['verified']:6d}  PRM fwd {summ['prm_forward']:6d}  "
                  f"{summ['s_per_problem']:.2f} s/problem", flush=True)
            for kind, r in summ.get("gold_ranks", {}).items():
                print(f"{dataset:8s}   the PRM's rank of the gold {kind}: first {r['top1']:.1%}, within the beam "
                      f"{r['within_beam']:.1%}, median {r['median_rank']} of {r['median_candidates']} "
                      f"({r['decisions']} gold prefixes)", flush=True)
        if "nsprm" in res and "prm_only" in res:
            saved = res["prm_only"]["prm_forward"] - res["nsprm"]["prm_forward"]
            res["prm_calls_saved_by_verifier"] = {
                "absolute": saved, "fraction_of_prm_only": round(saved / max(1, res["prm_only"]["prm_forward"]), 4)}
            print(f"{dataset:8s} PRM calls saved by the verifier: {saved} "
                  f"({res['prm_calls_saved_by_verifier']['fraction_of_prm_only']:.1%} of prm_only's)")
        out["datasets"][dataset] = res
    written = write_result(args.name, out, results_dir)
    if args.out:
        copy = Path(args.out) / f"{args.name}.json"
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(written, copy)
        print(f"wrote {copy}")
    path = records_path(args.name)
    with open(path, "w") as fh:
        for r in records:
            r.pop("candidates", None)
            fh.write(json.dumps(r, default=str) + "\n")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
