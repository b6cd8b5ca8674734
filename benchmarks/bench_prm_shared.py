"""Shared-context PRM against the pair cross-encoder: scoring speed on the search's own candidates, pairwise accuracy
of the two quick PRMs trained on the same pairs, and listwise training speed, each ratio measured in one run.

1. Candidates: the nsprm search (typed enumerator, cap 48, beam 2, as `listwise-rounds`' benchmark) runs on the
   first --problems physics problems of seed 13 (held-out templates) with the quick pair PRM, from the gold
   trace's givens (oracle givens: a fixed input for a speed measurement, recorded as "givens" in the JSON; no
   accuracy is read from this search); every (context, candidates) request it
   sends the PRM is recorded. Those requests are then scored, in the same run, by the pair PRM one pair per
   pass in int8 (today's default), by the pair PRM batched in fp32, and by the shared-context PRM in fp32 (the
   context cache, the scorer's default, and packs of --pack-sizes under the block mask) and in per-token int8
   (pcr_ray.prm.int8_rows, through the context cache), each kernel pinned, and by the kernel `prm.int8=true`
   picks on this CPU (pcr_ray.prm.kernels: int8 where it is measured faster, else fp32): candidates scored per
   second of wall time and per second of this process's CPU time (one torch thread: CPU time is what a
   scorer costs, less disturbed by other jobs on a shared machine), best of --rounds alternated rounds.
2. Accuracy (--parts accuracy): two PRMs trained by `pcr_ray.prm.checkpoints.ensure_checkpoint` on the same
   --budget-pairs CSP pairs of the `train` templates, under the same loss (--loss; the quick recipe's: listwise), one
   in each attention (pair and shared_context; trained when not cached: the shared-context one at the defaults is
   the cached quick PRM), scored in fp32 on the pairs bench_quick_prm.py scores (CSP pairs of --eval-problems
   physics problems of the `heldout` templates, never trained on): pairwise accuracy of each with its 95% interval,
   and the paired exact test on the pairs one ranks right and the other wrong.
3. Listwise (--parts listwise): training steps (forward, backward, AdamW) of the listwise loss on lists of about 13
   negatives (make-pairs' `search_per_kind=8`), pair against shared_context attention, same batches: pairs/s.

    .venv/bin/python benchmarks/bench_prm_shared.py [--parts scoring accuracy listwise] [--problems 6]
        [--pack-sizes 16 48] [--budget-pairs 1500] [--eval-problems 300] [--eval-pairs 1500]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from _machine import add_dry_run, dry_run, machine_info, write_result  # noqa: E402

# the searches whose PRM requests are timed start from the gold trace's givens: a fixed input, not a figure
GIVENS = "gold (oracle)"


class RecordingScorer:
    """Delegates to a scorer and keeps every request's pairs (the search's own candidates)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.requests: list[list[tuple[str, str]]] = []

    def score(self, pairs: Any) -> list[float]:
        self.requests.append([(str(c), str(s)) for c, s in pairs])
        return self.inner.score(pairs)


def collect(ck: Any, n: int, seed: int, cap: int, beam: int) -> tuple[list[list[tuple[str, str]]], dict[str, Any]]:
    """The PRM requests of the nsprm search on the first n physics problems of `seed` (<= 4 gold steps)."""
    from pcr_ray.data.physics import generate_problems
    from pcr_ray.generators.enumerate import EnumeratorGenerator
    from pcr_ray.prm.scorer import PRMScorer
    from pcr_ray.search import SearchConfig, SearchProblem, run_search

    pool = [p for p in generate_problems(600, seed=seed, split="heldout") if p.gold_steps and p.gold_steps <= 4][:n]
    rec = RecordingScorer(PRMScorer.from_checkpoint(ck, int8=True, runtime="onnx"))
    t0 = time.perf_counter()
    rows = run_search([SearchProblem.from_problem(p, givens="gold") for p in pool],
                      EnumeratorGenerator(typed=True, cap=cap, answer_coverage="any"), rec,
                      SearchConfig(method="nsprm", beam_width=beam, max_steps=6))
    pairs = [p for r in rec.requests for p in r]
    per_ctx: dict[str, int] = {}
    for c, _ in pairs:
        per_ctx[c] = per_ctx.get(c, 0) + 1
    info = {"problems": len(pool), "seed": seed, "cap": cap, "beam_width": beam, "requests": len(rec.requests),
            "candidates": len(pairs), "contexts": len(per_ctx),
            "candidates_per_context": round(len(pairs) / max(1, len(per_ctx)), 1),
            "search_s": round(time.perf_counter() - t0, 1), "answered": sum(r.answer_value is not None for r in rows)}
    return rec.requests, info


