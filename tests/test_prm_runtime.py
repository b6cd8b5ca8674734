"""ONNX Runtime scoring (export, int8, cache folder), the score cache and the runtime settings (real CSP PRM)."""

from __future__ import annotations

import random
import shutil
import statistics

import pytest
import torch
from omegaconf import OmegaConf

from pcr_ray.configs import ConfigError, PRMConfig, check, compose
from pcr_ray.pipeline.actors import prm_cache_stats
from pcr_ray.prm.build import build_scorer
from pcr_ray.prm.checkpoints import ensure_checkpoint
from pcr_ray.prm.onnx_runtime import FILES, checkpoint_key, exported
from pcr_ray.prm.runtimes import check_runtime
from pcr_ray.prm.score_cache import ScoreCache
from pcr_ray.prm.scorer import PRMScorer
from tests.prm_helpers import small_pairs


@pytest.fixture(scope="module")
def checkpoint():
    """A small pair cross-encoder (the runtime choice is a pair checkpoint's), trained once per machine into the
    per-user cache: what is tested (export, int8 agreement, caching) is a property of the architecture, not of
    the budget."""
    return ensure_checkpoint("csp", attention="pair", budget_pairs=240, val_pairs=40,
                             sources=[{"name": "physics", "kwargs": {"n": 80, "seed": 7919}}])


@pytest.fixture(scope="module")
def pairs():
    """Real renderings: (context, correct step) and (context, CSP negative) of generated traces, mixed."""
    rows = small_pairs(20)
    out = [(r["context"], r["pos_step"]) for r in rows] + [(r["context"], r["neg_step"]) for r in rows]
    random.Random(0).shuffle(out)
    return out[:48]


@pytest.fixture(scope="module")
def fp32(checkpoint):
    return PRMScorer.from_checkpoint(checkpoint, max_length=160)


@pytest.fixture(scope="module")
def onnx_int8(checkpoint):
    return PRMScorer.from_checkpoint(checkpoint, max_length=160, runtime="onnx", int8=True, measure_kernel=False)


@pytest.mark.slow
def test_onnx_int8_agrees_with_torch_fp32(fp32, onnx_int8, pairs):
    ref, got = fp32.score(pairs), onnx_int8.score(pairs)
    diffs = [abs(a - b) for a, b in zip(ref, got, strict=True)]
    assert statistics.fmean(diffs) < 0.01, statistics.fmean(diffs)
    assert max(diffs) > 0  # int8 arithmetic ran
    assert onnx_int8.identity["runtime"] == "onnx" and onnx_int8.identity["int8"] is True
    assert onnx_int8.pass_size == 1 and onnx_int8.model.threads == torch.get_num_threads()


@pytest.mark.slow
def test_onnx_fp32_export_matches_torch(checkpoint, fp32, pairs):
    # the exported graph before quantization computes what the torch model computes (batched, padded)
    ort32 = PRMScorer.from_checkpoint(checkpoint, max_length=160, max_batch=16, runtime="onnx", int8=False)
    assert ort32.pass_size == 16 and ort32.identity["runtime"] == "onnx" and ort32.identity["int8"] is False
    assert ort32.logits(pairs) == pytest.approx(fp32.logits(pairs), abs=1e-4)


@pytest.mark.slow
def test_onnx_int8_score_is_a_function_of_the_pair_alone(onnx_int8, pairs):
    alone = [onnx_int8.score([p])[0] for p in pairs[:12]]
    assert onnx_int8.score(pairs[:12]) == alone
    assert onnx_int8.score(pairs[:12][::-1]) == alone[::-1]
    assert onnx_int8.score([pairs[3], *pairs[20:40]])[0] == alone[3]


@pytest.mark.slow
def test_export_is_cached_by_checkpoint_content(checkpoint, tmp_path):
    folder = exported(checkpoint)
    assert set(FILES.values()) <= {p.name for p in folder.iterdir()}
    stamp = {f: (folder / f).stat().st_mtime_ns for f in FILES.values()}
    assert exported(checkpoint) == folder  # second call: no new export
    assert {f: (folder / f).stat().st_mtime_ns for f in FILES.values()} == stamp
    copy = shutil.copytree(checkpoint, tmp_path / "copy")
    assert checkpoint_key(copy) == checkpoint_key(checkpoint)  # same files, same key, wherever they lie
    head = torch.load(copy / "head.pt", weights_only=True)
    head["bias"] = head["bias"] + 1.0
    torch.save(head, copy / "head.pt")
    assert checkpoint_key(copy) != checkpoint_key(checkpoint)  # other weights: another export


