"""The one rendering of (problem, givens, prefix) and of a step: exact, stable strings."""

from __future__ import annotations

import pytest

from pcr_ray.prm.render import fmt_value, render_context, render_given, render_step, step_from_dict, step_with_value
from pcr_ray.trace import Given, Out, Step

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
        "steps: at = mul(x=a, y=t) = 10 [m/s]")
    expect = "A car starts from rest and accelerates. | givens: v0=0 m/s; a=2 m/s^2; n=3"
    assert render_context(text, givens, []) == expect
    assert render_given({"name": "p", "value": 12.5, "unit": "USD"}) == "p=12.5 USD"


def test_long_problem_text_is_cut_at_a_word():
    ctx = render_context("word " * 500, [], [])
    assert len(ctx) < 700 and ctx.endswith(" ...") and "wor ..." not in ctx