def torch_dynamic_int8(ck: Any) -> Any:
    """The pair PRM under torch's dynamic int8, one pair per pass: the one-pair int8 scorer the shared-context PRM
    set out to beat 4x (the pair PRM's CPU default is now ONNX Runtime's int8, also measured)."""
    import torch

    from pcr_ray.prm.model import load_checkpoint
    from pcr_ray.prm.scorer import PRMScorer

    model, tok, meta = load_checkpoint(ck, device="cpu")
    model.encoder = torch.ao.quantization.quantize_dynamic(model.encoder, {torch.nn.Linear}, dtype=torch.qint8)
    return PRMScorer(model.eval(), tok, int8=True, max_length=int(meta.max_length))


def rate(scorer: Any, requests: list[list[tuple[str, str]]]) -> tuple[float, float, list[float]]:
    """Candidates per wall second and per CPU second, scoring the requests one scorer call each (as the search
    calls it), and the scores."""
    t0, c0 = time.perf_counter(), time.process_time()
    scores = [s for r in requests for s in scorer.score(r)]
    return len(scores) / (time.perf_counter() - t0), len(scores) / (time.process_time() - c0), scores


def scoring(pair_ck: Any, shared_ck: Any, requests: list[list[tuple[str, str]]], pack_sizes: list[int],
            rounds: int) -> dict[str, Any]:
    import torch

    from pcr_ray.prm.model import encode_pairs
    from pcr_ray.prm.scorer import PRMScorer
    from pcr_ray.prm.shared import make_packs

    pinned = {"measure_kernel": False}  # every kernel as named, whatever this CPU runs fast
    scorers = {"pair_int8_one_pair": torch_dynamic_int8(pair_ck),
               "pair_onnx_int8_one_pair": PRMScorer.from_checkpoint(pair_ck, int8=True, runtime="onnx", **pinned),
               "pair_fp32_batched": PRMScorer.from_checkpoint(pair_ck, max_batch=64)}
    scorers["shared_fp32_context_cache"] = PRMScorer.from_checkpoint(shared_ck, max_batch=64)
    scorers["shared_int8_rows_context_cache"] = PRMScorer.from_checkpoint(shared_ck, max_batch=64, int8=True,
                                                                          **pinned)
    # what `prm.int8=true` picks on this CPU (pcr_ray.prm.kernels), as the search and solve load it
    auto = PRMScorer.from_checkpoint(shared_ck, max_batch=64, int8=True)
    scorers["shared_int8_auto"] = auto
    for k in pack_sizes:
        scorers[f"shared_fp32_pack{k}"] = PRMScorer.from_checkpoint(shared_ck, max_batch=64, pack_size=k,
                                                                     context_cache=False)
    for s in scorers.values():
        s.score(requests[0][:4])  # warm up
    best: dict[str, float] = {}
    best_cpu: dict[str, float] = {}
    scores: dict[str, list[float]] = {}
    for _ in range(rounds):
        for name, s in scorers.items():
            r, rc, sc = rate(s, requests)
            best[name] = max(best.get(name, 0.0), r)
            best_cpu[name] = max(best_cpu.get(name, 0.0), rc)
            scores[name] = sc
            print(f"  {name}: {r:.1f} candidates/s wall, {rc:.1f} per CPU second", flush=True)
    base, base_cpu = best["pair_int8_one_pair"], best_cpu["pair_int8_one_pair"]
    pairs = [p for r in requests for p in r]
    tok = scorers["pair_fp32_batched"].tokenizer
    pair_tokens = [len(x) for x in encode_pairs(tok, [p[0] for p in pairs], [p[1] for p in pairs], 160,
                                                pad=False)["input_ids"]]
    shared = scorers[f"shared_fp32_pack{pack_sizes[0]}"]
    packs = [p for r in requests for p in make_packs(shared.tokenizer, r, max_length=shared.max_length,
                                                     candidate_length=shared.model.candidate_length,
                                                     pack_size=pack_sizes[0])]
    # a candidate's score with the other candidates against alone: the first 64 candidates of the first request
    alone = [scorers["shared_fp32_context_cache"].score([p])[0] for p in requests[0][:64]]
    cached = scores["shared_fp32_context_cache"]
    alone8 = [scorers["shared_int8_rows_context_cache"].score([p])[0] for p in requests[0][:64]]
    return {
        "torch_threads": torch.get_num_threads(), "rounds": rounds,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(), "auto_kernel": auto.identity["kernel"],
        "candidates_per_s": {k: round(v, 1) for k, v in best.items()},
        "over_pair_int8_one_pair": {k: round(v / base, 2) for k, v in best.items()},
        "candidates_per_cpu_s": {k: round(v, 1) for k, v in best_cpu.items()},
        "cpu_over_pair_int8_one_pair": {k: round(v / base_cpu, 2) for k, v in best_cpu.items()},
        "cpu_over_pair_onnx_int8_one_pair": {k: round(v / best_cpu["pair_onnx_int8_one_pair"], 2)
                                             for k, v in best_cpu.items()},
        "pair_mean_tokens": round(statistics.fmean(pair_tokens), 1),
        "shared_mean_tokens_per_candidate": round(sum(p.length for p in packs) / len(pairs), 1),
        "shared_max_abs_diff_with_others_vs_alone": max(abs(a - b) for a, b in zip(alone, cached, strict=False)),
        "shared_max_abs_diff_cache_vs_packs": max(abs(a - b) for a, b in zip(
            cached, scores[f"shared_fp32_pack{pack_sizes[0]}"], strict=True)),
        "shared_int8_rows_mean_abs_diff_vs_fp32": round(statistics.fmean(
            abs(a - b) for a, b in zip(scores["shared_int8_rows_context_cache"], cached, strict=True)), 4),
        "shared_int8_rows_max_abs_diff_with_others_vs_alone": max(abs(a - b) for a, b in zip(
            alone8, scores["shared_int8_rows_context_cache"], strict=False)),
        "int8_mean_abs_diff_vs_fp32": round(statistics.fmean(
            abs(a - b) for a, b in zip(scores["pair_int8_one_pair"], scores["pair_fp32_batched"], strict=True)), 4),
    }


