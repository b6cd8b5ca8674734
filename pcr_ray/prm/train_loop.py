"""The PRM training loop, written once against a small `LoopSession` interface.

`pcr_ray.pipeline.train_prm` runs it inside Ray Train's TorchTrainer (a session over `ray.train`: dataset
shards, DDP, `ray.train.report` with a checkpoint every epoch); `LocalSession` runs it in this process over
in-memory rows (unit tests, `checkpoints.ensure_checkpoint`). Losses: pairwise -log sigmoid(l+ - l-) on
logits, pointwise BCE (positive = 1, negative = 0), or listwise: the pairs that share a (context, positive)
form one candidate list, as the search's candidates at one prefix do, and the loss is the softmax cross-entropy
of the positive against all of the list's negatives at once (`candidate_lists`, `listwise_loss`).
`attention=shared_context` trains a shared-context PRM (pcr_ray.prm.shared): the candidates of a batch that share
a context (a pair's positive and negative, a list's positive and negatives) are packed into one sequence under
the block mask the scorer uses, so the context is encoded once per pack.
A checkpoint folder holds `prm/` (a complete PRM checkpoint, see model.py) and `train_state.pt` (optimizer,
scheduler, epoch, RNG), so training resumes exactly.
"""

from __future__ import annotations

import contextlib
import logging
import math
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from pcr_ray.prm.model import (
    PRMMeta,
    PRMModel,
    build_model,
    encode_pairs,
    load_checkpoint,
    model_inputs,
    save_checkpoint,
)
from pcr_ray.prm.shared import DEFAULT_CANDIDATE_LENGTH, DEFAULT_PACK_SIZE, check_attention, packed_logits

log = logging.getLogger(__name__)

LOSSES = ("pairwise", "pointwise", "listwise")
PRECISIONS = ("fp32", "bf16", "auto")  # auto: bf16 on a CUDA device, fp32 on a CPU
PRM_SUBDIR = "prm"
STATE_FILE = "train_state.pt"
Batch = Mapping[str, Sequence[Any]]


@dataclass(frozen=True)
class TrainConfig:
    """Hyperparameters of one training run (plain data: it travels to Ray workers as a dict)."""

    backbone: str = "minilm"
    kind: str = "csp"
    pooling: str = "mean"
    dropout: float = 0.1
    loss: str = "pairwise"
    epochs: int = 2
    batch_size: int = 16
    lr: float = 5e-5
    head_lr: float = 1e-3
    weight_decay: float = 0.01
    warmup_frac: float = 0.1
    grad_clip: float = 1.0
    freeze_embeddings: bool = True  # the word-embedding matrix (half of MiniLM's weights) stays fixed: faster steps
    max_length: int = 160
    precision: str = "fp32"  # bf16: forward and loss under bfloat16 autocast (weights and optimizer stay fp32)
    seed: int = 0
    torch_threads: int = 0
    n_train: int = 0  # rows in the train set (for the LR schedule); LocalSession fills it in
    val_batch_size: int = 64
    max_batches: int = 0  # >0: stop training after this many batches (smoke runs, tests); 0 = no limit
    progress: bool = True
    group_window: int = 16  # >0: rows of this many batches are regrouped by length (less padding), then shuffled
    log_every: int = 0  # >0: also print a line every this many batches (rank 0), for logs without a tty
    init_from: str = ""  # a PRM checkpoint folder to start from (continued training); a resumed run ignores it
    attention: str = "pair"  # pair | shared_context: a context and its candidates in one sequence (prm/shared.py)
    candidate_length: int = DEFAULT_CANDIDATE_LENGTH  # shared_context: tokens a candidate keeps
    pack_size: int = DEFAULT_PACK_SIZE  # shared_context: candidates per packed sequence at most
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.loss not in LOSSES:
            raise ValueError(f"loss must be one of {LOSSES}, got {self.loss!r}")
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got {self.precision!r}")
        if self.epochs < 1 or self.batch_size < 1:
            raise ValueError("epochs and batch_size must be >= 1")
        check_attention(self.attention)
        if self.attention == "shared_context" and not 4 <= self.candidate_length <= self.max_length - 4:
            raise ValueError(f"candidate_length must be in [4, max_length - 4], got {self.candidate_length}")

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TrainConfig:
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"unknown training option(s) {unknown}; known: {sorted(known)}")
        return cls(**dict(d))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class LoopSession(Protocol):
    """What the loop needs from its runtime (Ray Train or this process)."""

    world_rank: int
    world_size: int

    def train_batches(self, epoch: int, batch_size: int) -> Iterable[Batch]: ...
    def val_batches(self, batch_size: int) -> Iterable[Batch]: ...
    def prepare_model(self, model: torch.nn.Module) -> torch.nn.Module: ...
    def device(self) -> torch.device: ...
    def all_reduce_sum(self, values: list[float]) -> list[float]: ...
    def latest_checkpoint(self) -> contextlib.AbstractContextManager[Path | None]: ...
    def report(self, metrics: dict[str, Any], checkpoint_dir: Path | None) -> None: ...


