"""`pcr-ray train-prm`: the PRM training loop (pcr_ray.prm.train_loop) on Ray Train's TorchTrainer.

Pairs are read with ray.data.read_parquet from make-pairs' output, filtered to the PRM's kinds (CSP pairs for
the NS-PRM, random perturbations for the conventional PRM), and streamed to the workers with
`ray.train.get_dataset_shard`. ScalingConfig(num_workers, use_gpu) comes from the config, so the same command
runs with 1 CPU worker here and N GPU workers on a cluster. Every epoch reports metrics with a checkpoint;
rerunning with the same run_name and storage_path resumes from the latest one. The final PRM checkpoint is
exported to `output` (default: cache_dir()/prm/<kind>; evaluate takes it as prm.checkpoint=...).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import shutil
import signal
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from pcr_ray.commands.hydra_app import hydra_command
from pcr_ray.configs import checked_dict
from pcr_ray.negatives.pairs import KIND_GROUPS, MINED_KINDS
from pcr_ray.paths import cache_dir, is_uri, put_folder, runs_dir
from pcr_ray.pipeline.make_pairs import default_pairs_dir
from pcr_ray.pipeline.ray_runtime import init_ray
from pcr_ray.prm.base import META_FILE
from pcr_ray.prm.checkpoints import install_checkpoint
from pcr_ray.tracking import Tracker, job_folder, tracked

log = logging.getLogger(__name__)

CONFIG_NAME = "train_prm"
# torch in the workers: passive OpenMP waiting (spinning threads crawl on a busy machine), no tokenizer threads
# the training workers' environment; the hub settings (HF_HUB_OFFLINE, ...) are the driver's, passed through by
# pcr_ray.pipeline.ray_runtime, so a hub name (microsoft/deberta-v3-base) downloads on a node that has not cached it
WORKER_ENV = {"OMP_WAIT_POLICY": "PASSIVE", "TOKENIZERS_PARALLELISM": "false"}
TRAIN_COLUMNS = ["problem_id", "kind", "t", "context", "pos_step", "neg_step"]


class RaySession:
    """LoopSession over ray.train: dataset shards, DDP via prepare_model, report with checkpoints."""

    def __init__(self, seed: int, shuffle_buffer: int) -> None:
        import ray.train  # heavy: ray

        ctx = ray.train.get_context()
        self.world_rank = ctx.get_world_rank()
        self.world_size = ctx.get_world_size()
        self.seed = seed
        self.shuffle_buffer = shuffle_buffer

    def train_batches(self, epoch: int, batch_size: int) -> Iterator[Any]:
        import ray.train  # heavy: ray

        shard = ray.train.get_dataset_shard("train")
        yield from shard.iter_batches(batch_size=batch_size, batch_format="numpy",
                                      local_shuffle_buffer_size=self.shuffle_buffer or None,
                                      local_shuffle_seed=self.seed * 1000 + epoch if self.shuffle_buffer else None)

    def val_batches(self, batch_size: int) -> Iterator[Any]:
        import ray.train  # heavy: ray

        shard = ray.train.get_dataset_shard("validation")
        if shard is None:
            return
        yield from shard.iter_batches(batch_size=batch_size, batch_format="numpy")

    def prepare_model(self, model: Any) -> Any:
        from ray.train.torch import prepare_model  # heavy: ray

        return prepare_model(model)

    def device(self) -> Any:
        from ray.train.torch import get_device  # heavy: ray

        return get_device()

    def all_reduce_sum(self, values: list[float]) -> list[float]:
        import torch  # heavy: torch
        import torch.distributed as dist  # heavy: torch

        if self.world_size <= 1 or not dist.is_initialized():
            return list(values)
        t = torch.tensor(values, dtype=torch.float64, device=self.device())
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
        return [float(x) for x in t.cpu().tolist()]

    @contextlib.contextmanager
    def latest_checkpoint(self) -> Iterator[Path | None]:
        import ray.train  # heavy: ray

        ck = ray.train.get_checkpoint()
        if ck is None:
            yield None
            return
        with ck.as_directory() as d:
            yield Path(d)

    def report(self, metrics: dict[str, Any], checkpoint_dir: Path | None) -> None:
        import ray.train  # heavy: ray

        ck = ray.train.Checkpoint.from_directory(str(checkpoint_dir)) if checkpoint_dir is not None else None
        ray.train.report(metrics, checkpoint=ck)


def ray_train_loop(config: dict[str, Any]) -> None:
    """train_loop_per_worker: the shared loop over a RaySession."""
    from pcr_ray.prm.train_loop import TrainConfig, train_loop  # heavy: torch

    loop_cfg = TrainConfig.from_dict(config["train"])
    train_loop(loop_cfg, RaySession(loop_cfg.seed, int(config["shuffle_buffer"])))


def default_kinds(prm_kind: str) -> tuple[str, ...]:
    """The pair kinds a PRM of this kind trains on; the NS-PRM also on mine-pairs' output when there is some."""
    return KIND_GROUPS[prm_kind] + (MINED_KINDS if prm_kind == "csp" else ())


