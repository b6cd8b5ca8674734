"""`pcr-ray sft`: fine-tune a generator on gold traces with Ray Train's TorchTrainer (one loop per worker)."""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pcr_ray.commands.hydra_app import hydra_command
from pcr_ray.configs import checked_dict
from pcr_ray.generators.model_folder import SFT_RECORD, resolve_model
from pcr_ray.paths import cache_dir, is_uri, put_folder, runs_dir
from pcr_ray.pipeline.ray_runtime import init_ray
from pcr_ray.pipeline.train_prm import fit_and_release
from pcr_ray.prm.checkpoints import install_checkpoint
from pcr_ray.sft.corpus import build_corpus
from pcr_ray.sft.examples import SFTExample
from pcr_ray.sft.train import SFTRecipe, save, train_model
from pcr_ray.tracking import job_folder, tracked


def ray_sft_loop(config: dict[str, Any]) -> None:
    """One worker: its shard of the examples, DDP through prepare_model; rank 0 reports the saved folder."""
    import ray.train  # heavy: ray
    from ray.train.torch import prepare_model  # heavy: ray

    ctx = ray.train.get_context()
    rank, world = ctx.get_world_rank(), ctx.get_world_size()
    recipe = SFTRecipe.from_config(config["recipe"])
    examples = [SFTExample(**e) for e in config["examples"]]
    model, tok, result = train_model(examples, recipe, prepare=prepare_model, shard=(rank, world))
    metrics = {"loss": result.losses[-1], "steps": result.steps, "tokens": result.tokens,
               "tokens_per_s": round(result.tokens / result.seconds, 1) if result.seconds else 0.0,
               "examples": result.data["examples"], "cut_by_max_len": result.data["cut_by_max_len"]["examples"]}
    if rank == 0:
        with tempfile.TemporaryDirectory() as tmp:
            result.folder = Path(tmp) / "model"
            save(model, tok, recipe, result, config["data_summary"])
            ray.train.report(metrics, checkpoint=ray.train.Checkpoint.from_directory(tmp))
    else:
        ray.train.report(metrics)


def build_trainer(cfg: dict[str, Any]) -> tuple[Any, list[SFTExample], SFTRecipe]:
    """The TorchTrainer of a checked sft config (not started), its examples and recipe."""
    from ray.train import RunConfig, ScalingConfig  # heavy: ray
    from ray.train.torch import TorchTrainer  # heavy: ray

    rcfg, scaling = cfg["sft_recipe"], cfg["scaling"]
    name = str(rcfg["name"])
    recipe = SFTRecipe.from_config(rcfg)
    examples, summary = build_corpus(recipe.physics_problems, recipe.physics_seed, recipe.gsm8k_train,
                                     recipe.formats, cfg["data_dir"], recipe.physics_mix)
    summary["recipe_name"] = name
    if not examples:
        raise ValueError("the recipe gives no training examples (physics_problems and gsm8k_train are both 0, or "
                         "no GSM8K train file was found)")
    print(f"[sft] {len(examples)} examples ({summary['by_source_format']}), base {recipe.base_model}, "
          f"{scaling['num_workers']} worker(s)", flush=True)
    recipe_cfg = {**recipe.to_dict(), "base_model": resolve_model(recipe.base_model),
                  "formats": tuple(recipe.formats)}
    gpu = bool(scaling["use_gpu"])
    trainer = TorchTrainer(
        ray_sft_loop,
        train_loop_config={"recipe": recipe_cfg, "examples": [vars(e) for e in examples], "data_summary": summary},
        scaling_config=ScalingConfig(num_workers=int(scaling["num_workers"]), use_gpu=gpu,
                                     resources_per_worker={"CPU": float(scaling["cpus_per_worker"]),
                                                           **({"GPU": 1} if gpu else {})}),
        run_config=RunConfig(name=str(cfg["run_name"] or f"sft-{name}"),
                             storage_path=str(cfg["storage_path"] or cache_dir() / "ray_train")))
    return trainer, examples, recipe


def sft(cfg: Any) -> dict[str, Any]:
    """Fine-tune as configured (an sft config); returns a summary with the folder.

    With `tracking=mlflow`: the config, the loss per step, the example counts and throughput, and sft.json go to
    an MLflow run (pcr_ray.tracking)."""
    cfg = checked_dict("sft", cfg)
    with tracked(cfg["tracking"], "sft", cfg, job_folder(runs_dir() / "sft")) as tracker:
        out = _sft(cfg)
        tracker.log_curve("train/loss", out["record"]["loss_curve"])
        tracker.log_metrics({k: v for k, v in out["metrics"].items() if k != "loss"} | {"seconds": out["seconds"]})
        if not is_uri(out["folder"]):
            tracker.log_artifact(Path(out["folder"]) / SFT_RECORD)
    return out


def _sft(cfg: dict[str, Any]) -> dict[str, Any]:
    """The fine-tune itself (sft without tracking)."""
    t0 = time.perf_counter()
    output = str(cfg["output"] or cache_dir() / "models" / f"sft-{cfg['sft_recipe']['name']}")
    init_ray(cfg["ray"])
    trainer, examples, _ = build_trainer(cfg)
    result = fit_and_release(trainer)
    if result.checkpoint is None:
        raise RuntimeError(f"fine-tuning reported no checkpoint (error: {result.error})")
    with result.checkpoint.as_directory() as d:
        src = Path(d) / "model"
        if not (src / SFT_RECORD).exists():
            raise RuntimeError(f"the Ray Train checkpoint {d} holds no fine-tuned model")
        record = json.loads((src / SFT_RECORD).read_text())
        if is_uri(output):
            put_folder(src, output)
        else:
            install_checkpoint(src, Path(output))
    metrics = dict(result.metrics or {})
    out = {"folder": output, "examples": metrics.get("examples"), "cut_by_max_len": metrics.get("cut_by_max_len"),
           "metrics": metrics, "record": record, "seconds": round(time.perf_counter() - t0, 1)}
    print(f"[sft] {output}: {out['examples']} of {len(examples)} examples trained on ({out['cut_by_max_len']} "
          f"longer than max_len), loss {metrics.get('loss')}, {metrics.get('tokens_per_s')} tokens/s, "
          f"{out['seconds']}s", flush=True)
    return out


USAGE = """usage: pcr-ray sft [key=value ...]

Fine-tune a generator (any causal LM) on gold traces with Ray Train, in every method's output format: DSL steps
with the compact prompt, Python programs, direct answers. The folder loads in vLLM and transformers unchanged.
e.g.  pcr-ray sft                                            # the CPU recipe (SmolLM2-135M), 1 CPU worker
      pcr-ray sft sft_recipe.lora_r=16 output=/tmp/sft-lora  # a LoRA instead of full fine-tuning
      pcr-ray sft sft_recipe=qwen_math_1_5b_lora scaling.num_workers=4 scaling.use_gpu=true output=/mnt/shared/sft"""


main = hydra_command("sft", "sft", sft, USAGE)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
