"""BERT's encoder for scoring, built from a checkpoint's config.json and safetensors without transformers' model code.

Importing transformers' model code costs about 2.5 s of CPU (it pulls in torch's distributed and compiler
packages); a PRM scorer on a BERT-family checkpoint (MiniLM) loads this instead, so that `pcr-ray solve` and a
PRM actor start in about a second. Same module names and weights as transformers' `BertModel` (so a state dict, the
context cache of `pcr_ray.prm.context_cache` and row-wise int8 apply unchanged), same arithmetic, inference only:
training builds transformers' own model (`pcr_ray.prm.model.build_model`). tests/test_prm_bert.py holds the two to
the same outputs.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

WEIGHTS_FILE = "model.safetensors"


def supports(config: dict[str, Any]) -> str | None:
    """None when an encoder config (config.json) is one this module reproduces; else the reason it is not."""
    checks = {"model_type": "bert", "hidden_act": "gelu", "position_embedding_type": "absolute"}
    for key, want in checks.items():
        got = config.get(key, "absolute" if key == "position_embedding_type" else None)
        if got != want:
            return f"{key} is {got!r}, not {want!r}"
    if config.get("is_decoder") or config.get("add_cross_attention"):
        return "a decoder"
    return None


class BertEmbeddings(nn.Module):
    def __init__(self, c: SimpleNamespace) -> None:
        super().__init__()
        self.word_embeddings = nn.Embedding(c.vocab_size, c.hidden_size, padding_idx=c.pad_token_id)
        self.position_embeddings = nn.Embedding(c.max_position_embeddings, c.hidden_size)
        self.token_type_embeddings = nn.Embedding(c.type_vocab_size, c.hidden_size)
        self.LayerNorm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None,
                position_ids: torch.Tensor | None = None) -> torch.Tensor:
        if position_ids is None:
            position_ids = torch.arange(input_ids.shape[1], device=input_ids.device).unsqueeze(0)
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        x = self.word_embeddings(input_ids) + self.token_type_embeddings(token_type_ids)
        return self.LayerNorm(x + self.position_embeddings(position_ids))


class BertSelfAttention(nn.Module):
    def __init__(self, c: SimpleNamespace) -> None:
        super().__init__()
        self.num_attention_heads = c.num_attention_heads
        self.attention_head_size = c.hidden_size // c.num_attention_heads
        self.scaling = self.attention_head_size ** -0.5
        self.query = nn.Linear(c.hidden_size, c.hidden_size)
        self.key = nn.Linear(c.hidden_size, c.hidden_size)
        self.value = nn.Linear(c.hidden_size, c.hidden_size)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        b, n, _ = x.shape

        def heads(t: torch.Tensor) -> torch.Tensor:
            return t.view(b, n, self.num_attention_heads, self.attention_head_size).transpose(1, 2)

        out = F.scaled_dot_product_attention(heads(self.query(x)), heads(self.key(x)), heads(self.value(x)),
                                             attn_mask=mask, scale=self.scaling)
        return out.transpose(1, 2).reshape(b, n, -1)


class BertResidual(nn.Module):
    """dense, then LayerNorm of it plus the residual: transformers' BertSelfOutput and BertOutput."""

    def __init__(self, n_in: int, c: SimpleNamespace) -> None:
        super().__init__()
        self.dense = nn.Linear(n_in, c.hidden_size)
        self.LayerNorm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)

    def forward(self, hidden_states: torch.Tensor, input_tensor: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(self.dense(hidden_states) + input_tensor)


class BertAttention(nn.Module):
    def __init__(self, c: SimpleNamespace) -> None:
        super().__init__()
        self.self = BertSelfAttention(c)
        self.output = BertResidual(c.hidden_size, c)


class BertIntermediate(nn.Module):
    def __init__(self, c: SimpleNamespace) -> None:
        super().__init__()
        self.dense = nn.Linear(c.hidden_size, c.intermediate_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.dense(x))


class BertLayer(nn.Module):
    def __init__(self, c: SimpleNamespace) -> None:
        super().__init__()
        self.attention = BertAttention(c)
        self.intermediate = BertIntermediate(c)
        self.output = BertResidual(c.intermediate_size, c)

    def feed_forward_chunk(self, attention_output: torch.Tensor) -> torch.Tensor:
        return self.output(self.intermediate(attention_output), attention_output)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        return self.feed_forward_chunk(self.attention.output(self.attention.self(x, mask), x))


class BertEncoder(nn.Module):
    def __init__(self, c: SimpleNamespace) -> None:
        super().__init__()
        self.layer = nn.ModuleList(BertLayer(c) for _ in range(c.num_hidden_layers))


@dataclass
class EncoderOutput:
    last_hidden_state: torch.Tensor


class BertModel(nn.Module):
    """transformers' BertModel without its pooler, for inference: forward(...).last_hidden_state."""

    def __init__(self, config: dict[str, Any]) -> None:
        super().__init__()
        why = supports(config)
        if why:
            raise ValueError(f"pcr_ray.prm.bert does not reproduce this encoder: {why}")
        self.config = SimpleNamespace(**{"pad_token_id": 0, "layer_norm_eps": 1e-12, "is_decoder": False, **config})
        self.embeddings = BertEmbeddings(self.config)
        self.encoder = BertEncoder(self.config)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None, position_ids: torch.Tensor | None = None) -> EncoderOutput:
        """`attention_mask`: [B, L] of 1/0 (padding), or a [B, 1, L, L] mask (bool, or additive floats)."""
        h = self.embeddings(input_ids, token_type_ids, position_ids)
        mask = None
        if attention_mask is not None:
            if attention_mask.dim() == 2:
                mask = attention_mask[:, None, None, :].bool()
            elif attention_mask.dtype == torch.bool:
                mask = attention_mask
            else:
                mask = attention_mask.to(h.dtype)
        for layer in self.encoder.layer:
            h = layer(h, mask)
        return EncoderOutput(h)


def load_bert(folder: str | os.PathLike[str]) -> BertModel:
    """The encoder of a checkpoint's `encoder/` folder (config.json, model.safetensors), in eval mode.

    Raises ValueError when the config is not one this module reproduces (`supports`), and when the weights
    miss a parameter of it."""
    from safetensors.torch import load_file  # heavy: safetensors

    p = Path(folder)
    model = BertModel(json.loads((p / "config.json").read_text()))
    state = load_file(str(p / WEIGHTS_FILE))
    missing, _ = model.load_state_dict(state, strict=False)  # the pooler's weights (unused) are left out
    if missing:
        raise ValueError(f"{p / WEIGHTS_FILE} lacks {len(missing)} of the encoder's weights, e.g. {missing[0]}")
    return model.eval()
