"""The scoring kernel follows the machine: int8 where this CPU runs it faster than fp32, else fp32, measured."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from pcr_ray.prm import kernels
from pcr_ray.prm.int8_rows import RowInt8Linear


def test_pick_keeps_int8_only_when_clearly_faster():
    fast = kernels.pick(kernels.INT8_ROWS, {kernels.INT8_ROWS: 300.0, kernels.FP32: 100.0}, "rows/s")
    assert fast.kernel == kernels.INT8_ROWS and "3.00x" in fast.reason
    slow = kernels.pick(kernels.INT8_ROWS, {kernels.INT8_ROWS: 4.0, kernels.FP32: 100.0}, "rows/s")
    assert slow.kernel == kernels.FP32 and "0.04x" in slow.reason
    close = kernels.pick(kernels.ONNX_INT8, {kernels.ONNX_INT8: 105.0, kernels.FP32: 100.0}, "pairs/s")
    assert close.kernel == kernels.FP32  # within MIN_SPEEDUP: int8's error buys nothing
    assert slow.to_dict()["rates"] == {kernels.INT8_ROWS: 4.0, kernels.FP32: 100.0}


def test_the_choice_agrees_with_a_measurement_of_the_same_layer():
    """choose_row_int8 keeps whichever kernel an independent timing of the same layer finds faster (when the two
    differ by a clear margin: a near tie may go either way on a shared machine)."""
    import time

    choice = kernels.choose_row_int8(384, 1536)
    assert set(choice.rates) == {kernels.INT8_ROWS, kernels.FP32} and choice.unit == "rows/s"
    assert kernels.choose_row_int8(384, 1536) is choice  # measured once per process and shape
    lin = torch.nn.Linear(384, 1536)
    q, x = RowInt8Linear(lin), torch.randn(256, 384)

    def best(fn) -> float:
        fn()
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return min(times)

    with torch.inference_mode():
        ratio = best(lambda: lin(x)) / best(lambda: q(x))  # > 1: int8 faster
    if ratio > 2 * kernels.MIN_SPEEDUP:
        assert choice.kernel == kernels.INT8_ROWS, (ratio, choice)
    elif ratio < 1 / 2:
        assert choice.kernel == kernels.FP32, (ratio, choice)


def test_largest_linear_is_the_feed_forward_layer():
    m = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8), torch.nn.Linear(8, 4))
    assert kernels.largest_linear(m) == (8, 32)
    with pytest.raises(ValueError, match="no nn.Linear"):
        kernels.largest_linear(torch.nn.ReLU())


def test_a_slow_int8_kernel_makes_the_scorer_fall_back_to_fp32(tmp_path):
    """Where int8 is measured slow, int8=true scores in fp32 and says why; where it is fast, per-token int8.
    The measurement is replaced here by fixed rates; the scorer's own path is real."""
    from pcr_ray.prm.model import PRMMeta, build_model, save_checkpoint
    from pcr_ray.prm.scorer import PRMScorer
    from tests.prm_helpers import tiny_backbone

    tiny = tiny_backbone(tmp_path / "tiny")
    model, tok = build_model(str(tiny), seed=0, attention="shared_context", candidate_length=24)
    path = save_checkpoint(model, tok, tmp_path / "sc", PRMMeta(backbone=str(tiny), attention="shared_context",
                                                               candidate_length=24, max_length=96, dropout=0.0))
    shape = kernels.largest_linear(model.encoder)
    key = ("rows", *shape, 256, torch.get_num_threads())
    saved = kernels._MEASURED.pop(key, None)
    try:
        kernels._MEASURED[key] = kernels.pick(kernels.INT8_ROWS, {kernels.INT8_ROWS: 4.0, kernels.FP32: 100.0}, "r")
        slow = PRMScorer.from_checkpoint(path, int8=True)
        assert slow.identity["int8"] is False and slow.identity["kernel"]["kernel"] == "fp32"
        assert not any(isinstance(m, RowInt8Linear) for m in slow.model.modules()) and slow.pass_size == 64
        kernels._MEASURED[key] = kernels.pick(kernels.INT8_ROWS, {kernels.INT8_ROWS: 400.0, kernels.FP32: 100.0}, "r")
        fast = PRMScorer.from_checkpoint(path, int8=True)
        assert fast.identity["int8"] is True and fast.identity["kernel"]["rates"]["int8_rows"] == 400.0
        assert any(isinstance(m, RowInt8Linear) for m in fast.model.modules())
        plain = PRMScorer.from_checkpoint(path, int8=False)
        assert plain.identity["kernel"]["kernel"] == "fp32" and plain.identity["kernel"]["rates"] == {}
    finally:
        kernels._MEASURED.pop(key, None)
        if saved is not None:
            kernels._MEASURED[key] = saved


@pytest.mark.slow
def test_onednn_limited_to_avx2_measures_int8_slower_here():
    """A CPU without VNNI, simulated by limiting oneDNN to AVX2: the measured int8 rate falls against fp32's.
    (The ratio itself depends on the CPU; what must hold is that the measurement sees the limit.)"""
    code = ("from pcr_ray.prm.kernels import choose_row_int8 as c; r = c(384, 1536).rates; "
            "print(r['int8_rows'] / r['fp32'])")
    env = {k: v for k, v in os.environ.items() if k != "ONEDNN_MAX_CPU_ISA"}
    full = float(subprocess.check_output([sys.executable, "-c", code], env=env, text=True))
    avx2 = float(subprocess.check_output([sys.executable, "-c", code], env={**env, "ONEDNN_MAX_CPU_ISA": "AVX2"},
                                         text=True))
    if full < 1.2:
        pytest.skip(f"this CPU runs int8 at {full:.2f}x fp32 already: nothing to limit")
    assert avx2 < full / 1.3, (full, avx2)
