"""Shared-context scoring with each context encoded once: its per-layer keys and values reused by all its candidates.

The same function as the block mask of `pcr_ray.prm.shared` (context tokens attend to the context alone; a
candidate's tokens to the context and to themselves; positions restart after the context), computed without the
packed sequence: the contexts of a batch run through the encoder's layers on their own, and at every layer each
candidate's queries attend to its context's keys and values (computed once per context) and to its own. A
candidate costs its own tokens, not the pack's quadratic attention: its per-token layers run on its real tokens
only (no padding), and each layer's query, key and value come from one fused product. BERT-family encoders (MiniLM) only
(`supports_context_cache`); inference only (training packs under the mask, which is differentiable as is).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F

from pcr_ray.prm.int8_rows import fuse_linears
from pcr_ray.prm.shared import Pack, batches_of_packs, make_packs


def supports_context_cache(encoder: Any) -> bool:
    """True for an encoder with BERT's layout (embeddings, encoder.layer[i].attention.self.query, ...)."""
    layers = getattr(getattr(encoder, "encoder", None), "layer", None)
    if not hasattr(encoder, "embeddings") or layers is None or getattr(encoder.config, "is_decoder", False):
        return False
    return all(hasattr(getattr(getattr(la, "attention", None), "self", None), "query")
               and hasattr(la, "feed_forward_chunk") for la in layers)


def cached_context_logits(model: torch.nn.Module, tokenizer: Any, pairs: Sequence[tuple[str, str]], *,
                          max_length: int, candidate_length: int, max_candidates: int,
                          device: torch.device | str = "cpu") -> torch.Tensor:
    """Logits of (context, candidate) pairs, in input order; contexts batched with up to `max_candidates`
    candidates per pass (a context with more passes alone)."""
    packs = make_packs(tokenizer, pairs, max_length=max_length, candidate_length=candidate_length,
                       pack_size=max(1, len(pairs)))
    out = torch.empty(len(pairs))
    for group in batches_of_packs(packs, max_candidates):
        slots = torch.tensor([s for p in group for s in p.slots], dtype=torch.long)
        out[slots] = _group_logits(model, group, torch.device(device)).float().cpu()
    return out


def _qkv(sa: Any) -> Any:
    """A function x -> (query, key, value) of a BERT self-attention module, one fused matrix product when its three
    projections fuse (pcr_ray.prm.int8_rows.fuse_linears; rebuilt when their weights or device change)."""
    parts = (sa.query, sa.key, sa.value)
    tensors = [t for m in parts for t in (*m.parameters(), *m.buffers())]
    stamp = tuple((t.data_ptr(), t._version) for t in tensors)
    cached = sa.__dict__.get("_pcr_fused_qkv")  # kept outside the module's registry: not in its state_dict
    if cached is None or cached[0] != stamp:
        cached = (stamp, fuse_linears(parts))
        object.__setattr__(sa, "_pcr_fused_qkv", cached)
    fused = cached[1]
    if fused is None:
        return lambda x: (sa.query(x), sa.key(x), sa.value(x))
    sizes = [m.out_features for m in parts]
    return lambda x: fused(x).split(sizes, dim=-1)


