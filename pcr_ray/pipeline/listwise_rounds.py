"""`pcr-ray listwise-rounds`: the listwise PRM recipe end to end, as docs/results.md measured it, for any backbone.

One listwise run on make-pairs' longer lists, then rounds of (mine lists with the last PRM, train one listwise
epoch on them from it), then the search benchmark on 100 physics problems of seed 13 (docs/results.md):

  make-pairs search_per_kind=8            -> OUT/pairs_lw
  train-prm train.loss=listwise           -> OUT/lw1
  round r = 1..R: mine-pairs with lw<r>   -> OUT/pairs_mlw<r>;  train-prm from lw<r> -> OUT/lw<r+1>
  pcr_ray.bench.search_methods            -> OUT/seed13_lw<R+1>.json (and <cache>/bench/, with per-problem records)

Each step is one `pcr-ray` command in its own process (so each joins, or starts, its own Ray); a step whose
output is complete (a checkpoint's prm.json, a pairs summary) is skipped, so a rerun resumes where it stopped
(other settings want another OUT: what is there is not checked against them).
`gpus=N` is the GPU cluster's shape: Ray Train on N GPU workers, mining on N GPU actors in bfloat16 (the
paper's backbone: `prm=deberta_v3_base`); without it, the CPU recipe (int8 mining in process).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from pcr_ray.commands.hydra_app import hydra_command
from pcr_ray.configs import ConfigError
from pcr_ray.negatives.csp import CSP_KINDS
from pcr_ray.negatives.pairs import MINED_KINDS
from pcr_ray.negatives.search_pairs import SEARCH_KINDS
from pcr_ray.pipeline.recipe import RecipeStep, run_recipe


def _hydra_list(kinds: Sequence[str]) -> str:
    return "[" + ",".join(kinds) + "]"


LISTWISE_KINDS = _hydra_list(CSP_KINDS + SEARCH_KINDS)  # the verifier-passing kinds of make-pairs
MINED_LISTS = _hydra_list(MINED_KINDS)  # mine-pairs' kinds: the mined lists alone
FIRST_MINING_SEED = 7919  # make-pairs' physics seed; later rounds take 7921, 7923, ... (new problems each round)


DEFAULT_PRM = "minilm_csp"  # conf/listwise_rounds.yaml's prm (train-prm's)


def _attention(args: DictConfig) -> str:
    """`attention`, else the attention of the PRM config the recipe trains (MiniLM: shared_context; DeBERTa: pair)."""
    return str(args.attention or args.prm.attention)


def _prm_overrides(args: DictConfig, prm: str) -> list[str]:
    return [f"prm={prm}", f"prm.attention={_attention(args)}"]


def _train_scaling(args: DictConfig) -> list[str]:
    if args.gpus > 0:
        return ["scaling.use_gpu=true", f"scaling.num_workers={args.gpus}", "scaling.cpus_per_worker=4"]
    return []


def _mining_placement(args: DictConfig) -> list[str]:
    if args.gpus > 0:  # Ray Data over GPU actors, batched bf16 scoring
        return ["prm.device=cuda", "prm.runtime=torch", "prm.int8=false", "prm.bf16=true", "use_ray=true",
                f"actors={args.gpus}"]
    if _attention(args) == "shared_context":  # torch per-token int8, each context encoded once (the quick PRM's)
        return ["prm.device=cpu", "prm.runtime=torch", "prm.int8=true", "use_ray=false"]
    return ["prm.device=cpu", "prm.runtime=onnx", "prm.int8=true", "use_ray=false"]  # a pair PRM on CPU


def recipe(args: DictConfig, prm: str = DEFAULT_PRM) -> list[RecipeStep]:
    """The recipe's steps for this config (conf/listwise_rounds.yaml) whose `prm` is the preset named `prm`
    (nothing is run)."""
    out = Path(args.out).expanduser().resolve()
    pcr = (sys.executable, "-m", "pcr_ray.cli")
    pairs = out / "pairs_lw"
    make_pairs = ["make-pairs", f"search_per_kind={args.search_per_kind}", f"out_dir={pairs}",
                  f"kinds={LISTWISE_KINDS}"]
    if args.pairs_physics is not None:
        sources = [f"{{name: physics, kwargs: {{n: {args.pairs_physics}, seed: {FIRST_MINING_SEED}, split: train}}}}"]
        if args.pairs_gsm8k:
            sources.append(f"{{name: gsm8k_train, limit: {args.pairs_gsm8k}}}")
        make_pairs.append(f"sources=[{', '.join(sources)}]")
    steps = [RecipeStep("make-pairs", (*pcr, *make_pairs), pairs / "summary.json")]
    first = out / "lw1"
    steps.append(RecipeStep("train lw1", (*pcr, "train-prm", *_prm_overrides(args, prm), f"pairs_dir={pairs}",
                                          f"limit_train={args.first_limit}", f"limit_val={args.limit_val}",
                                          "train.loss=listwise", "train.epochs=1", "train.batch_size=32",
                                          f"train.precision={args.precision}", f"output={first}",
                                          f"storage_path={out / 'ray_train'}", "run_name=prm-lw1",
                                          *_train_scaling(args)),
                            first / "prm.json"))
    for r in range(1, args.rounds + 1):
        prev, new, mined = out / f"lw{r}", out / f"lw{r + 1}", out / f"pairs_mlw{r}"
        seed = FIRST_MINING_SEED + 2 * (r - 1)
        n = 3000 if r == 1 else max(600, 2 * args.lists_per_round)  # round 1: make-pairs' own problems
        steps.append(RecipeStep(
            f"mine round {r}",
            (*pcr, "mine-pairs", *_prm_overrides(args, prm), f"prm.checkpoint={prev}", f"pairs_dir={mined}",
             "positions=all", "per_problem=6", f"cap={args.cap}",
             f"sources=[{{name: physics, kwargs: {{n: {n}, seed: {seed}, split: train}}}}]",
             "splits=[train,validation]",
             f"limit_per_split={{train: {args.lists_per_round}, validation: {args.val_lists}}}",
             *_mining_placement(args)),
            mined / "mined_all_summary.json", mkdirs=(mined / "train", mined / "validation")))
        steps.append(RecipeStep(
            f"train lw{r + 1}",
            (*pcr, "train-prm", *_prm_overrides(args, prm), f"pairs_dir={mined}", f"kinds={MINED_LISTS}",
             "limit_train=0", f"limit_val={args.limit_val}", "train.loss=listwise", "train.epochs=1",
             "train.batch_size=32", "train.lr=3e-5", f"train.precision={args.precision}", f"train.init_from={prev}",
             f"output={new}",
             f"storage_path={out / 'ray_train'}", f"run_name=prm-lw{r + 1}", *_train_scaling(args)),
            new / "prm.json"))
    if args.eval_problems > 0:
        final = out / f"lw{args.rounds + 1}"
        name = args.name or f"seed13_lw{args.rounds + 1}"
        bench_args = ("--physics", str(args.eval_problems), "--gsm8k", "0", "--seed", "13", "--generators", "typed",
                      "--methods", "nsprm", "--typed-cap", str(args.cap), "--checkpoint", str(final),
                      "--name", name, "--out", str(out))
        # with GPUs the benchmark runs on a GPU node (the head has none), else here
        bench = ("pcr_ray.bench.search_methods", *bench_args)
        run = ((sys.executable, "-m", "pcr_ray.pipeline.gpu_step", *bench, "--device", "cuda", "--bf16")
               if args.gpus > 0 else (sys.executable, "-m", *bench))
        steps.append(RecipeStep("search benchmark", run, out / f"{name}.json"))
    return steps


USAGE = """usage: pcr-ray listwise-rounds out=DIR [key=value ...]