# ---------------------------------------------------------------- the loop


def pair_loss(lp: torch.Tensor, ln: torch.Tensor, loss: str) -> torch.Tensor:
    """Pairwise -log sigmoid(l+ - l-) (softplus form, stable), or pointwise BCE on both logits."""
    if loss == "pairwise":
        return F.softplus(-(lp - ln)).mean()
    logits = torch.cat([lp, ln])
    target = torch.cat([torch.ones_like(lp), torch.zeros_like(ln)])
    return F.binary_cross_entropy_with_logits(logits, target)


def listwise_loss(lp: torch.Tensor, ln: torch.Tensor, group: torch.Tensor) -> torch.Tensor:
    """Mean over lists of -log softmax(positive | positive + its negatives): lp[g] is list g's positive logit,
    ln[i] a negative's logit and group[i] the list it belongs to. A one-negative list is the pairwise loss."""
    losses = [torch.logsumexp(torch.cat([lp[g:g + 1], ln[group == g]]), 0) - lp[g] for g in range(len(lp))]
    return torch.stack(losses).mean()


@dataclass(frozen=True)
class Packing:
    """How a shared-context PRM packs a batch (TrainConfig's attention, candidate_length, pack_size)."""

    candidate_length: int = DEFAULT_CANDIDATE_LENGTH
    pack_size: int = DEFAULT_PACK_SIZE

    @classmethod
    def of(cls, cfg: TrainConfig) -> Packing | None:
        """The packing of `cfg`, None for pair attention."""
        return cls(cfg.candidate_length, cfg.pack_size) if cfg.attention == "shared_context" else None


def _shared_logits(model: torch.nn.Module, tokenizer: Any, pairs: Sequence[tuple[str, str]], max_length: int,
                   device: torch.device, packing: Packing) -> torch.Tensor:
    """Logits of `pairs` (duplicates scored once) through shared-context packs, in input order."""
    index: dict[tuple[str, str], int] = {}
    at = [index.setdefault(p, len(index)) for p in pairs]
    logits = packed_logits(model, tokenizer, list(index), max_length=max_length,
                           candidate_length=packing.candidate_length, pack_size=packing.pack_size, device=device)
    return logits[torch.tensor(at, dtype=torch.long, device=logits.device)]


def list_logits(model: torch.nn.Module, tokenizer: Any, batch: Batch, max_length: int, device: torch.device,
                packing: Packing | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One forward over each list's (context, pos) once and every (context, neg) -> (l+ per list, l-, list of
    each negative). Lists are the rows sharing (context, pos_step). With `packing` (shared-context PRM) a list's
    positive and negatives share packed sequences."""
    ctx = [str(c) for c in batch["context"]]
    pos = [str(s) for s in batch["pos_step"]]
    neg = [str(s) for s in batch["neg_step"]]
    index: dict[tuple[str, str], int] = {}
    group = [index.setdefault((c, p), len(index)) for c, p in zip(ctx, pos, strict=True)]
    heads = list(index)
    if packing is not None:
        logits = _shared_logits(model, tokenizer, heads + list(zip(ctx, neg, strict=True)), max_length, device,
                                packing)
        return logits[:len(heads)], logits[len(heads):], torch.tensor(group, device=logits.device)
    enc = encode_pairs(tokenizer, [c for c, _ in heads] + ctx, [p for _, p in heads] + neg, max_length)
    inner = getattr(model, "module", model)
    logits = model(**model_inputs(inner, enc, device))
    g = len(heads)
    return logits[:g], logits[g:], torch.tensor(group, device=logits.device)


def pair_logits(model: torch.nn.Module, tokenizer: Any, batch: Batch, max_length: int,
                device: torch.device, packing: Packing | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """One forward over the 2B sequences (context, pos) + (context, neg) -> (l+, l-); with `packing`
    (shared-context PRM) over packs of each context's distinct candidates."""
    ctx = [str(c) for c in batch["context"]]
    pos = [str(s) for s in batch["pos_step"]]
    neg = [str(s) for s in batch["neg_step"]]
    if packing is not None:
        logits = _shared_logits(model, tokenizer, list(zip(ctx + ctx, pos + neg, strict=True)), max_length, device,
                                packing)
        return logits[:len(ctx)], logits[len(ctx):]
    enc = encode_pairs(tokenizer, ctx + ctx, pos + neg, max_length)
    inner = getattr(model, "module", model)
    logits = model(**model_inputs(inner, enc, device))
    n = len(ctx)
    return logits[:n], logits[n:]