def _group_logits(model: Any, group: Sequence[Pack], device: torch.device) -> torch.Tensor:
    enc = model.encoder
    nb = len(group)
    c_len = torch.tensor([len(p.context_ids) for p in group])
    cands = [(b, ids) for b, p in enumerate(group) for ids in p.candidate_ids]
    cmax, mmax = int(c_len.max()), max(len(ids) for _, ids in cands)
    ctx_ids = torch.zeros(nb, cmax, dtype=torch.long)
    for b, p in enumerate(group):
        ctx_ids[b, :len(p.context_ids)] = torch.tensor(p.context_ids)
    ctx_valid = torch.arange(cmax).unsqueeze(0) < c_len.unsqueeze(1)
    owner = torch.tensor([b for b, _ in cands])
    cand_ids = torch.zeros(len(cands), mmax, dtype=torch.long)
    m_len = torch.tensor([len(ids) for _, ids in cands])
    for i, (_, ids) in enumerate(cands):
        cand_ids[i, :len(ids)] = torch.tensor(ids)
    cand_valid = torch.arange(mmax).unsqueeze(0) < m_len.unsqueeze(1)
    cand_pos = c_len[owner].unsqueeze(1) + torch.arange(mmax).unsqueeze(0)
    one = 1 if model.uses_token_types else 0
    hc = enc.embeddings(input_ids=ctx_ids.to(device), token_type_ids=torch.zeros_like(ctx_ids).to(device),
                        position_ids=torch.arange(cmax).expand(nb, cmax).to(device))
    hx = enc.embeddings(input_ids=cand_ids.to(device), token_type_ids=torch.full_like(cand_ids, one).to(device),
                        position_ids=cand_pos.to(device))
    neg = torch.finfo(hc.dtype).min
    ctx_mask = torch.zeros(nb, 1, 1, cmax, dtype=hc.dtype).masked_fill(~ctx_valid[:, None, None, :], neg)
    keys_valid = torch.cat([ctx_valid[owner], cand_valid], dim=1)
    cand_mask = torch.zeros(len(cands), 1, 1, cmax + mmax, dtype=hc.dtype).masked_fill(
        ~keys_valid[:, None, None, :], neg)
    ctx_mask, cand_mask = ctx_mask.to(device), cand_mask.to(device)
    # the candidates' per-token layers (projections, feed-forward, layer norms) run on their real tokens only,
    # flattened [tokens, hidden]; only attention sees them padded to [candidates, longest, hidden]
    real = cand_valid.to(device)
    hx = hx[real]
    n_c = len(cands)

    def padded(t: torch.Tensor) -> torch.Tensor:
        out = t.new_zeros(n_c, mmax, t.shape[-1])
        out[real] = t
        return out

    starts = [0, *torch.bincount(owner, minlength=nb).cumsum(0).tolist()]  # candidates are in context order
    n_heads, head_dim = enc.encoder.layer[0].attention.self.num_attention_heads, \
        enc.encoder.layer[0].attention.self.attention_head_size
    # each candidate's keys and values: its context's, then its own (padded), written once into one buffer
    keys = hc.new_zeros(n_c, n_heads, cmax + mmax, head_dim)
    values = torch.zeros_like(keys)
    own_keys, own_values = keys[:, :, cmax:].transpose(1, 2), values[:, :, cmax:].transpose(1, 2)

    for layer in enc.encoder.layer:
        sa = layer.attention.self

        def heads(t: torch.Tensor, sa: Any = sa) -> torch.Tensor:
            return t.view(t.shape[0], t.shape[1], sa.num_attention_heads, sa.attention_head_size).transpose(1, 2)

        qkv = _qkv(sa)
        qc, kc, vc = (heads(t) for t in qkv(hc))
        ac = F.scaled_dot_product_attention(qc, kc, vc, attn_mask=ctx_mask, scale=sa.scaling)
        qx, kx, vx = qkv(hx)
        for b, (s, e) in enumerate(zip(starts[:-1], starts[1:], strict=True)):
            keys[s:e, :, :cmax] = kc[b]
            values[s:e, :, :cmax] = vc[b]
        # under bf16 autocast the projections come out in bf16 while the buffer holds the embeddings' fp32
        own_keys[real] = kx.view(-1, n_heads, head_dim).to(keys.dtype)
        own_values[real] = vx.view(-1, n_heads, head_dim).to(values.dtype)
        ax = F.scaled_dot_product_attention(heads(padded(qx)), keys, values, attn_mask=cand_mask, scale=sa.scaling)
        hc = layer.feed_forward_chunk(layer.attention.output(ac.transpose(1, 2).reshape(hc.shape), hc))
        hx = layer.feed_forward_chunk(layer.attention.output(ax.transpose(1, 2).reshape(n_c, mmax, -1)[real], hx))
    token_owner = torch.arange(n_c, device=device).unsqueeze(1).expand(n_c, mmax)[real]
    pooled = hx.new_zeros(n_c, hx.shape[-1]).index_add_(0, token_owner, hx) / m_len.to(device, hx.dtype).unsqueeze(1)
    return model.head(model.dropout(pooled)).squeeze(-1)
