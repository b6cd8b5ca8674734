"""Counted kinds in the verifier: a count of sacks is not a count of oranges (pcr_ray.core.counts)."""

from __future__ import annotations

import pytest

from pcr_ray.core.trace import Answer, Given
from pcr_ray.core.units import count_kinds, generic_count_unit
from pcr_ray.core.verifier import VerifierState, check_answer, verify, verify_step

GIVENS = [Given("sacks", 8, "sack"), Given("per_sack", 35, "orange/sack"), Given("oranges", 35, "oranges"),
          Given("boys", 5, "boy"), Given("girls", 3, "girl"), Given("kids", 8, "child"), Given("things", 4, "item"),
          Given("price", 3, "USD/orange"), Given("days", 4, "day")]
STATE, _ = VerifierState.from_givens(GIVENS)


def check(op: str, args: dict, unit: str):
    c = verify_step(STATE, {"op": op, "args": args, "out": {"name": "z", "unit": unit}})
    return (c.result.value if c.ok else c.diagnostic.code), (c.diagnostic.message if c.diagnostic else "")


@pytest.mark.parametrize("unit,kinds", [
    ("orange/sack", (("orange", 1), ("sack", -1))), ("oranges", (("orange", 1),)), ("USD/orange", (("orange", -1),)),
    ("egg*box", (("box", 1), ("egg", 1))), ("m/s", ()), ("percent", ()), ("item/hour", None), ("USD/item", None),
    ("cookies", (("cookie", 1),)),
])
def test_count_kinds_of_units(unit, kinds):
    assert count_kinds(unit) == kinds


def test_generic_count_unit_forgets_the_kinds_only():
    assert generic_count_unit("USD/orange") == "USD/item"
    assert generic_count_unit("orange") == "item"
    assert generic_count_unit("orange/sack") == "dimensionless"
    assert generic_count_unit("m/s") == "m/s"


@pytest.mark.parametrize("op,args,unit,want", [
    ("mul", {"x": "sacks", "y": "per_sack"}, "orange", 280.0),  # a rate carries its kinds through mul
    ("mul", {"x": "oranges", "y": "price"}, "USD", 105.0),
    ("div", {"x": "oranges", "y": "sacks"}, "orange/sack", 4.375),
    ("add", {"x": "boys", "y": "girls"}, "child", 8.0),  # a covering kind
    ("sub", {"x": "kids", "y": "boys"}, "girl", 3.0),
    ("sum", {"x1": "boys", "x2": "girls"}, "child", 8.0),
    ("add", {"x": "things", "y": "oranges"}, "orange", 39.0),  # the generic item is not checked
    ("scale", {"x": "sacks", "k": 2}, "sack", 16.0),
    ("mul", {"x": "days", "y": 3}, "day", 12.0),  # nothing counted: untouched
])
def test_steps_whose_counts_work_out(op, args, unit, want):
    assert check(op, args, unit)[0] == pytest.approx(want)


@pytest.mark.parametrize("op,args,unit,needle", [
    ("add", {"x": "sacks", "y": "oranges"}, "orange", "'x' counts sack and 'y' counts orange"),
    ("add", {"x": "boys", "y": "girls"}, "boy", "like counts only"),  # a sum is not one of its parts
    ("sub", {"x": "kids", "y": "boys"}, "child", "like counts only"),
    ("sum", {"x1": "sacks", "x2": "oranges"}, "orange", "like counts only"),
    ("mul", {"x": "sacks", "y": "per_sack"}, "sack", "gives a count of orange"),
    ("scale", {"x": "sacks", "k": "per_sack"}, "sack", "plain factor"),
    ("ratio", {"x": "oranges", "y": "sacks"}, "dimensionless", "like counts only"),
])
def test_steps_that_count_the_wrong_thing(op, args, unit, needle):
    code, msg = check(op, args, unit)
    assert code == "count_mismatch" and needle in msg, msg


def test_an_answer_must_count_what_the_question_asks():
    values, diags = check_answer(STATE, [Answer("sacks", "orange")])
    assert not values and diags[0].code == "count_mismatch" and "counts sack" in diags[0].message
    values, diags = check_answer(STATE, [Answer("oranges", "orange")])
    assert not diags and values[0].value == 35.0


