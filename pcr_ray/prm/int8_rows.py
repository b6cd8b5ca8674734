"""Int8 linear layers with one activation scale per token: each output row is a function of its input row alone,
so a candidate's scale never comes from the other candidates of its pass.

torch's dynamic quantization takes one activation scale per forward pass (the largest value of the whole batch),
which couples a candidate's score to whatever shares its pass; here each row of the input is quantized with its
own scale (max |x| / 127), the weights per output channel, and the product is an exact int32 matmul
(`torch._int_mm`) rescaled in fp32. Used for shared-context PRMs (`prm.int8=true`). The fp32 parts between the
layers (attention, layer norm) still differ by ~1e-7 with the batch's padding, and such a difference can flip a
value's rounding: a MiniLM score moves by a few thousandths at most with the other candidates (docs/prm.md).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn


class RowInt8Linear(nn.Module):
    """y = (q(x) @ q(W)^T) * s_x * s_W + b with per-row activation scales and per-channel weight scales."""

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        w = linear.weight.detach().float()
        scale = w.abs().amax(1).clamp(min=1e-12) / 127.0
        self.register_buffer("weight_t", (w / scale[:, None]).round().clamp(-127, 127).to(torch.int8).t().contiguous())
        self.register_buffer("weight_scale", scale)
        self.register_buffer("bias", None if linear.bias is None else linear.bias.detach().float().clone())
        self.in_features, self.out_features = linear.in_features, linear.out_features

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        x2 = x.reshape(-1, shape[-1]).float()
        s = x2.abs().amax(1, keepdim=True).clamp(min=1e-12) / 127.0
        q = torch.round(x2 / s).clamp_(-127, 127).to(torch.int8)
        if q.shape[0] <= 16:  # _int_mm wants more than 16 rows: pad (rows are independent)
            q = torch.cat([q, q.new_zeros(17 - q.shape[0], q.shape[1])])
        y = torch._int_mm(q, self.weight_t)[: x2.shape[0]].float() * s * self.weight_scale
        if self.bias is not None:
            y = y + self.bias
        return y.reshape(*shape[:-1], self.out_features).to(x.dtype)


def quantize_rows(module: nn.Module) -> nn.Module:
    """`module` with every nn.Linear replaced (in place) by a RowInt8Linear; returns it."""
    for name, child in list(module.named_children()):
        if isinstance(child, nn.Linear):
            setattr(module, name, RowInt8Linear(child))
        else:
            quantize_rows(child)
    return module


def fuse_linears(linears: Sequence[nn.Module]) -> nn.Module | None:
    """One layer whose output is the outputs of `linears` (all nn.Linear, or all RowInt8Linear, of one input size)
    side by side, computed in one matrix product: the attention's query, key and value from one pass over their
    shared input (for RowInt8Linear that input is quantized once; the result is the same to the bit). None when
    the layers are of mixed or other kinds."""
    if not linears or len({m.in_features for m in linears}) != 1:
        return None
    if all(type(m) is RowInt8Linear for m in linears):
        out = RowInt8Linear.__new__(RowInt8Linear)
        nn.Module.__init__(out)
        out.register_buffer("weight_t", torch.cat([m.weight_t for m in linears], 1).contiguous())
        out.register_buffer("weight_scale", torch.cat([m.weight_scale for m in linears]))
        out.register_buffer("bias", torch.cat([m.bias if m.bias is not None else m.weight_scale.new_zeros(
            m.out_features) for m in linears]))
        out.in_features, out.out_features = linears[0].in_features, sum(m.out_features for m in linears)
        return out
    if all(type(m) is nn.Linear for m in linears):
        w = linears[0].weight
        fused = nn.Linear(linears[0].in_features, sum(m.out_features for m in linears), device=w.device, dtype=w.dtype)
        with torch.no_grad():
            fused.weight.copy_(torch.cat([m.weight for m in linears]))
            fused.bias.copy_(torch.cat([m.bias if m.bias is not None else w.new_zeros(m.out_features)
                                        for m in linears]))
        return fused.requires_grad_(False)
    return None
