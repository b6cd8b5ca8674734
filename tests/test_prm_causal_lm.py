"""Off-the-shelf causal-LM PRMs (pcr_ray.prm.causal_lm) on models built here from configurations of the published
architectures (random weights: the plumbing is what is tested): separator positions against the tokens, scores
against a direct forward pass, and the scorer in the search and the pipeline as prm=qwen_math_prm_7b."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from pcr_ray.prm.causal_lm import CausalLMPRM, natural_step, split_context

CTX = ("A 2 kg block slides from rest down a frictionless ramp from a height of 5 m. What is its speed? | "
       "givens: m=2 kg; h=5 m | steps: g = const(name=g) = 9.807 [m/s^2]")
STEPS = ["v2 = kin_final_speed(v0=v0, a=g, d=h) = 9.9 [m/s]", "v2 = mul(x=g, y=h) = 49.03 [m^2/s^2]"]


def _tokenizer(extra: str):
    from transformers import AutoTokenizer

    from pcr_ray.prm.model import minilm_path

    tok = AutoTokenizer.from_pretrained(str(minilm_path()))
    tok.add_special_tokens({"additional_special_tokens": [extra]})
    return tok


@pytest.fixture(scope="module")
def qwen_prm(tmp_path_factory) -> Path:
    """A Qwen2 token classifier (two classes) of a tiny size, saved with a tokenizer that holds `<extra_0>`."""
    from transformers import Qwen2Config, Qwen2ForTokenClassification

    tok = _tokenizer("<extra_0>")
    cfg = Qwen2Config(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=1, num_labels=2, pad_token_id=tok.pad_token_id)
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("qwen_prm")
    Qwen2ForTokenClassification(cfg).save_pretrained(path)
    tok.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def shepherd_prm(tmp_path_factory) -> Path:
    """A Mistral causal LM of a tiny size (Math-Shepherd's architecture) with a tokenizer that holds `ки`."""
    from transformers import MistralConfig, MistralForCausalLM

    tok = _tokenizer("ки")
    cfg = MistralConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                        num_attention_heads=2, num_key_value_heads=1, pad_token_id=tok.pad_token_id)
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("shepherd")
    MistralForCausalLM(cfg).save_pretrained(path)
    tok.save_pretrained(path)
    return path


def test_contexts_become_a_question_and_natural_steps():
    q, steps = split_context(CTX)
    assert q.startswith("A 2 kg block") and q.endswith("Givens: m=2 kg; h=5 m") and steps == [
        "g = const(name=g) = 9.807 [m/s^2]"]
    assert split_context("Just a problem.") == ("Just a problem.", [])
    assert natural_step(STEPS[0]) == "Compute v2 = kin_final_speed(v0=v0, a=g, d=h) = 9.9 m/s."


@pytest.mark.parametrize("which", ["qwen_prm", "math_shepherd"])
def test_scores_are_the_models_own_at_the_candidates_separator(which, qwen_prm, shepherd_prm):
    path = qwen_prm if which == "qwen_prm" else shepherd_prm
    prm = CausalLMPRM.from_pretrained(path, which, max_batch=2, cache_size=10)
    pairs = [(CTX, s) for s in STEPS] + [(CTX.split(" | steps:")[0], STEPS[0])]
    scores = prm.score(pairs)
    assert all(0.0 < s < 1.0 for s in scores) and len(set(scores)) == 3
    sep = "<extra_0>" if which == "qwen_prm" else "ки"
    tokens = prm.token_counts(pairs)  # what the model takes in for each pair (search.usage's PRM tokens)
    for (ctx, step), got, n_tokens in zip(pairs, scores, tokens, strict=True):
        text = prm.text(ctx, step)
        assert text.count(sep) == len(split_context(ctx)[1]) + 1  # one separator per step, the candidate's last
        ids = prm.tokenizer(text, return_tensors="pt")["input_ids"]
        pos = prm.separator_positions(ids)[0]
        assert n_tokens == ids.shape[1]
        assert int(ids[0, pos]) == prm.sep_id and int((ids[0] == prm.sep_id).sum()) == text.count(sep)
        with torch.inference_mode():  # the model itself, on this one text, at that position
            out = prm.model(input_ids=ids).logits[0, pos].float()
        if which == "qwen_prm":
            want = torch.softmax(out, -1)[1].item()
        else:
            want = torch.softmax(out[[prm.good_id, prm.bad_id]], -1)[0].item()
        assert got == pytest.approx(want, abs=1e-5)
    assert prm.cache.stats()["misses"] == 3 and prm.score(pairs[:1]) == scores[:1] and prm.cache.hits == 1
    assert prm.identity["family"] == "causal_lm" and prm.identity["convention"] == which
    assert math.isfinite(prm.logits(pairs)[0])


