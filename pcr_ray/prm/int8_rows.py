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
