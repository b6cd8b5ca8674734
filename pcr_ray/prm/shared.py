"""Shared-context packing: one context and several candidate steps in one sequence, each candidate blind to the others.

A pack is `[CLS] context [SEP] cand_1 [SEP] cand_2 [SEP] ...`. Its attention mask (4D, additive) lets context
tokens attend only to the context and a candidate's tokens attend to the context and to themselves, never to
another candidate; each candidate's position ids restart right after the context. A candidate's hidden states
are therefore those of the sequence `[CLS] context [SEP] cand [SEP]` alone, whatever its pack-mates and their
order, and the context is encoded once per pack instead of once per candidate. The score pools (mean) over the
candidate's own tokens. Training (`pcr_ray.prm.train_loop`) and scoring (`pcr_ray.prm.scorer`) pack the same way.

Budgets: a candidate keeps at most `candidate_length` tokens (its [SEP] included, cut at its end); the context
keeps at most `max_length - candidate_length` tokens ([CLS] and [SEP] included), losing tokens from its start
as in pair mode.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

ATTENTIONS = ("pair", "shared_context")
DEFAULT_CANDIDATE_LENGTH = 40
DEFAULT_PACK_SIZE = 16


def check_attention(attention: str) -> str:
    """`attention` when it is one of ATTENTIONS; else a ValueError that lists them."""
    if attention not in ATTENTIONS:
        raise ValueError(f"prm attention must be one of {ATTENTIONS}, got {attention!r}")
    return attention


@dataclass(frozen=True)
class Pack:
    """One context and the candidates packed after it (token ids without padding)."""

    context_ids: tuple[int, ...]
    candidate_ids: tuple[tuple[int, ...], ...]
    slots: tuple[int, ...]  # index of each candidate in the caller's list of (context, candidate) pairs

    @property
    def length(self) -> int:
        return len(self.context_ids) + sum(len(c) for c in self.candidate_ids)


@dataclass(frozen=True)
class PackedBatch:
    """Model inputs for a batch of packs, and where each candidate's score lands."""

    input_ids: torch.Tensor       # [B, L]
    token_type_ids: torch.Tensor  # [B, L]
    position_ids: torch.Tensor    # [B, L]
    attention_mask: torch.Tensor  # [B, 1, L, L] additive: 0 where attended, dtype min elsewhere
    pool: torch.Tensor            # [B, K, L] mean-pooling weights of each candidate's tokens
    valid: torch.Tensor           # [B, K] True where a candidate sits
    slots: tuple[int, ...]        # caller's index of each valid candidate, in valid.nonzero() order

    def to(self, device: torch.device | str) -> PackedBatch:
        return PackedBatch(self.input_ids.to(device), self.token_type_ids.to(device), self.position_ids.to(device),
                           self.attention_mask.to(device), self.pool.to(device), self.valid.to(device), self.slots)


def make_packs(tokenizer: Any, pairs: Sequence[tuple[str, str]], *, max_length: int, candidate_length: int,
               pack_size: int) -> list[Pack]:
    """Group (context, candidate) pairs by context and cut each group into packs of at most `pack_size`."""
    if pack_size < 1:
        raise ValueError(f"pack_size must be >= 1, got {pack_size}")
    if not 4 <= candidate_length <= max_length - 4:
        raise ValueError(f"candidate_length must be in [4, max_length - 4] = [4, {max_length - 4}], "
                         f"got {candidate_length}")
    groups: dict[str, list[int]] = {}
    for i, (c, _) in enumerate(pairs):
        groups.setdefault(c, []).append(i)
    contexts = list(groups)
    cands = [s for _, s in pairs]
    cls, sep = int(tokenizer.cls_token_id), int(tokenizer.sep_token_id)
    ctx_tok = tokenizer(contexts, add_special_tokens=False)["input_ids"] if contexts else []
    cand_tok = tokenizer(cands, add_special_tokens=False)["input_ids"] if cands else []
    ctx_keep = max_length - candidate_length - 2
    packs: list[Pack] = []
    for c, ids in zip(contexts, ctx_tok, strict=True):
        ctx_ids = (cls, *ids[max(0, len(ids) - ctx_keep):], sep)
        members = groups[c]
        for start in range(0, len(members), pack_size):
            chunk = members[start:start + pack_size]
            packs.append(Pack(ctx_ids, tuple((*cand_tok[i][:candidate_length - 1], sep) for i in chunk),
                              tuple(chunk)))
    return packs