def test_the_oranges_trace_end_to_end():
    trace = {"givens": [{"name": "n_sacks", "value": 8, "unit": "sacks"},
                        {"name": "per_sack", "value": 35, "unit": "orange/sack"}],
             "steps": [{"op": "mul", "args": {"x": "n_sacks", "y": "per_sack"}, "out": {"name": "n", "unit": "orange"},
                        "value": 280}],
             "answer": [{"name": "n", "unit": "orange"}]}
    assert verify(trace).ok
    trace["steps"][0] = {"op": "add", "args": {"x": "n_sacks", "y": "per_sack"}, "out": {"name": "n", "unit": "orange"}}
    bad = verify(trace)
    assert not bad.ok and bad.first_failure.code in ("unit_mismatch", "count_mismatch")


@pytest.mark.parametrize("text,units,asked", [
    ("A farmer harvests 8 sacks of oranges. Each sack contains 35 oranges. How many oranges does he harvest?",
     ["sack", "orange/sack"], "orange"),
    ("There are 12 eggs in each large box. Mary has 5 boxes. How many eggs does she have?", ["egg/box", "box"], "egg"),
    ("Tom has 5 apples per basket and 3 baskets. How many apples does he have?", ["apple/basket", "basket"], "apple"),
    ("A large pizza has 16 slices. Albert buys 2 pizzas.", ["slice/pizza", "pizza"], None),
    ("Each of the 5 friends got 8 pencils.", ["friend", "pencil"], None),  # no rate word: plain counts
    ("Each cookie costs $2. She buys 5 cookies.", ["USD/cookie", "cookie"], None),
    ("Cookies cost $2 each. She buys 5 cookies.", ["USD/cookie", "cookie"], None),
    ("She sells 5 cupcakes at $3 per cupcake.", ["cupcake", "USD/cupcake"], None),
    ("Tickets are $12 for each adult.", ["USD/adult"], None),
    ("He earns $12 an hour and works 5 hours.", ["USD/hour", "hour"], None),  # a rate per unit of time
    ("Tom plants 10 trees a year and has 50 trees.", ["tree/year", "tree"], None),
])
def test_the_extractor_types_counts_rates_and_the_asked_count(text, units, asked):
    from pcr_ray.data.givens import extract

    e = extract(text)
    assert [g.unit for g in e.givens] == units
    assert e.target.unit == asked


def test_the_verifier_alone_solves_the_oranges_problem(capsys):
    """With counts typed, the enumerator's only valid one-step answer is the grounded one (no PRM)."""
    from pcr_ray.solve import main

    text = "A farmer harvests 8 sacks of oranges. Each sack contains 35 oranges. How many oranges does he harvest?"
    assert main([text, "method=verifier_only"]) == 0
    out = capsys.readouterr().out
    assert "mul(x=n_sacks, y=oranges_per_sack) = 280 [orange]" in out and out.rstrip().endswith("answer: 280 orange")


def test_the_enumerator_proposes_no_step_that_counts_the_wrong_thing():
    """Typed enumeration keeps counts apart (and rates out of plain factors) before the verifier sees a step; what
    it does propose passes the verifier, labelled with what it counts."""
    import json

    from pcr_ray.generators.base import ProposalRequest
    from pcr_ray.generators.enumerate import EnumeratorGenerator

    givens = (Given("n_sacks", 8, "sack"), Given("oranges_per_sack", 35, "orange/sack"),
              Given("n_oranges", 12, "orange"), Given("t", 2, "s"))
    req = ProposalRequest("p", "harvest", givens=givens, target_unit="orange")
    steps = [json.loads(c) for c in EnumeratorGenerator(cap=100_000).step_candidates(req)]
    calls = {(s["op"], tuple(sorted(str(a) for a in s["args"].values())), s["out"]["unit"]) for s in steps if "op" in s}
    assert ("mul", ("n_sacks", "oranges_per_sack"), "orange") in calls
    assert ("add", ("n_oranges", "n_oranges"), "orange") not in calls  # (a variable fills one parameter)
    assert not [c for c in calls if c[0] in ("add", "sub") and {"n_sacks", "n_oranges"} <= set(c[1])]
    assert not [c for c in calls if "oranges_per_sack" in c[1] and c[0] in ("scale", "percent_of", "pow")]
    state, _ = VerifierState.from_givens(list(givens))
    bad = [s for s in steps if "op" in s and not verify_step(state, s).ok
           and verify_step(state, s).diagnostic.code == "count_mismatch"]
    assert not bad, bad[:3]