def accuracy(budget: int, loss: str, eval_problems: int, eval_pairs: int) -> dict[str, Any]:
    """Pairwise accuracy on unseen-template pairs of a pair and a shared-context PRM trained alike (paired test)."""
    from bench_quick_prm import heldout_pairs, pair_wins, pairwise

    from pcr_ray.pipeline.stats import mcnemar_exact
    from pcr_ray.prm.checkpoints import DEFAULT_LOSS, ensure_checkpoint
    from pcr_ray.prm.model import read_meta

    pairs = heldout_pairs(eval_problems, eval_pairs, seed=0)
    out: dict[str, Any] = {"train_pairs": budget, "loss": loss, "templates": "heldout (never trained on)",
                           "eval_problems": eval_problems, "eval_pairs": len(pairs)}
    wins: dict[str, list[bool]] = {}
    for attention in ("pair", "shared_context"):
        overrides = None if DEFAULT_LOSS[attention] == loss else {"loss": loss}
        ck = ensure_checkpoint("csp", attention=attention, budget_pairs=budget, train_overrides=overrides)
        wins[attention] = pair_wins(ck, pairs)
        res = pairwise(pairs, wins[attention])
        tr = read_meta(ck).train
        out[attention] = {**res, "checkpoint": ck.name, "train_pairs_per_s": tr.get("pairs_per_s"),
                          "train_epoch_s": tr.get("epoch_seconds")}
        print(f"  {attention}: {out[attention]['pairwise_acc']:.4f} {out[attention]['ci95']}", flush=True)
    only_shared = sum(s and not p for p, s in zip(wins["pair"], wins["shared_context"], strict=True))
    only_pair = sum(p and not s for p, s in zip(wins["pair"], wins["shared_context"], strict=True))
    out["acc_gap_points"] = round(100 * (out["shared_context"]["pairwise_acc"] - out["pair"]["pairwise_acc"]), 2)
    out["discordant"] = {"only_shared_context_right": only_shared, "only_pair_right": only_pair,
                         "p_exact": round(mcnemar_exact(only_shared, only_pair), 4)}
    return out