def autocast(precision: str, device: torch.device) -> contextlib.AbstractContextManager[Any]:
    """bfloat16 autocast for `precision="bf16"` (CPUs with AVX512-BF16/AMX, Ampere+ GPUs: 1.53x the fp32 MiniLM
    steps on 2 AVX512-BF16 cores, `benchmarks/bench_prm.py --train`) and for "auto" on a GPU, else a no-op."""
    if precision == "bf16" or (precision == "auto" and device.type == "cuda"):
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def _steps_per_epoch(cfg: TrainConfig, world_size: int) -> int:
    per_worker = math.ceil(max(cfg.n_train, 1) / max(world_size, 1))
    return max(1, math.ceil(per_worker / cfg.batch_size))


def _optimizer(model: PRMModel, cfg: TrainConfig) -> torch.optim.Optimizer:
    if cfg.freeze_embeddings:
        model.encoder.get_input_embeddings().weight.requires_grad_(False)
    params = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    head = [p for n, p in params if n.startswith("head.")]
    decay = [p for n, p in params if not n.startswith("head.") and p.ndim > 1]
    no_decay = [p for n, p in params if not n.startswith("head.") and p.ndim <= 1]
    return torch.optim.AdamW([
        {"params": decay, "lr": cfg.lr, "weight_decay": cfg.weight_decay},
        {"params": no_decay, "lr": cfg.lr, "weight_decay": 0.0},
        {"params": head, "lr": cfg.head_lr, "weight_decay": 0.0},
    ])


def _schedule(optimizer: torch.optim.Optimizer, total: int, warmup_frac: float) -> torch.optim.lr_scheduler.LambdaLR:
    warm = max(1, int(total * warmup_frac))

    def f(step: int) -> float:
        if step < warm:
            return (step + 1) / warm
        return max(0.0, (total - step) / max(1, total - warm))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, f)


def evaluate_pairs(model: torch.nn.Module, tokenizer: Any, batches: Iterable[Batch], cfg: TrainConfig,
                   device: torch.device) -> tuple[float, float, float]:
    """(sum of losses, number of correctly ordered pairs, number of pairs) over the batches."""
    loss_sum = correct = total = 0.0
    was = model.training
    model.eval()
    with torch.inference_mode():
        for b in batches:
            lp, ln = pair_logits(model, tokenizer, b, cfg.max_length, device, Packing.of(cfg))
            n = len(lp)
            loss_sum += float(pair_loss(lp, ln, "pairwise" if cfg.loss == "listwise" else cfg.loss)) * n
            correct += float((lp > ln).sum())
            total += n
    model.train(was)
    return loss_sum, correct, total


