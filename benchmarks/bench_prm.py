"""PRM scoring throughput (steps/s): the batched PRMScorer against one-at-a-time scoring, same pairs, same run.

Pairs are real (context, step) renderings from the pairs parquet (make-pairs' output) when present, else
made from the example traces. The checkpoint is the cached CSP PRM when present, else an untrained MiniLM
PRM (same architecture, so the same speed); --checkpoint picks another. Also measured, each against torch fp32
batched on the same pairs (speed best of --rounds alternated rounds, mean |score diff|): ONNX Runtime int8
(`prm.runtime=onnx`, the CPU default; one pair per forward pass: dynamic quantization takes one activation scale
per forward pass, padding included, so a batched int8 score moves with its batch-mates, also measured), ONNX
Runtime fp32 batched, torch's dynamic int8 (one pair per pass; the runtime ONNX Runtime replaced) and bf16.
With --train: training steps (forward, backward, AdamW) in fp32 against bfloat16 autocast (`train.precision`),
same pairs, same run, alternated twice, and how far the bf16 loss is from the fp32 loss on the same batches.
Writes <cache>/bench/bench_prm.json
(benchmarks/results/ too with PCR_RAY_BENCH_RESULTS=1).

    .venv/bin/python benchmarks/bench_prm.py [--pairs 512] [--single 64] [--max-batch 64] [--checkpoint DIR]
        [--rounds 2] [--name bench_prm_runtime]
    .venv/bin/python benchmarks/bench_prm.py --train [--train-batches 8] --name bench_prm_train
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from _machine import add_dry_run, dry_run, machine_info, write_result

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
    found = find_checkpoint("csp", "pair")
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
    ap.add_argument("--name", default="bench_prm", help="result name (<cache>/bench/NAME.json)")
    ap.add_argument("--rounds", type=int, default=2, help="alternated timing rounds per runtime (best is kept)")
    ap.add_argument("--train", action="store_true", help="measure training steps, fp32 against bf16 autocast, "
                    "instead of scoring")
    ap.add_argument("--train-batches", type=int, default=8, help="timed training steps per precision and round")
    ap.add_argument("--train-batch-size", type=int, default=16, help="pairs per training step (train.batch_size)")
    add_dry_run(ap)
    args = ap.parse_args()
    if args.dry_run:
        raise SystemExit(dry_run(__file__, vars(args)))
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
    from torch.ao.quantization import quantize_dynamic

    from pcr_ray.prm.model import encode_pairs, load_checkpoint
    from pcr_ray.prm.onnx_runtime import export_dir, exported, load_onnx
    from pcr_ray.prm.scorer import PRMScorer

    pairs, source = load_pairs(args.pairs)
    kw = {"max_batch": args.max_batch, "max_length": args.max_length}
    with tempfile.TemporaryDirectory() as tmp:
        ck, ck_desc = checkpoint(Path(tmp), args.checkpoint)
        fresh_export = not export_dir(ck).exists()
        t0 = time.perf_counter()
        exported(ck)
        export_s = time.perf_counter() - t0
        fp32 = PRMScorer.from_checkpoint(ck, **kw)
        tq, tok, _ = load_checkpoint(ck)
        torch_q8 = PRMScorer(quantize_dynamic(tq, {torch.nn.Linear}, dtype=torch.qint8), tok,
                             int8=True, **kw)  # torch's dynamic int8, one pair per pass (no longer a prm option)
        ort_q8 = PRMScorer.from_checkpoint(ck, runtime="onnx", int8=True, **kw)
        ort_q8_batched = PRMScorer(ort_q8.model, tok, **kw)  # int8 in batches: breaks "a function of the pair alone"
        ort_32 = PRMScorer(load_onnx(ck, int8=False), tok, **kw)
        b16 = PRMScorer.from_checkpoint(ck, bf16=True, **kw)
        runtimes = {"fp32_batched": fp32, "torch_int8_per_pair": torch_q8, "onnx_int8_per_pair": ort_q8,
                    "onnx_int8_batched": ort_q8_batched, "onnx_fp32_batched": ort_32, "bf16_batched": b16}
        lengths = [len(x) for x in encode_pairs(tok, [p[0] for p in pairs], [p[1] for p in pairs],
                                                args.max_length, pad=False)["input_ids"]]
        for sc in runtimes.values():
            sc.score(pairs[:8])  # warm up
        t0 = time.perf_counter()
        single_scores = [fp32.score([p])[0] for p in pairs[: args.single]]
        single_rate = args.single / (time.perf_counter() - t0)
        rate: dict[str, float] = {}
        scores: dict[str, list[float]] = {}
        for _ in range(max(1, args.rounds)):
            for name, sc in runtimes.items():
                t0 = time.perf_counter()
                scores[name] = sc.score(pairs)
                rate[name] = max(rate.get(name, 0.0), len(pairs) / (time.perf_counter() - t0))
        alone = {name: [sc.score([p])[0] for p in pairs[: args.single]] for name, sc in runtimes.items()
                 if name != "fp32_batched"}
    ref = scores["fp32_batched"]
    res: dict[str, object] = {
        "machine": machine_info(), "torch_threads": torch.get_num_threads(), "onnx_threads": ort_q8.model.threads,
        "pairs_source": source, "checkpoint": ck_desc, "pairs": len(pairs), "single_pairs": args.single,
        "max_batch": args.max_batch, "max_length": args.max_length, "rounds": args.rounds,
        "mean_tokens": round(statistics.fmean(lengths), 1),
        "onnx_export_s": round(export_s, 1) if fresh_export else None,
        "one_at_a_time_steps_per_s": round(single_rate, 1), "batched_steps_per_s": round(rate["fp32_batched"], 1),
        "batched_over_single": round(rate["fp32_batched"] / single_rate, 2),
        "max_abs_score_diff_single_vs_batched": max(abs(a - b) for a, b in zip(single_scores, ref, strict=False)),
    }
    for name in runtimes:
        if name == "fp32_batched":
            continue
        diffs = [abs(a - b) for a, b in zip(scores[name], ref, strict=True)]
        gaps = [abs(a - b) for a, b in zip(alone[name], scores[name], strict=False)]
        res.update({f"{name}_steps_per_s": round(rate[name], 1),
                    f"{name}_over_fp32_batched": round(rate[name] / rate["fp32_batched"], 2),
                    f"{name}_mean_abs_score_diff_vs_fp32": round(statistics.fmean(diffs), 4),
                    f"{name}_max_abs_score_diff_vs_fp32": round(max(diffs), 4),
                    f"{name}_equals_scored_alone": alone[name] == scores[name][: args.single],
                    f"{name}_max_abs_score_diff_alone_vs_among_others": round(max(gaps), 5)})
    res["onnx_int8_per_pair_over_torch_int8_per_pair"] = round(rate["onnx_int8_per_pair"]
                                                               / rate["torch_int8_per_pair"], 2)
    print(f"pairs: {len(pairs)} from {source}; mean {res['mean_tokens']} tokens; {ck_desc}; "
          f"{res['torch_threads']} torch threads, {res['onnx_threads']} ONNX Runtime threads")
    print(f"{'one at a time':<20}: {res['one_at_a_time_steps_per_s']:>7} steps/s")
    print(f"{'fp32_batched':<20}: {res['batched_steps_per_s']:>7} steps/s  ({res['batched_over_single']}x one at a "
          f"time)")
    for name in [n for n in runtimes if n != "fp32_batched"]:
        print(f"{name:<20}: {res[f'{name}_steps_per_s']:>7} steps/s  ({res[f'{name}_over_fp32_batched']}x fp32; "
              f"mean |score diff| {res[f'{name}_mean_abs_score_diff_vs_fp32']}; alone == among others: "
              f"{res[f'{name}_equals_scored_alone']})")
    write_result(args.name, res)


if __name__ == "__main__":
    main()
