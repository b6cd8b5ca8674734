"""Best-of-N: N whole traces sampled per problem, verified, ranked by the PRM's aggregate over their steps.

One propose() call (mode 'full', k = n_samples) for the batch and one score() call for every step of every
verified sample. The result's `samples` lists every distinct verified sample in generator order (its index `i`, its
score and answer, and the PRM calls and tokens it added to those before it), so that the first k of them are what
best-of-k would have seen (the scaling experiment subsamples them, pcr_ray/pipeline/scaling.py).
A sample is a JSON object {"steps": [...], "answer": [...]}; the problem's givens are used
(a sample's own "givens", if any, are ignored), so every sample is judged against the same known quantities.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import replace
from typing import Any

from pcr_ray.core.render import render_step
from pcr_ray.core.trace import Trace, parse_trace
from pcr_ray.core.verifier import VerifierState, verify
from pcr_ray.generators.base import ProposalRequest
from pcr_ray.search.candidates import check_answer_candidate
from pcr_ray.search.scoring import ScoreBatch, pair_for
from pcr_ray.search.selection import Answered, answer_quantity, quantity_key, select_answered
from pcr_ray.search.strategy import search_strategy
from pcr_ray.search.types import SearchConfig, SearchProblem, SearchResult, aggregate
from pcr_ray.search.usage import propose_counted


def parse_sample(raw: str, problem: SearchProblem) -> tuple[Trace | None, str]:
    """A sampled whole trace over the problem's own givens; (None, the reject code) when it does not parse."""
    try:
        obj = json.loads(raw)
    except (ValueError, RecursionError):
        return None, "malformed"
    if not isinstance(obj, dict):
        return None, "malformed"
    obj = {"givens": [g.to_dict() for g in problem.givens], "steps": obj.get("steps", []),
           "answer": obj.get("answer", [])}
    trace, errors = parse_trace(obj)
    if trace is None:
        return None, errors[0].code if errors else "malformed"
    return trace, ""


@search_strategy("best_of_n")
def run_best_of_n(problems: list[SearchProblem], generator: Any, scorer: Any | None,
                  cfg: SearchConfig) -> list[SearchResult]:
    """Sample, verify, score and pick the best verified trace of each problem."""
    t0 = time.perf_counter()
    reqs = [ProposalRequest(p.id, p.text, p.givens, (), k=cfg.n_samples, mode="full", target_unit=p.target_unit,
                            seed=cfg.seed) for p in problems]
    results = [SearchResult.for_problem(p, cfg.method) for p in problems]
    tg = time.perf_counter()
    try:
        outs, usage = propose_counted(generator, reqs)
    except Exception as exc:
        for r in results:
            r.error, r.stop_reason = f"generator failed: {type(exc).__name__}: {exc}"[:500], "error"
        return results
    gen_share = (time.perf_counter() - tg) / max(1, len(problems))
    caches: dict[int, dict[tuple[str, str], float]] = {}
    batch = ScoreBatch(caches)
    vcfg = cfg.verifier_config
    valid: list[list[tuple[Trace, list[int], Any, int]]] = []
    for i, (p, cands) in enumerate(zip(problems, outs, strict=True)):
        res = results[i]
        res.gen_s = round(gen_share, 4)
        res.prompt_tokens, res.output_tokens = usage[i]
        rejects: Counter = Counter()
        tv = time.perf_counter()
        kept: list[tuple[Trace, list[int], Any, int]] = []
        seen: set[str] = set()
        for n, raw in enumerate(cands):
            res.n_proposed += 1
            trace, code = parse_sample(raw, p)
            if trace is None:
                rejects[code] += 1
                continue
            res.n_parsed += 1
            verdict = verify(trace, vcfg)
            ans = None
            if verdict.ok:
                state, _ = VerifierState.from_givens(p.givens, vcfg)
                for s in verdict.steps:
                    state = state.extend(s)
                ans = check_answer_candidate(state, trace.answer, p.target_unit, strict=True)
            if not verdict.ok or ans is None or not ans.ok:
                d = verdict.first_failure or (ans.diagnostic if ans else None)
                rejects[d.code if d else "invalid"] += 1
                continue
            filled = trace.with_steps([replace(s.step, value=s.value) for s in verdict.steps if s.step is not None])
            key = filled.to_json()
            if key in seen:
                rejects["duplicate"] += 1
                continue
            seen.add(key)
            res.n_verified += 1
            idx = [batch.add(i, pair_for(p.text, p.givens, filled.steps[:j], st, with_values=cfg.render_values))
                   for j, st in enumerate(filled.steps)] if cfg.uses_prm else []
            kept.append((filled, idx, ans, n))
        res.verify_s = round(time.perf_counter() - tv, 4)
        res.reject_codes = dict(rejects)
        valid.append(kept)
    scores: list[float] = []
    if batch.requests:
        try:
            scores, acct = batch.run(scorer)
        except Exception as exc:
            for r in results:
                r.error, r.stop_reason = f"scorer failed: {type(exc).__name__}: {exc}"[:500], "error"
            return results
        for owner, a in acct.items():
            results[owner].n_scored, results[owner].n_prm_calls = a["scored"], a["prm_calls"]
            results[owner].n_cache_hits, results[owner].prm_tokens = a["cache_hits"], a["prm_tokens"]
            results[owner].prm_s = round(batch.seconds * a["scored"] / len(batch.requests), 4)

    for i, kept in enumerate(valid):
        res = results[i]
        res.iterations = 1
        if not kept:
            res.stop_reason = "no_valid_sample"
            res.wall_s = round(time.perf_counter() - t0, 4)
            continue
        ranked = []
        seen_pairs: set[tuple[str, str]] = set()
        for order, (trace, idx, ans, n) in enumerate(kept):
            st = [scores[j] for j in idx]
            ranked.append((aggregate(st, cfg.aggregate) if cfg.uses_prm else 0.0, -order, trace, st, ans))
            new = [j for j in idx if batch.requests[j][1] not in seen_pairs]
            seen_pairs.update(batch.requests[j][1] for j in idx)
            av = ans.values[0] if ans.values else None
            res.samples.append({"i": n, "score": ranked[-1][0] if cfg.uses_prm else None, "order": order,
                                "prm_calls": len(new), "prm_tokens": sum(batch.tokens[j] for j in new),
                                **({"value": float(av.value), "unit": av.unit, "key": quantity_key(av.dims, av.base)}
                                   if av is not None else {})})
        items = [Answered(sc if cfg.uses_prm else 1.0, -neg_order,
                          answer_quantity(a.values[0].dims, a.values[0].base) if a.values else ())
                 for sc, neg_order, _, _, a in ranked]
        score, _, trace, st, ans = ranked[select_answered(items, cfg.answer_selection)]
        res.trace, res.score = trace.to_dict(), score if cfg.uses_prm else None
        res.trace_ok = cfg.verifier_coverage >= 1.0 or verify(trace).ok  # judged by the full verifier
        res.steps = [{"step": render_step(s), "verdict": "ok", "score": st[j] if j < len(st) else None}
                     for j, s in enumerate(trace.steps)]
        av = ans.values[0]
        res.answer_value, res.answer_unit, res.answer_name = float(av.value), av.unit, av.name
        res.stop_reason = "answered"
        res.wall_s = round(time.perf_counter() - t0, 4)
    return results