def pair_rank(key: str, seed: int, weight: float = 1.0) -> float:
    """A pair's sampling key: u**(1/weight) for a hash-uniform u (weighted sampling without replacement, largest
    first: Efraimidis-Spirakis), so a kind with weight 2 is about twice as likely to be in a limited subset."""
    h = int.from_bytes(hashlib.sha1(f"{seed}|{key}".encode()).digest()[:8], "big")
    u = (h + 1) / (2**64 + 1)
    return u ** (1.0 / weight)


def _rank_batch(batch: Any, seed: int, weights: Mapping[str, float], whole_lists: bool = False) -> Any:
    if whole_lists:  # one key per candidate list (problem, prefix, positive): a list is kept or dropped whole
        keys = (batch["problem_id"].astype(str) + "|" + batch["t"].astype(str) + "|" + batch["pos_step"].astype(str))
    else:
        keys = (batch["problem_id"].astype(str) + "|" + batch["t"].astype(str) + "|" + batch["kind"].astype(str)
                + "|" + batch["neg_step"].astype(str))
    batch = batch.copy()
    batch["rank"] = [-pair_rank(k, seed, float(weights.get(kind, 1.0)))
                     for k, kind in zip(keys, batch["kind"], strict=True)]
    return batch


def load_pairs_dataset(pairs_dir: str | Path, split: str, kinds: tuple[str, ...], limit: int = 0, seed: int = 0,
                       kind_weights: Mapping[str, float] | None = None, whole_lists: bool = False) -> Any:
    """A Ray Dataset of the pairs of one split and kinds; `limit` > 0 keeps a deterministic hash-ranked subset,
    in which a kind's share is scaled by `kind_weights[kind]` (default 1: its natural share). With
    `whole_lists` (the listwise loss) the subset is drawn by candidate list, so no list loses negatives;
    `limit` then rounds up to the end of the limit-th pair's list, and kind_weights do not apply."""
    import ray  # heavy: ray

    path = Path(pairs_dir) / split
    if not path.exists():
        raise FileNotFoundError(f"no pairs at {path}; run `pcr-ray make-pairs` first (or set pairs_dir=...)")
    ds = ray.data.read_parquet(str(path)).select_columns(TRAIN_COLUMNS)  # projection pushed into the read
    wanted = set(kinds)
    ds = ds.map_batches(lambda b: b[b["kind"].isin(wanted)], batch_format="pandas")
    if limit and limit > 0:
        weights = {str(k): float(v) for k, v in (kind_weights or {}).items()}
        bad = {k: v for k, v in weights.items() if not v > 0}
        if bad:
            raise ValueError(f"kind_weights must be > 0, got {bad}")
        ds = ds.map_batches(_rank_batch, fn_kwargs={"seed": seed, "weights": {} if whole_lists else weights,
                                                    "whole_lists": whole_lists}, batch_format="pandas").materialize()
        ds = _lowest_ranks(ds, limit, whole_lists)
    return ds


def _lowest_ranks(ds: Any, limit: int, whole_lists: bool) -> Any:
    """The rows of the `limit` lowest ranks (with whole_lists: every row whose rank is at most the limit-th's), in
    rank order, rank column dropped, as one block. The cut comes from the rank column alone on the driver (8 bytes
    a pair); the kept rows are sorted in one task. (Ray's sort samples and shuffles into 200 partitions: 6-30 s of
    overhead for a subset of thousands of pairs on 2 CPUs, where this takes 2-3 s.) A limited subset is what one
    training run reads; for many millions of pairs, train on the whole split (limit 0) instead."""
    ranks = np.concatenate([np.asarray(b["rank"], dtype=np.float64)
                            for b in ds.select_columns(["rank"]).iter_batches(batch_format="numpy", batch_size=None)]
                           or [np.empty(0)])
    if len(ranks) > limit:
        cut = float(np.partition(ranks, limit - 1)[limit - 1])
        ds = ds.map_batches(lambda b: b[b["rank"] <= cut], batch_format="pandas")
    ds = ds.repartition(1).map_batches(lambda b: b.sort_values("rank", kind="stable"), batch_format="pandas",
                                       batch_size=None)
    if not whole_lists:
        ds = ds.limit(limit)  # ties at the cut (hash collisions) keep no more than `limit`
    return ds.drop_columns(["rank"])


