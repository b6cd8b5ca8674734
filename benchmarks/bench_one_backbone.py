"""Table 1 on one backbone, in one process without Ray: fine-tune, step validity, every method, one model.

    .venv/bin/python benchmarks/bench_one_backbone.py --model sft:test --physics 4 --gsm8k 4     # a smoke run
    python benchmarks/bench_one_backbone.py --train tiny_gpu --base FOLDER --device cuda --batch-sequences 512

The same code as `pcr-ray evaluate experiment=one_backbone` below the Ray layer: the experiment's dataset,
methods and search settings (conf/experiment/one_backbone.yaml), the HF generator, the PRM scorer, run_search,
the baselines, pipeline/records.py's rows and grading, pipeline/metrics.py's table. Each method runs over all
problems in lock-step, so one batched `generate` call serves every problem's requests (a GPU's way to run a
135M model). For a machine without Ray (a lent GPU box) or a quick look on a laptop; the Ray pipeline is the
way to run it at scale.

`--train RECIPE` first fine-tunes `--base` with conf/sft_recipe/RECIPE.yaml (in this process, on the GPU when
there is one) and evaluates that folder. Measured besides the table: the share of proposed steps that pass the
verifier at every gold prefix of held-out problems (sft/measure.py), and the retry-with-feedback loop (of the
re-asks that carried the verifier's diagnostics, how many got a valid step). Writes
<cache>/bench/bench_one_backbone.json (--results: also benchmarks/results/; --out: also that path).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections import Counter
from pathlib import Path

from _machine import machine_info, write_result

from pcr_ray.baselines import BASELINES, run_baseline
from pcr_ray.configs import compose, to_plain
from pcr_ray.data.selection import load_problems
from pcr_ray.generators.hf import HFGenerator
from pcr_ray.pipeline.metrics import compute_metrics, error_table, markdown_table
from pcr_ray.pipeline.records import error_record, exc_text, grade_row, search_problem, search_record, with_givens
from pcr_ray.prm.build import build_scorer
from pcr_ray.search import SearchConfig, run_search
from pcr_ray.sft.measure import step_validity


def sft_recipe(name: str):
    """conf/sft_recipe/<name>.yaml, composed and checked."""
    from pcr_ray.sft.quick import recipe_from_config

    return recipe_from_config(to_plain(compose("sft", [f"sft_recipe={name}"]))["sft_recipe"])


def fine_tune(recipe_name: str, base: str, out: Path) -> dict:
    """Train `recipe_name` from `base` into `out`; the run's summary."""
    from pcr_ray.sft.corpus import build_corpus
    from pcr_ray.sft.train import run_sft

    recipe = dataclasses.replace(sft_recipe(recipe_name), base_model=base)
    t0 = time.perf_counter()
    examples, summary = build_corpus(recipe.physics_problems, recipe.physics_seed, recipe.gsm8k_train,
                                     recipe.formats, physics_mix=recipe.physics_mix)
    corpus_s = time.perf_counter() - t0
    res = run_sft(examples, recipe, out, data_summary=summary)
    print(f"fine-tune {recipe_name}: {res.steps} steps, {res.tokens} tokens in {res.seconds:.0f} s "
          f"({res.tokens / res.seconds:,.0f} tokens/s), loss {res.losses[0]:.2f} -> {res.losses[-1]:.2f}", flush=True)
    return {"recipe": recipe.to_dict(), "data": summary, "corpus_s": round(corpus_s, 2), "steps": res.steps,
            "tokens": res.tokens, "seconds": round(res.seconds, 1), "tokens_per_s": round(res.tokens / res.seconds),
            "first_loss": res.losses[0], "last_loss": res.losses[-1], "folder": str(out)}


def held_out_validity(gen: HFGenerator, problems: list, k: int, batch: int) -> dict:
    """Step validity at every gold prefix, per source, of the problems that have a gold trace."""
    out = {}
    for source in sorted({p.source for p in problems}):
        probs = [p for p in problems if p.source == source and p.gold_trace]
        if probs:
            m = step_validity(gen, probs, k=k, batch=batch).to_dict()
            out[source] = {"problems": len(probs), **m}
            print(f"step validity {source}: {m.get('valid')}/{m.get('proposals')} pass the verifier", flush=True)
    return out


def run_method(method: str, rows: list[dict], gen: HFGenerator, scorer, search: dict, baselines: dict) -> tuple:
    """Result rows of one method over every problem (lock-step), graded; the searches' retry counts."""
    rows = [{**r, "method": method} for r in rows]
    todo = [r for r in rows if not r.get("extract_error")]
    out = [error_record(r, r["extract_error"], attempts=1) for r in rows if r.get("extract_error")]
    retries: Counter = Counter()
    try:
        if method in BASELINES:
            results = run_baseline(method, [search_problem(r) for r in todo], gen, baselines)
        else:
            cfg = SearchConfig.from_dict({**search, "method": method})
            results = run_search([search_problem(r) for r in todo], gen, scorer if cfg.uses_prm else None, cfg)
            for res in results:
                retries.update(res.round_stats or {})
        out += [search_record(r, res) for r, res in zip(todo, results, strict=True)]
    except Exception as exc:  # noqa: BLE001 - a method that breaks is a row of errors, the table goes on
        out += [error_record(r, exc_text(exc), attempts=1) for r in todo]
    return [grade_row(r) for r in out], retries


