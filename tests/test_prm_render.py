"""The one rendering of (problem, givens, prefix) and of a step: exact, stable strings."""

from __future__ import annotations

import pytest

from pcr_ray.core.render import (
    canonical_names,
    fmt_value,
    render_answer,
    render_candidate,
    render_context,
    render_given,
    render_step,
    step_from_dict,
    step_with_value,
)
from pcr_ray.core.trace import Answer, Given, Out, Step

STEP = Step("kin_displacement", {"v0": "v0", "a": "a", "t": "t"}, Out("d", "m"))


def test_step_rendering_is_exact():
    assert render_step(STEP) == "d = kin_displacement(v0=v0, a=a, t=t) [m]"
    assert render_step(step_with_value(STEP, 25.0)) == "d = kin_displacement(v0=v0, a=a, t=t) = 25 [m]"
    half = Step("mul", {"x": "at2", "y": 0.5}, Out("d", "m"), 25.000000001)
    assert render_step(half) == "d = mul(x=at2, y=0.5) = 25 [m]"
    dimless = Step("div", {"x": "n", "y": 2}, Out("clips", "dimensionless"), 24.0)
    assert render_step(dimless) == "clips = div(x=n, y=2) = 24"
    assert render_step(Step("const", {"name": "g"}, Out("g", "m/s^2"), 9.80665)) == "g = const(name=g) = 9.807 [m/s^2]"


def test_dict_and_object_render_the_same():
    d = step_with_value(STEP, 12.5).to_dict()
    assert render_step(d) == render_step(step_with_value(STEP, 12.5))
    assert step_from_dict(d) == step_with_value(STEP, 12.5)
    with pytest.raises(ValueError, match="not a step"):
        step_from_dict({"args": {}})


def test_numbers_are_compact():
    assert fmt_value(1234567.0) == "1.235e+06"
    assert fmt_value(0.2) == "0.2"
    assert fmt_value(-0.0) == "0"
    assert fmt_value(1 / 3) == "0.3333"
    assert fmt_value(None) == "?"


def test_context_rendering_is_exact():
    givens = [Given("v0", 0, "m/s", "starts from rest"), Given("a", 2, "m/s^2"), Given("n", 3)]
    prefix = [Step("mul", {"x": "a", "y": "t"}, Out("at", "m/s"), 10.0)]
    text = "A car  starts from rest\nand accelerates."
    assert render_context(text, givens, prefix) == (
        "A car starts from rest and accelerates. | givens: v0=0 m/s; a=2 m/s^2; n=3 | "
        "steps: v1 = mul(x=a, y=t) = 10 [m/s]")
    expect = "A car starts from rest and accelerates. | givens: v0=0 m/s; a=2 m/s^2; n=3"
    assert render_context(text, givens, []) == expect
    assert render_given({"name": "p", "value": 12.5, "unit": "USD"}) == "p=12.5 USD"


def test_long_problem_text_is_cut_at_a_word():
    ctx = render_context("word " * 500, [], [])
    assert len(ctx) < 700 and ctx.endswith(" ...") and "wor ..." not in ctx


def _trace(names: tuple[str, str, str]) -> tuple[list[Given], list[Step], Step]:
    """A gold-like prefix and candidate whose computed quantities are called `names`."""
    g, w, f = names
    givens = [Given("m", 16, "kg"), Given("F_app", 156, "N"), Given("mu", 0.2), Given("d1", 2, "m")]
    prefix = [Step("const", {"name": "g"}, Out(g, "m/s^2"), 9.807),
              Step("weight", {"m": "m", "g": g}, Out(w, "N"), 156.9)]
    return givens, prefix, Step("sub", {"x": "F_app", "y": w}, Out(f, "N"), -0.9)


def test_computed_quantities_render_under_canonical_names():
    """A gold trace's names and a search's names render alike: the PRM sees what is computed from what."""
    gold, other = _trace(("g", "W", "F_net")), _trace(("accel", "weight_1", "net"))
    for givens, prefix, cand in (gold, other):
        assert render_context("t", givens, prefix) == (
            "t | givens: m=16 kg; F_app=156 N; mu=0.2; d1=2 m | steps: a1 = const(name=g) = 9.807 [m/s^2]; "
            "F2 = weight(m=m, g=a1) = 156.9 [N]")  # const's name argument is a constant, not a variable
        assert render_candidate(givens, prefix, cand) == "F3 = sub(x=F_app, y=F2) = -0.9 [N]"
        names = canonical_names(givens, prefix)
        assert render_answer([Answer(prefix[1].out.name, "N")], [156.9], names) == "answer: F2 = 156.9 [N]"
    # the enumerator's own names are a fixed point; a canonical name never takes a given's name
    givens = [Given("d1", 1, "m"), Given("t", 2, "s")]
    prefix = [Step("mul", {"x": "d1", "y": 2}, Out("d1_1", "m"), 2.0)]
    assert canonical_names(givens, prefix) == {"d1_1": "d1_1"}
    assert render_step(prefix[0]) == "d1_1 = mul(x=d1, y=2) = 2 [m]"  # render_step alone keeps names as written


def test_expression_arguments_are_renamed_by_identifier():
    givens = [Given("x", 2.0)]
    prefix = [Step("mul", {"x": "x", "y": "x"}, Out("sq", "dimensionless"), 4.0)]
    cand = Step("eval_expr", {"expr": "sq + squash*2"}, Out("y", "dimensionless"), 4.0)
    assert render_candidate(givens, prefix, cand) == "r2 = eval_expr(expr=r1 + squash*2) = 4"