def train_loop(cfg: TrainConfig | Mapping[str, Any], session: LoopSession) -> dict[str, Any]:
    """Train (or resume) a PRM; report metrics and a checkpoint each epoch; return the last metrics."""
    cfg = cfg if isinstance(cfg, TrainConfig) else TrainConfig.from_dict(cfg)
    if cfg.torch_threads > 0:
        torch.set_num_threads(cfg.torch_threads)
    random.seed(cfg.seed)
    np.random.seed(cfg.seed % 2**32)
    model, tokenizer = _initial_model(cfg)
    device = session.device()
    optimizer = _optimizer(model, cfg)
    total_steps = cfg.epochs * _steps_per_epoch(cfg, session.world_size)
    scheduler = _schedule(optimizer, total_steps, cfg.warmup_frac)
    start_epoch, history, rng_state = 0, [], None
    with session.latest_checkpoint() as ck:
        if ck is not None:
            loaded, _, _ = load_checkpoint(ck / PRM_SUBDIR)
            model.load_state_dict(loaded.state_dict())
            state = torch.load(ck / STATE_FILE, map_location="cpu", weights_only=False)
            optimizer.load_state_dict(state["optimizer"])
            scheduler.load_state_dict(state["scheduler"])
            start_epoch = int(state["epoch"]) + 1
            history = list(state.get("history", []))
            rng_state = state.get("torch_rng")
    if rng_state is not None:
        torch.set_rng_state(rng_state)
    model.to(device)
    wrapped = session.prepare_model(model)
    rank0 = session.world_rank == 0
    last: dict[str, Any] = dict(history[-1]) if history else {}
    for epoch in range(start_epoch, cfg.epochs):
        wrapped.train()
        t0 = time.perf_counter()
        loss_sum = seen = 0.0
        n_batches = 0
        step_losses: list[float] = []  # this worker's loss per batch: the curve tracking logs
        stopped = False
        bar = _bar(cfg, rank0, epoch, _steps_per_epoch(cfg, session.world_size))
        batches = session.train_batches(epoch, cfg.batch_size)
        if cfg.loss == "listwise":
            batches = candidate_lists(batches, cfg.batch_size, f"{cfg.seed}|{epoch}",
                                      _steps_per_epoch(cfg, session.world_size))
        elif cfg.group_window > 0:
            batches = length_grouped(batches, cfg.batch_size, cfg.group_window, f"{cfg.seed}|{epoch}")
        for b in batches:
            with autocast(cfg.precision, device):
                if cfg.loss == "listwise":
                    lp, ln, group = list_logits(wrapped, tokenizer, b, cfg.max_length, device, Packing.of(cfg))
                    loss = listwise_loss(lp.float(), ln.float(), group)
                else:
                    lp, ln = pair_logits(wrapped, tokenizer, b, cfg.max_length, device, Packing.of(cfg))
                    loss = pair_loss(lp.float(), ln.float(), cfg.loss)
            n_pairs = len(ln)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if cfg.grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(wrapped.parameters(), cfg.grad_clip)
            optimizer.step()
            scheduler.step()
            batch_loss = float(loss.detach())
            step_losses.append(round(batch_loss, 5))
            loss_sum += batch_loss * n_pairs
            seen += n_pairs
            n_batches += 1
            if bar is not None:
                bar.update(1)
                bar.set_postfix(loss=f"{loss_sum / max(seen, 1):.4f}")
            if cfg.log_every > 0 and rank0 and n_batches % cfg.log_every == 0:
                log.info("[prm] epoch %d batch %d/%d loss %.4f (%.2f pairs/s)", epoch + 1, n_batches,
                         _steps_per_epoch(cfg, session.world_size), loss_sum / max(seen, 1),
                         seen / (time.perf_counter() - t0))
            if cfg.max_batches > 0 and n_batches >= cfg.max_batches:
                stopped = True
                break
        if bar is not None:
            bar.close()
        train_secs = time.perf_counter() - t0
        vl, vc, vn = evaluate_pairs(wrapped, tokenizer, session.val_batches(cfg.val_batch_size), cfg, device)
        loss_sum, seen, vl, vc, vn = session.all_reduce_sum([loss_sum, seen, vl, vc, vn])
        metrics = {
            "epoch": epoch, "train_loss": loss_sum / max(seen, 1), "train_pairs": int(seen),
            "val_loss": vl / vn if vn else float("nan"), "val_pairwise_acc": vc / vn if vn else float("nan"),
            "val_pairs": int(vn), "epoch_seconds": round(train_secs, 2),
            "pairs_per_s": round(seen / train_secs, 2) if train_secs > 0 else 0.0, "stopped_early": stopped,
            "step_losses": step_losses,
        }
        history.append(metrics)
        with tempfile.TemporaryDirectory(prefix="prm_ck_") as tmp:
            ck_dir: Path | None = None
            if rank0:
                ck_dir = Path(tmp)
                meta = PRMMeta(backbone=cfg.backbone, kind=cfg.kind, pooling=cfg.pooling, max_length=cfg.max_length,
                               dropout=cfg.dropout, attention=cfg.attention,
                               candidate_length=cfg.candidate_length,
                               train={**metrics, "epochs": epoch + 1, "history": history, "config": cfg.to_dict()})
                save_checkpoint(model, tokenizer, ck_dir / PRM_SUBDIR, meta)
                torch.save({"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(), "epoch": epoch,
                            "history": history, "torch_rng": torch.get_rng_state()}, ck_dir / STATE_FILE)
                log.info("[prm] epoch %d/%d train_loss=%.4f val_acc=%.4f val_loss=%.4f pairs=%d (%s/s)", epoch + 1,
                         cfg.epochs, metrics["train_loss"], metrics["val_pairwise_acc"], metrics["val_loss"],
                         metrics["train_pairs"], metrics["pairs_per_s"])
            session.report(metrics, ck_dir)
        last = metrics
        if stopped:
            break
    return last