def test_the_prm_configs_build_the_scorer(qwen_prm):
    from pcr_ray.configs import to_plain
    from pcr_ray.evaluate import compose_config
    from pcr_ray.prm.build import build_scorer, checkpoint_path

    cfg = to_plain(compose_config(["prm=qwen_math_prm_7b", f"prm.checkpoint={qwen_prm}", "prm.device=cpu"]))["prm"]
    assert checkpoint_path(cfg) == str(qwen_prm)
    sc = build_scorer(cfg)
    assert isinstance(sc, CausalLMPRM) and sc.conv.separator == "<extra_0>" and sc.max_batch == 8
    for name, conv, model in (("qwen_math_prm_72b", "qwen_prm", "Qwen/Qwen2.5-Math-PRM-72B"),
                              ("math_shepherd", "math_shepherd", "peiyi9979/math-shepherd-mistral-7b-prm")):
        c = to_plain(compose_config([f"prm={name}"]))["prm"]  # ready for a GPU cluster with hub access
        assert (c["family"], c["convention"], c["checkpoint"], c["device"]) == ("causal_lm", conv, model, "cuda")
    with pytest.raises(ValueError, match="convention must be one of"):
        CausalLMPRM.from_pretrained(qwen_prm, "orm")


@pytest.mark.slow
@pytest.mark.ray
def test_nsprm_through_the_pipeline_with_a_causal_lm_prm(ray_session, qwen_prm, tmp_path):
    """prm=qwen_math_prm_7b in the evaluation: the PRM actor loads it and the search scores with it."""
    from pcr_ray.evaluate import compose_config, evaluate
    from tests.pipeline_util import read_metrics, read_rows

    cfg = compose_config(["experiment=smoke", "methods=[nsprm]", "prm=qwen_math_prm_7b", f"prm.checkpoint={qwen_prm}",
                          "prm.device=cpu", "dataset.limit=2", "search.max_steps=2", "search.max_backtracks=0"])
    out = evaluate(cfg, tmp_path / "run", progress=False)
    rows = read_rows(out)
    assert len(rows) == 2 and not [r["error"] for r in rows if r.get("error")]
    assert sum(r["prm_calls"] for r in rows) > 0
    prm = next(a for n, a in read_metrics(out)["actors"].items() if n.startswith("pcr-prm-"))
    assert prm["identity"]["family"] == "causal_lm" and prm["pairs"] > 0


def test_serve_scores_a_trace_with_a_causal_lm_prm(qwen_prm):
    """The scoring service's settings name it (family, convention, checkpoint = the model), the replica's builder
    makes it, and /v1/score returns its scores (over ASGI: the app is Ray-free)."""
    import json

    from fastapi.testclient import TestClient

    from pcr_ray.prm.build import build_scorer
    from pcr_ray.serve.app import LocalBackend, ServeSettings, create_app, resolve_checkpoint

    s = ServeSettings.from_mapping({"family": "causal_lm", "convention": "qwen_prm", "checkpoint": str(qwen_prm)})
    assert resolve_checkpoint(s) == str(qwen_prm)
    with pytest.raises(ValueError, match="served by name"):
        resolve_checkpoint(ServeSettings.from_mapping({"family": "causal_lm", "convention": "qwen_prm"}))
    # what PRMScorerDeployment builds from these settings
    scorer = build_scorer({"device": s.device, "family": s.family, "convention": s.convention, "max_batch": 8,
                           "cache_size": 0}, resolve_checkpoint(s), max_length=None)
    assert isinstance(scorer, CausalLMPRM)
    trace = json.loads((Path(__file__).resolve().parents[1] / "pcr_ray" / "examples" / "car_from_rest.json")
                       .read_text())
    with TestClient(create_app(LocalBackend(scorer), s, str(qwen_prm))) as c:
        body = c.post("/v1/score", json={"problem": "A car accelerates from rest. How far does it go?",
                                         "trace": trace}).json()
    scores = [st["score"] for st in body["steps"]]
    assert scores and all(0 < x < 1 for x in scores)
    assert body["aggregate"]["last"] == pytest.approx(scores[-1])


def test_the_first_error_benchmark_scores_with_a_causal_lm_prm(qwen_prm):
    """pcr_ray.bench.first_error --prm prm=qwen_math_prm_7b ...: its step scores come from that PRM."""
    from pcr_ray.bench.first_error import step_scores
    from pcr_ray.data.physics import generate_problems
    from pcr_ray.negatives.first_error import BenchConfig, build_bench

    items = build_bench([p for p in generate_problems(6, seed=3) if p.gold_trace], BenchConfig(seed=0))[:3]
    scores, _, n = step_scores(items, None, False, ["prm=qwen_math_prm_7b", f"prm.checkpoint={qwen_prm}",
                                                    "prm.device=cpu"])
    assert n == sum(len(s) for s in scores) > 0 and all(0 < x < 1 for s in scores for x in s)
