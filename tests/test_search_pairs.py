"""Search-matched pairs (alternative_step, answer_timing, unused_constant): verifier-valid, really different,
seeded; and their rows."""

from __future__ import annotations

import json

import pytest

from pcr_ray.core.render import render_answer, step_from_dict
from pcr_ray.core.trace import Answer
from pcr_ray.core.units import unit_info
from pcr_ray.core.verifier import check_answer, check_step
from pcr_ray.data.physics import generate_problems
from pcr_ray.negatives.csp import prepare_gold, step_key
from pcr_ray.negatives.pairs import KIND_GROUPS, PairConfig, pair_records
from pcr_ray.negatives.search_pairs import ALTERNATIVE_STEP, ANSWER_TIMING, UNUSED_CONSTANT, search_negatives


@pytest.fixture(scope="module")
def physics() -> list:
    return [p for p in generate_problems(n=80, seed=23) if p.gold_trace]


def test_alternatives_pass_the_verifier_and_differ_from_the_gold_step(physics) -> None:
    n_alt = 0
    for p in physics:
        gold = prepare_gold(p.gold_trace)
        for neg in search_negatives(gold, p.text, key=p.id, kinds=(ALTERNATIVE_STEP,), per_kind=3):
            n_alt += 1
            pos, alt = step_from_dict(json.loads(neg.pos_json)), step_from_dict(json.loads(neg.neg_json))
            assert alt.out.name == pos.out.name  # names carry no signal
            chk = check_step(gold.states[neg.t], alt, neg.t)
            assert chk.ok, (p.id, neg)
            res = chk.result
            gold_res = gold.results[neg.t]
            assert step_key(alt) != step_key(pos)
            assert res.dims != gold_res.dims or abs(res.base - gold_res.base) > 1e-3 * max(abs(res.base),
                                                                                           abs(gold_res.base))
    assert n_alt > 2 * len(physics)


def test_answer_timing_pairs_stop_early_vs_go_on(physics) -> None:
    early = done = 0
    for p in physics:
        gold = prepare_gold(p.gold_trace)
        n = len(gold.trace.steps)
        target = unit_info(gold.trace.answer[0].unit).dims
        for neg in search_negatives(gold, p.text, key=p.id, kinds=(ANSWER_TIMING,)):
            if neg.t < n:  # the positive goes on with the gold step; the negative answers with an earlier output
                early += 1
                assert "answer" not in json.loads(neg.pos_json) and neg.neg_text.startswith("answer: ")
                name = json.loads(neg.neg_json)["answer"][0]["name"]
                earlier = {r.name: r for r in gold.results[: neg.t]}
                assert name in earlier and earlier[name].dims == target
            else:  # after the last step: the gold answer beats another valid step
                done += 1
                assert json.loads(neg.pos_json)["answer"] == [a.to_dict() for a in gold.trace.answer]
                assert "op" in json.loads(neg.neg_json) and not neg.neg_text.startswith("answer")
    assert early > 0 and done > len(physics)


def test_unused_constant_pairs_load_a_constant_the_gold_trace_never_uses(physics) -> None:
    n_neg = 0
    for p in physics:
        gold = prepare_gold(p.gold_trace)
        used = {s.args.get("name") for s in gold.trace.steps if s.op == "const"}
        for neg in search_negatives(gold, p.text, key=p.id, kinds=(UNUSED_CONSTANT,)):
            n_neg += 1
            pos, load = step_from_dict(json.loads(neg.pos_json)), step_from_dict(json.loads(neg.neg_json))
            assert load.op == "const" and load.args["name"] not in used, (p.id, neg)
            assert pos == gold.trace.steps[neg.t] and load.out.name == pos.out.name
            assert check_step(gold.states[neg.t], load, neg.t).ok
            assert "const(name=" in neg.neg_text
    assert n_neg > len(physics)


def test_seeded_and_in_the_pair_rows(physics) -> None:
    p = next(p for p in physics if (p.gold_steps or 0) >= 3)
    cfg = PairConfig(kinds=KIND_GROUPS["csp"], seed=4)
    a, status = pair_records(p.to_dict(), cfg)
    b, _ = pair_records(p.to_dict(), cfg)
    assert status == "ok" and a == b
    kinds = {r["kind"] for r in a}
    assert {ALTERNATIVE_STEP, ANSWER_TIMING, UNUSED_CONSTANT} <= kinds
    assert not kinds & {"random_op", "random_arg", "random_noise"}
    assert all(r["verified"] and r["pos_step"] != r["neg_step"] for r in a)
    c, _ = pair_records(p.to_dict(), PairConfig(kinds=KIND_GROUPS["csp"], seed=5))
    assert c != a
    with pytest.raises(ValueError, match="unknown pair kind"):
        PairConfig(kinds=("principle_swapp",))


def test_render_answer_matches_the_search_rendering() -> None:
    assert render_answer((Answer("d", "m"),), [25.0]) == "answer: d = 25 [m]"
    assert render_answer([{"name": "r", "unit": "dimensionless"}]) == "answer: r"
    gold = prepare_gold({"givens": [{"name": "v", "value": 36, "unit": "km/h"}],
                         "steps": [{"op": "mul", "args": {"x": "v", "y": 2}, "out": {"name": "w", "unit": "km/h"}}],
                         "answer": [{"name": "w", "unit": "m/s"}]})
    state = check_step(gold.states[0], gold.trace.steps[0], 0).state
    values, _ = check_answer(state, gold.trace.answer)
    assert render_answer(gold.trace.answer, [v.value for v in values]) == "answer: w = 20 [m/s]"


def test_gsm8k_alternatives_are_made_as_its_search_makes_steps_in_their_operands_units() -> None:
    trace = {"givens": [{"name": "m", "value": 5000, "unit": "lb"}, {"name": "m_2", "value": 15, "unit": "lb"},
                        {"name": "m_3", "value": 3755, "unit": "lb"}],
             "steps": [{"op": "sub", "args": {"x": "m", "y": "m_3"}, "out": {"name": "m1", "unit": "lb"}},
                       {"op": "div", "args": {"x": "m1", "y": "m_2"}, "out": {"name": "n", "unit": "dimensionless"}}],
             "answer": [{"name": "n", "unit": "dimensionless"}]}
    text = ("A bridge holds 5000 pounds. The empty truck weighs 3755 pounds and each box 15 pounds. "
            "How many boxes can the truck carry?")
    units = {}
    for source in ("gsm8k_train", "physics"):  # GSM8K's steps in their operands' units; elsewhere SI
        problem = {"id": "truck", "source": source, "text": text, "gold_trace": trace}
        rows, status = pair_records(problem, PairConfig(kinds=(ALTERNATIVE_STEP,), search_per_kind=8))
        assert status == "ok" and rows
        units[source] = {step_from_dict(json.loads(r["neg_json"])).out.unit for r in rows if r["t"] == 0}
    assert "lb" in units["gsm8k_train"] and "kg" not in units["gsm8k_train"], units
    assert "kg" in units["physics"], units
