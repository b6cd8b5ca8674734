"""The first-error benchmark's builder (pcr_ray.negatives.first_error): labels, verifier behaviour, scoring."""

from __future__ import annotations

import json

import pytest

from pcr_ray.core.verifier import verify
from pcr_ray.data.physics import generate_problems
from pcr_ray.negatives.first_error import (
    ANSWER_STEP,
    CORRECT,
    BenchConfig,
    best_threshold,
    build_bench,
    combined_prediction,
    score_predictions,
    threshold_prediction,
    verifier_prediction,
)


@pytest.fixture(scope="module")
def physics():
    return generate_problems(n=120, seed=2027)


@pytest.fixture(scope="module")
def items(physics):
    return build_bench(physics)


def _steps(trace_json: str) -> list[dict]:
    return json.loads(trace_json)["steps"]


def test_half_correct_both_error_sources_and_every_problem_kept(items, physics):
    assert len(items) == len(physics)  # every generated gold trace verifies
    n_correct = sum(it.label == CORRECT for it in items)
    assert 0.35 * len(items) <= n_correct <= 0.65 * len(items)
    assert {it.error_source for it in items if it.label != CORRECT} == {"csp", "random"}
    assert {it.split for it in items} == {"validation", "test"}


def test_planted_index_is_the_first_step_that_leaves_the_gold_trace(items, physics):
    gold = {p.id: p.gold_trace for p in physics}
    for it in items:
        g = verify(gold[it.problem_id])
        mine = _steps(it.trace_json)
        if it.label == CORRECT:
            assert len(mine) == len(g.steps)
            continue
        for i in range(it.label):  # the prefix is the gold one, value for value
            assert mine[i]["op"] == g.steps[i].op and mine[i]["args"] == dict(g.steps[i].step.args)
            assert mine[i]["value"] == pytest.approx(g.steps[i].value, rel=1e-9)
        t = it.label
        same_call = mine[t]["op"] == g.steps[t].op and mine[t]["args"] == dict(g.steps[t].step.args)
        same_value = mine[t].get("value") is not None and mine[t]["value"] == pytest.approx(g.steps[t].value,
                                                                                             rel=1e-3)
        assert not (same_call and same_value), f"{it.id}: step {t} is the gold step"


def test_correct_traces_and_csp_errors_pass_the_verifier(items):
    for it in items:
        if it.label == CORRECT or it.error_source == "csp":
            assert it.verifier_ok and verify(it.trace_json).ok, it.id
            assert verifier_prediction(it.trace_json) == CORRECT


def test_planted_errors_change_the_answer_when_the_trace_verifies(items, physics):
    gold = {p.id: verify(p.gold_trace).answer[0].base for p in physics}
    for it in items:
        if it.label != CORRECT and it.verifier_ok:
            ans = verify(it.trace_json).answer[0].base
            assert ans != pytest.approx(gold[it.problem_id], rel=1e-3), it.id


def test_the_verifier_never_flags_a_step_before_the_planted_one(items):
    for it in items:
        pred = verifier_prediction(it.trace_json)
        assert pred in (CORRECT, it.label, ANSWER_STEP), (it.id, pred, it.label)
    caught = [verifier_prediction(it.trace_json) == it.label for it in items if it.error_source == "random"]
    assert sum(caught) > len(caught) / 2, "most random perturbations break a unit or a value the verifier checks"


def test_output_does_not_depend_on_input_order(physics):
    a = {it.id: it for it in build_bench(physics[:40])}
    b = {it.id: it for it in build_bench(list(reversed(physics[:40])))}
    assert a == b
    other = {it.id.split("#")[0]: it.label for it in build_bench(physics[:40], BenchConfig(seed=1))}
    assert other != {k.split("#")[0]: v.label for k, v in a.items()}, "the seed changes what is planted"


def test_gsm8k_gold_traces_make_items(data_dir):
    from pcr_ray.data.readers import load_dataset

    probs = [p for p in load_dataset("gsm8k_test", limit=80) if p.gold_trace][:30]
    items = build_bench(probs)
    assert len(items) == len(probs)
    assert all(it.source == "gsm8k" for it in items)
    assert any(it.label != CORRECT for it in items) and any(it.label == CORRECT for it in items)


def test_score_predictions_is_processbench_f1():
    labels = [CORRECT, CORRECT, 0, 2, 1]
    preds = [CORRECT, 1, 0, 1, 1]
    s = score_predictions(labels, preds)
    assert (s.n_error, s.n_correct, s.hits_error, s.hits_correct) == (3, 2, 2, 1)
    assert s.f1 == pytest.approx(2 * (2 / 3) * 0.5 / (2 / 3 + 0.5))
    with pytest.raises(ValueError):
        score_predictions([CORRECT], [])


def test_threshold_and_combined_predictions():
    assert threshold_prediction([0.9, 0.2, 0.1], 0.5) == 1
    assert threshold_prediction([0.9, 0.8], 0.5) == CORRECT
    assert combined_prediction(2, [0.9, 0.1, 0.9], 0.5) == 1
    assert combined_prediction(0, [0.9, 0.1], 0.5) == 0
    assert combined_prediction(CORRECT, [0.9, 0.8], 0.5) == CORRECT
    assert combined_prediction(ANSWER_STEP, [0.9, 0.8], 0.5) == ANSWER_STEP


def test_best_threshold_separates_a_separable_validation_set():
    labels = [CORRECT, 1, 0, CORRECT]
    scores = [[0.9, 0.8], [0.9, 0.3], [0.2, 0.7], [0.6, 0.7]]
    th, sc = best_threshold(labels, scores)
    assert 0.3 < th <= 0.6 and sc.f1 == 1.0
    th2, sc2 = best_threshold(labels, scores, verifier=[CORRECT, CORRECT, 0, CORRECT])
    assert sc2.f1 == 1.0
