"""Verifier-first search: control flow with planted scorers; the real enumerator + trained PRM on easy physics."""

from __future__ import annotations

import json
import math

import pyarrow as pa
import pytest

from pcr_ray.core.trace import Given
from pcr_ray.core.verifier import verify
from pcr_ray.data.physics import generate_problems
from pcr_ray.generators.base import ProposalRequest
from pcr_ray.generators.enumerate import EnumeratorGenerator
from pcr_ray.search import METHODS, SearchConfig, SearchProblem, aggregate, run_search

CAR = "A car accelerates from rest at 2 m/s^2 for 5 s. How far does it go?"
CAR_GIVENS = (Given("v0", 0, "m/s", "from rest"), Given("a", 2, "m/s^2", "acceleration"), Given("t", 5, "s", "time"))


@pytest.fixture(scope="module")
def prm():
    """A real trained PRM of the shipped kind, test-size (tests/prm_helpers.py; cached, trained on first use)."""
    from tests.prm_helpers import small_prm_scorer

    return small_prm_scorer(max_batch=64, max_length=160)


class CountingScorer:
    """Delegates to a real scorer and counts calls (to check batching)."""

    def __init__(self, inner):
        self.inner, self.calls, self.pairs = inner, 0, 0

    def score(self, pairs):
        self.calls += 1
        self.pairs += len(pairs)
        return self.inner.score(pairs)


class CountingGenerator:
    """Delegates to a real generator and records every request."""

    def __init__(self, inner):
        self.inner, self.calls, self.requests = inner, 0, []
        self.uses_feedback = getattr(inner, "uses_feedback", True)

    def propose(self, requests):
        self.calls += 1
        self.requests.extend(requests)
        return self.inner.propose(requests)


class ScriptedGenerator:
    """A generator that answers from a script: fn(request, call_index) -> candidate strings."""

    uses_feedback = True

    def __init__(self, fn):
        self.fn, self.requests = fn, []

    def propose(self, requests):
        out = []
        for r in requests:
            self.requests.append(r)
            out.append(self.fn(r, len(self.requests) - 1))
        return out


class RuleScorer:
    """A planted PRM for search-logic tests: score = the first rule whose substring is in the step text."""

    def __init__(self, rules, default=0.5):
        self.rules, self.default, self.seen = rules, default, []

    def score(self, pairs):
        self.seen.extend(pairs)
        return [next((s for frag, s in self.rules if frag in step), self.default) for _, step in pairs]


def _easy(n: int = 10, max_steps: int = 2) -> list[SearchProblem]:
    ps = [p for p in generate_problems(120, seed=11) if p.gold_steps and p.gold_steps <= max_steps][:n]
    return [SearchProblem.from_problem(p, givens="gold") for p in ps]


def _correct(res) -> bool:
    return res.answer_value is not None and math.isclose(res.answer_value, res.gold_value, rel_tol=1e-4, abs_tol=1e-9)


def test_config_validation_and_aggregates() -> None:
    with pytest.raises(ValueError, match="method"):
        SearchConfig(method="magic")
    with pytest.raises(ValueError, match="unknown search option"):
        SearchConfig.from_dict({"beam_widht": 2})
    assert SearchConfig(method="greedy", beam_width=8).beam_width == 1
    assert aggregate([0.5, 0.8], "last") == 0.8 and aggregate([0.5, 0.8], "min") == 0.5
    assert aggregate([0.5, 0.8], "prod") == pytest.approx(0.4) and aggregate([], "mean") == 0.0
    with pytest.raises(ValueError, match="needs a PRM"):
        run_search(_easy(1), EnumeratorGenerator(), None, SearchConfig(method="nsprm"))


@pytest.mark.slow
def test_nsprm_with_a_trained_prm_batches_and_returns_verified_traces(prm) -> None:
    problems = _easy(12, max_steps=1)
    assert len(problems) == 12
    gen, sc = CountingGenerator(EnumeratorGenerator(cap=48)), CountingScorer(prm)
    results = run_search(problems, gen, sc, SearchConfig(method="nsprm", beam_width=2, max_steps=2))
    assert [r.id for r in results] == [p.id for p in problems] and not any(r.error for r in results)
    assert sc.pairs == sum(r.n_scored for r in results) > 0
    for r in results:
        assert r.n_verified <= r.n_parsed <= r.n_proposed and r.n_prm_calls <= r.n_scored
        if r.answer_value is not None:  # the returned trace re-verifies to the returned answer
            v = verify(r.trace)
            assert v.ok and v.answer[0].value == pytest.approx(r.answer_value)
            assert all(s["verdict"] == "ok" and 0.0 <= s["score"] <= 1.0 for s in r.steps)
    # lock-step: one propose() and one score() per search step for the whole batch (no retries: enumerator)
    iters = max(r.iterations for r in results)
    assert gen.calls == iters and sc.calls <= iters


