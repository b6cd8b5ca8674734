"""The gold-path oracle scorer: scores by the verified gold trace, and bounds what a search setting can solve."""

from __future__ import annotations

import math

import pytest

from pcr_ray.core.render import canonical_names, render_answer, render_context
from pcr_ray.core.trace import parse_trace
from pcr_ray.core.verifier import VerifierState, verify
from pcr_ray.data.physics import generate_problems
from pcr_ray.generators.base import ProposalRequest
from pcr_ray.generators.enumerate import EnumeratorGenerator
from pcr_ray.search import SearchConfig, SearchProblem, run_search
from pcr_ray.search.candidates import check_step_candidate, parse_candidate
from pcr_ray.search.gold_oracle import ANSWER, GOLD_STEP, OTHER, REPEATED, GoldPathScorer, GoldRankProbe
from pcr_ray.search.scoring import pair_for


def _problems(n: int, min_steps: int) -> list:
    """Generated physics problems of min_steps to 4 gold steps (the README's ceiling setting)."""
    return [p for p in generate_problems(60, seed=4) if p.gold_steps and min_steps <= p.gold_steps <= 4][:n]


def _valued_steps(sp: SearchProblem, trace) -> list:
    """The gold steps with their values filled in, as the search holds them."""
    state, _ = VerifierState.from_givens(sp.givens)
    out = []
    for s in trace.steps:
        chk = check_step_candidate(state, s, strict=True)
        assert chk.ok
        state = chk.state
        out.append(chk.step)
    return out


def test_gold_steps_answers_repeats_and_other_values_score_as_documented() -> None:
    problems = _problems(5, min_steps=2)
    oracle = GoldPathScorer.from_problems(problems)
    gen = EnumeratorGenerator(cap=48)
    for p in problems:
        sp = SearchProblem.from_problem(p, givens="gold")
        trace = parse_trace(p.gold_trace)[0]
        steps = _valued_steps(sp, trace)
        gold = [(s.base, s.dims) for s in verify(p.gold_trace).steps]
        for t, step in enumerate(steps):
            assert oracle.score([pair_for(sp.text, sp.givens, steps[:t], step)]) == [GOLD_STEP]
            if t:  # a gold value the prefix already holds is no progress
                assert oracle.score([pair_for(sp.text, sp.givens, steps[:t], steps[0])]) == [REPEATED]
        ctx = render_context(sp.text, sp.givens, steps)
        names = canonical_names(sp.givens, steps)
        ans, value = trace.answer[:1], verify(p.gold_trace).answer[0].value  # in the declared unit
        assert oracle.score([(ctx, render_answer(ans, [value], names=names)),
                             (ctx, render_answer(ans, [value * 1.5], names=names))]) == [ANSWER, OTHER]
        # at the root, the enumerator's valid steps: gold-valued ones score GOLD_STEP, the others OTHER
        state, _ = VerifierState.from_givens(sp.givens)
        scored = []
        for raw in gen.propose([ProposalRequest(sp.id, sp.text, sp.givens, k=48, target_unit=sp.target_unit)])[0]:
            parsed = parse_candidate(raw, 0)
            chk = check_step_candidate(state, parsed.step, strict=True) if parsed.step is not None else None
            if chk is None or not chk.ok:
                continue
            base = chk.state.env[chk.step.out.name].base
            is_gold = any(math.isclose(base, g, rel_tol=2e-3) and chk.state.env[chk.step.out.name].dims == d
                          for g, d in gold)
            scored.append((oracle.score([pair_for(sp.text, sp.givens, (), chk.step)])[0], is_gold))
        assert scored and all(s == (GOLD_STEP if g else OTHER) for s, g in scored)
    with pytest.raises(KeyError, match="knows no problem"):
        oracle.score([("A problem the oracle was not given | givens: x=1 m", "x1 = mul(x=x, y=x) = 1 [m^2]")])


def test_the_oracle_in_the_prm_place_follows_the_gold_path() -> None:
    problems = _problems(16, min_steps=1)
    sps = [SearchProblem.from_problem(p, givens="gold") for p in problems]
    res = run_search(sps, EnumeratorGenerator(cap=48), GoldPathScorer.from_problems(problems),
                     SearchConfig(method="nsprm", beam_width=2, max_steps=6, aggregate="min", stop="best"))
    solved = [r for r in res if r.answer_value is not None
              and math.isclose(r.answer_value, r.gold_value, rel_tol=1e-4)]
    # the README measures this setting's ceiling at 90-95% on physics; an oracle below 80% would be a bug
    assert len(solved) >= 0.8 * len(res), [(r.id, r.answer_value, r.gold_value) for r in res]
    for r in solved:  # a solved search followed gold values only, and its answer scored ANSWER
        assert all(s["score"] == GOLD_STEP for s in r.steps) and r.score == pytest.approx(GOLD_STEP)


def test_from_extracted_givens_the_oracle_knows_the_contexts_of_that_search() -> None:
    problems = _problems(12, min_steps=1)
    sps = [SearchProblem.from_problem(p, givens="extract") for p in problems]
    oracle = GoldPathScorer.from_problems(problems, givens="extract")
    res = run_search(sps, EnumeratorGenerator(cap=48), oracle,
                     SearchConfig(method="nsprm", beam_width=2, max_steps=6, aggregate="min", stop="best"))
    assert all(r.error in (None, "") for r in res)  # every context was one the oracle knew (no KeyError)
    assert sum(r.answer_value is not None and math.isclose(r.answer_value, r.gold_value, rel_tol=1e-4)
               for r in res) >= len(res) // 2
    with pytest.raises(KeyError, match="knows no problem"):  # the gold givens' contexts are another search's
        GoldPathScorer.from_problems(problems[:1], givens="extract").score(
            [(render_context(problems[0].text, SearchProblem.from_problem(problems[0], givens="gold").givens, ()),
              "x = mul(a, b) = 1 [m]")])


class _Fixed:
    """A scorer of fixed scores by candidate kind: the oracle's own (a perfect PRM) or its negation (the worst)."""

    def __init__(self, oracle: GoldPathScorer, sign: float) -> None:
        self.oracle, self.sign = oracle, sign

    def score(self, pairs):
        return [self.sign * s for s in self.oracle.score(pairs)]


def test_the_rank_probe_ranks_the_gold_step_first_for_a_perfect_prm_and_last_for_the_worst() -> None:
    problems = _problems(8, min_steps=2)
    sps = [SearchProblem.from_problem(p, givens="gold") for p in problems]
    cfg = SearchConfig(method="nsprm", beam_width=2, max_steps=6, aggregate="min", stop="best")
    summaries = {}
    for sign in (1.0, -1.0):
        oracle = GoldPathScorer.from_problems(problems)
        probe = GoldRankProbe(oracle, _Fixed(oracle, sign))
        run_search(sps, EnumeratorGenerator(cap=48), probe, cfg)
        summaries[sign] = probe.summary(beam=2)
    best, worst = summaries[1.0]["step"], summaries[-1.0]["step"]
    assert best["decisions"] == worst["decisions"] > 0  # the oracle drove both searches the same way
    assert best["top1"] == 1.0 and best["within_beam"] == 1.0 and best["median_rank"] == 1
    assert worst["top1"] == 0.0 and worst["median_rank"] > 2
