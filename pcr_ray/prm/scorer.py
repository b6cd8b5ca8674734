"""PRMScorer: batched, length-sorted scoring of (context, step) pairs under torch.inference_mode.

The one scoring class: the evaluation pipeline's PRM actors and the Serve app both wrap it.
"""

from __future__ import annotations

import contextlib
import math
import os
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from pcr_ray.prm.context_cache import cached_context_logits, supports_context_cache
from pcr_ray.prm.int8_rows import RowInt8Linear, quantize_rows
from pcr_ray.prm.model import PRMModel, encode_pairs, load_checkpoint, model_inputs
from pcr_ray.prm.render import RENDER_VERSION
from pcr_ray.prm.shared import DEFAULT_PACK_SIZE, packed_logits

SHARED_INT8 = ("int8 scoring is refused for a shared_context PRM under torch's dynamic int8: it takes one activation "
               "scale per forward pass, so a candidate's score would move with the other candidates; load it with "
               "PRMScorer.from_checkpoint(path, int8=True), which quantizes each token with its own scale "
               "(pcr_ray.prm.int8_rows), or score in fp32")


class PRMScorer:
    """Scores (context, step) pairs -> r in [0, 1]; dynamic batching: sort by length, batches of <= max_batch.

    A dynamically quantized (int8) model takes its activation scale per forward pass, so it scores one pair
    per pass: a pair's score is then a function of the pair alone, as in fp32.
    `bf16` runs the batched forward pass under bfloat16 autocast (no quantization scales: batched like fp32).
    A shared-context model (`model.attention == "shared_context"`, pcr_ray.prm.shared) is scored grouped by
    context, up to `max_batch` candidates per forward pass: with `context_cache` (BERT-family encoders) each
    context is encoded once and its per-layer keys and values serve all its candidates
    (pcr_ray.prm.context_cache); otherwise in packs of at most `pack_size` candidates under the block mask the
    model was trained with. Both compute the same function; a candidate's score does not depend on the other
    candidates. Its int8 mode quantizes each token with its own scale (pcr_ray.prm.int8_rows), so that a score still
    depends on its pair alone; torch's dynamic int8 (one scale per pass) is refused for it.
    """

    def __init__(self, model: PRMModel, tokenizer: Any, *, device: str = "cpu", max_batch: int = 64,
                 max_length: int = 256, identity: dict[str, Any] | None = None, int8: bool = False,
                 bf16: bool = False, pack_size: int = DEFAULT_PACK_SIZE, context_cache: bool = True) -> None:
        if max_batch < 1 or max_length < 8:
            raise ValueError("max_batch must be >= 1 and max_length >= 8")
        if int8 and bf16:
            raise ValueError("choose one of int8 and bf16 scoring, not both")
        self.shared = getattr(model, "attention", "pair") == "shared_context"
        if int8 and self.shared and not _row_quantized(model):
            raise ValueError(SHARED_INT8)
        if pack_size < 1:
            raise ValueError(f"pack_size must be >= 1, got {pack_size}")
        self.pack_size = int(pack_size)
        self.context_cache = bool(context_cache) and self.shared and supports_context_cache(model.encoder)
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.device = torch.device(device)
        self.int8 = bool(int8)
        self.bf16 = bool(bf16)
        # int8 per pair: no batch-mates, no padding in the activation scale (README, PRM scoring)
        self.pass_size = 1 if self.int8 else int(max_batch)
        self.max_batch = int(max_batch)
        self.max_length = int(max_length)
        self.identity: dict[str, Any] = dict(identity or {})
        self.calls = 0
        self.pairs_scored = 0

    @classmethod
    def from_checkpoint(cls, path: str | os.PathLike[str], *, device: str = "cpu", int8: bool = False,
                        max_batch: int = 64, max_length: int | None = None, bf16: bool = False,
                        pack_size: int = DEFAULT_PACK_SIZE, context_cache: bool = True) -> PRMScorer:
        """Load a checkpoint folder; int8=True applies dynamic int8 quantization to the Linear layers (CPU).

        Dynamic int8 takes its activation scale per forward pass, padding included, so an int8 model scores one
        pair per pass (about 2x fp32 on 2 cores) and a score depends on the pair alone.
        bf16=True scores batched under bfloat16 autocast (fp32 weights; CPUs with AVX512-BF16 or AMX, GPUs).

        max_length: tokens per (context, step); None scores at the length the checkpoint was trained at
        (prm.json), so that a longer context is cut as it was in training.
        """
        if int8 and bf16:
            raise ValueError("choose one of int8 and bf16 scoring, not both")
        if int8 and device != "cpu":
            raise ValueError("int8 dynamic quantization runs on CPU only")
        if torch.device(device).type == "cuda" and not torch.cuda.is_available():
            raise RuntimeError(f"PRM device {device!r} asked for, but torch {torch.__version__} sees no CUDA GPU on "
                               f"this machine; set prm.device=cpu, or run where a GPU and a CUDA build of torch are")
        model, tok, meta = load_checkpoint(path, device="cpu")
        max_length = int(meta.max_length if max_length is None else max_length)
        if meta.render != RENDER_VERSION:
            warnings.warn(f"PRM checkpoint {path} was trained on rendering v{meta.render}, this code renders "
                          f"v{RENDER_VERSION} (computed quantities named canonically): its scores will be off; "
                          f"retrain it (pcr-ray make-pairs, then pcr-ray train-prm)", stacklevel=2)
        if int8 and meta.attention == "shared_context":
            quantize_rows(model.encoder)  # one scale per token: a score stays a function of its pair
        elif int8:
            from torch.ao.quantization import quantize_dynamic

            model = quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
        model.to(device)
        identity = {"checkpoint": str(Path(path).resolve()), "backbone": meta.backbone, "kind": meta.kind,
                    "render": meta.render,
                    "pooling": meta.pooling, "int8": bool(int8),
                    "bf16": bool(bf16), "device": device, "max_length": max_length, "attention": meta.attention,
                    **({"candidate_length": meta.candidate_length, "pack_size": int(pack_size)}
                       if meta.attention == "shared_context" else {}),
                    "train": {k: meta.train[k] for k in ("val_pairwise_acc", "epochs", "train_pairs")
                              if k in meta.train}}
        return cls(model, tok, device=device, max_batch=max_batch, max_length=max_length, identity=identity,
                   int8=int8, bf16=bf16, pack_size=pack_size, context_cache=context_cache)

    def logits(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        """Raw head outputs (before the sigmoid), in input order."""
        pairs = list(pairs)
        if not pairs:
            return []
        for i, p in enumerate(pairs):
            if not (isinstance(p, (tuple, list)) and len(p) == 2 and isinstance(p[0], str) and isinstance(p[1], str)):
                raise TypeError(f"pair {i} is not a (context, step) tuple of strings")
        if self.shared:
            out = self.shared_logits(pairs)
            self.calls += 1
            self.pairs_scored += len(pairs)
            return out
        ctx = [p[0] for p in pairs]
        stp = [p[1] for p in pairs]
        lengths = [len(ids) for ids in encode_pairs(self.tokenizer, ctx, stp, self.max_length, pad=False)["input_ids"]]
        order = sorted(range(len(pairs)), key=lambda i: lengths[i])
        out = [0.0] * len(pairs)
        cast = (torch.autocast(device_type=self.device.type, dtype=torch.bfloat16) if self.bf16
                else contextlib.nullcontext())
        with torch.inference_mode(), cast:
            for start in range(0, len(order), self.pass_size):
                idx = order[start:start + self.pass_size]
                enc = encode_pairs(self.tokenizer, [ctx[i] for i in idx], [stp[i] for i in idx], self.max_length)
                vals = self.model(**model_inputs(self.model, enc, self.device)).float().cpu().tolist()
                for i, v in zip(idx, vals, strict=True):
                    out[i] = float(v)
        self.calls += 1
        self.pairs_scored += len(pairs)
        return out

    def shared_logits(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        """Logits of a shared-context model: pairs grouped by context into packs (pcr_ray.prm.shared)."""
        cast = (torch.autocast(device_type=self.device.type, dtype=torch.bfloat16) if self.bf16
                else contextlib.nullcontext())
        with torch.inference_mode(), cast:
            if self.context_cache:
                vals = cached_context_logits(self.model, self.tokenizer, pairs, max_length=self.max_length,
                                             candidate_length=self.model.candidate_length,
                                             max_candidates=self.max_batch, device=self.device)
                return [float(v) for v in vals.tolist()]
            vals = packed_logits(self.model, self.tokenizer, pairs, max_length=self.max_length,
                                 candidate_length=self.model.candidate_length, pack_size=self.pack_size,
                                 max_candidates=self.max_batch, device=self.device)
        return [float(v) for v in vals.float().cpu().tolist()]

    def score(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        """r = sigmoid(logit) in [0, 1] for each (context, step), in input order."""
        return [sigmoid(v) for v in self.logits(pairs)]


def _row_quantized(model: torch.nn.Module) -> bool:
    """True when the model's int8 layers are per-token (RowInt8Linear) and none is torch's per-pass dynamic one."""
    mods = list(model.modules())
    return any(isinstance(m, RowInt8Linear) for m in mods) and not any(
        type(m).__module__.startswith("torch.ao.nn.quantized") for m in mods)


def sigmoid(x: float) -> float:
    """Numerically safe logistic function."""
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    z = math.exp(x)
    return z / (1.0 + z)
