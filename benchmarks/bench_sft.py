"""Generator fine-tuning: training tokens/s (full vs LoRA, same run) and what the fine-tune buys at generation.

    .venv/bin/python benchmarks/bench_sft.py train [--steps 6]
    .venv/bin/python benchmarks/bench_sft.py generate --backend hf [--problems 20]
    OMP_NUM_THREADS=1 .venv-vllm/bin/python benchmarks/bench_sft.py generate --backend vllm [--problems 20]

`train`: the same examples (a sample of the tiny recipe's corpus, one epoch) through the fine-tune (TRL's
SFTTrainer), full fine-tuning then a rank-16 LoRA of SmolLM2-135M; tokens/s and loss of each, and their ratio.
`generate`: at every prefix of held-out gold traces (generated physics of evaluation seed 0 and, where the data is,
GSM8K test), k proposals from the base model with its full prompt (the op list and a worked example) and from the
fine-tuned `sft:tiny` with the compact prompt; the share that passes the verifier, proposals/s, verifier-passing
proposals/s and prompt tokens per request of each, and the ratios. Writes
<cache>/bench/bench_sft_<part>[_<backend>].json (--results: also benchmarks/results/).
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import sys

from _machine import add_dry_run, dry_run, machine_info, write_result


def _fit(examples: list, recipe) -> dict:
    import tempfile
    from pathlib import Path

    from pcr_ray.sft.trainer import build_trainer, fit

    with tempfile.TemporaryDirectory() as tmp:
        trainer, data = build_trainer(examples, recipe, Path(tmp))
        res = fit(trainer, data)
    return {"steps": res.steps, "tokens": res.tokens, "seconds": round(res.seconds, 2), "losses": res.losses}


def bench_train(steps: int) -> dict:
    """The fine-tune (TRL's SFTTrainer) on a seeded sample of the tiny recipe's corpus (`steps` batches of its batch
    size, one epoch), full fine-tuning then a rank-16 LoRA: tokens/s and the loss curve of each; their ratio."""
    import random

    from pcr_ray.generators.model_folder import resolve_model
    from pcr_ray.sft.corpus import build_corpus
    from pcr_ray.sft.quick import quick_recipe

    recipe = quick_recipe("tiny")
    recipe = dataclasses.replace(recipe, base_model=resolve_model(recipe.base_model), max_steps=0, epochs=1.0,
                                 eval_share=0.0, max_len=10**6)
    corpus, _ = build_corpus(recipe.physics_problems, recipe.physics_seed, recipe.gsm8k_train,
                             recipe.formats, physics_mix=recipe.physics_mix)
    examples = random.Random(0).sample(corpus, steps * recipe.batch_size)
    out: dict = {}
    for name, r in (("full", recipe), ("lora_r16", dataclasses.replace(recipe, lora_r=16))):
        m = _fit(examples, r)
        m["tokens_per_s"] = round(m["tokens"] / m["seconds"], 1)
        m["mean_loss"] = round(sum(m["losses"]) / len(m["losses"]), 4)
        out[name] = m
        print(f"{name}: {m['tokens_per_s']} tokens/s over {m['steps']} steps, mean loss {m['mean_loss']}", flush=True)
    ratio = round(out["lora_r16"]["tokens_per_s"] / out["full"]["tokens_per_s"], 3)
    return {"train": out, "lora_vs_full_tokens_per_s": ratio, "examples": len(examples), "recipe": "sft:tiny",
            "batches": steps}


def _held_out(n: int) -> dict[str, list]:
    from pcr_ray.data.physics import generate_problems

    sets = {"physics": generate_problems(n, seed=0, split="heldout")}
    try:
        from pcr_ray.data.readers import iter_gsm8k

        sets["gsm8k_test"] = list(itertools.islice((p for p in iter_gsm8k("test") if p.gold_trace), n))
    except Exception as exc:  # noqa: BLE001 - no data folder: physics alone
        print(f"GSM8K test left out: {exc}", flush=True)
    return sets


def _generator_cfg(backend: str, fine_tuned: bool, sft_model: str = "sft:tiny") -> dict:
    """The generator config of the base (full prompt) or the fine-tuned model (compact prompt) on a backend."""
    from pcr_ray.configs import compose, to_plain

    if backend == "hf":
        name = "sft_tiny"
        over = [f"generator.model={sft_model}"] if fine_tuned else ["generator.model=tiny:smollm2",
                                                                    "generator.prompt=full"]
    else:
        name = "vllm_sft_tiny" if fine_tuned else "vllm_tiny"
        over = [f"generator.model={sft_model}"] if fine_tuned else []
    return to_plain(compose("evaluate", [f"generator={name}", *over]))["generator"]


def bench_generate(backend: str, n: int, k: int, models: tuple[str, ...], sft_model: str = "sft:tiny") -> dict:
    from pcr_ray.generators.base import build_generator
    from pcr_ray.sft.measure import step_validity

    sets = _held_out(n)
    out: dict = {}
    for label, fine_tuned in (("base_full_prompt", False), ("sft_compact_prompt", True)):
        if label.split("_")[0] not in models:
            continue
        gen = build_generator(_generator_cfg(backend, fine_tuned, sft_model))
        out[label] = {}
        for ds, problems in sets.items():
            before = dict(gen.stats.extra)
            m = step_validity(gen, problems, k=k).to_dict()
            ptok = gen.stats.extra.get("prompt_tokens", 0) - before.get("prompt_tokens", 0)
            m["prompt_tokens_per_request"] = round(ptok / max(1, m["proposals"]), 1) if ptok else None
            out[label][ds] = m
            print(f"{label} {ds}: {m['valid']}/{m['proposals']} pass the verifier ({m['valid_share']}), "
                  f"{m['proposals_per_s']} proposals/s", flush=True)
        if hasattr(gen, "shutdown"):
            gen.shutdown()
    for ds in sets if len(out) == 2 else ():
        b, s = out["base_full_prompt"][ds], out["sft_compact_prompt"][ds]
        out.setdefault("ratios", {})[ds] = {
            "valid_per_s": round(s["valid_per_s"] / b["valid_per_s"], 2) if b["valid_per_s"] else None,
            "proposals_per_s": round(s["proposals_per_s"] / b["proposals_per_s"], 2)}
    return {"generate": out, "backend": backend, "problems_per_set": n, "k": k, "sft_model": sft_model}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("part", choices=("train", "generate"))
    ap.add_argument("--steps", type=int, default=6, help="batches of the same examples per condition (train)")
    ap.add_argument("--backend", choices=("hf", "vllm"), default="hf", help="generation backend (generate)")
    ap.add_argument("--problems", type=int, default=20, help="held-out problems per data set (generate)")
    ap.add_argument("-k", type=int, default=4, help="proposals per request (generate)")
    ap.add_argument("--models", default="base,sft", help="which of base,sft to measure (generate)")
    ap.add_argument("--sft-model", default="sft:tiny", help="the fine-tuned model: sft:<recipe> or a folder (generate)")
    ap.add_argument("--results", action="store_true", help="also write benchmarks/results/")
    add_dry_run(ap)
    args = ap.parse_args(argv)
    if args.dry_run:
        models = args.models.split(",")
        gens = {m: _generator_cfg(args.backend, m == "sft", args.sft_model) for m in ("base", "sft") if m in models}
        return dry_run(__file__, {**vars(args), "generators": gens})
    if args.part == "train":
        result, name = bench_train(args.steps), "bench_sft_train"
    else:
        models = tuple(args.models.split(","))
        result = bench_generate(args.backend, args.problems, args.k, models, args.sft_model)
        name = f"bench_sft_generate_{args.backend}"
    result["machine"] = machine_info()
    write_result(name, result, commit=args.results or None)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