@pytest.mark.slow
def test_nsprm_reaches_every_gold_answer_when_the_prm_ranks_the_gold_path_first() -> None:
    """The search's own logic, deterministically: the enumerator proposes every typed step, the verifier filters and
    a scorer that knows the gold path (GoldPathScorer, the benchmarks' ceiling diagnostic) ranks. Whatever a trained
    PRM finds is a benchmark's figure (benchmarks/bench_search.py); that the search finds the gold answer when the
    ranking is right is the search's."""
    from pcr_ray.search.gold_oracle import GoldPathScorer

    raw = [p for p in generate_problems(120, seed=11) if p.gold_steps and p.gold_steps <= 2][:12]
    problems = [SearchProblem.from_problem(p, givens="gold") for p in raw]
    assert len(problems) == 12
    results = run_search(problems, EnumeratorGenerator(cap=48), GoldPathScorer.from_problems(raw),
                         SearchConfig(method="nsprm", beam_width=2, max_steps=3))
    assert all(_correct(r) for r in results), [(r.id, r.answer_value, r.gold_value, r.stop_reason) for r in results]
    assert all(r.stop_reason == "answered" for r in results)


@pytest.mark.slow
def test_every_variant_runs_on_the_same_problems() -> None:
    prm = RuleScorer([])  # control flow only: a planted PRM (0.5 for every step)
    problems = _easy(2, max_steps=1)
    base = {"beam_width": 2, "max_steps": 2, "n_samples": 3}
    blind = EnumeratorGenerator(typed=False, cap=200)
    out = {}
    for m in METHODS:
        res = run_search(problems, blind, prm if m != "verifier_only" else None, SearchConfig(method=m, **base))
        assert [r.id for r in res] == [p.id for p in problems]
        assert all(r.method == m and r.stop_reason for r in res)
        out[m] = res
    # the verifier filter saves PRM calls: nsprm scores only verified candidates of the same blind generator
    ns = sum(r.n_scored for r in out["nsprm"])
    po = sum(r.n_scored for r in out["prm_only"])
    assert ns < po / 3, (ns, po)
    assert all(r.n_scored == 0 for r in out["verifier_only"])
    for r in out["nsprm"] + out["greedy"] + out["verifier_only"]:
        assert r.answer_value is None or r.trace_ok
    # records are flat and go to Arrow as they are
    table = pa.Table.from_pylist([r.to_record() for m in METHODS for r in out[m]])
    assert table.num_rows == len(METHODS) * len(problems) and "stop_reason" in table.column_names


def test_prm_only_takes_claimed_values_nsprm_rejects_them() -> None:
    prm = RuleScorer([])  # control flow only: a planted PRM (0.5 for every step)
    wrong = json.dumps({"op": "kin_displacement", "args": {"v0": "v0", "a": "a", "t": "t"},
                        "out": {"name": "d", "unit": "m"}, "value": 30})
    gen = ScriptedGenerator(lambda r, i: [wrong] if not r.steps else ['{"answer": [{"name": "d", "unit": "m"}]}'])
    p = SearchProblem("car", CAR, CAR_GIVENS, "m", 25.0, "m")
    po = run_search([p], gen, prm, SearchConfig(method="prm_only", max_retries=0))[0]
    assert po.answer_value == 30 and not po.trace_ok and po.steps[0]["verdict"] == "arithmetic_error"
    ns = run_search([p], ScriptedGenerator(gen.fn), prm, SearchConfig(method="nsprm", max_retries=0))[0]
    assert ns.answer_value is None and ns.reject_codes == {"arithmetic_error": 1}


