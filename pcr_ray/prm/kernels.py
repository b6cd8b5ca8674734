"""Which kernel scores a PRM fastest on this CPU, int8 or fp32: chosen by timing both on the loaded model.

int8 is only worth its small error where the CPU runs it faster, and CPUs differ by more than an order of
magnitude there: `torch._int_mm` (the per-token int8 of pcr_ray.prm.int8_rows) runs on VNNI/AMX instructions
where a CPU has them and on a slow fallback where it has AVX2 alone; ONNX Runtime's int8 has AVX2 kernels but
scores one pair per pass; and how much a model gains also depends on what lies between its int8 products. So
`prm.int8=true` means "int8 where it is faster here": the loader scores one typical request (a context and 16
candidates) through both scorers, in turn, and keeps the faster (int8 from MIN_SPEEDUP x fp32's rate), once per
machine and checkpoint (the choice is kept in the cache, keyed by the CPU and torch's version). The choice
and both rates go into the scorer's identity (metrics.json, Serve's /v1/info, `pcr-ray solve --verbose`). Either
kernel keeps a score a function of its pair alone.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pcr_ray.paths import cache_dir

INT8_ROWS, ONNX_INT8, FP32 = "int8_rows", "onnx_int8", "fp32"
# int8 is kept only when this much faster than fp32: below that its (small) error buys nothing
MIN_SPEEDUP = 1.1
# a warm-up call this many times slower than the other kernel's decides without more calls (int8 on AVX2 alone)
GIVE_UP = 8.0
_CHOSEN: dict[Hashable, KernelChoice] = {}

PROBE_CONTEXT = ("Problem: A 2 kg block slides from rest down a frictionless ramp from a height of 5 m. What is its "
                 "speed at the bottom? | givens: m = 2 kg; h = 5 m; v0 = 0 m/s | steps: g = const(name=g) = "
                 "9.80665 [m/s^2]; E = potential_energy(m=m, g=g, h=h) = 98.0665 [J]")


@dataclass(frozen=True)
class KernelChoice:
    """The kernel a scorer uses, the rates measured for each candidate kernel, their unit, and why."""

    kernel: str
    rates: dict[str, float] = field(default_factory=dict)
    unit: str = ""
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"kernel": self.kernel, "rates": {k: round(v, 1) for k, v in self.rates.items()}, "unit": self.unit,
                "reason": self.reason}


def probe_pairs(n: int = 16) -> list[tuple[str, str]]:
    """A typical PRM request: one context and n candidate steps of a few dozen tokens each."""
    return [(PROBE_CONTEXT, f"v{i} = kin_final_speed(v0=v0, a=g, d=h) = {9.9 + i / 10:.2f} [m/s]") for i in range(n)]


def rates(fns: dict[str, Callable[[], object]], work: float, *, rounds: int = 5, seconds: float = 2.0
          ) -> dict[str, float]:
    """`work` units per second of each fn, from its fastest call. One warm-up call each; then the fns are called
    in turn (so that a busy moment of the machine falls on all of them) for `rounds` rounds or `seconds`. A fn whose
    warm-up took GIVE_UP x the fastest warm-up is rated by it alone (it is not called again)."""
    warm: dict[str, float] = {}
    for name, fn in fns.items():
        t0 = time.perf_counter()
        fn()
        warm[name] = time.perf_counter() - t0
    best = dict(warm)
    slow = {n for n, t in warm.items() if t > GIVE_UP * min(warm.values())}
    t_end = time.perf_counter() + seconds
    for i in range(rounds):
        for name, fn in fns.items():
            if name in slow:
                continue
            t0 = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - t0)
        if i >= 1 and time.perf_counter() > t_end:
            break
    return {name: work / max(t, 1e-9) for name, t in best.items()}


def pick(int8_kernel: str, measured: dict[str, float], unit: str) -> KernelChoice:
    """int8_kernel when its rate is at least MIN_SPEEDUP x fp32's, else fp32; the reason states the ratio."""
    import torch  # heavy: torch

    ratio = measured[int8_kernel] / max(measured[FP32], 1e-12)
    kernel = int8_kernel if ratio >= MIN_SPEEDUP else FP32
    return KernelChoice(kernel, dict(measured), unit,
                        f"{int8_kernel} scores at {ratio:.2f}x fp32's rate on this CPU "
                        f"({torch.backends.cpu.get_cpu_capability()}); int8 is kept from {MIN_SPEEDUP}x")


def _machine_file(key: Hashable) -> Path:
    """Where a choice is kept for this machine: the cache, by a digest of the key, the CPU and torch's version."""
    import torch  # heavy: torch

    cpu = platform.processor()
    with contextlib.suppress(OSError):
        cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), cpu)
    blob = json.dumps([repr(key), cpu, os.cpu_count(), torch.__version__, torch.backends.cpu.get_cpu_capability(),
                       os.environ.get("ONEDNN_MAX_CPU_ISA", "")])
    return cache_dir() / "kernels" / f"{hashlib.sha256(blob.encode()).hexdigest()[:20]}.json"


def recall(key: Hashable) -> KernelChoice | None:
    """The choice already made for `key` in this process, or on this machine (kept in the cache), else None."""
    if key not in _CHOSEN:
        with contextlib.suppress(OSError, ValueError, TypeError):
            d = json.loads(_machine_file(key).read_text())
            _CHOSEN[key] = KernelChoice(d["kernel"], dict(d["rates"]), d["unit"], f"{d['reason']} (measured "
                                        f"{d['measured_at']} on this machine)")
    return _CHOSEN.get(key)


def choose(int8_kernel: str, int8_score: Callable[[list[tuple[str, str]]], object],
           fp32_score: Callable[[list[tuple[str, str]]], object], key: Hashable) -> KernelChoice:
    """int8_kernel or fp32, by scoring probe_pairs() through each; kept per process and per machine (the cache)
    under `key` (the checkpoint, engine, threads and batch size), so that it is measured once."""
    if recall(key) is None:
        pairs = probe_pairs()
        measured = rates({int8_kernel: lambda: int8_score(pairs), FP32: lambda: fp32_score(pairs)}, len(pairs))
        _CHOSEN[key] = choice = pick(int8_kernel, measured, "pairs/s")
        with contextlib.suppress(OSError):
            f = _machine_file(key)
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_text(json.dumps({**choice.to_dict(), "measured_at": time.strftime("%Y-%m-%d %H:%M")}))
    return _CHOSEN[key]


def forced(kernel: str, reason: str) -> KernelChoice:
    """A choice made by the caller, not measured (prm.int8=false, a GPU, bf16, or int8 pinned)."""
    return KernelChoice(kernel, {}, "", reason)
