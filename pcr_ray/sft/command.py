"""`pcr-ray sft`: fine-tune a generator on gold traces: TRL's SFTTrainer on Ray Train's TorchTrainer.

The examples go to the workers as a Ray Dataset (each worker reads all of it; the Trainer's sampler shards it);
`prepare_trainer` and Ray's report callback make the Trainer's checkpoints Ray Train checkpoints in
`storage_path/run_name`, so a worker that dies restarts the group from the latest (`max_failures`) and a rerun of
the same run name resumes there (`resume`).
"""

from __future__ import annotations

import json
import shutil
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
from pcr_ray.pipeline.train_prm import WORKER_ENV, fit_and_release
from pcr_ray.prm.checkpoints import install_checkpoint
from pcr_ray.sft.corpus import build_corpus
from pcr_ray.sft.examples import SFTExample
from pcr_ray.sft.train import SFTRecipe, save
from pcr_ray.sft.trainer import build_trainer as build_sft_trainer
from pcr_ray.sft.trainer import fit
from pcr_ray.tracking import job_folder, tracked

# Ray Train's print patch in the workers would defeat dill's stdout capture, and the `datasets` map under TRL would
# then print the bytecode of every function it fingerprints; the map's progress bars are noise in a worker's log
SFT_WORKER_ENV = {**WORKER_ENV, "RAY_TRAIN_ENABLE_PRINT_PATCH": "0", "HF_DATASETS_DISABLE_PROGRESS_BARS": "1"}


def example_rows(examples: list[SFTExample]) -> list[dict[str, Any]]:
    """The examples as Ray Dataset rows (the messages as JSON: one string column)."""
    return [{"problem_id": e.problem_id, "fmt": e.fmt, "messages": json.dumps(list(e.messages)), "target": e.target}
            for e in examples]


def row_example(row: Any) -> SFTExample:
    return SFTExample(str(row["problem_id"]), str(row["fmt"]), tuple(json.loads(row["messages"])), str(row["target"]))


def exit_at_step(step: int, marker: str) -> Any:
    """A TrainerCallback that ends this worker's process at `step`, once (the marker file records it;
    pcr_ray.pipeline.actors.maybe_inject_fault): a test's worker crash."""
    from transformers import TrainerCallback  # heavy: transformers

    from pcr_ray.pipeline.actors import maybe_inject_fault  # heavy: ray

    class ExitAtStep(TrainerCallback):
        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            if state.global_step == step:
                maybe_inject_fault("sft_worker", {"sft_worker": marker})

    return ExitAtStep()


def ray_sft_loop(config: dict[str, Any]) -> None:
    """One worker: the whole example set, TRL's trainer under DDP (prepare_trainer), a Ray Train checkpoint at each
    Trainer save; from the latest checkpoint when there is one. Rank 0 reports the saved folder at the end."""
    import ray.train  # heavy: ray
    from ray.train.huggingface.transformers import RayTrainReportCallback, prepare_trainer  # heavy: ray

    ctx = ray.train.get_context()
    rank, world = ctx.get_world_rank(), ctx.get_world_size()
    recipe = SFTRecipe.from_config(config["recipe"])
    examples = [row_example(r) for r in ray.train.get_dataset_shard("train").iter_rows()]
    callbacks: list[Any] = [RayTrainReportCallback()]
    faults = config.get("faults") or {}
    if faults.get("exit_at_step") and rank == world - 1:
        callbacks.append(exit_at_step(int(faults["exit_at_step"]), str(faults["marker"])))
    with tempfile.TemporaryDirectory() as tmp:
        trainer, data = build_sft_trainer(examples, recipe, Path(tmp) / "trainer", callbacks=callbacks,
                                          save_every=int(config["checkpoint_every"]))
        trainer = prepare_trainer(trainer)
        resume = None
        latest = ray.train.get_checkpoint()
        if latest is not None:  # a copy: the Trainer writes next to what it resumes from
            with latest.as_directory() as d:
                saved = Path(d) / RayTrainReportCallback.CHECKPOINT_NAME
                if not saved.is_dir():  # the run finished: its last checkpoint holds the folder, not a Trainer's
                    raise RuntimeError(f"run {ctx.get_experiment_name()!r} already finished in its storage: pass "
                                       f"resume=false to train it again, or another run_name")
                resume = str(shutil.copytree(saved, Path(tmp) / "resume"))
        result = fit(trainer, data, resume_from=resume)
        metrics = {"loss": result.losses[-1] if result.losses else None, "steps": result.steps,
                   "tokens": result.tokens, "eval_loss": result.eval_losses[-1][1] if result.eval_losses else None,
                   "tokens_per_s": round(result.tokens / result.seconds, 1) if result.seconds else 0.0,
                   "examples": data["examples"], "cut_by_max_len": data["cut_by_max_len"]["examples"],
                   "resumed_from_step": result.resumed_from_step}
        if rank == 0:
            result.folder = Path(tmp) / "final" / "model"
            save(trainer.model, trainer.processing_class, recipe, result, config["data_summary"])
            ray.train.report(metrics, checkpoint=ray.train.Checkpoint.from_directory(str(result.folder.parent)))
        else:
            ray.train.report(metrics)