""" + __doc__.split("\n\n")[1] + """

e.g.  pcr-ray listwise-rounds out=/mnt/shared/pcr_ray/deberta prm=deberta_v3_base gpus=4
      pcr-ray listwise-rounds out=runs/lw                      # on CPU (71 minutes on 2 cores)
      pcr-ray listwise-rounds out=/tmp/lw dry_run=true         # print the commands"""


def check_options(cfg: DictConfig) -> None:
    """ConfigError for a value the recipe cannot run with."""
    for key in ("rounds", "gpus", "eval_problems", "first_limit"):
        if cfg[key] < 0:
            raise ConfigError(f"{key} must be >= 0, got {cfg[key]}")
    for key in ("lists_per_round", "search_per_kind"):
        if cfg[key] < 1:
            raise ConfigError(f"{key} must be >= 1, got {cfg[key]}")
    for key, allowed in (("attention", (None, "pair", "shared_context")), ("precision", ("fp32", "bf16"))):
        if cfg[key] not in allowed:
            raise ConfigError(f"{key} must be one of {[a for a in allowed if a]}, got {cfg[key]!r}")


def run(cfg: DictConfig) -> int:
    """`pcr-ray listwise-rounds`: run the recipe's steps (or print them)."""
    check_options(cfg)
    prm = HydraConfig.get().runtime.choices.get("prm") if HydraConfig.initialized() else None
    return run_recipe(recipe(cfg, prm or DEFAULT_PRM), dry_run=cfg.dry_run, label="listwise-rounds")


main = hydra_command("listwise-rounds", "listwise_rounds", run, USAGE)


if __name__ == "__main__":
    sys.exit(main())