def feedback_loop(retries: Counter) -> dict:
    """Of the re-asks that carried the verifier's diagnostics, how many got a valid step; first asks beside."""
    def share(tag: str) -> dict:
        asks, ok = retries.get(f"{tag}_asks", 0), retries.get(f"{tag}_asks_ok", 0)
        return {"asks": asks, "asks_with_valid_step": ok, "share": round(ok / asks, 4) if asks else None,
                "proposed": retries.get(f"{tag}_proposed", 0), "verified": retries.get(f"{tag}_verified", 0)}

    return {"first": share("first"), "retry": share("retry")}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="sft:tiny", help="the fine-tuned folder (or sft:<recipe>); with --train: "
                    "where the fine-tune is written")
    ap.add_argument("--train", default="", help="fine-tune this conf/sft_recipe first (from --base)")
    ap.add_argument("--base", default="", help="base model folder for --train (default: the recipe's)")
    ap.add_argument("--prm", default="", help="PRM checkpoint folder (default: the experiment's, trained if needed)")
    ap.add_argument("--device", default="cpu", help="cpu | cuda")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--batch-sequences", type=int, default=1, help="samples per generate call (GPU: 256+)")
    ap.add_argument("--physics", type=int, default=40, help="generated physics problems (evaluation seed 0)")
    ap.add_argument("--gsm8k", type=int, default=100, help="GSM8K test problems (random sample, seed 0)")
    ap.add_argument("--methods", default="", help="comma-separated (default: the experiment's)")
    ap.add_argument("-k", type=int, default=4, help="proposals per request in the step-validity measurement")
    ap.add_argument("--revision", default="", help="git revision to record (a machine without git)")
    ap.add_argument("--out", default="", help="also write the JSON here")
    ap.add_argument("--results", action="store_true", help="also write benchmarks/results/")
    args = ap.parse_args(argv)
    t_start = time.perf_counter()

    if args.device.startswith("cuda"):
        import torch

        torch.set_float32_matmul_precision("high")  # TF32 matmuls: fp32 training and sampling, tensor cores
    cfg = to_plain(compose("evaluate", ["experiment=one_backbone"]))
    result: dict = {"machine": machine_info()}
    if args.revision:
        result["git_revision"] = args.revision
    model = args.model
    if args.train:
        from pcr_ray.generators.model_folder import resolve_model

        base = args.base or resolve_model(sft_recipe(args.train).base_model)
        result["fine_tune"] = fine_tune(args.train, base, Path(model))
    gen_cfg = {k: v for k, v in cfg["generator"].items() if k not in ("kind", "name", "description")}
    gen = HFGenerator(**{**gen_cfg, "model": model, "device": args.device, "dtype": args.dtype,
                         "batch_sequences": args.batch_sequences, "num_threads": None})
    prm_cfg = dict(cfg["prm"])
    if args.device != "cpu":  # ONNX Runtime and int8 are the CPU's engines
        prm_cfg.update(device=args.device, runtime="torch", int8=False)
    scorer = build_scorer(prm_cfg, args.prm or None)

    dataset = cfg["dataset"]
    sizes = {"physics": args.physics, "gsm8k_test": args.gsm8k}
    dataset["sources"] = [{**s, "limit": sizes[s["name"]], "kwargs": {**(s.get("kwargs") or {}),
                                                                       **({"n": args.physics} if s["name"] ==
                                                                          "physics" else {})}}
                          for s in dataset["sources"] if sizes.get(s["name"], 0) > 0]
    problems = load_problems(dataset)
    print(f"{len(problems)} problems: {dict(Counter(p.source for p in problems))}", flush=True)

    t0 = time.perf_counter()
    result["step_validity"] = held_out_validity(gen, problems, args.k, max(1, args.batch_sequences // args.k))
    result["step_validity_s"] = round(time.perf_counter() - t0, 1)

    methods = args.methods.split(",") if args.methods else [str(m) for m in cfg["methods"]]
    result["givens"] = givens = str(cfg["pipeline"]["givens"])  # gold: oracle givens
    base_rows = [with_givens(p.to_dict(), givens) for p in problems]
    rows: list[dict] = []
    retries: Counter = Counter()
    timing = {}
    for method in methods:  # the record is rewritten after each method: a run cut short keeps what it did
        t0 = time.perf_counter()
        graded, r = run_method(method, base_rows, gen, scorer, cfg["search"], cfg.get("baselines") or {})
        rows += graded
        retries += r
        timing[method] = round(time.perf_counter() - t0, 1)
        acc = sum(x["correct"] for x in graded) / max(1, len(graded))
        print(f"{method}: {acc:.1%} correct of {len(graded)} in {timing[method]} s", flush=True)
        metrics = compute_metrics(rows, methods)
        result.update(methods=methods, search=cfg["search"], generator={**gen.identity, "batch_sequences":
                                                                        args.batch_sequences},
                      prm=dict(getattr(scorer, "identity", {}) or {}), method_seconds=timing,
                      feedback=feedback_loop(retries), metrics=metrics, table=markdown_table(metrics),
                      error_table=error_table(metrics), wall_s=round(time.perf_counter() - t_start, 1))
        path = write_result("bench_one_backbone", result, commit=args.results or None)
        if args.out:
            Path(args.out).write_text(json.dumps(result, indent=1, default=str))
    print(result["table"], flush=True)
    print(f"wrote {path}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