def _initial_model(cfg: TrainConfig) -> tuple[PRMModel, Any]:
    """A fresh model from the backbone, or the weights of `cfg.init_from` (same pooling) to train further."""
    if not cfg.init_from:
        return build_model(cfg.backbone, pooling=cfg.pooling, dropout=cfg.dropout, seed=cfg.seed,
                           attention=cfg.attention, candidate_length=cfg.candidate_length)
    path = Path(cfg.init_from).expanduser()
    if not path.is_dir():
        raise FileNotFoundError(f"init_from={cfg.init_from!r}: no such PRM checkpoint folder")
    model, tokenizer, meta = load_checkpoint(path)
    if (meta.pooling, meta.backbone) != (cfg.pooling, cfg.backbone):
        raise ValueError(f"init_from={cfg.init_from!r} is a {meta.backbone!r} PRM with {meta.pooling!r} pooling; "
                         f"the config says {cfg.backbone!r} with {cfg.pooling!r} (choose the matching prm=...)")
    if (meta.attention, meta.candidate_length) != (cfg.attention, cfg.candidate_length):
        raise ValueError(f"init_from={cfg.init_from!r} is a {meta.attention} PRM (candidate_length "
                         f"{meta.candidate_length}); the config says {cfg.attention} ({cfg.candidate_length}): "
                         f"set train.attention / train.candidate_length to match")
    torch.manual_seed(cfg.seed)
    return model.train(), tokenizer


def length_grouped(batches: Iterable[Batch], batch_size: int, window: int, seed: str) -> Iterator[Batch]:
    """Re-batch each window of `window` batches by text length (less padding), in a seeded random batch order."""
    rng = random.Random(seed)
    buf: list[tuple[str, str, str]] = []

    def flush() -> Iterator[Batch]:
        buf.sort(key=lambda r: len(r[0]) + max(len(r[1]), len(r[2])))
        chunks = [buf[i:i + batch_size] for i in range(0, len(buf), batch_size)]
        rng.shuffle(chunks)
        for c in chunks:
            yield {"context": [r[0] for r in c], "pos_step": [r[1] for r in c], "neg_step": [r[2] for r in c]}

    for b in batches:
        buf.extend(zip(map(str, b["context"]), map(str, b["pos_step"]), map(str, b["neg_step"]), strict=True))
        if len(buf) >= window * batch_size:
            yield from flush()
            buf = []
    if buf:
        yield from flush()


def candidate_lists(batches: Iterable[Batch], batch_size: int, seed: str, n_batches: int = 0) -> Iterator[Batch]:
    """Re-batch a whole epoch (one worker's shard) as candidate lists: the rows sharing (context, pos_step),
    negatives deduplicated, a list longer than `batch_size` cut into chunks of at most that many; chunks in a
    seeded random order, each packed whole into one batch. With `n_batches` (the LR
    schedule's steps per epoch) the lists are spread over that many batches of about equal size; without it
    a batch holds at most `batch_size` negatives (or one chunk)."""
    lists: dict[tuple[str, str], dict[str, None]] = {}
    for b in batches:
        for c, p, n in zip(map(str, b["context"]), map(str, b["pos_step"]), map(str, b["neg_step"]), strict=True):
            lists.setdefault((c, p), {})[n] = None
    chunks = [(key, negs[i:i + batch_size]) for key, d in lists.items()
              for negs in [list(d)] for i in range(0, len(negs), batch_size)]
    random.Random(seed).shuffle(chunks)
    total = sum(len(negs) for _, negs in chunks)
    out: dict[str, list[str]] = {"context": [], "pos_step": [], "neg_step": []}
    done = made = 0  # pairs in closed batches, batches closed
    for (c, p), negs in chunks:
        if out["neg_step"]:
            if n_batches > 0:
                full = done + len(out["neg_step"]) + len(negs) / 2 > (made + 1) * total / n_batches
            else:
                full = len(out["neg_step"]) + len(negs) > batch_size
            if full:
                done += len(out["neg_step"])
                made += 1
                yield out
                out = {"context": [], "pos_step": [], "neg_step": []}
        out["context"] += [c] * len(negs)
        out["pos_step"] += [p] * len(negs)
        out["neg_step"] += negs
    if out["neg_step"]:
        yield out