def build_trainer(cfg: dict[str, Any]) -> tuple[Any, list[SFTExample], SFTRecipe]:
    """The TorchTrainer of a checked sft config (not started), its examples and recipe."""
    import ray.data  # heavy: ray
    from ray.train import CheckpointConfig, DataConfig, FailureConfig, RunConfig, ScalingConfig  # heavy: ray
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
    storage = str(cfg["storage_path"] or cache_dir() / "ray_train")
    storage = storage if is_uri(storage) else str(Path(storage).expanduser().resolve())
    run_name = str(cfg["run_name"] or f"sft-{name}")
    if not cfg["resume"] and not is_uri(storage):
        shutil.rmtree(Path(storage) / run_name, ignore_errors=True)
    trainer = TorchTrainer(
        ray_sft_loop,
        train_loop_config={"recipe": recipe_cfg, "data_summary": summary, "faults": dict(cfg["faults"] or {}),
                           "checkpoint_every": int(cfg["checkpoint_every"])},
        datasets={"train": ray.data.from_items(example_rows(examples))},
        dataset_config=DataConfig(datasets_to_split=[]),  # every worker reads all; the Trainer's sampler shards
        scaling_config=ScalingConfig(num_workers=int(scaling["num_workers"]), use_gpu=gpu,
                                     resources_per_worker={"CPU": float(scaling["cpus_per_worker"]),
                                                           **({"GPU": 1} if gpu else {})}),
        run_config=RunConfig(name=run_name, storage_path=storage,
                             failure_config=FailureConfig(max_failures=int(cfg["max_failures"])),
                             checkpoint_config=CheckpointConfig(num_to_keep=int(cfg["keep_checkpoints"])),
                             worker_runtime_env={"env_vars": SFT_WORKER_ENV}))
    return trainer, examples, recipe


def sft(cfg: Any) -> dict[str, Any]:
    """Fine-tune as configured (an sft config); returns a summary with the folder.

    With `tracking=mlflow`: the config, the loss per step, the example counts and throughput, and sft.json go to
    an MLflow run (pcr_ray.tracking)."""
    cfg = checked_dict("sft", cfg)
    with tracked(cfg["tracking"], "sft", cfg, job_folder(runs_dir() / "sft")) as tracker:
        out = _sft(cfg)
        tracker.log_curve("train/loss", out["record"]["loss_curve"])
        evals = out["record"].get("eval_loss_curve") or []
        tracker.log_curve("eval/loss", [v for _, v in evals], [int(s) for s, _ in evals])
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
    if not is_uri(str(result.path)):  # finished: its checkpoints were for resuming an unfinished run
        shutil.rmtree(result.path, ignore_errors=True)
    metrics = dict(result.metrics or {})
    out = {"folder": output, "examples": metrics.get("examples"), "cut_by_max_len": metrics.get("cut_by_max_len"),
           "metrics": metrics, "record": record, "seconds": round(time.perf_counter() - t0, 1)}
    resumed = f", resumed from step {metrics['resumed_from_step']}" if metrics.get("resumed_from_step") else ""
    print(f"[sft] {output}: {out['examples']} of {len(examples)} examples fit max_len ({out['cut_by_max_len']} "
          f"longer), loss {metrics.get('loss')}, held-out loss {metrics.get('eval_loss')}, "
          f"{metrics.get('tokens_per_s')} tokens/s, {out['seconds']}s{resumed}", flush=True)
    return out


USAGE = """usage: pcr-ray sft [key=value ...]

Fine-tune a generator (any causal LM) on gold traces with TRL's SFTTrainer on Ray Train, in every method's output
format: DSL steps with the compact prompt, Python programs, direct answers. The folder loads in vLLM and
transformers unchanged. A Ray Train checkpoint every `checkpoint_every` steps: a dead worker restarts the run from
it, and rerunning the same run_name goes on from it (resume=false starts over).
e.g.  pcr-ray sft                                            # the CPU recipe (SmolLM2-135M), 1 CPU worker
      pcr-ray sft sft_recipe.lora_r=16 output=/tmp/sft-lora  # a LoRA instead of full fine-tuning
      pcr-ray sft sft_recipe=qwen_math_1_5b_lora scaling.num_workers=4 scaling.use_gpu=true output=/mnt/shared/sft
      pcr-ray sft sft_recipe.grad_accum=4 sft_recipe.eval_every=50 storage_path=s3://bucket/ray_train"""


main = hydra_command("sft", "sft", sft, USAGE)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
