"""DVTS: subtrees from the best distinct first steps (planted scorer), and the real enumerator + quick PRM."""

from __future__ import annotations

import json

import pytest

from pcr_ray.core.trace import Given
from pcr_ray.core.verifier import verify
from pcr_ray.data.physics import generate_problems
from pcr_ray.generators.enumerate import EnumeratorGenerator
from pcr_ray.search import SearchConfig, SearchProblem, run_search
from pcr_ray.search.dvts import n_subtrees

CAR = "A car accelerates from rest at 2 m/s^2 for 5 s. How far does it go?"
CAR_GIVENS = (Given("v0", 0, "m/s", "from rest"), Given("a", 2, "m/s^2", "acceleration"), Given("t", 5, "s", "time"))


def _step(op: str, args: dict, name: str, unit: str) -> str:
    return json.dumps({"op": op, "args": args, "out": {"name": name, "unit": unit}})


DISP = _step("kin_displacement", {"v0": "v0", "a": "a", "t": "t"}, "d", "m")  # 25 m, planted best
SPEED = _step("mul", {"x": "a", "y": "t"}, "v", "m/s")                         # 10 m/s, planted second
SQUARE = _step("mul", {"x": "t", "y": "t"}, "tt", "s^2")                       # 25 s^2, planted worst
HALF_VT = _step("mul", {"x": "v", "y": "t"}, "vt", "m")                        # 50 m (a wrong distance)


class Script:
    """Root: three valid first steps; after DISP: answer d; after SPEED: v*t, then answer it; records requests."""

    uses_feedback = True

    def __init__(self) -> None:
        self.requests = []

    def propose(self, requests):
        out = []
        for r in requests:
            self.requests.append(r)
            names = [s.out.name for s in r.steps]
            if not names:
                out.append([SQUARE, SPEED, DISP])
            elif names == ["d"]:
                out.append(['{"answer": [{"name": "d", "unit": "m"}]}'])
            elif names == ["v"]:
                out.append([HALF_VT])
            elif names == ["v", "vt"]:
                out.append(['{"answer": [{"name": "vt", "unit": "m"}]}'])
            else:
                out.append([])
        return out


class Planted:
    """A PRM that likes kin_displacement, then the speed, then anything with vt, and dislikes t*t."""

    def score(self, pairs):
        def one(step: str) -> float:
            for frag, s in (("kin_displacement", 0.9), ("answer", 0.8), ("mul(x=a, y=t)", 0.7), ("mul(x=v", 0.6),
                            ("mul(x=t, y=t)", 0.1)):
                if frag in step:
                    return s
            return 0.5
        return [one(step) for _, step in pairs]


def _car() -> SearchProblem:
    return SearchProblem("car", CAR, CAR_GIVENS, "m", 25.0, "m")


def test_subtrees_grow_from_the_best_distinct_first_steps() -> None:
    gen = Script()
    cfg = SearchConfig(method="dvts", n_samples=4, beam_width=2, aggregate="min", max_retries=0)
    assert n_subtrees(cfg) == 2 and n_subtrees(SearchConfig(method="dvts", n_samples=1, beam_width=2)) == 1
    res = run_search([_car()], gen, Planted(), cfg)[0]
    firsts = {r.steps[0].out.name for r in gen.requests if r.steps}
    assert firsts == {"d", "v"}, "the two best first steps each root a subtree; t*t (scored lowest) roots none"
    assert sum(1 for r in gen.requests if not r.steps) == 1, "the root is expanded once"
    # subtrees sample with seeds of their own (an LLM generator would diverge even from equal prefixes)
    seeds = {r.steps[0].out.name: r.seed for r in gen.requests if len(r.steps) == 1}
    assert seeds["d"] != seeds["v"]
    # each subtree answered once; `best` returns the better-scored (min aggregate: 0.8 against 0.6)
    assert sorted(s["value"] for s in res.samples) == [25.0, 50.0]
    assert res.answer_value == 25.0 and res.stop_reason == "answered" and res.trace_ok
    assert res.iterations == 3  # the root step, then the longer subtree's two steps and answer, lock-step
    one = run_search([_car()], Script(), Planted(), SearchConfig(method="dvts", n_samples=2, beam_width=2,
                                                                max_retries=0))[0]
    assert len(one.samples) == 1 and one.answer_value == 25.0, "N // B = 1: a single greedy subtree"


def test_vote_sums_scores_over_subtrees() -> None:
    # Three subtrees: d (25 m, min score 0.8), v -> v*t (50 m, 0.6) and t*t -> a*t*t (50 m, 0.65). `best` returns
    # 25 m, the best-scored answer; `vote` returns 50 m, whose two answers' scores add up to more.
    class ThreeWays(Script):
        def propose(self, requests):
            out = super().propose(requests)
            after = {("tt",): [_step("mul", {"x": "a", "y": "tt"}, "x", "m")],
                     ("tt", "x"): ['{"answer": [{"name": "x", "unit": "m"}]}']}
            return [after.get(tuple(s.out.name for s in r.steps), o) for r, o in zip(requests, out, strict=True)]

    class Scores(Planted):
        def score(self, pairs):
            return [0.65 if "mul(x=t, y=t)" in s or "mul(x=a, y=" in s and "y=t)" not in s else v
                    for (_, s), v in zip(pairs, super().score(pairs), strict=True)]

    base = {"method": "dvts", "n_samples": 6, "beam_width": 2, "aggregate": "min", "max_retries": 0}
    best = run_search([_car()], ThreeWays(), Scores(), SearchConfig(**base))[0]
    vote = run_search([_car()], ThreeWays(), Scores(), SearchConfig(**base, answer_selection="vote"))[0]
    assert sorted(s["value"] for s in best.samples) == [25.0, 50.0, 50.0]
    assert best.answer_value == 25.0 and vote.answer_value == 50.0


@pytest.mark.slow
def test_dvts_with_the_enumerator_and_a_trained_prm() -> None:
    from tests.prm_helpers import small_prm_scorer

    prm = small_prm_scorer(max_batch=64, max_length=160)
    ps = [p for p in generate_problems(120, seed=11) if p.gold_steps and p.gold_steps <= 2][:6]
    problems = [SearchProblem.from_problem(p, givens="gold") for p in ps]
    gen = EnumeratorGenerator(cap=24)
    cfg = {"max_steps": 3, "max_backtracks": 1}
    dvts = run_search(problems, gen, prm, SearchConfig(method="dvts", n_samples=4, beam_width=2, **cfg))
    greedy = run_search(problems, gen, prm, SearchConfig(method="greedy", **cfg))
    for d, g in zip(dvts, greedy, strict=True):
        assert len(d.samples) <= 2 and d.n_prm_calls >= 1 and d.prm_tokens > 0
        assert d.prompt_tokens == d.output_tokens == 0, "the enumerator has no tokens"
        if d.answer_value is not None:  # the returned trace re-verifies to the returned answer
            v = verify(d.trace)
            assert v.ok and v.answer[0].value == pytest.approx(d.answer_value)
            assert d.score == max(s["score"] for s in d.samples)
        # two subtrees cost more PRM work than one greedy path, whose first step is one of DVTS's roots
        assert d.n_prm_calls > g.n_prm_calls
        # the greedy path is DVTS's best-scored subtree (same root ranking, same greedy steps): its answer is one of
        # DVTS's samples, with the same score, and DVTS returns a sample scored at least as high
        if g.answer_value is not None:
            assert any(s["value"] == pytest.approx(g.answer_value) and s["score"] == pytest.approx(g.score)
                       for s in d.samples), (g.answer_value, g.score, d.samples)
            assert d.score >= g.score - 1e-9