def _bar(cfg: TrainConfig, rank0: bool, epoch: int, total: int) -> Any:
    if not (cfg.progress and rank0):
        return None

    return tqdm(total=total, desc=f"epoch {epoch + 1}/{cfg.epochs}", unit="batch", file=sys.stderr, leave=False)


# ---------------------------------------------------------------- in-process session


class TrainingInterrupted(RuntimeError):
    """LocalSession(stop_after=n) stops the loop after n checkpoints, as a preemption would (tests resume)."""


class LocalSession:
    """Runs the loop in this process: in-memory rows, seeded shuffles, checkpoints as run_dir/epoch_NNN folders."""

    world_rank = 0
    world_size = 1

    def __init__(self, train_rows: Sequence[Mapping[str, Any]], val_rows: Sequence[Mapping[str, Any]],
                 run_dir: str | Path, *, seed: int = 0, keep: int = 2, stop_after: int = 0) -> None:
        self.train_rows = list(train_rows)
        self.val_rows = list(val_rows)
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.seed = seed
        self.keep = keep
        self.stop_after = stop_after
        self.reports: list[dict[str, Any]] = []

    def train_batches(self, epoch: int, batch_size: int) -> Iterator[Batch]:
        idx = list(range(len(self.train_rows)))
        random.Random(f"{self.seed}|epoch|{epoch}").shuffle(idx)
        for i in range(0, len(idx), batch_size):
            yield _columns([self.train_rows[j] for j in idx[i:i + batch_size]])

    def val_batches(self, batch_size: int) -> Iterator[Batch]:
        for i in range(0, len(self.val_rows), batch_size):
            yield _columns(self.val_rows[i:i + batch_size])

    def prepare_model(self, model: torch.nn.Module) -> torch.nn.Module:
        return model

    def device(self) -> torch.device:
        return torch.device("cpu")

    def all_reduce_sum(self, values: list[float]) -> list[float]:
        return list(values)

    def checkpoints(self) -> list[Path]:
        return sorted(p for p in self.run_dir.glob("epoch_*") if (p / STATE_FILE).exists())

    @contextlib.contextmanager
    def latest_checkpoint(self) -> Iterator[Path | None]:
        cks = self.checkpoints()
        yield cks[-1] if cks else None

    def report(self, metrics: dict[str, Any], checkpoint_dir: Path | None) -> None:
        self.reports.append(dict(metrics))
        if checkpoint_dir is None:
            return
        dest = self.run_dir / f"epoch_{int(metrics['epoch']):03d}"
        tmp = self.run_dir / f".tmp_{dest.name}"
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(checkpoint_dir, tmp)
        shutil.rmtree(dest, ignore_errors=True)
        tmp.rename(dest)
        for old in self.checkpoints()[: -self.keep] if self.keep > 0 else []:
            shutil.rmtree(old, ignore_errors=True)
        if self.stop_after and len(self.reports) >= self.stop_after:
            raise TrainingInterrupted(f"stopped after {len(self.reports)} epoch(s) (stop_after)")


def _columns(rows: Sequence[Mapping[str, Any]]) -> dict[str, list[Any]]:
    return {k: [r[k] for r in rows] for k in ("context", "pos_step", "neg_step")}


def train_local(train_rows: Sequence[Mapping[str, Any]], val_rows: Sequence[Mapping[str, Any]],
                run_dir: str | Path, cfg: TrainConfig | Mapping[str, Any]) -> tuple[dict[str, Any], Path]:
    """Train in this process; returns (last metrics, path of the final PRM checkpoint folder inside run_dir)."""
    c = cfg if isinstance(cfg, TrainConfig) else TrainConfig.from_dict(cfg)
    if c.n_train <= 0:
        c = TrainConfig.from_dict({**c.to_dict(), "n_train": len(train_rows)})
    session = LocalSession(train_rows, val_rows, run_dir, seed=c.seed)
    metrics = train_loop(c, session)
    cks = session.checkpoints()
    if not cks:
        raise RuntimeError("training produced no checkpoint")
    return metrics, cks[-1] / PRM_SUBDIR
