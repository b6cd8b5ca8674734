"""PRM scoring throughput (steps/s): the batched PRMScorer against one-at-a-time scoring, same pairs, same run.

Pairs are real (context, step) renderings from the pairs parquet (make-pairs' output) when present, else
made from the example traces. The checkpoint is the cached CSP PRM when present, else an untrained MiniLM
PRM (same architecture, so the same speed); --checkpoint picks another. Also measured: int8 (dynamic
quantization, one pair per forward pass: dynamic quantization takes one activation scale per forward pass, padding
included, so a batched int8 score would move with its batch-mates) and how far int8 scores move from fp32.
With --train: training steps (forward, backward, AdamW) in fp32 against bfloat16 autocast (`train.precision`),
same pairs, same run, alternated twice, and how far the bf16 loss is from the fp32 loss on the same batches.
Writes benchmarks/results/bench_prm.json.

    .venv/bin/python benchmarks/bench_prm.py [--pairs 512] [--single 64] [--max-batch 64] [--checkpoint DIR]
    .venv/bin/python benchmarks/bench_prm.py --train [--train-batches 8] --name bench_prm_train
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from _machine import machine_info, write_result

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def load_pairs(n: int) -> tuple[list[tuple[str, str]], str]:
    import pandas as pd

    from pcr_ray.pipeline.make_pairs import default_pairs_dir

    p = default_pairs_dir() / "test"
    if p.exists():
        df = pd.read_parquet(p, columns=["context", "pos_step", "neg_step"]).head(n // 2 + 1)
        pairs = list(zip(df.context, df.pos_step, strict=True)) + list(zip(df.context, df.neg_step, strict=True))
        if len(pairs) >= n:
            return pairs[:n], str(p)
    from tests.prm_helpers import small_pairs

    rows = small_pairs(max(8, n // 6), kinds=("principle_swap", "variable_substitution", "random_op"))
    pairs = [(r["context"], r["pos_step"]) for r in rows] + [(r["context"], r["neg_step"]) for r in rows]
    return (pairs * (n // max(len(pairs), 1) + 1))[:n], "generated traces"


def checkpoint(tmp: Path, given: str | None = None) -> tuple[Path, str]:
    from pcr_ray.prm.checkpoints import find_checkpoint
    from pcr_ray.prm.model import PRMMeta, build_model, save_checkpoint

    if given:
        return Path(given), given
    found = find_checkpoint("csp")
    if found is not None:
        return found, "cached csp checkpoint"
    model, tok = build_model("minilm")
    return save_checkpoint(model, tok, tmp / "prm", PRMMeta(backbone="minilm")), "untrained MiniLM PRM"


def train_rates(ck: Path, pairs: list[tuple[str, str]], batch_size: int, n_batches: int, max_length: int
                ) -> dict[str, float]:
    """Pairs/s of training steps in fp32 and under bf16 autocast on the same batches (best of two alternated
    rounds each), and the relative gap between the two precisions' losses on the first (untimed) step."""
    import torch

    from pcr_ray.prm.model import load_checkpoint
    from pcr_ray.prm.train_loop import autocast, pair_logits, pair_loss

    half = len(pairs) // 2
    rows = [(pairs[i][0], pairs[i][1], pairs[half + i][1]) for i in range(half)]
    batches = [{"context": [r[0] for r in rows[i:i + batch_size]], "pos_step": [r[1] for r in rows[i:i + batch_size]],
                "neg_step": [r[2] for r in rows[i:i + batch_size]]}
               for i in range(0, min(len(rows), batch_size * (n_batches + 1)), batch_size)][: n_batches + 1]
    if len(batches) < 2:
        raise SystemExit(f"--train needs at least {2 * batch_size} pairs (--pairs)")
    device = torch.device("cpu")
    best: dict[str, float] = {}
    first_loss: dict[str, float] = {}
    for _ in range(2):
        for precision in ("fp32", "bf16"):
            model, tok, _ = load_checkpoint(ck)
            model.train()
            torch.manual_seed(0)
            opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-5)
            t0 = 0.0
            for i, b in enumerate(batches):  # batch 0 warms up
                if i == 1:
                    t0 = time.perf_counter()
                with autocast(precision, device):
                    lp, ln = pair_logits(model, tok, b, max_length, device)
                    loss = pair_loss(lp.float(), ln.float(), "pairwise")
                if i == 0:
                    first_loss[precision] = float(loss.detach())
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
            rate = sum(len(b["context"]) for b in batches[1:]) / (time.perf_counter() - t0)
            best[precision] = max(best.get(precision, 0.0), rate)
    return {"train_batch_size": batch_size, "train_batches": len(batches) - 1,
            "train_fp32_pairs_per_s": round(best["fp32"], 2), "train_bf16_pairs_per_s": round(best["bf16"], 2),
            "train_bf16_over_fp32": round(best["bf16"] / best["fp32"], 2),
            "train_first_loss_rel_gap": round(abs(first_loss["bf16"] - first_loss["fp32"]) / first_loss["fp32"], 4)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=512)
    ap.add_argument("--single", type=int, default=64, help="pairs scored one at a time")
    ap.add_argument("--max-batch", type=int, default=64)
    ap.add_argument("--max-length", type=int, default=160)
    ap.add_argument("--checkpoint", default=None, help="PRM checkpoint folder (default: the cached csp one)")
    ap.add_argument("--name", default="bench_prm", help="result file name (benchmarks/results/NAME.json)")
    ap.add_argument("--train", action="store_true", help="measure training steps, fp32 against bf16 autocast, "
                    "instead of scoring")
    ap.add_argument("--train-batches", type=int, default=8, help="timed training steps per precision and round")
    ap.add_argument("--train-batch-size", type=int, default=16, help="pairs per training step (train.batch_size)")
    args = ap.parse_args()
    if args.train:
        import torch

        pairs, source = load_pairs(2 * args.train_batch_size * (args.train_batches + 1))
        with tempfile.TemporaryDirectory() as tmp:
            ck, ck_desc = checkpoint(Path(tmp), args.checkpoint)
            res = {"machine": machine_info(), "torch_threads": torch.get_num_threads(), "pairs_source": source,
                   "checkpoint": ck_desc, "max_length": args.max_length,
                   **train_rates(ck, pairs, args.train_batch_size, args.train_batches, args.max_length)}
        print(f"training, {res['train_batches']} steps of {res['train_batch_size']} pairs, {ck_desc}, "
              f"{res['torch_threads']} torch threads")
        print(f"fp32 : {res['train_fp32_pairs_per_s']:>7} pairs/s")
        print(f"bf16 : {res['train_bf16_pairs_per_s']:>7} pairs/s  ({res['train_bf16_over_fp32']}x fp32; first-step "
              f"loss within {100 * res['train_first_loss_rel_gap']:.2f}% of fp32's)")
        write_result(args.name, res)
        return
    import torch

    from pcr_ray.prm.model import encode_pairs
    from pcr_ray.prm.scorer import PRMScorer

    pairs, source = load_pairs(args.pairs)
    with tempfile.TemporaryDirectory() as tmp:
        ck, ck_desc = checkpoint(Path(tmp), args.checkpoint)
        batched = PRMScorer.from_checkpoint(ck, max_batch=args.max_batch, max_length=args.max_length)
        q8p = PRMScorer.from_checkpoint(ck, max_batch=args.max_batch, max_length=args.max_length, int8=True)
        b16 = PRMScorer.from_checkpoint(ck, max_batch=args.max_batch, max_length=args.max_length, bf16=True)
        lengths = [len(x) for x in encode_pairs(batched.tokenizer, [p[0] for p in pairs], [p[1] for p in pairs],
                                                args.max_length, pad=False)["input_ids"]]
        batched.score(pairs[:8])  # warm up
        q8p.score(pairs[:8])
        b16.score(pairs[:8])
        t0 = time.perf_counter()
        single_scores = [batched.score([p])[0] for p in pairs[: args.single]]
        t_single = time.perf_counter() - t0
        t0 = time.perf_counter()
        batch_scores = batched.score(pairs)
        t_batch = time.perf_counter() - t0
        t0 = time.perf_counter()
        q8p_scores = q8p.score(pairs)
        t_q8p = time.perf_counter() - t0
        q8_single = [q8p.score([p])[0] for p in pairs[: args.single]]
        t0 = time.perf_counter()
        b16_scores = b16.score(pairs)
        t_b16 = time.perf_counter() - t0
        b16_single = [b16.score([p])[0] for p in pairs[: args.single]]
    max_diff = max(abs(a - b) for a, b in zip(single_scores, batch_scores, strict=False))
    single_rate = args.single / t_single
    batch_rate = len(pairs) / t_batch
    q8p_rate = len(pairs) / t_q8p
    b16_rate = len(pairs) / t_b16
    b16_alone = [abs(a - b) for a, b in zip(b16_single, b16_scores, strict=False)]
    res = {
        "machine": machine_info(), "torch_threads": torch.get_num_threads(), "pairs_source": source,
        "checkpoint": ck_desc, "pairs": len(pairs), "single_pairs": args.single, "max_batch": args.max_batch,
        "max_length": args.max_length, "mean_tokens": round(statistics.fmean(lengths), 1),
        "one_at_a_time_steps_per_s": round(single_rate, 1), "batched_steps_per_s": round(batch_rate, 1),
        "batched_over_single": round(batch_rate / single_rate, 2),
        "max_abs_score_diff_single_vs_batched": max_diff,
        "int8_per_pair_steps_per_s": round(q8p_rate, 1),
        "int8_per_pair_over_fp32_batched": round(q8p_rate / batch_rate, 2),
        "int8_per_pair_mean_abs_score_diff_vs_fp32": round(statistics.fmean(
            abs(a - b) for a, b in zip(q8p_scores, batch_scores, strict=True)), 4),
        "int8_per_pair_equals_scored_alone": q8p_scores[: args.single] == q8_single,
        "bf16_batched_steps_per_s": round(b16_rate, 1), "bf16_over_fp32_batched": round(b16_rate / batch_rate, 2),
        "bf16_over_int8_per_pair": round(b16_rate / q8p_rate, 2),
        "bf16_mean_abs_score_diff_vs_fp32": round(statistics.fmean(
            abs(a - b) for a, b in zip(b16_scores, batch_scores, strict=True)), 4),
        "bf16_max_abs_score_diff_vs_fp32": round(max(abs(a - b) for a, b in zip(b16_scores, batch_scores,
                                                                                strict=True)), 4),
        "bf16_max_abs_score_diff_single_vs_batched": round(max(b16_alone), 4),
        "bf16_mean_abs_score_diff_single_vs_batched": round(statistics.fmean(b16_alone), 5),
    }
    print(f"pairs: {len(pairs)} from {source}; mean {res['mean_tokens']} tokens; {ck_desc}; "
          f"{res['torch_threads']} torch threads")
    print(f"one at a time : {res['one_at_a_time_steps_per_s']:>8} steps/s")
    print(f"batched fp32  : {res['batched_steps_per_s']:>8} steps/s  ({res['batched_over_single']}x one at a time)")
    print(f"int8 per pair : {res['int8_per_pair_steps_per_s']:>8} steps/s  ({res['int8_per_pair_over_fp32_batched']}x "
          f"fp32; mean |score diff| {res['int8_per_pair_mean_abs_score_diff_vs_fp32']}; the default)")
    print(f"batched bf16  : {res['bf16_batched_steps_per_s']:>8} steps/s  ({res['bf16_over_fp32_batched']}x fp32, "
          f"{res['bf16_over_int8_per_pair']}x int8 per pair; mean |score diff| "
          f"{res['bf16_mean_abs_score_diff_vs_fp32']}, alone vs batched up to "
          f"{res['bf16_max_abs_score_diff_single_vs_batched']})")
    print(f"max |score diff| one-at-a-time vs batched: fp32 {max_diff:.2e}; int8 per pair equals scored alone: "
          f"{res['int8_per_pair_equals_scored_alone']}")
    write_result(args.name, res)


if __name__ == "__main__":
    main()