@pytest.mark.slow
def test_score_cache_returns_identical_scores_and_counts(checkpoint, fp32, pairs):
    sc = PRMScorer.from_checkpoint(checkpoint, max_length=160, cache_size=100)
    first = sc.score(pairs[:10])
    assert sc.cache.stats()["misses"] == 10 and sc.cache.hits == 0
    again = sc.score([*pairs[5:10], *pairs[10:13], pairs[10]])
    assert again[:5] == first[5:10]  # identical, not recomputed
    assert sc.cache.hits == 5 and sc.cache.misses == 10 + 4  # pairs[10] twice in one call: both misses, scored once
    assert again[5:8] == pytest.approx(fp32.score(pairs[10:13]), abs=1e-5) and again[8] == again[5]
    st = sc.cache.stats()
    assert st["entries"] == 13 and st["hit_rate"] == round(5 / 19, 4)
    small = ScoreCache(2)
    small.store([b"a", b"b", b"c"], [1.0, 2.0, 3.0])
    assert len(small) == 2 and small._d.get(b"a") is None  # least recently used dropped
    off = PRMScorer.from_checkpoint(checkpoint, max_length=160, cache_size=0)
    off.score(pairs[:3])
    off.score(pairs[:3])
    assert off.cache.stats() == {"hits": 0, "misses": 0, "hit_rate": 0.0, "size": 0, "entries": 0}


def test_prm_cache_stats_sum_the_prm_actors():
    info = {"pcr-prm-a-0": {"cache": {"hits": 3, "misses": 1}}, "pcr-prm-b-0": {"cache": {"hits": 1, "misses": 3}},
            "pcr-gen-c-0": {"calls": 4}, "pcr-prm-d-0": {"error": "gone"}}
    assert prm_cache_stats(info) == {"hits": 4, "misses": 4, "hit_rate": 0.5}
    assert prm_cache_stats({}) == {"hits": 0, "misses": 0, "hit_rate": 0.0}


@pytest.mark.slow
def test_runtime_settings_are_checked(checkpoint):
    cfg = compose("evaluate")
    assert cfg.prm.runtime == "onnx" and cfg.prm.int8 is True and cfg.prm.cache_size == 50000
    assert compose("evaluate", ["prm=deberta_v3_base"]).prm.runtime == "torch"
    with pytest.raises(ValueError, match="prm.runtime must be one of"):
        check_runtime("tensorrt")
    with pytest.raises(ValueError, match="set prm.runtime=onnx"):
        check_runtime("torch", int8=True)
    with pytest.raises(ValueError, match="set prm.runtime=torch"):
        check_runtime("onnx", device="cuda", int8=True)
    check_runtime("onnx", int8=False)  # ONNX Runtime fp32
    check_runtime("onnx", int8=True, attention="shared_context")  # a shared_context PRM scores on torch whatever
    with pytest.raises(ValueError, match="not both"):
        check_runtime("onnx", int8=True, bf16=True)
    with pytest.raises(ValueError, match="bf16 scoring runs on torch"):
        check_runtime("onnx", bf16=True)
    with pytest.raises(ValueError, match="cache_size must be >= 0"):
        build_scorer({"runtime": "torch", "int8": False, "cache_size": -1}, checkpoint)
    with pytest.raises(ValueError, match="set prm.runtime=onnx"):
        build_scorer({"runtime": "torch", "int8": True}, checkpoint)
    body = OmegaConf.to_container(compose("evaluate"), resolve=True)
    del body["prm"]["runtime"]
    assert check("evaluate", body).prm.runtime == PRMConfig.runtime  # a key left out: the schema's default
    body["prm"]["runtime"] = ["onnx"]
    with pytest.raises(ConfigError, match="runtime"):
        check("evaluate", body)
    sc = build_scorer(compose("evaluate").prm, checkpoint)
    assert sc.identity["runtime"] == "onnx" and sc.cache.size == 50000


@pytest.mark.slow
def test_onnx_int8_is_kept_only_where_it_is_measured_faster(checkpoint):
    """A pair PRM on ONNX Runtime: int8 (one pair per pass) against fp32 (batched), timed on the exported graphs;
    the scorer returned runs the faster, and its identity says which, with both rates."""
    from pcr_ray.prm import kernels

    kernels._CHOSEN.clear()  # measured here, or recalled from this machine's earlier measurement: the same record
    sc = PRMScorer.from_checkpoint(checkpoint, max_length=160, runtime="onnx", int8=True)
    k = sc.identity["kernel"]
    assert set(k["rates"]) == {"onnx_int8", "fp32"}
    int8 = k["rates"]["onnx_int8"] >= kernels.MIN_SPEEDUP * k["rates"]["fp32"]
    assert (k["kernel"] == "onnx_int8") == int8 == sc.identity["int8"] == (sc.pass_size == 1)
    assert sc.model.file.name == FILES["int8" if int8 else "fp32"]
