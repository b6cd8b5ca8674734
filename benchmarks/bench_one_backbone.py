"""Table 1 on one backbone, in one process without Ray: fine-tune, step validity, every method, one model.

    python benchmarks/bench_one_backbone.py --model sft:test --physics 4 --gsm8k 4     # a smoke run
    python benchmarks/bench_one_backbone.py --train tiny_gpu --model /tmp/sft_tiny_gpu --device cuda \
        --batch-sequences 512 --physics 40 --gsm8k 100
    python benchmarks/bench_one_backbone.py --dry-run grading.mode=scibench    # compose and check, run nothing

`pcr-ray evaluate experiment=one_backbone KEY=VALUE...` without the Ray layer. The config is composed as
evaluate composes it (the experiment, then the KEY=VALUE overrides given here: `pipeline.givens=gold`,
`grading.mode=scibench`, `method_overrides.nsprm.beam_width=4`, `prm.checkpoint=FOLDER`, ...; the flags below
are overrides too) and every method's problems go through the pipeline's own batch code,
pcr_ray/pipeline/search_batch.py's BatchRunner: givens by `pipeline.givens`, each method's search or baseline
with its `method_overrides`, a problem whose run raises retried alone `pipeline.problem_attempts` times, rows
graded by `grading.mode`; pipeline/metrics.py makes the table. What differs from `pcr-ray evaluate`: the models
(the generators and PRMs the methods use) are built in this process instead of in Ray actors; each method's
problems are one batch (every problem lock-step, so one batched generate call serves all their requests: a
GPU's way to run a 135M model) where the pipeline cuts `pipeline.batch_size`, so sampled proposals may differ
by batch; a worker that dies is not restarted; no parquet shards, report.html or resume. Ray is never
imported, so the script runs on a machine that has torch and transformers alone.

`--train RECIPE` first fine-tunes `--base` with conf/sft_recipe/RECIPE.yaml (in this process, on the GPU when
there is one) into `--model`, and evaluates that folder. Measured besides the table: the share of proposed
steps that pass the verifier at every gold prefix of held-out problems (sft/measure.py), and the
retry-with-feedback loop (of the re-asks that carried the verifier's diagnostics, how many got a valid step).
Writes <cache>/bench/bench_one_backbone.json (--results: also benchmarks/results/; --out: also that path).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from _machine import add_dry_run, dry_run, machine_info, write_result

from pcr_ray.configs import compose, to_plain
from pcr_ray.data.selection import load_problems
from pcr_ray.evaluate import GRADING_NOTES
from pcr_ray.generators.base import build_generator
from pcr_ray.generators.model_folder import resolve_model
from pcr_ray.grading import check_grading_mode
from pcr_ray.pipeline.metrics import compute_metrics, error_table, markdown_table
from pcr_ray.pipeline.search_batch import (
    BatchRunner,
    check_search_configs,
    generator_label,
    parse_methods,
    work_items,
    worker_spec,
)
from pcr_ray.prm.build import build_scorer, checkpoint_path
from pcr_ray.sft.corpus import build_corpus
from pcr_ray.sft.measure import step_validity
from pcr_ray.sft.train import SFTRecipe
from pcr_ray.sft.trainer import run_sft


def sft_recipe(name: str) -> SFTRecipe:
    """conf/sft_recipe/<name>.yaml, composed and checked."""
    return SFTRecipe.from_config(to_plain(compose("sft", [f"sft_recipe={name}"]))["sft_recipe"])


def fine_tune(recipe: SFTRecipe, name: str, out: Path) -> dict[str, Any]:
    """Train `recipe` into `out`; the run's summary (the counts are of the examples it trained on)."""
    t0 = time.perf_counter()
    examples, summary = build_corpus(recipe.physics_problems, recipe.physics_seed, recipe.gsm8k_train,
                                     recipe.formats, physics_mix=recipe.physics_mix)
    summary["recipe_name"] = name
    corpus_s = time.perf_counter() - t0
    res = run_sft(examples, recipe, out, data_summary=summary)
    print(f"fine-tune {name}: {res.data['examples']} examples ({res.data['cut_by_max_len']['examples']} longer "
          f"than max_len {recipe.max_len} left out), {res.steps} steps, {res.tokens} tokens in {res.seconds:.0f} s "
          f"({res.tokens / res.seconds:,.0f} tokens/s), loss {res.losses[0]:.2f} -> {res.losses[-1]:.2f}", flush=True)
    return {"recipe": recipe.to_dict(), "data": {**summary, **res.data}, "corpus_s": round(corpus_s, 2),
            "steps": res.steps, "tokens": res.tokens, "seconds": round(res.seconds, 1),
            "tokens_per_s": round(res.tokens / res.seconds), "first_loss": res.losses[0],
            "last_loss": res.losses[-1], "folder": str(out)}