def kind_counts(ds: Any) -> dict[str, int]:
    """Pairs per kind of a Ray Dataset of pairs (what kind_weights made of a limited subset), largest first. Counted
    per block and summed here: no shuffle."""
    counts: dict[str, int] = {}
    for b in ds.select_columns(["kind"]).iter_batches(batch_format="pandas", batch_size=None):
        for k, v in b["kind"].astype(str).value_counts().items():
            counts[str(k)] = counts.get(str(k), 0) + int(v)
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def fit_and_release(trainer: Any) -> Any:
    """trainer.fit(), then its controller actor released.

    Ray Train's fit() registers a SIGINT handler whose closure holds the TrainController's handle, so the
    controller (and the DatasetManager it owns) would live as long as the process. Putting the previous handler
    back drops that last handle, and Ray ends both."""
    previous = signal.getsignal(signal.SIGINT)
    try:
        return trainer.fit()
    finally:
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, previous)


def train_prm(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """Train a PRM as configured (a train_prm config as a dict); returns a summary with the checkpoint path.

    With `tracking=mlflow`: the config, the loss per batch and the per-epoch losses and validation accuracy, the
    pair counts and the checkpoint's meta file go to an MLflow run (pcr_ray.tracking)."""
    cfg = checked_dict("train_prm", cfg)
    with tracked(cfg["tracking"], "train-prm", cfg, job_folder(runs_dir() / "train_prm")) as tracker:
        summary = _train_prm(cfg)
        log_training(tracker, summary)
    return summary


def log_training(tracker: Tracker, summary: Mapping[str, Any]) -> None:
    """A finished PRM training's curves (loss per batch; per epoch the losses and validation accuracy), counts and
    meta file, to the tracker."""
    history = summary["history"]
    losses = [v for h in history for v in h.get("step_losses", [])]
    tracker.log_curve("train/step_loss", losses)
    for key in ("train_loss", "val_loss", "val_pairwise_acc", "pairs_per_s"):
        tracker.log_curve(f"epoch/{key}", [h[key] for h in history], [h["epoch"] + 1 for h in history])
    tracker.log_metrics({"train_pairs": summary["train_pairs"], "val_pairs": summary["val_pairs"],
                         "seconds": summary["seconds"],
                         **{f"train_pairs_by_kind/{k}": v for k, v in summary["train_pairs_by_kind"].items()}})
    if not is_uri(summary["checkpoint"]):
        tracker.log_artifact(Path(summary["checkpoint"]) / META_FILE)


def _train_prm(cfg: dict[str, Any]) -> dict[str, Any]:
    """The training itself (train_prm without tracking)."""
    from ray.train import CheckpointConfig, RunConfig, ScalingConfig  # heavy: ray
    from ray.train.torch import TorchTrainer  # heavy: ray

    t0 = time.perf_counter()
    prm = dict(cfg["prm"] or {})
    kind = str(prm["kind"])
    if kind not in KIND_GROUPS:
        raise ValueError(f"prm.kind must be one of {sorted(KIND_GROUPS)}, got {kind!r}")
    kinds = tuple(cfg["kinds"] or default_kinds(kind))
    pairs_dir = Path(str(cfg["pairs_dir"] or default_pairs_dir())).expanduser()
    # a local path, or a URI every node reaches (s3://, gs://, an NFS path): Ray Train writes its checkpoints there
    output = str(cfg["output"] or (cache_dir() / "prm" / kind))
    output = output if is_uri(output) else str(Path(output).expanduser().resolve())
    storage = str(cfg["storage_path"] or (cache_dir() / "ray_train"))
    storage = storage if is_uri(storage) else str(Path(storage).expanduser().resolve())
    run_name = str(cfg["run_name"] or f"prm-{kind}")
    scaling = dict(cfg["scaling"] or {})
    tcfg = dict(cfg["train"] or {})
    seed = int(tcfg["seed"])
    for split in ("train", "validation"):
        if not (pairs_dir / split).exists():
            raise FileNotFoundError(f"no pairs at {pairs_dir / split}; run `pcr-ray make-pairs` first "
                                    f"(or set pairs_dir=...)")
    if not cfg["resume"] and not is_uri(storage):
        shutil.rmtree(Path(storage) / run_name, ignore_errors=True)

    init_ray(cfg["ray"])
    weights = dict(cfg["kind_weights"] or {})
    listwise = str(tcfg["loss"]) == "listwise"
    if listwise and weights:
        raise ValueError("kind_weights do not apply to train.loss=listwise (lists are sampled whole); drop them")
    unknown = sorted(set(weights) - set(kinds))
    if unknown:
        raise ValueError(f"kind_weights names kinds {unknown} that are not trained on (kinds: {list(kinds)})")
    train_ds = load_pairs_dataset(pairs_dir, "train", kinds, int(cfg["limit_train"] or 0), seed,
                                  weights, whole_lists=listwise).materialize()
    val_ds = load_pairs_dataset(pairs_dir, "validation", kinds, int(cfg["limit_val"] or 0), seed).materialize()
    n_train, n_val = train_ds.count(), val_ds.count()
    if n_train == 0:
        raise ValueError(f"no {kind} training pairs (kinds {list(kinds)}) in {pairs_dir}/train")
    cpus = float(scaling["cpus_per_worker"])
    train_cfg = {
        "backbone": prm["backbone"], "pooling": prm["pooling"],
        "dropout": float(prm["dropout"]), "max_length": int(prm["max_length"]), "kind": kind,
        "attention": str(prm["attention"]), "candidate_length": int(prm["candidate_length"]),
        **tcfg, "n_train": int(n_train),
    }
    if train_cfg.get("init_from"):  # the Ray Train workers run in another directory: pass an absolute path
        train_cfg["init_from"] = str(Path(str(train_cfg["init_from"])).expanduser().resolve())
    if not train_cfg.get("torch_threads") and not scaling["use_gpu"]:
        train_cfg["torch_threads"] = max(1, int(cpus))
    by_kind = kind_counts(train_ds)
    log.info("[train-prm] %s PRM: %d train / %d validation pairs (kinds %s), %s worker(s), backbone %s", kind,
             n_train, n_val, list(kinds), scaling["num_workers"], train_cfg["backbone"])
    log.info("[train-prm] train pairs by kind: %s", ", ".join(f"{k} {v}" for k, v in by_kind.items()))
    trainer = TorchTrainer(
        ray_train_loop,
        train_loop_config={"train": train_cfg, "shuffle_buffer": int(cfg["shuffle_buffer"])},
        scaling_config=ScalingConfig(num_workers=int(scaling["num_workers"]),
                                     use_gpu=bool(scaling["use_gpu"]),
                                     resources_per_worker={"CPU": cpus,
                                                           **({"GPU": 1} if scaling["use_gpu"] else {})}),
        run_config=RunConfig(name=run_name, storage_path=str(storage),
                             checkpoint_config=CheckpointConfig(num_to_keep=int(cfg["keep_checkpoints"])),
                             worker_runtime_env={"env_vars": dict(WORKER_ENV)}),
        datasets={"train": train_ds, "validation": val_ds},
    )
    result = fit_and_release(trainer)
    if result.checkpoint is None:
        raise RuntimeError(f"training reported no checkpoint (error: {result.error})")
    with result.checkpoint.as_directory() as d:
        src = Path(d) / "prm"
        if not (src / META_FILE).exists():
            raise RuntimeError(f"the last Ray Train checkpoint {d} holds no PRM")
        meta = json.loads((src / META_FILE).read_text())
        if is_uri(output):
            put_folder(src, output)
        else:
            install_checkpoint(src, Path(output))
    history = meta.get("train", {}).get("history", [])
    for h in history:
        print(f"[train-prm] epoch {h['epoch'] + 1}: train_loss {h['train_loss']:.4f}  val_pairwise_acc "
              f"{h['val_pairwise_acc']:.4f}  val_loss {h['val_loss']:.4f}  ({h['train_pairs']} pairs, "
              f"{h['epoch_seconds']}s)", flush=True)
    summary = {"checkpoint": str(output), "kind": kind, "train_pairs": int(n_train), "val_pairs": int(n_val),
               "train_pairs_by_kind": by_kind,
               "metrics": dict(result.metrics or {}), "history": history, "run_dir": f"{storage}/{run_name}",
               "seconds": round(time.perf_counter() - t0, 1)}
    print(f"[train-prm] checkpoint: {output} ({summary['seconds']}s)", flush=True)
    return summary


USAGE = """usage: pcr-ray train-prm [key=value ...]

Train the PRM (cross-encoder, pairwise loss) with Ray Train on make-pairs' parquet output.
e.g.  pcr-ray train-prm                                   # NS-PRM (CSP pairs), MiniLM, 1 CPU worker
      pcr-ray train-prm prm=minilm_random                 # conventional PRM (random perturbations)
      pcr-ray train-prm prm=deberta_v3_base scaling.num_workers=4 scaling.use_gpu=true
Rerunning with the same run_name resumes from the last epoch checkpoint (resume=false starts over)."""


main = hydra_command("train-prm", CONFIG_NAME, train_prm, USAGE)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