def collate_packs(packs: Sequence[Pack], dtype: torch.dtype = torch.float32) -> PackedBatch:
    """Pad packs to one length and build their block masks, position ids and pooling weights."""
    if not packs:
        raise ValueError("no packs to collate")
    n, width = len(packs), max(p.length for p in packs)
    k = max(len(p.candidate_ids) for p in packs)
    input_ids = torch.zeros(n, width, dtype=torch.long)
    token_type = torch.zeros(n, width, dtype=torch.long)
    positions = torch.zeros(n, width, dtype=torch.long)
    segment = torch.full((n, width), -2, dtype=torch.long)  # -1: context, j >= 0: candidate j, -2: padding
    pool = torch.zeros(n, k, width, dtype=dtype)
    valid = torch.zeros(n, k, dtype=torch.bool)
    slots: list[int] = []
    for b, p in enumerate(packs):
        c = len(p.context_ids)
        input_ids[b, :c] = torch.tensor(p.context_ids)
        positions[b, :c] = torch.arange(c)
        segment[b, :c] = -1
        at = c
        for j, ids in enumerate(p.candidate_ids):
            m = len(ids)
            input_ids[b, at:at + m] = torch.tensor(ids)
            token_type[b, at:at + m] = 1
            positions[b, at:at + m] = torch.arange(c, c + m)
            segment[b, at:at + m] = j
            pool[b, j, at:at + m] = 1.0 / m
            valid[b, j] = True
            at += m
        slots.extend(p.slots)
    q, kk = segment.unsqueeze(2), segment.unsqueeze(1)  # query rows, key columns
    allowed = (kk == -1) & (q != -2)                     # everyone but padding sees the context
    allowed |= (q == kk) & (q >= 0)                      # a candidate sees itself
    allowed |= torch.eye(width, dtype=torch.bool).unsqueeze(0) & (q == -2)  # padding sees itself (no empty row)
    mask = torch.zeros(n, 1, width, width, dtype=dtype)
    mask.masked_fill_(~allowed.unsqueeze(1), torch.finfo(dtype).min)
    return PackedBatch(input_ids, token_type, positions, mask, pool, valid, tuple(slots))


def batches_of_packs(packs: Sequence[Pack], max_candidates: int) -> list[list[Pack]]:
    """Packs sorted by length and grouped into forward passes of at most `max_candidates` candidates
    (a pack larger than that passes alone)."""
    out: list[list[Pack]] = []
    cur: list[Pack] = []
    n = 0
    for p in sorted(packs, key=lambda p: p.length):
        if cur and n + len(p.candidate_ids) > max_candidates:
            out.append(cur)
            cur, n = [], 0
        cur.append(p)
        n += len(p.candidate_ids)
    if cur:
        out.append(cur)
    return out


def packed_logits(model: torch.nn.Module, tokenizer: Any, pairs: Sequence[tuple[str, str]], *, max_length: int,
                  candidate_length: int, pack_size: int, max_candidates: int = 0,
                  device: torch.device | str = "cpu") -> torch.Tensor:
    """Logits of (context, candidate) pairs, in input order, through shared-context packs (differentiable).

    `max_candidates` > 0 splits the packs into several forward passes of at most that many candidates;
    0 runs them in one pass (training)."""
    packs = make_packs(tokenizer, pairs, max_length=max_length, candidate_length=candidate_length,
                       pack_size=pack_size)
    groups = batches_of_packs(packs, max_candidates) if max_candidates > 0 else [packs]
    inner = getattr(model, "module", model)
    out: list[torch.Tensor] = []
    order: list[int] = []
    for g in groups:
        batch = collate_packs(g).to(device)
        out.append(model(batch.input_ids, batch.attention_mask, batch.token_type_ids
                         if inner.uses_token_types else None, position_ids=batch.position_ids,
                         pool=batch.pool)[batch.valid])
        order.extend(batch.slots)
    flat = torch.cat(out) if out else torch.zeros(0)
    inverse = torch.empty(len(order), dtype=torch.long)
    inverse[torch.tensor(order, dtype=torch.long)] = torch.arange(len(order))
    return flat[inverse.to(flat.device)]
