"""PRMScorer: batched, length-sorted scoring of (context, step) pairs (torch or ONNX Runtime), with a score cache.

The one scoring class: the evaluation pipeline's PRM actors and the Serve app both wrap it.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from pcr_ray.core.render import RENDER_VERSION
from pcr_ray.prm import bert, kernels
from pcr_ray.prm.base import ENCODER_DIR, HEAD_FILE, META_FILE, sigmoid
from pcr_ray.prm.context_cache import cached_context_logits, supports_context_cache
from pcr_ray.prm.int8_rows import RowInt8Linear, quantize_rows
from pcr_ray.prm.model import PRMMeta, PRMModel, encode_pairs, load_checkpoint, load_tokenizer, model_inputs, read_meta
from pcr_ray.prm.onnx_runtime import load_onnx
from pcr_ray.prm.runtimes import check_runtime
from pcr_ray.prm.score_cache import ScoreCache
from pcr_ray.prm.shared import DEFAULT_PACK_SIZE, make_packs, packed_logits
from pcr_ray.prm.tokenizer import load_prm_tokenizer

SHARED_INT8 = ("int8 scoring is refused for a shared_context PRM whose int8 takes one activation scale per forward "
               "pass: a candidate's score would move with the other candidates; load it with "
               "PRMScorer.from_checkpoint(path, int8=True, runtime='torch'), which quantizes each token with its own "
               "scale (pcr_ray.prm.int8_rows), or score in fp32")


def load_for_scoring(path: str | os.PathLike[str], device: str | torch.device = "cpu") -> tuple[PRMModel, Any, PRMMeta]:
    """load_checkpoint for scoring alone: a BERT-family encoder (MiniLM) with its tokenizer.json loads without
    transformers (pcr_ray.prm.bert, pcr_ray.prm.tokenizer: about 2.5 s less to start); any other as load_checkpoint."""
    p = Path(path)
    meta = read_meta(p)
    enc = p / ENCODER_DIR
    config = json.loads((enc / "config.json").read_text()) if (enc / "config.json").is_file() else None
    tokenizer = load_prm_tokenizer(enc)
    if config is None or bert.supports(config) or tokenizer is None or not (enc / bert.WEIGHTS_FILE).is_file():
        return load_checkpoint(p, device)
    model = PRMModel(bert.load_bert(enc), pooling=meta.pooling, dropout=meta.dropout, attention=meta.attention,
                     candidate_length=meta.candidate_length)
    model.head.load_state_dict(torch.load(p / HEAD_FILE, map_location="cpu", weights_only=True))
    model.to(device).eval()
    return model, tokenizer, meta


def load_scoring_tokenizer(path: str | os.PathLike[str]) -> Any:
    """The tokenizer scoring uses for a checkpoint folder: its tokenizer.json without transformers when it has one."""
    return load_prm_tokenizer(Path(path) / ENCODER_DIR) or load_tokenizer(path)


class PRMScorer:
    """Scores (context, step) pairs -> r in [0, 1]; dynamic batching: sort by length, batches of <= max_batch.

    `model` is a PRMModel (torch) or an OnnxPRM (pcr_ray.prm.onnx_runtime). A dynamically quantized (int8) model
    takes its activation scale per forward pass, so it scores one pair per pass: a pair's score is then a
    function of the pair alone, as in fp32.
    `bf16` runs the batched forward pass under bfloat16 autocast (no quantization scales: batched like fp32).
    `cache_size` > 0 keeps that many logits by (context, step) text (ScoreCache): a pair asked for again is not
    scored again; `cache.stats()` counts hits and misses.
    A shared-context model (`model.attention == "shared_context"`, pcr_ray.prm.shared) is scored grouped by
    context, up to `max_batch` candidates per forward pass: with `context_cache` (BERT-family encoders) each
    context is encoded once and its per-layer keys and values serve all its candidates
    (pcr_ray.prm.context_cache); otherwise in packs of at most `pack_size` candidates under the block mask the
    model was trained with. Both compute the same function; a candidate's score does not depend on the other
    candidates. Its int8 mode (torch) quantizes each token with its own scale (pcr_ray.prm.int8_rows).
    """

    def __init__(self, model: Any, tokenizer: Any, *, device: str = "cpu", max_batch: int = 64,
                 max_length: int = 256, identity: dict[str, Any] | None = None, int8: bool = False,
                 bf16: bool = False, cache_size: int = 0, pack_size: int = DEFAULT_PACK_SIZE,
                 context_cache: bool = True) -> None:
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
        self.model = model.eval() if isinstance(model, torch.nn.Module) else model
        self.tokenizer = tokenizer
        self.device = torch.device(device)
        self.int8 = bool(int8)
        self.bf16 = bool(bf16)
        # int8 per pair: no batch-mates, no padding in the activation scale (README, PRM scoring)
        self.pass_size = 1 if self.int8 else int(max_batch)
        self.max_batch = int(max_batch)
        self.max_length = int(max_length)
        self.identity: dict[str, Any] = dict(identity or {})
        self.cache = ScoreCache(cache_size)
        self.calls = 0
        self.pairs_scored = 0

    @classmethod
    def from_checkpoint(cls, path: str | os.PathLike[str], *, device: str = "cpu", int8: bool = False,
                        max_batch: int = 64, max_length: int | None = None, bf16: bool = False,
                        runtime: str = "torch", cache_size: int = 0, threads: int | None = None,
                        pack_size: int = DEFAULT_PACK_SIZE, context_cache: bool = True,
                        measure_kernel: bool = True) -> PRMScorer:
        """Load a checkpoint folder. runtime: `torch` (fp32, or bf16=True) or `onnx` (ONNX Runtime, CPU, int8 or fp32).

        runtime=onnx scores with the checkpoint exported to ONNX (pcr_ray.prm.onnx_runtime, cached per
        checkpoint), with int8=True its weights quantized to int8; dynamic int8 takes its activation scale per
        forward pass, padding included, so it scores one pair per pass and a score depends on the pair alone.
        bf16=True scores batched under bfloat16 autocast (fp32 weights; CPUs with AVX512-BF16 or AMX, GPUs).
        int8=True on CPU is "int8 where it is faster here": with measure_kernel (the default) the int8 kernel is
        timed against fp32 on this CPU and the faster one kept (pcr_ray.prm.kernels); identity["kernel"] says
        which, with the rates. measure_kernel=False pins int8 as asked.
        threads: ONNX Runtime's intra-op threads (None: torch's thread count, i.e. the actor's CPUs).

        max_length: tokens per (context, step); None scores at the length the checkpoint was trained at
        (prm.json), so that a longer context is cut as it was in training.
        """
        if torch.device(device).type == "cuda" and not torch.cuda.is_available():
            raise RuntimeError(f"PRM device {device!r} asked for, but torch {torch.__version__} sees no CUDA GPU on "
                               f"this machine; set prm.device=cpu, or run where a GPU and a CUDA build of torch are")
        meta = read_meta(path)
        check_runtime(runtime, device=device, int8=int8, bf16=bf16, attention=meta.attention)
        if meta.attention == "shared_context":
            runtime = "torch"  # its contexts encoded once (context_cache); int8 per token below
        if runtime == "onnx":  # the export (cached) holds the model: only the tokenizer is loaded here
            model, tok = None, load_scoring_tokenizer(path)
        else:
            model, tok, meta = load_for_scoring(path, device="cpu")
        max_length = int(meta.max_length if max_length is None else max_length)
        if meta.render != RENDER_VERSION:
            warnings.warn(f"PRM checkpoint {path} was trained on rendering v{meta.render}, this code renders "
                          f"v{RENDER_VERSION} (computed quantities named canonically): its scores will be off; "
                          f"retrain it (pcr-ray make-pairs, then pcr-ray train-prm)", stacklevel=2)
        identity = {"checkpoint": str(Path(path).resolve()), "backbone": meta.backbone, "kind": meta.kind,
                    "render": meta.render, "runtime": runtime,
                    "pooling": meta.pooling, "int8": False,
                    "bf16": bool(bf16), "device": device, "max_length": max_length, "attention": meta.attention,
                    **({"candidate_length": meta.candidate_length, "pack_size": int(pack_size)}
                       if meta.attention == "shared_context" else {}),
                    "train": {k: meta.train[k] for k in ("val_pairwise_acc", "epochs", "train_pairs")
                              if k in meta.train}}
        kw = {"device": device, "max_batch": max_batch, "max_length": max_length, "bf16": bf16,
              "cache_size": cache_size, "pack_size": pack_size, "context_cache": context_cache}

        def build(m: Any, quantized: bool, choice: kernels.KernelChoice) -> PRMScorer:
            return cls(m, tok, identity={**identity, "int8": quantized, "kernel": choice.to_dict()}, int8=quantized,
                       **kw)

        int8_kernel = kernels.ONNX_INT8 if runtime == "onnx" else kernels.INT8_ROWS
        key = (identity["checkpoint"], (Path(path) / META_FILE).stat().st_mtime_ns, runtime, threads,
               torch.get_num_threads(), max_batch, max_length)
        known = kernels.recall(key) if int8 and measure_kernel else None
        if known is not None:  # chosen before on this machine: build that scorer alone
            int8 = known.kernel == int8_kernel
            measure_kernel = False
        if runtime == "onnx":
            fp32_model = load_onnx(path, int8=False, threads=threads) if not (int8 and not measure_kernel) else None
            int8_model = load_onnx(path, int8=True, threads=threads) if int8 else None
        else:
            fp32_model = model.to(device) if not (int8 and not measure_kernel) else None
            int8_model = None
            if int8:  # a shared_context PRM (check_runtime refuses torch int8 for a pair PRM)
                int8_model = copy.deepcopy(model) if fp32_model is not None else model
                quantize_rows(int8_model.encoder)  # one scale per token: a score stays a function of its pair
                int8_model.to(device)
        if int8_model is None:
            return build(fp32_model, False, known or kernels.forced("bf16" if bf16 else kernels.FP32,
                                                                     f"int8=false on {device}"))
        if fp32_model is None:
            return build(int8_model, True, known or kernels.forced(int8_kernel, "int8 pinned by the caller"))
        scorers = {True: build(int8_model, True, kernels.forced(int8_kernel, "")),
                   False: build(fp32_model, False, kernels.forced(kernels.FP32, ""))}
        choice = kernels.choose(int8_kernel, scorers[True].forward_all, scorers[False].forward_all, key)
        chosen = scorers[choice.kernel == int8_kernel]
        chosen.identity["kernel"] = choice.to_dict()
        return chosen

    def logits(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        """Raw head outputs (before the sigmoid), in input order; cached pairs are not scored again."""
        pairs = list(pairs)
        if not pairs:
            return []
        for i, p in enumerate(pairs):
            if not (isinstance(p, (tuple, list)) and len(p) == 2 and isinstance(p[0], str) and isinstance(p[1], str)):
                raise TypeError(f"pair {i} is not a (context, step) tuple of strings")
        self.calls += 1
        self.pairs_scored += len(pairs)
        if not self.cache.size:
            return self.forward_all(pairs)
        found, keys = self.cache.lookup(pairs)
        todo: dict[bytes, int] = {}  # key -> index of its first uncached pair (a pair repeated in one call: once)
        for i, (v, k) in enumerate(zip(found, keys, strict=True)):
            if v is None and k not in todo:
                todo[k] = i
        fresh = dict(zip(todo, self.forward_all([pairs[i] for i in todo.values()]), strict=True))
        self.cache.store(list(fresh), list(fresh.values()))
        return [fresh[k] if v is None else v for v, k in zip(found, keys, strict=True)]

    def forward_all(self, pairs: list[tuple[str, str]]) -> list[float]:
        """Logits of these pairs through the model, the cache bypassed: grouped by context (shared), else sorted by
        length in passes."""
        if not pairs:
            return []
        if self.shared:
            return self.shared_logits(pairs)
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
                if isinstance(self.model, PRMModel):
                    vals = self.model(**model_inputs(self.model, enc, self.device)).float().cpu().tolist()
                else:
                    vals = self.model.logits(enc)
                for i, v in zip(idx, vals, strict=True):
                    out[i] = float(v)
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

    def token_counts(self, pairs: Sequence[tuple[str, str]]) -> list[int]:
        """The tokens the encoder takes in for each pair when these pairs are scored together, cut as scoring cuts
        them: a pair model's (context, step) sequence; for a shared-context model each candidate's tokens, and its
        context's tokens on the first pair of each context (encoded once for all its candidates). The score cache
        is not credited: this is what the pairs cost, whichever caller asked first."""
        pairs = [(str(c), str(s)) for c, s in pairs]
        if not pairs:
            return []
        if not self.shared:
            enc = encode_pairs(self.tokenizer, [c for c, _ in pairs], [s for _, s in pairs], self.max_length, pad=False)
            return [len(ids) for ids in enc["input_ids"]]
        out = [0] * len(pairs)
        for pack in make_packs(self.tokenizer, pairs, max_length=self.max_length,
                               candidate_length=self.model.candidate_length,
                               pack_size=len(pairs) if self.context_cache else self.pack_size):
            for slot, ids in zip(pack.slots, pack.candidate_ids, strict=True):
                out[slot] = len(ids)
            out[pack.slots[0]] += len(pack.context_ids)
        return out

    def score_counted(self, pairs: Sequence[tuple[str, str]]) -> tuple[list[float], list[int]]:
        """score(pairs) and token_counts(pairs) (pcr_ray.search.usage)."""
        return self.score(pairs), self.token_counts(pairs)


def _row_quantized(model: torch.nn.Module) -> bool:
    """True when the model's int8 layers are per-token (RowInt8Linear) and none is torch's per-pass dynamic one."""
    mods = list(model.modules())
    return any(isinstance(m, RowInt8Linear) for m in mods) and not any(
        type(m).__module__.startswith("torch.ao.nn.quantized") for m in mods)