def test_retries_carry_the_verifier_diagnostic() -> None:
    prm = RuleScorer([])  # control flow only: a planted PRM (0.5 for every step)
    bad = json.dumps({"op": "add", "args": {"x": "a", "y": "t"}, "out": {"name": "s", "unit": "m"}})
    good = json.dumps({"op": "kin_displacement", "args": {"v0": "v0", "a": "a", "t": "t"},
                       "out": {"name": "d", "unit": "m"}})

    def script(r: ProposalRequest, i: int) -> list[str]:
        if r.steps:
            return ['{"answer": [{"name": "d", "unit": "m"}]}']
        return [good] if r.feedback else [bad, "{not json"]

    gen = ScriptedGenerator(script)
    res = run_search([SearchProblem("car", CAR, CAR_GIVENS, "m", 25.0, "m")], gen, prm,
                     SearchConfig(method="nsprm", max_retries=2))[0]
    first, second = gen.requests[0], gen.requests[1]
    assert first.feedback == () and second.steps == ()
    assert any("unit_mismatch" in f for f in second.feedback) and any("malformed" in f for f in second.feedback)
    assert res.retries == 1 and res.answer_value == pytest.approx(25.0) and res.stop_reason == "answered"
    assert res.reject_codes == {"unit_mismatch": 1, "malformed": 1}


def test_backtracking_recovers_from_a_dead_beam() -> None:
    prm = RuleScorer([])  # control flow only: a planted PRM (0.5 for every step)
    d1 = json.dumps({"op": "kin_displacement", "args": {"v0": "v0", "a": "a", "t": "t"},
                     "out": {"name": "d", "unit": "m"}})
    v1 = json.dumps({"op": "kin_final_velocity", "args": {"v0": "v0", "a": "a", "t": "t"},
                     "out": {"name": "v", "unit": "m/s"}})
    dead: list[str] = []

    def script(r: ProposalRequest, i: int) -> list[str]:
        if not r.steps:
            return [d1, v1]
        last = r.steps[-1].out.name
        if not dead:  # whichever branch is explored first is a dead end: nothing it proposes verifies
            dead.append(last)
        if last == dead[0]:
            return ['{"op": "sqrt", "args": {"x": "nope"}, "out": {"name": "z", "unit": "m"}}']
        if last == "v":
            return [json.dumps({"op": "distance_speed_time", "args": {"v": "v", "t": "t"},
                                "out": {"name": "d2", "unit": "m"}})]
        return [json.dumps({"answer": [{"name": last, "unit": "m"}]})]

    gen = ScriptedGenerator(script)
    res = run_search([SearchProblem("car", CAR, CAR_GIVENS, "m", 25.0, "m")], gen, prm,
                     SearchConfig(method="greedy", max_retries=0, max_steps=4))[0]
    assert res.backtracks >= 1 and res.stop_reason == "answered"
    first_step = json.loads(res.trace and json.dumps(res.trace))["steps"][0]["out"]["name"]
    assert first_step != dead[0]  # the answer came from the alternative that had been pruned
    assert res.answer_value == pytest.approx(25.0 if first_step == "d" else 50.0)


def test_generator_failure_is_an_error_row_not_an_exception() -> None:
    prm = RuleScorer([])  # control flow only: a planted PRM (0.5 for every step)
    def boom(r, i):
        raise RuntimeError("model crashed")

    res = run_search([SearchProblem("car", CAR, CAR_GIVENS, "m")], ScriptedGenerator(boom), prm, SearchConfig())[0]
    assert res.stop_reason == "error" and "model crashed" in res.error and res.answer_value is None
    res = run_search([SearchProblem("bad", CAR, (Given("x", 1, "furlongs per zorp"),), "m")], EnumeratorGenerator(),
                     prm, SearchConfig())[0]
    assert res.stop_reason == "bad_givens" and "bad_unit" in res.error


D1 = json.dumps({"op": "kin_displacement", "args": {"v0": "v0", "a": "a", "t": "t"}, "out": {"name": "d", "unit": "m"}})
D2 = json.dumps({"op": "mul", "args": {"x": "d", "y": 2}, "out": {"name": "d2", "unit": "m"}})


def _answer_or_double(r: ProposalRequest, i: int) -> list[str]:
    """d first; then an answer for every quantity so far, and d2 = 2 d until it exists."""
    names = [s.out.name for s in r.steps]
    if not names:
        return [D1]
    out = [json.dumps({"answer": [{"name": n, "unit": "m"}]}) for n in names]
    return out + ([D2] if "d2" not in names else [])


