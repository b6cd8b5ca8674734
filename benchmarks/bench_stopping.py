"""Listwise ranking at gold prefixes: does the PRM put the gold action first among every valid candidate?

Pairwise accuracy (eval-prm) sets one positive against one negative. At search time the PRM ranks the gold
action against every valid candidate the enumerator offers at once (~40): after the last gold step the gold
answer against every continuation (stopping), before it the gold step against every step that computes none
of the gold trace's remaining quantities and every too-early answer. For each checkpoint, on the same
generated physics problems (gold givens, seed 11: not the pairs' seed 7919, not the search benchmark's
seed 3) and optionally GSM8K test problems: how often the gold action ranks first, in the top 2 (beam 2
keeps it), its mean reciprocal rank, how often a too-early answer outscores the gold step, and (answers
compared with answers only) how often the gold answer outscores every other answer met along its gold path. Candidates
come from `pcr_ray.negatives.mined.gold_state` (the search's typed enumerator, cap 48, rendered as the search
renders them). Also reports the share of gold (context, action) pairs longer than the scorer's max_length
(their context loses its start), and how often the enumerator itself offers the gold action or its equal
(a step of the gold step's value; at the end, an answer of the gold value): where it does not, the search
cannot take the gold path whatever the PRM's ranking (the gold action is ranked all the same).
Writes <cache>/bench/bench_stopping.json
(benchmarks/results/ too with PCR_RAY_BENCH_RESULTS=1).

    .venv/bin/python benchmarks/bench_stopping.py --checkpoints .cache/prm_full/csp3 .cache/prm_full/csp4 \
        [--physics 40] [--gsm8k 0]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time
from typing import Any

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from _machine import add_dry_run, dry_run, machine_info, write_result  # noqa: E402


def _problems(args: argparse.Namespace) -> dict[str, list[dict[str, Any]]]:
    from pcr_ray.data.physics import generate_problems

    out = {"physics": [p.to_dict() for p in generate_problems(600, seed=args.seed, split="heldout")
                       if p.gold_steps and p.gold_steps <= args.max_gold_steps][: args.physics]}
    if args.gsm8k:
        from pcr_ray.data.readers import load_dataset

        gsm = [p for p in load_dataset("gsm8k_test", limit=4 * args.gsm8k + 200) if p.gold_trace]
        random.Random(args.seed).shuffle(gsm)
        out["gsm8k"] = [p.to_dict() for p in gsm[: args.gsm8k]]
    return out


def _states(problems: list[dict[str, Any]], cap: int = 48) -> list[Any]:
    """Every gold prefix's GoldState (end included) of every problem, in order (the typed enumerator at `cap`)."""
    from pcr_ray.negatives.mined import MineConfig, gold_state

    cfg = MineConfig(cap=cap)
    out = []
    for p in problems:
        end, why = gold_state(p, cfg)
        if end is None:
            continue
        for t in range(end.row["gold_steps"]):
            st, _ = gold_state(p, cfg, t)
            if st is not None:
                out.append(st)
        out.append(end)
    return out


def _ranks(states: list[Any], scorer: Any) -> list[dict[str, Any]]:
    from pcr_ray.prm.model import encode_pairs

    flat = sorted({pair for st in states for pair in st.pairs})
    got = dict(zip(flat, scorer.score(flat), strict=True))
    golds = [st.pairs[0] for st in states]  # their whole length: is the context cut at the scorer's max_length?
    tokens = [len(ids) for ids in encode_pairs(scorer.tokenizer, [c for c, _ in golds], [t for _, t in golds],
                                               4096, pad=False)["input_ids"]]
    rows = []
    for st, n_tok in zip(states, tokens, strict=True):
        s = [got[p] for p in st.pairs]
        is_answer = [t.startswith("answer: ") for _, t in st.pairs]
        early = any(a and x > s[0] for a, x in zip(is_answer[1:], s[1:], strict=True))
        end = st.row["t"] == st.row["gold_steps"]
        rows.append({"end": end, "rank": sum(1 for x in s[1:] if x > s[0]),
                     "n": len(s), "cut": n_tok > scorer.max_length, "offered": st.offered,
                     "early_answer_wins": early, "problem": st.row["problem_id"],
                     "other_answers": [x for a, x in zip(is_answer[1:], s[1:], strict=True) if a],
                     "gold_answer": s[0] if end else None})
    return rows


