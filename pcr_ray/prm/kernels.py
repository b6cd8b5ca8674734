"""Which kernel scores a PRM fastest on this CPU: int8 or fp32, chosen by a short measurement at load.

int8 scoring is only worth its small error where the CPU runs int8 products fast. `torch._int_mm` (the per-token
int8 of a shared-context PRM, pcr_ray.prm.int8_rows) is several times faster than fp32 on a CPU with AVX-512 VNNI
or AMX, and tens of times slower on one with AVX2 alone; ONNX Runtime's int8 (a pair PRM's) has AVX2 kernels but
scores one pair per pass. So `prm.int8=true` means "int8 where it is faster here": the loader times both kernels
on the model's own shapes (a fraction of a second) and keeps the faster; the choice and both rates go into the
scorer's identity (metrics.json, `pcr-ray solve --verbose`). Either kernel keeps a score a function of its pair.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

INT8_ROWS, ONNX_INT8, FP32 = "int8_rows", "onnx_int8", "fp32"
# int8 is kept only when this much faster than fp32: below that its (small) error buys nothing
MIN_SPEEDUP = 1.1
_MEASURED: dict[tuple[Any, ...], KernelChoice] = {}


@dataclass(frozen=True)
class KernelChoice:
    """The kernel a scorer uses, the rates measured for each candidate (units of work per second) and why."""

    kernel: str
    rates: dict[str, float] = field(default_factory=dict)
    unit: str = ""
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"kernel": self.kernel, "rates": {k: round(v, 2) for k, v in self.rates.items()}, "unit": self.unit,
                "reason": self.reason}


def rates(fns: dict[str, Callable[[], object]], work: float, *, rounds: int = 10, seconds: float = 0.5
          ) -> dict[str, float]:
    """`work` units per second of each fn, from its fastest call: one warm-up each, then the fns called in turn
    (so that a busy moment of the machine falls on both) for `rounds` rounds or until `seconds` pass."""
    best = {name: float("inf") for name in fns}
    for fn in fns.values():
        fn()
    t_end = time.perf_counter() + seconds
    for i in range(rounds):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - t0)
        if i >= 1 and time.perf_counter() > t_end:
            break
    return {name: work / max(t, 1e-9) for name, t in best.items()}


def pick(int8_kernel: str, measured: dict[str, float], unit: str) -> KernelChoice:
    """int8_kernel when its rate is at least MIN_SPEEDUP x fp32's, else fp32; the reason states the ratio."""
    ratio = measured[int8_kernel] / max(measured[FP32], 1e-12)
    kernel = int8_kernel if ratio >= MIN_SPEEDUP else FP32
    return KernelChoice(kernel, dict(measured), unit,
                        f"{int8_kernel} runs {ratio:.2f}x fp32's rate on this CPU "
                        f"({torch.backends.cpu.get_cpu_capability()}); int8 is kept from {MIN_SPEEDUP}x")


def choose_row_int8(in_features: int, out_features: int, *, rows: int = 256) -> KernelChoice:
    """Per-token int8 (RowInt8Linear, torch._int_mm) against fp32 on one linear layer of this shape, in rows/s.

    Measured once per process and shape (a fraction of a second; a second or so where int8 is slow).
    """
    from pcr_ray.prm.int8_rows import RowInt8Linear

    key = ("rows", in_features, out_features, rows, torch.get_num_threads())
    if key not in _MEASURED:
        gen = torch.Generator().manual_seed(0)
        linear = torch.nn.Linear(in_features, out_features)
        with torch.no_grad():
            linear.weight.copy_(torch.randn(out_features, in_features, generator=gen) * 0.05)
        x = torch.randn(rows, in_features, generator=gen)
        q = RowInt8Linear(linear)
        with torch.inference_mode():
            measured = rates({INT8_ROWS: lambda: q(x), FP32: lambda: linear(x)}, rows)
        _MEASURED[key] = pick(INT8_ROWS, measured, "rows/s")
    return _MEASURED[key]


def largest_linear(module: torch.nn.Module) -> tuple[int, int]:
    """(in_features, out_features) of the module's largest nn.Linear (the feed-forward layer of a BERT block)."""
    shapes = [(m.in_features, m.out_features) for m in module.modules() if isinstance(m, torch.nn.Linear)]
    if not shapes:
        raise ValueError("the model has no nn.Linear layer to measure an int8 kernel on")
    return max(shapes, key=lambda s: s[0] * s[1])


def choose_onnx_int8(int8_logits: Callable[[Any], object], fp32_logits: Callable[[Any], object],
                     encode: Callable[[int], Any], *, pass_size: int, key: Any) -> KernelChoice:
    """ONNX Runtime int8 (one pair per pass) against fp32 (pass_size pairs per pass), in pairs/s, once per `key`."""
    if key not in _MEASURED:
        one, many = encode(1), encode(pass_size)
        int8_rate = rates({ONNX_INT8: lambda: int8_logits(one)}, 1)
        _MEASURED[key] = pick(ONNX_INT8, {**int8_rate, **rates({FP32: lambda: fp32_logits(many)}, pass_size)},
                              "pairs/s")
    return _MEASURED[key]


def forced(kernel: str, reason: str) -> KernelChoice:
    """A choice made by the caller, not measured (prm.int8=false, a GPU, bf16, or a test pinning a kernel)."""
    return KernelChoice(kernel, {}, "", reason)
