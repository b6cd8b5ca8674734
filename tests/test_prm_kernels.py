"""The scoring kernel follows the machine: int8 where this CPU runs it faster than fp32, else fp32, measured."""

from __future__ import annotations

import pytest

from pcr_ray.prm import kernels
from pcr_ray.prm.int8_rows import RowInt8Linear


def test_pick_keeps_int8_only_when_clearly_faster():
    fast = kernels.pick(kernels.INT8_ROWS, {kernels.INT8_ROWS: 300.0, kernels.FP32: 100.0}, "pairs/s")
    assert fast.kernel == kernels.INT8_ROWS and "3.00x" in fast.reason
    slow = kernels.pick(kernels.INT8_ROWS, {kernels.INT8_ROWS: 4.0, kernels.FP32: 100.0}, "pairs/s")
    assert slow.kernel == kernels.FP32 and "0.04x" in slow.reason
    close = kernels.pick(kernels.ONNX_INT8, {kernels.ONNX_INT8: 105.0, kernels.FP32: 100.0}, "pairs/s")
    assert close.kernel == kernels.FP32  # within MIN_SPEEDUP: int8's error buys nothing
    assert slow.to_dict()["rates"] == {kernels.INT8_ROWS: 4.0, kernels.FP32: 100.0}


class FakeClock:
    """time.perf_counter for kernels.rates: each kernel's call advances it by that kernel's cost, nothing else does."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now

    def kernel(self, seconds: float, counter: dict[str, int], name: str):
        def run() -> None:
            counter[name] += 1
            self.now += seconds
        return run


def test_rates_alternate_and_give_up_on_a_far_slower_kernel(monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(kernels, "time", clock)
    calls = {"fast": 0, "slow": 0}
    fns = {"fast": clock.kernel(0.001, calls, "fast"), "slow": clock.kernel(0.05, calls, "slow")}
    r = kernels.rates(fns, 10, rounds=4)
    assert calls == {"fast": 5, "slow": 1}  # slow: its warm-up alone (50x the other's, past GIVE_UP)
    assert r == {"fast": pytest.approx(10 / 0.001), "slow": pytest.approx(10 / 0.05)}
    even = {"a": 0, "b": 0}
    r = kernels.rates({"a": clock.kernel(0.005, even, "a"), "b": clock.kernel(0.006, even, "b")}, 1, rounds=3)
    assert even == {"a": 4, "b": 4}  # within GIVE_UP: both called each round, in turn
    assert r == {"a": pytest.approx(200.0), "b": pytest.approx(1 / 0.006)}
    long = {"a": 0, "b": 0}  # past `seconds` after the second round: no more rounds
    kernels.rates({"a": clock.kernel(1.0, long, "a"), "b": clock.kernel(1.0, long, "b")}, 1, rounds=5, seconds=2.5)
    assert long == {"a": 3, "b": 3}


@pytest.fixture(scope="module")
def shared_checkpoint(tmp_path_factory):
    from pcr_ray.prm.model import PRMMeta, build_model, save_checkpoint
    from tests.prm_helpers import tiny_backbone

    tmp = tmp_path_factory.mktemp("kernels")
    tiny = tiny_backbone(tmp / "tiny")
    model, tok = build_model(str(tiny), seed=0, attention="shared_context", candidate_length=24)
    return save_checkpoint(model, tok, tmp / "sc", PRMMeta(backbone=str(tiny), attention="shared_context",
                                                           candidate_length=24, max_length=96, dropout=0.0))


def test_the_scorer_keeps_the_kernel_its_measurement_finds_faster(shared_checkpoint, monkeypatch, tmp_path):
    """int8=true scores in per-token int8 where that is measured faster, in fp32 where not; the real scorers are
    built and timed, and the measurement's verdict (forced here both ways) decides which one is returned."""
    from pcr_ray.prm.scorer import PRMScorer

    measured = []

    def verdict(ratio):
        def fake_rates(fns, work, **kw):
            measured.append(sorted(fns))
            for fn in fns.values():
                fn()  # the real scorers run on the probe
            return {kernels.INT8_ROWS: 100.0 * ratio, kernels.FP32: 100.0}
        return fake_rates

    kernels._CHOSEN.clear()
    monkeypatch.setenv("PCR_RAY_CACHE", str(tmp_path / "slow"))  # where a machine keeps its choice
    monkeypatch.setattr(kernels, "rates", verdict(0.04))  # int8 slow: the AVX2-only case
    slow = PRMScorer.from_checkpoint(shared_checkpoint, int8=True)
    assert slow.identity["int8"] is False and slow.identity["kernel"]["kernel"] == "fp32"
    assert "0.04x" in slow.identity["kernel"]["reason"] and slow.pass_size == 64
    assert not any(isinstance(m, RowInt8Linear) for m in slow.model.modules())
    assert PRMScorer.from_checkpoint(shared_checkpoint, int8=True).identity["kernel"] == slow.identity["kernel"]
    assert len(measured) == 1  # once per process and checkpoint
    # kept for this machine: a new process (the memo cleared) reads it and measures nothing, builds one scorer
    kernels._CHOSEN.clear()
    again = PRMScorer.from_checkpoint(shared_checkpoint, int8=True)
    assert len(measured) == 1 and again.identity["int8"] is False and "on this machine" in again.identity[
        "kernel"]["reason"]
    kernels._CHOSEN.clear()
    monkeypatch.setenv("PCR_RAY_CACHE", str(tmp_path / "fast"))
    monkeypatch.setattr(kernels, "rates", verdict(4.0))
    fast = PRMScorer.from_checkpoint(shared_checkpoint, int8=True)
    assert fast.identity["int8"] is True and fast.identity["kernel"]["rates"]["int8_rows"] == 400.0
    assert any(isinstance(m, RowInt8Linear) for m in fast.model.modules())
    assert measured == [["fp32", "int8_rows"]] * 2
    kernels._CHOSEN.clear()
    kept = PRMScorer.from_checkpoint(shared_checkpoint, int8=True)  # the kept choice: int8, built alone
    assert kept.identity["int8"] is True and any(isinstance(m, RowInt8Linear) for m in kept.model.modules())
    kernels._CHOSEN.clear()
    plain = PRMScorer.from_checkpoint(shared_checkpoint, int8=False)
    assert plain.identity["kernel"]["kernel"] == "fp32" and plain.identity["kernel"]["rates"] == {}
    pinned = PRMScorer.from_checkpoint(shared_checkpoint, int8=True, measure_kernel=False)
    assert pinned.identity["int8"] is True and len(measured) == 2  # pinned: nothing measured
    # the chosen scorer scores as the one built directly for its kernel
    pairs = kernels.probe_pairs(4)
    assert fast.logits(pairs) == pinned.logits(pairs) and slow.logits(pairs) == plain.logits(pairs)


def test_a_real_measurement_on_the_loaded_model(shared_checkpoint, monkeypatch, tmp_path):
    """No stand-in: both kernels are timed on the checkpoint and the choice agrees with the rates recorded."""
    from pcr_ray.prm.scorer import PRMScorer

    kernels._CHOSEN.clear()
    monkeypatch.setenv("PCR_RAY_CACHE", str(tmp_path))
    sc = PRMScorer.from_checkpoint(shared_checkpoint, int8=True)
    k = sc.identity["kernel"]
    assert set(k["rates"]) == {"int8_rows", "fp32"} and k["unit"] == "pairs/s" and all(v > 0 for v in
                                                                                       k["rates"].values())
    faster = k["rates"]["int8_rows"] >= kernels.MIN_SPEEDUP * k["rates"]["fp32"]
    assert (k["kernel"] == "int8_rows") == faster == sc.identity["int8"]