def _summ(rows: list[dict[str, Any]]) -> dict[str, Any]:
    def part(rs: list[dict[str, Any]]) -> dict[str, Any]:
        if not rs:
            return {}
        return {"states": len(rs), "top1": round(sum(r["rank"] == 0 for r in rs) / len(rs), 4),
                "top2": round(sum(r["rank"] <= 1 for r in rs) / len(rs), 4),
                "mrr": round(statistics.mean(1 / (1 + r["rank"]) for r in rs), 4),
                "median_rank": statistics.median(r["rank"] for r in rs),
                "candidates_mean": round(statistics.mean(r["n"] for r in rs), 1),
                "gold_offered": round(sum(r["offered"] for r in rs) / len(rs), 4),
                "top1_where_offered": round(sum(r["rank"] == 0 for r in rs if r["offered"])
                                            / max(1, sum(r["offered"] for r in rs)), 4)}

    end = [r for r in rows if r["end"]]
    before = [r for r in rows if not r["end"]]
    out = {"end (gold answer vs going on)": part(end), "before the end (gold step vs the rest)": part(before)}
    if before:
        wins = sum(r["early_answer_wins"] for r in before)
        out["early answer outscores the gold step"] = round(wins / len(before), 4)
    # answers compared with answers: over a problem's whole gold path (every prefix's too-early answers and the end's
    # other answers), does the gold answer score highest? (a stop rule that ranks answers apart from steps needs it)
    by_problem: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_problem.setdefault(r["problem"], []).append(r)
    golds = [(g, [x for r in rs for x in r["other_answers"]]) for rs in by_problem.values()
             for g in [next((r["gold_answer"] for r in rs if r["end"]), None)] if g is not None]
    if golds:
        out["gold answer outscores every other answer on its path"] = round(
            sum(all(g > x for x in others) for g, others in golds) / len(golds), 4)
        out["other answers per path (mean)"] = round(statistics.mean(len(o) for _, o in golds), 1)
    out["gold pairs cut at max_length"] = round(sum(r["cut"] for r in rows) / max(1, len(rows)), 4)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoints", nargs="+", default=None,
                    help="PRM checkpoint folders, compared in one run (default: the cached csp PRM)")
    ap.add_argument("--physics", type=int, default=40)
    ap.add_argument("--gsm8k", type=int, default=0)
    ap.add_argument("--max-gold-steps", type=int, default=4)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--fp32", action="store_true", help="score in fp32 (default: int8, as the search benchmark)")
    ap.add_argument("--bf16", action="store_true", help="score batched under bfloat16 autocast instead of int8 "
                    "(CPUs with AVX512-BF16 or AMX)")
    ap.add_argument("--device", default="cpu",
                    help="torch device of the PRM, e.g. cuda on a GPU node (scores in fp32 there, or bf16 with "
                         "--bf16: int8 is CPU-only)")
    ap.add_argument("--cap", type=int, default=48, help="the typed enumerator's cap (the search benchmark's default)")
    ap.add_argument("--max-length", type=int, default=None,
                    help="tokens per (context, candidate); longer contexts lose tokens from their start "
                         "(default: the length the checkpoint was trained at)")
    ap.add_argument("--name", default="bench_stopping", help="result name (<cache>/bench/NAME.json)")
    add_dry_run(ap)
    args = ap.parse_args()
    if args.dry_run:
        raise SystemExit(dry_run(__file__, vars(args)))

    from pcr_ray.prm.checkpoints import ensure_checkpoint
    from pcr_ray.prm.scorer import PRMScorer

    if not args.checkpoints:  # `make bench` runs every script without arguments
        args.checkpoints = [str(ensure_checkpoint("csp"))]

    sets = {name: _states(probs, args.cap) for name, probs in _problems(args).items()}
    out: dict[str, Any] = {"machine": machine_info(), "args": vars(args), "results": {}}
    for ck in args.checkpoints:
        scorer = PRMScorer.from_checkpoint(ck, int8=(q8 := not (args.fp32 or args.bf16) and args.device == "cpu"),
                                           runtime="onnx" if q8 else "torch",
                                           max_batch=64, device=args.device,
                                           max_length=args.max_length,
                                           bf16=args.bf16)
        res = {}
        for name, states in sets.items():
            t0 = time.perf_counter()
            res[name] = _summ(_ranks(states, scorer))
            res[name]["seconds"] = round(time.perf_counter() - t0, 1)
            for part, m in res[name].items():
                if isinstance(m, dict):
                    print(f"{ck:32s} {name:8s} {part:42s} top1 {m['top1']:.3f}  top2 {m['top2']:.3f}  "
                          f"MRR {m['mrr']:.3f}  median rank {m['median_rank']}  ({m['states']} states, "
                          f"{m['candidates_mean']} candidates; gold offered by the enumerator "
                          f"{m['gold_offered']:.3f}, top1 there {m['top1_where_offered']:.3f})", flush=True)
            if "early answer outscores the gold step" in res[name]:
                print(f"{ck:32s} {name:8s} early answer outscores the gold step: "
                      f"{res[name]['early answer outscores the gold step']:.3f}", flush=True)
            if "gold answer outscores every other answer on its path" in res[name]:
                print(f"{ck:32s} {name:8s} gold answer outscores every other answer on its path: "
                      f"{res[name]['gold answer outscores every other answer on its path']:.3f} "
                      f"({res[name]['other answers per path (mean)']} others)", flush=True)
            print(f"{ck:32s} {name:8s} gold pairs longer than {scorer.max_length} tokens (context cut): "
                  f"{res[name]['gold pairs cut at max_length']:.3f}", flush=True)
        out["results"][ck] = {"identity": scorer.identity, **res}
    write_result(args.name, out)


if __name__ == "__main__":
    main()