def test_answers_are_scored_and_compete_with_steps() -> None:
    script = _answer_or_double
    p = SearchProblem("car", CAR, CAR_GIVENS, "m", 50.0, "m")
    # the PRM prefers going on after d, and answering with d2: the search stops only when the answer wins
    # (the PRM sees canonical names: the trace's d and d2 render as d1 and d2)
    sc = RuleScorer([("answer: d2", 0.9), ("answer: d1 ", 0.2), ("d2 = mul", 0.6)])
    res = run_search([p], ScriptedGenerator(script), sc,
                     SearchConfig(method="greedy", max_steps=4, aggregate="last"))[0]
    assert res.answer_name == "d2" and res.answer_value == pytest.approx(50.0) and len(res.trace["steps"]) == 2
    assert res.score == pytest.approx(0.9)  # aggregate 'last': the answer's own score
    assert ("answer: d1 = 25 [m]" in [s for _, s in sc.seen]) and res.stop_reason == "answered"
    # below the threshold an answer is not taken; a dead end then falls back to the best answer seen
    sc2 = RuleScorer([("answer: d2", 0.05), ("answer: d1 ", 0.3)], default=0.7)
    res2 = run_search([p], ScriptedGenerator(lambda r, i: script(r, i) if len(r.steps) < 2 else []), sc2,
                      SearchConfig(method="greedy", max_steps=4, max_backtracks=0, aggregate="last"))[0]
    assert res2.stop_reason == "answered" and res2.answer_name == "d" and res2.answer_value == pytest.approx(25.0)
    # verifier_only has no PRM to judge the stop: the first valid answer completes
    vo = run_search([p], ScriptedGenerator(script), None, SearchConfig(method="verifier_only", max_steps=4))[0]
    assert vo.answer_name == "d" and vo.n_scored == 0


def test_stop_best_lets_a_better_scored_beam_finish() -> None:
    p = SearchProblem("car", CAR, CAR_GIVENS, "m", 50.0, "m")
    # beam 2 after d: going on to d2 (min 0.5) and answering d (min 0.2) are both kept
    sc = RuleScorer([("answer: d2", 0.9), ("answer: d1 ", 0.2), ("d2 = mul", 0.6)])
    cfg = {"method": "nsprm", "beam_width": 2, "max_steps": 4, "aggregate": "min"}
    first = run_search([p], ScriptedGenerator(_answer_or_double), sc, SearchConfig(**cfg))[0]
    assert first.answer_name == "d" and first.score == pytest.approx(0.2) and first.iterations == 2
    # stop=best: the live d2 beam (0.5) outscores the answered trace (0.2), so the search goes on to answer d2
    best = run_search([p], ScriptedGenerator(_answer_or_double), sc, SearchConfig(**cfg, stop="best"))[0]
    assert best.answer_name == "d2" and best.answer_value == pytest.approx(50.0) and best.score == pytest.approx(0.5)
    assert best.iterations == 3 and best.stop_reason == "answered"
    # no live beam above the answer: stop=best stops where stop=first does
    sc_low = RuleScorer([("answer: d1 ", 0.7), ("d2 = mul", 0.3)])
    same = run_search([p], ScriptedGenerator(_answer_or_double), sc_low, SearchConfig(**cfg, stop="best"))[0]
    assert same.answer_name == "d" and same.iterations == 2
    with pytest.raises(ValueError, match="stop must be one of"):
        SearchConfig(stop="never")


def test_children_of_equal_aggregate_keep_generator_order() -> None:
    p = SearchProblem("car", CAR, CAR_GIVENS, "m", 50.0, "m")
    # d scores 0.1: under `min` every child of it ties at 0.1, so the answer declaration (proposed first) wins
    sc = RuleScorer([("d1 = kin_displacement", 0.1), ("answer: d2", 0.9), ("answer: d1 ", 0.3), ("d2 = mul", 0.8)])
    cfg = {"method": "greedy", "max_steps": 4}
    by_rank = run_search([p], ScriptedGenerator(_answer_or_double), sc, SearchConfig(**cfg, aggregate="min"))[0]
    assert by_rank.answer_name == "d" and by_rank.answer_value == pytest.approx(25.0)
    # no tie (aggregate last): the better-scored continuation wins
    by_last = run_search([p], ScriptedGenerator(_answer_or_double), sc, SearchConfig(**cfg, aggregate="last"))[0]
    assert by_last.answer_name == "d2"
    with pytest.raises(TypeError):
        SearchConfig(tie_break="last")  # type: ignore[call-arg]


def test_gold_givens_do_not_reveal_which_are_distractors() -> None:
    probs = [p for p in generate_problems(60, seed=2)
             if any(g["desc"].startswith("not needed") for g in p.gold_trace["givens"])]
    assert probs
    for p in probs:
        sp = SearchProblem.from_problem(p, givens="gold")
        assert not any("not needed" in g.desc for g in sp.givens)
        assert len(sp.givens) == len(p.gold_trace["givens"])