def held_out_validity(gen: Any, problems: list, k: int, batch: int) -> dict[str, Any]:
    """Step validity at every gold prefix, per source, of the problems that have a gold trace."""
    out = {}
    for source in sorted({p.source for p in problems}):
        probs = [p for p in problems if p.source == source and p.gold_trace]
        if probs:
            m = step_validity(gen, probs, k=k, batch=batch).to_dict()
            out[source] = {"problems": len(probs), **m}
            print(f"step validity {source}: {m.get('valid')}/{m.get('proposals')} pass the verifier", flush=True)
    return out


def feedback_loop(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Of the re-asks that carried the verifier's diagnostics, how many got a valid step; first asks beside
    (the searches' round_stats, summed over the rows)."""
    retries: Counter = Counter()
    for r in rows:
        stats = r.get("round_stats")
        retries.update(json.loads(stats) if isinstance(stats, str) and stats else stats or {})

    def share(tag: str) -> dict[str, Any]:
        asks, ok = retries.get(f"{tag}_asks", 0), retries.get(f"{tag}_asks_ok", 0)
        return {"asks": asks, "asks_with_valid_step": ok, "share": round(ok / asks, 4) if asks else None,
                "proposed": retries.get(f"{tag}_proposed", 0), "verified": retries.get(f"{tag}_verified", 0)}

    return {"first": share("first"), "retry": share("retry")}


def overrides_of(args: argparse.Namespace) -> list[str]:
    """The evaluate overrides the flags stand for, then the KEY=VALUE ones given (which win)."""
    over = ["experiment=one_backbone"]
    if args.model:
        over.append(f"generator.model={args.model}")
    if args.device:
        over.append(f"generator.device={args.device}")
        if args.device != "cpu":  # ONNX Runtime and int8 are the CPU's engines
            over += [f"prm.device={args.device}", "prm.runtime=torch", "prm.int8=false"]
    if args.dtype:
        over.append(f"generator.dtype={args.dtype}")
    if args.batch_sequences:
        over.append(f"generator.batch_sequences={args.batch_sequences}")
    if args.prm:
        over.append(f"prm.checkpoint={args.prm}")
    if args.methods:
        over.append(f"methods=[{args.methods}]")
    return over + list(args.overrides)


def sized(dataset: dict[str, Any], physics: int, gsm8k: int) -> dict[str, Any]:
    """The dataset with --physics generated problems and --gsm8k GSM8K test ones (0 leaves a source out)."""
    sizes = {"physics": physics, "gsm8k_test": gsm8k}
    sources = []
    for s in dataset["sources"]:
        if s["name"] not in sizes:
            sources.append(s)
        elif sizes[s["name"]] > 0:
            kwargs = {**(s.get("kwargs") or {}), **({"n": physics} if s["name"] == "physics" else {})}
            sources.append({**s, "limit": sizes[s["name"]], "kwargs": kwargs})
    return {**dataset, "sources": sources}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("overrides", nargs="*", metavar="KEY=VALUE",
                    help="evaluate config overrides, after experiment=one_backbone and the flags' own")
    ap.add_argument("--model", default="", help="generator.model: a fine-tuned folder or sft:<recipe> (default: the "
                    "experiment's); with --train: the folder the fine-tune is written to")
    ap.add_argument("--train", default="", help="fine-tune this conf/sft_recipe first (from --base) into --model")
    ap.add_argument("--base", default="", help="base model folder for --train (default: the recipe's)")
    ap.add_argument("--prm", default="", help="prm.checkpoint: a PRM checkpoint folder (default: the experiment's)")
    ap.add_argument("--device", default="", help="generator.device, and the PRM's: cpu | cuda (default: the "
                    "config's)")
    ap.add_argument("--dtype", default="", help="generator.dtype (default: the config's)")
    ap.add_argument("--batch-sequences", type=int, default=0, help="generator.batch_sequences: samples per "
                    "generate call (GPU: 256+; default: the config's)")
    ap.add_argument("--physics", type=int, default=40, help="generated physics problems (evaluation seed 0)")
    ap.add_argument("--gsm8k", type=int, default=100, help="GSM8K test problems (random sample, seed 0)")
    ap.add_argument("--methods", default="", help="comma-separated (default: the experiment's)")
    ap.add_argument("-k", type=int, default=4, help="proposals per request in the step-validity measurement")
    ap.add_argument("--revision", default="", help="git revision to record (a machine without git)")
    ap.add_argument("--out", default="", help="also write the JSON here")
    ap.add_argument("--results", action="store_true", help="also write benchmarks/results/")
    add_dry_run(ap)
    args = ap.parse_args(argv)
    if args.train and not args.model:
        ap.error("--train needs --model FOLDER, where the fine-tune is written")
    t_start = time.perf_counter()

    cfg = to_plain(compose("evaluate", overrides_of(args)))
    grading, givens = str(cfg["grading"]["mode"]), str(cfg["pipeline"]["givens"])
    check_grading_mode(grading)
    specs = parse_methods(cfg["methods"], cfg.get("method_generators") or {}, cfg.get("method_overrides") or {},
                          cfg.get("method_prms") or {})
    check_search_configs(specs, cfg["search"], cfg.get("search_source_overrides") or {})
    recipe = sft_recipe(args.train) if args.train else None
    problems = load_problems(sized(cfg["dataset"], args.physics, args.gsm8k))
    print(f"{len(problems)} problems: {dict(Counter(p.source for p in problems))}", flush=True)
    gen_cfgs = {"default": cfg["generator"], **(cfg.get("generators") or {})}
    prm_cfgs = {"default": cfg["prm"], **(cfg.get("prms") or {})}
    used_gens = sorted({s.generator for s in specs})
    used_prms = sorted({s.prm for s in specs if s.uses_prm})
    for what, used, have in (("generator", used_gens, gen_cfgs), ("PRM", used_prms, prm_cfgs)):
        if set(used) - set(have):
            raise ValueError(f"methods use {what}(s) {sorted(set(used) - set(have))}, not configured")
    if args.dry_run:
        return dry_run(__file__, {"methods": [s.label for s in specs], "givens": givens, "grading": grading,
                                  "problems": dict(Counter(p.source for p in problems)), "generators": used_gens,
                                  "prms": used_prms, "train": recipe.to_dict() if recipe else None})

    if str(cfg["generator"].get("device", "cpu")).startswith("cuda"):
        import torch  # heavy: torch

        torch.set_float32_matmul_precision("high")  # TF32 matmuls: fp32 training and sampling, tensor cores
    result: dict[str, Any] = {"machine": machine_info(), "overrides": overrides_of(args), "givens": givens,
                              "grading": GRADING_NOTES[grading]}
    if args.revision:
        result["git_revision"] = args.revision
    if recipe is not None:
        base = args.base or resolve_model(recipe.base_model)
        result["fine_tune"] = fine_tune(dataclasses.replace(recipe, base_model=base), args.train, Path(args.model))
    generators = {g: build_generator(gen_cfgs[g]) for g in used_gens}
    scorers = {k: build_scorer(prm_cfgs[k], checkpoint_path(prm_cfgs[k])) for k in used_prms}
    runner = BatchRunner({**worker_spec(cfg, specs), "fused_givens": givens}, generators, scorers,
                         local_cfgs={g: gen_cfgs[g] for g in used_gens},
                         labels={g: generator_label(g, gen_cfgs[g]) for g in used_gens}, where="bench_one_backbone")

    gen = generators.get("default") or generators[used_gens[0]]
    k_batch = max(1, int(gen_cfgs["default"].get("batch_sequences") or 1) // args.k)
    t0 = time.perf_counter()
    result["step_validity"] = held_out_validity(gen, problems, args.k, k_batch)
    result["step_validity_s"] = round(time.perf_counter() - t0, 1)

    labels = [s.label for s in specs]
    rows: list[dict[str, Any]] = []
    timing = {}
    for spec in specs:  # the record is rewritten after each method: a run cut short keeps what it did
        t0 = time.perf_counter()
        graded = runner.run(work_items(problems, [spec]))
        rows += graded
        timing[spec.label] = round(time.perf_counter() - t0, 1)
        acc = sum(bool(x["correct"]) for x in graded) / max(1, len(graded))
        print(f"{spec.label}: {acc:.1%} correct of {len(graded)} in {timing[spec.label]} s", flush=True)
        metrics = compute_metrics(rows, labels, {"grading": GRADING_NOTES[grading], "givens": givens})
        result.update(methods=labels, search=cfg["search"], method_overrides=cfg.get("method_overrides") or {},
                      generator={**dict(getattr(gen, "identity", {}) or {}),
                                 "batch_sequences": gen_cfgs["default"].get("batch_sequences")},
                      prm={k: dict(getattr(s, "identity", {}) or {}) for k, s in scorers.items()},
                      method_seconds=timing, feedback=feedback_loop(rows), metrics=metrics,
                      table=markdown_table(metrics), error_table=error_table(metrics),
                      wall_s=round(time.perf_counter() - t_start, 1))
        path = write_result("bench_one_backbone", result, commit=args.results or None)
        if args.out:
            Path(args.out).write_text(json.dumps(result, indent=1, default=str))
    print(result["table"], flush=True)
    print(f"wrote {path}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