def listwise(n_steps: int, batch_size: int, rounds: int) -> dict[str, Any]:
    """Listwise training pairs/s, pair against shared_context attention, on the same candidate-list batches."""
    import torch

    from pcr_ray.negatives.pairs import KIND_GROUPS, PairConfig, pairs_from_problems
    from pcr_ray.prm.checkpoints import load_problems
    from pcr_ray.prm.model import build_model
    from pcr_ray.prm.train_loop import Packing, _columns, candidate_lists, list_logits, listwise_loss

    src = [{"name": "physics", "kwargs": {"n": 60, "seed": 7919, "split": "train"}}]
    rows = pairs_from_problems(load_problems(src),
                               PairConfig(kinds=KIND_GROUPS["csp"], seed=0, search_per_kind=8))
    rows = [r for r in rows if r["split"] == "train"]
    batches = list(candidate_lists([_columns(rows)], batch_size, "0"))[: n_steps + 1]
    n_lists = [len({(c, p) for c, p in zip(b["context"], b["pos_step"], strict=True)}) for b in batches]
    best: dict[str, float] = {}
    best_cpu: dict[str, float] = {}
    device = torch.device("cpu")
    for _ in range(rounds):
        for attention in ("pair", "shared_context"):
            model, tok = build_model("minilm", attention=attention, seed=0)
            model.train()
            packing = Packing() if attention == "shared_context" else None
            opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-5)
            t0 = c0 = 0.0
            for i, b in enumerate(batches):  # batch 0 warms up
                if i == 1:
                    t0, c0 = time.perf_counter(), time.process_time()
                lp, ln, group = list_logits(model, tok, b, 160, device, packing)
                loss = listwise_loss(lp, ln, group)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
            n = sum(len(b["neg_step"]) for b in batches[1:])
            r, rc = n / (time.perf_counter() - t0), n / (time.process_time() - c0)
            best[attention] = max(best.get(attention, 0.0), r)
            best_cpu[attention] = max(best_cpu.get(attention, 0.0), rc)
            print(f"  listwise {attention}: {r:.2f} pairs/s wall, {rc:.2f} per CPU second", flush=True)
    negs = sum(len(b["neg_step"]) for b in batches[1:])
    return {"batch_size": batch_size, "steps": len(batches) - 1, "pairs": negs,
            "negatives_per_list": round(negs / sum(n_lists[1:]), 1), "rounds": rounds,
            "pairs_per_s": {k: round(v, 2) for k, v in best.items()},
            "shared_over_pair": round(best["shared_context"] / best["pair"], 2),
            "pairs_per_cpu_s": {k: round(v, 2) for k, v in best_cpu.items()},
            "cpu_shared_over_pair": round(best_cpu["shared_context"] / best_cpu["pair"], 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--problems", type=int, default=6, help="seed-13 physics problems whose search is recorded")
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--cap", type=int, default=48)
    ap.add_argument("--beam", type=int, default=2)
    ap.add_argument("--max-candidates", type=int, default=1500, help="score the first requests up to this many "
                    "candidates (whole requests)")
    ap.add_argument("--pack-sizes", type=int, nargs="+", default=[16, 48])
    ap.add_argument("--rounds", type=int, default=2, help="alternated timing rounds (best of)")
    ap.add_argument("--parts", nargs="+", choices=("scoring", "accuracy", "listwise"), default=["scoring"],
                    help="what to measure: scoring speed, pairwise accuracy on unseen templates (trains the two "
                    "PRMs when not cached), listwise training speed")
    ap.add_argument("--budget-pairs", type=int, default=1500, help="train pairs of each PRM (accuracy)")
    ap.add_argument("--loss", choices=("pairwise", "listwise"), default="listwise", help="both PRMs' loss (accuracy)")
    ap.add_argument("--eval-problems", type=int, default=300, help="heldout-template physics problems (accuracy)")
    ap.add_argument("--eval-pairs", type=int, default=1500, help="pairs scored, hash-drawn (accuracy)")
    ap.add_argument("--listwise-steps", type=int, default=6)
    ap.add_argument("--listwise-batch-size", type=int, default=32)
    ap.add_argument("--name", default="bench_prm_shared")
    add_dry_run(ap)
    args = ap.parse_args()
    if args.dry_run:
        raise SystemExit(dry_run(__file__, vars(args)))

    import torch

    res: dict[str, Any] = {"machine": machine_info(), "torch_threads": torch.get_num_threads()}
    if "scoring" in args.parts:
        res.update(scoring_part(args))
        write_result(args.name, res)  # each part as soon as it is measured
    if "accuracy" in args.parts:
        res["accuracy"] = accuracy(args.budget_pairs, args.loss, args.eval_problems, args.eval_pairs)
        print(f"accuracy: {res['accuracy']}", flush=True)
        write_result(args.name, res)
    if "listwise" in args.parts:
        res["listwise"] = listwise(args.listwise_steps, args.listwise_batch_size, args.rounds)
        print(f"listwise: {res['listwise']}", flush=True)
        write_result(args.name, res)


def scoring_part(args: argparse.Namespace) -> dict[str, Any]:
    """Part 1: the quick PRMs' scoring speed on the recorded search's candidates."""
    import json

    from pcr_ray.paths import cache_dir
    from pcr_ray.prm.checkpoints import ensure_checkpoint

    pair_ck = ensure_checkpoint("csp", attention="pair")
    shared_ck = ensure_checkpoint("csp", attention="shared_context")
    res: dict[str, Any] = {"pair_checkpoint": "quick csp (pair)", "shared_checkpoint": "quick csp (shared_context)",
                           "givens": GIVENS}
    saved = cache_dir() / "bench" / f"prm_requests_seed{args.seed}_p{args.problems}_cap{args.cap}_b{args.beam}.json"
    if saved.exists():  # the same search's requests, recorded by an earlier run
        requests, info = (lambda d: ([[tuple(p) for p in r] for r in d["requests"]], d["info"]))(
            json.loads(saved.read_text()))
    else:
        requests, info = collect(pair_ck, args.problems, args.seed, args.cap, args.beam)
        saved.parent.mkdir(parents=True, exist_ok=True)
        saved.write_text(json.dumps({"requests": requests, "info": info}))
    res["search_candidates"] = info
    print(f"search: {info}", flush=True)
    kept: list[list[tuple[str, str]]] = []
    for r in requests:
        if sum(map(len, kept)) >= args.max_candidates:
            break
        kept.append(r)
    info["scored_requests"], info["scored_candidates"] = len(kept), sum(map(len, kept))
    res["scoring"] = scoring(pair_ck, shared_ck, kept, args.pack_sizes, args.rounds)
    print(f"scoring: {res['scoring']}", flush=True)
    return res


if __name__ == "__main__":
    main()