def test_answer_selection_best_vs_weighted_vote() -> None:
    from pcr_ray.search.selection import Answered, answer_quantity, select_answered

    km, m = answer_quantity((("length", 1),), 500.0), answer_quantity((("length", 1),), 500.0000001)
    assert km == m  # 0.5 km and 500 m (SI values) are one quantity
    items = [Answered(0.9, 0, ("a",)), Answered(0.6, 1, ("b",)), Answered(0.5, 2, ("b",)), Answered(0.7, 3, ())]
    assert select_answered(items, "best") == 0
    assert select_answered(items, "vote") == 1  # b: 1.1 > a: 0.9; the best-scored trace of b
    assert select_answered(items[:1], "vote") == select_answered(items[:1], "best") == 0
    assert select_answered([Answered(1.0, 5, ("a",)), Answered(1.0, 2, ("a",))], "vote") == 1  # ties: lower order
    with pytest.raises(ValueError, match="answer selection"):
        select_answered(items, "majority")
    with pytest.raises(ValueError, match="no answered"):
        select_answered([], "best")
    with pytest.raises(ValueError, match="answer_selection"):
        SearchConfig(answer_selection="majority")


def test_vote_returns_the_answer_two_traces_agree_on() -> None:
    """Two traces answer 25 m (scores 0.6 each), one answers 50 m (0.9): best returns 50, vote 25."""
    d = {"op": "kin_displacement", "args": {"v0": "v0", "a": "a", "t": "t"}, "out": {"name": "d", "unit": "m"}}
    v = json.dumps({"op": "kin_final_velocity", "args": {"v0": "v0", "a": "a", "t": "t"},
                    "out": {"name": "v", "unit": "m/s"}})
    far = json.dumps({"op": "distance_speed_time", "args": {"v": "v", "t": "t"}, "out": {"name": "far", "unit": "m"}})

    def script(r: ProposalRequest, i: int) -> list[str]:
        names = [s.out.name for s in r.steps]
        if not names:
            return [json.dumps(d), json.dumps({**d, "out": {"name": "e", "unit": "m"}}), v]
        if names == ["v"]:
            return [far]
        return [json.dumps({"answer": [{"name": names[-1], "unit": "m"}]})]

    sc = RuleScorer([("answer: d1 = 25", 0.6), ("answer: d2 = 50", 0.9)], default=0.5)
    p = SearchProblem("car", CAR, CAR_GIVENS, "m", 25.0, "m")
    got = {}
    for how in ("best", "vote"):
        cfg = SearchConfig(method="nsprm", beam_width=3, max_steps=4, aggregate="last", n_complete=3,
                           dedupe_beams=False, answer_selection=how, log_candidates=True)
        got[how] = run_search([p], ScriptedGenerator(script), sc, cfg)[0]
    assert got["best"].answer_value == pytest.approx(50.0) and got["best"].score == pytest.approx(0.9)
    assert got["vote"].answer_value == pytest.approx(25.0) and got["vote"].score == pytest.approx(0.6)
    assert got["vote"].stop_reason == got["best"].stop_reason == "answered"
    # log_candidates keeps each candidate's PRM score (what `pcr-ray solve show_candidates=true` prints)
    logged = {(c["kind"], c["candidate"]): c["score"] for c in got["best"].candidates}
    assert logged[("answer", json.dumps({"answer": [{"name": "far", "unit": "m"}]}))] == pytest.approx(0.9)
    assert logged[("answer", json.dumps({"answer": [{"name": "e", "unit": "m"}]}))] == pytest.approx(0.6)
    assert logged[("step", far)] == pytest.approx(0.5)


@pytest.mark.parametrize("strict", [True, False])
def test_a_candidate_named_like_an_existing_variable_is_renamed_not_lost(strict):
    """A model that names its output like a given ('price' for a new price) proposes a usable step: the output is
    renamed (price_2, then price_3) and verified; the step itself is unchanged."""
    from pcr_ray.core.trace import Out, Step
    from pcr_ray.core.verifier import VerifierState
    from pcr_ray.search.candidates import check_step_candidate

    givens = [Given("price", 2, "USD/egg"), Given("n", 9, "egg"), Given("price_2", 1, "USD")]
    state, _ = VerifierState.from_givens(givens)
    out = check_step_candidate(state, Step("mul", {"x": "price", "y": "n"}, Out("price", "USD")), strict=strict)
    assert out.ok and out.step.out.name == "price_3" and out.step.value == pytest.approx(18.0)
    assert out.state.env["price"].value == 2 and out.state.env["price_3"].value == pytest.approx(18.0)
