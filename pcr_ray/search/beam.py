"""Lock-step verifier-first beam search (nsprm, prm_only, verifier_only, greedy) over a batch of problems.

One search step for the whole batch: one propose() call for every live beam of every problem (plus bounded
retry rounds for beams whose candidates were all rejected, each carrying the diagnostics), candidates parsed
and checked per beam, one score() call for every surviving candidate of every problem, then per problem:
with a PRM, answer declarations are scored like steps (`answer: x = v [unit]`, so the PRM decides when to stop)
and compete with the steps: the best B children by aggregate score (above the threshold) are kept, answers
among them become completed traces and steps become the beams; the other steps go to a pruned pool that
backtracking resumes from when every beam dies, the other answers are kept as a fallback for a search that
ends without one. The search stops with n_complete answered traces (`stop=best`: only once no live beam scores
above the best of them). Without a PRM (verifier_only) the first valid answer in generator order completes.
"""

from __future__ import annotations

import heapq
import itertools
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any

from pcr_ray.core.render import canonical_names, render_answer, render_context, render_step
from pcr_ray.core.trace import Answer, Step, Trace
from pcr_ray.core.verifier import AnswerValue, VerifierState, verify
from pcr_ray.generators.base import ProposalRequest, uses_feedback
from pcr_ray.search.candidates import check_answer_candidate, check_step_candidate, parse_candidate
from pcr_ray.search.scoring import ScoreBatch, pair_for
from pcr_ray.search.selection import Answered, answer_quantity, quantity_key, select_answered
from pcr_ray.search.strategy import search_strategy
from pcr_ray.search.types import SearchConfig, SearchProblem, SearchResult, aggregate
from pcr_ray.search.usage import propose_counted


@dataclass(frozen=True)
class Beam:
    """A partial trace: steps (values filled), the verifier state after them, and each step's score/verdict."""

    steps: tuple[Step, ...]
    state: VerifierState
    scores: tuple[float, ...] = ()
    verdicts: tuple[str, ...] = ()  # per step: 'ok' or the code the strict verifier would give
    feedback: tuple[str, ...] = ()
    answer: tuple[Answer, ...] = ()
    answer_values: tuple[AnswerValue, ...] = ()
    rank: int = 0  # generator order, for verifier_only
    answer_score: float | None = None  # the PRM's score of the answer declaration

    def key(self) -> frozenset[tuple[Any, ...]]:
        """Semantic identity: the set of (dimension, value) of the step outputs (order and names ignored)."""
        return frozenset((v.dims, float(f"{v.base:.9g}")) for v in self.state.env.values()
                         if v.name in {s.out.name for s in self.steps})


@dataclass
class SearchRun:
    """Per-problem search state (one DVTS subtree is one run; `seed_offset` varies its sampling)."""

    idx: int
    problem: SearchProblem
    beams: list[Beam]
    completed: list[tuple[float, int, Beam]] = field(default_factory=list)
    pruned: list[tuple[float, int, Beam]] = field(default_factory=list)  # heap of (-score, seq, beam)
    spare_answers: list[tuple[float, int, Beam]] = field(default_factory=list)  # scored answers not kept
    seen: set[frozenset[tuple[Any, ...]]] = field(default_factory=set)
    counts: Counter = field(default_factory=Counter)
    rejects: Counter = field(default_factory=Counter)
    log: list[dict[str, Any]] = field(default_factory=list)
    done: bool = False
    stop_reason: str = ""
    error: str = ""
    depth_limited: bool = False
    at_limit: bool = False  # every beam of this search step was at max_steps
    t_done: float = 0.0
    gen_s: float = 0.0
    verify_s: float = 0.0
    prm_s: float = 0.0
    seed_offset: int = 0


@dataclass
class _Child:
    beam: Beam
    parent: int
    pair: tuple[str, str] | None  # what the PRM will score (steps only)
    is_answer: bool
    pair_index: int | None = None
    log_index: int | None = None  # its entry in run.log (log_candidates), where its score is filled in


_SEQ = itertools.count()


def _request(run: SearchRun, beam: Beam, cfg: SearchConfig, it: int, b: int, retry: int) -> ProposalRequest:
    p = run.problem
    return ProposalRequest(p.id, p.text, p.givens, beam.steps, k=cfg.k, feedback=beam.feedback, mode="step",
                           target_unit=p.target_unit, seed=cfg.seed + run.seed_offset + 1000 * it + 10 * b + retry)


def _expand(run: SearchRun, beam: Beam, b: int, cands: list[str], cfg: SearchConfig, it: int,
            ) -> tuple[list[_Child], list[str]]:
    """Parse and check a beam's candidates. Returns the children (with the pair to score) and diagnostics."""
    strict = cfg.uses_verifier
    children: list[_Child] = []
    diags: list[str] = []
    seen_raw: set[str] = set()
    at_limit = len(beam.steps) >= cfg.max_steps
    p = run.problem
    for raw in cands:
        run.counts["proposed"] += 1
        if raw in seen_raw:
            run.counts["duplicates"] += 1
            continue
        seen_raw.add(raw)
        parsed = parse_candidate(raw, len(beam.steps))
        if not parsed.ok:
            run.rejects[parsed.diagnostic.code] += 1
            diags.append(parsed.diagnostic.feedback())
            _log(run, cfg, it, b, raw, "parse", parsed.diagnostic.code)
            continue
        run.counts["parsed"] += 1
        if parsed.answer is not None:
            out = check_answer_candidate(beam.state, parsed.answer, p.target_unit, strict=strict)
            if not out.ok:
                run.rejects[out.diagnostic.code] += 1
                diags.append(out.diagnostic.feedback())
                _log(run, cfg, it, b, raw, "answer", out.diagnostic.code)
                continue
            if not beam.steps:  # answering with a given: nothing was computed, nothing to rank
                run.rejects["answer_without_steps"] += 1
                continue
            run.counts["verified"] += 1
            child = Beam(beam.steps, beam.state, beam.scores, beam.verdicts, (), parsed.answer, out.values,
                         rank=next(_SEQ))
            shown = _shown(beam.steps, cfg)
            pair = (render_context(p.text, p.givens, shown),
                    render_answer(parsed.answer, [v.value for v in out.values] if cfg.render_values else None,
                                  names=canonical_names(p.givens, shown))) if cfg.uses_prm else None
            children.append(_Child(child, b, pair, True,
                                   log_index=_log(run, cfg, it, b, raw, "answer",
                                                  "ok" if out.verifier_ok else out.diagnostic.code)))
            continue
        assert parsed.step is not None
        if at_limit:
            run.depth_limited = True
            continue
        out_s = check_step_candidate(beam.state, parsed.step, strict=strict)
        if not out_s.ok:
            run.rejects[out_s.diagnostic.code] += 1
            diags.append(out_s.diagnostic.feedback())
            _log(run, cfg, it, b, raw, "step", out_s.diagnostic.code)
            continue
        run.counts["verified"] += 1
        verdict = "ok" if out_s.verifier_ok else (out_s.diagnostic.code if out_s.diagnostic else "unverified")
        child = Beam(beam.steps + (out_s.step,), out_s.state, beam.scores, beam.verdicts + (verdict,),
                     rank=next(_SEQ))
        pair = pair_for(p.text, p.givens, beam.steps, out_s.step, with_values=cfg.render_values) \
            if cfg.uses_prm else None
        children.append(_Child(child, b, pair, False, log_index=_log(run, cfg, it, b, raw, "step", verdict)))
    return children, diags


def _shown(steps: tuple[Step, ...], cfg: SearchConfig) -> tuple[Step, ...]:
    return steps if cfg.render_values else tuple(Step(s.op, s.args, s.out, None) for s in steps)


def _log(run: SearchRun, cfg: SearchConfig, it: int, b: int, raw: str, kind: str, verdict: str) -> int | None:
    """Record a candidate and its verdict (cfg.log_candidates); returns its index, for the score added later."""
    if not cfg.log_candidates:
        return None
    run.log.append({"iter": it, "beam": b, "kind": kind, "candidate": raw[:300], "verdict": verdict, "score": None})
    return len(run.log) - 1


def _queue_pairs(live: list[SearchRun], children: dict[tuple[int, int], list[_Child]], batch: ScoreBatch) -> None:
    """Queue every child's (context, step-or-answer) pair for one batched scorer call."""
    for r in live:
        if r.done:
            continue
        for b in range(len(r.beams)):
            for ch in children.get((r.idx, b), []):
                if ch.pair is not None:
                    ch.pair_index = batch.add(r.idx, ch.pair)


def _dedupe_feedback(diags: list[str], n: int) -> tuple[str, ...]:
    out: list[str] = []
    for d in diags:
        if d not in out:
            out.append(d)
        if len(out) >= n:
            break
    return tuple(out)


def trace_score(beam: Beam, how: str) -> float:
    """The aggregate of a (partial or answered) trace's step scores, the answer's score included."""
    scores = beam.scores if beam.answer_score is None else beam.scores + (beam.answer_score,)
    return aggregate(scores, how)


def _select(run: SearchRun, children: list[_Child], cfg: SearchConfig) -> None:
    """The top-B children by aggregate (threshold, dedupe): answers among them complete, steps become beams."""
    ranked: list[tuple[float, float, int, _Child]] = []
    for ch in children:
        if not cfg.uses_prm:
            if ch.is_answer:  # no PRM to judge the stop: the first valid answer completes
                run.completed.append((-float(ch.beam.rank), ch.beam.rank, ch.beam))
            else:
                ranked.append((-float(ch.beam.rank), 0.0, ch.beam.rank, ch))
            continue
        last = ch.beam.answer_score if ch.is_answer else ch.beam.scores[-1]
        if last is None or last < cfg.threshold:
            run.counts["below_threshold"] += 1
            continue
        ranked.append((trace_score(ch.beam, cfg.aggregate), 0.0, ch.beam.rank, ch))
    ranked.sort(key=lambda t: (-t[0], t[1], t[2]))
    kept: list[Beam] = []
    slots = 0
    for score, _, rank, ch in ranked:
        beam = ch.beam
        if ch.is_answer:
            if slots < cfg.beam_width:
                slots += 1
                run.completed.append((score, rank, beam))
            else:
                run.spare_answers.append((score, rank, beam))
            continue
        if cfg.dedupe_beams:
            key = beam.key()
            if key in run.seen:
                run.counts["duplicate_beams"] += 1
                continue
            run.seen.add(key)
        if slots < cfg.beam_width:
            slots += 1
            kept.append(beam)
        else:
            heapq.heappush(run.pruned, (-score, rank, beam))
    run.beams = kept


def _round_stats(run: SearchRun, tag: str, before: tuple[int, int, int], ok: bool) -> None:
    """Candidates proposed / parsed / verified on first asks vs retries, and beams with a valid candidate."""
    c = run.counts
    c[f"{tag}_proposed"] += c["proposed"] - before[0]
    c[f"{tag}_parsed"] += c["parsed"] - before[1]
    c[f"{tag}_verified"] += c["verified"] - before[2]
    c[f"{tag}_asks"] += 1
    c[f"{tag}_asks_ok"] += ok


def _finish(run: SearchRun, reason: str, now: float) -> None:
    if not run.completed and run.spare_answers and reason in ("max_steps", "dead_end"):
        run.completed.append(max(run.spare_answers, key=lambda t: (t[0], -t[1])))  # the best answer seen
        run.counts["fallback_answer"] += 1
        reason = "answered"
    run.done = True
    run.stop_reason = reason
    run.t_done = now


def _better_beam_lives(run: SearchRun, cfg: SearchConfig) -> bool:
    """With stop='best': a live beam scores above every answered trace, so the search goes on."""
    if cfg.stop == "first" or not cfg.uses_prm or not run.beams:
        return False
    best_done = max(score for score, _, _ in run.completed)
    return max(trace_score(b, cfg.aggregate) for b in run.beams) > best_done


def _after_step(run: SearchRun, cfg: SearchConfig, now: float) -> None:
    """Stop (answered / dead end / max steps) or backtrack to the best pruned alternatives."""
    if len(run.completed) >= cfg.n_complete and not _better_beam_lives(run, cfg):
        _finish(run, "answered", now)
        return
    if run.beams:
        return
    if run.at_limit:  # the beams ran out of steps, not of valid continuations: backtracking would restart shallow
        _finish(run, "answered" if run.completed else "max_steps", now)
        return
    if run.pruned and run.counts["backtracks"] < cfg.max_backtracks:
        run.counts["backtracks"] += 1
        while run.pruned and len(run.beams) < cfg.beam_width:
            _, _, beam = heapq.heappop(run.pruned)
            run.beams.append(beam)
        return
    if run.completed:
        _finish(run, "answered", now)
    else:
        _finish(run, "max_steps" if run.depth_limited else "dead_end", now)


def start_runs(problems: list[SearchProblem], cfg: SearchConfig) -> list[SearchRun]:
    """One run per problem with an empty beam (problems with bad or no givens are finished at once)."""
    runs: list[SearchRun] = []
    for i, p in enumerate(problems):
        state, diags = VerifierState.from_givens(p.givens, cfg.verifier_config)
        run = SearchRun(i, p, [Beam((), state)])
        if diags:
            _finish(run, "bad_givens", time.perf_counter())
            run.error = "; ".join(d.feedback() for d in diags)
        elif not p.givens:
            _finish(run, "no_givens", time.perf_counter())
        runs.append(run)
    return runs


@search_strategy("greedy", beam_width=1)
@search_strategy("verifier_only", uses_prm=False)
@search_strategy("prm_only", uses_verifier=False)
@search_strategy("nsprm")
def run_beam_search(problems: list[SearchProblem], generator: Any, scorer: Any | None,
                    cfg: SearchConfig) -> list[SearchResult]:
    """The lock-step beam search; see the module docstring."""
    t0 = time.perf_counter()
    runs = start_runs(problems, cfg)
    search_runs(runs, generator, scorer, cfg)
    now = time.perf_counter()
    for r in runs:
        if not r.done:
            _finish(r, "max_steps", now)
    return [run_result(r, cfg, t0) for r in runs]


def search_runs(runs: list[SearchRun], generator: Any, scorer: Any | None, cfg: SearchConfig, *,
                first_iter: int = 0, iterations: int | None = None) -> None:
    """Search step after search step over `runs` (run.idx is its index in `runs`) until every run is done or
    `iterations` steps (default: enough for max_steps with every backtrack) have passed; `first_iter` numbers the
    first one (it varies the seeds of LLM requests)."""
    caches: dict[int, dict[tuple[str, str], float]] = {}
    retry_ok = uses_feedback(generator) and cfg.uses_verifier
    max_iters = cfg.max_steps * (1 + cfg.max_backtracks) + 1 if iterations is None else iterations
    for it in range(first_iter, first_iter + max_iters):
        live = [r for r in runs if not r.done]
        if not live:
            break
        batch = ScoreBatch(caches) if cfg.uses_prm else None
        children: dict[tuple[int, int], list[_Child]] = {}
        for r in live:
            r.at_limit = all(len(beam.steps) >= cfg.max_steps for beam in r.beams)
        pending = [(r, b, beam) for r in live for b, beam in enumerate(r.beams)]
        for retry in range(cfg.max_retries + 1 if retry_ok else 1):
            if not pending:
                break
            reqs = [_request(r, beam, cfg, it, b, retry) for r, b, beam in pending]
            tg = time.perf_counter()
            try:
                outs, usage = propose_counted(generator, reqs)
                if len(outs) != len(reqs):
                    raise RuntimeError(f"generator returned {len(outs)} lists for {len(reqs)} requests")
            except Exception as exc:  # the batch fails; results so far stay
                now = time.perf_counter()
                for r, _, _ in pending:
                    if not r.done:
                        r.error = f"generator failed: {type(exc).__name__}: {exc}"[:500]
                        _finish(r, "error", now)
                pending = []
                break
            dt = time.perf_counter() - tg
            share = dt / max(1, len(reqs))
            again = []
            for (r, b, beam), cands, (n_in, n_out) in zip(pending, outs, usage, strict=True):
                if r.done:
                    continue
                r.gen_s += share
                r.counts["prompt_tokens"] += n_in
                r.counts["output_tokens"] += n_out
                if retry:
                    r.counts["retries"] += 1
                tv = time.perf_counter()
                before = (r.counts["proposed"], r.counts["parsed"], r.counts["verified"])
                try:
                    kids, diags = _expand(r, beam, b, list(cands), cfg, it)
                except Exception as exc:  # a bug on one problem must not take the batch down
                    r.error = f"search failed: {type(exc).__name__}: {exc}"[:500]
                    _finish(r, "error", time.perf_counter())
                    continue
                r.verify_s += time.perf_counter() - tv
                _round_stats(r, "retry" if retry else "first", before, bool(kids))
                children.setdefault((r.idx, b), []).extend(kids)
                if not kids and diags and retry < cfg.max_retries and retry_ok:
                    fb = _dedupe_feedback(diags, cfg.max_feedback)
                    again.append((r, b, Beam(beam.steps, beam.state, beam.scores, beam.verdicts, fb)))
            pending = again
        if batch is not None:
            _queue_pairs(live, children, batch)
        scores: list[float] = []
        if batch is not None and batch.requests:
            try:
                scores, acct = batch.run(scorer)
            except Exception as exc:
                now = time.perf_counter()
                for r in live:
                    if not r.done:
                        r.error = f"scorer failed: {type(exc).__name__}: {exc}"[:500]
                        _finish(r, "error", now)
                continue
            n_pairs = max(1, len(batch.requests))
            for owner, a in acct.items():
                run = runs[owner]
                run.counts["scored"] += a["scored"]
                run.counts["prm_calls"] += a["prm_calls"]
                run.counts["cache_hits"] += a["cache_hits"]
                run.counts["prm_tokens"] += a["prm_tokens"]
                run.prm_s += batch.seconds * a["scored"] / n_pairs
        now = time.perf_counter()
        for r in live:
            if r.done:
                continue
            r.counts["iterations"] += 1
            kids: list[_Child] = []
            for b in range(len(r.beams)):
                for ch in children.get((r.idx, b), []):
                    if ch.pair_index is not None:
                        s = scores[ch.pair_index]
                        if ch.log_index is not None:
                            r.log[ch.log_index]["score"] = s
                        if ch.is_answer:
                            ch.beam = replace(ch.beam, answer_score=s)
                        else:
                            ch.beam = Beam(ch.beam.steps, ch.beam.state, ch.beam.scores + (s,), ch.beam.verdicts,
                                           rank=ch.beam.rank)
                    kids.append(ch)
            _select(r, kids, cfg)
            _after_step(r, cfg, now)


def finish_run(run: SearchRun, reason: str) -> None:
    """End a run now with `reason` (an answered run ends 'answered'; without an answer the best one scored, if any)."""
    _finish(run, reason, time.perf_counter())


def _chosen(completed: list[tuple[float, int, Beam]], cfg: SearchConfig) -> int:
    """Which answered trace to return (cfg.answer_selection); without a PRM each trace weighs one vote."""
    items = [Answered(score if cfg.uses_prm else 1.0, rank,
                      answer_quantity(b.answer_values[0].dims, b.answer_values[0].base) if b.answer_values else ())
             for score, rank, b in completed]
    return select_answered(items, cfg.answer_selection)


def run_result(run: SearchRun, cfg: SearchConfig, t0: float) -> SearchResult:
    """The SearchResult of a finished run: its chosen answered trace, counts and seconds."""
    p = run.problem
    c = run.counts
    res = SearchResult(
        id=p.id, method=cfg.method, stop_reason=run.stop_reason, error=run.error,
        n_proposed=c["proposed"], n_parsed=c["parsed"], n_verified=c["verified"], n_scored=c["scored"],
        n_prm_calls=c["prm_calls"], n_cache_hits=c["cache_hits"], retries=c["retries"],
        backtracks=c["backtracks"], iterations=c["iterations"], wall_s=round(run.t_done - t0, 4),
        gen_s=round(run.gen_s, 4), verify_s=round(run.verify_s, 4), prm_s=round(run.prm_s, 4),
        reject_codes=dict(run.rejects), candidates=run.log,
        round_stats={k: c[k] for k in sorted(c) if k.startswith(("first_", "retry_"))},
        gold_value=p.gold_value, gold_unit=p.gold_unit, source=p.source, gold_steps=p.gold_steps,
        givens_source=p.givens_source, prompt_tokens=c["prompt_tokens"], output_tokens=c["output_tokens"],
        prm_tokens=c["prm_tokens"],
        samples=[{"score": score if cfg.uses_prm else None, "order": rank,
                  **({"value": float(b.answer_values[0].value), "unit": b.answer_values[0].unit,
                      "key": quantity_key(b.answer_values[0].dims, b.answer_values[0].base)}
                     if b.answer_values else {})} for score, rank, b in run.completed],
    )
    if not run.completed:
        return res
    score, _, beam = run.completed[_chosen(run.completed, cfg)]
    trace = Trace(p.givens, beam.steps, beam.answer)
    verdict = verify(trace)
    res.trace = trace.to_dict()
    res.trace_ok = verdict.ok
    res.final_diagnostics = [d.feedback() for d in verdict.diagnostics]
    res.score = score if cfg.uses_prm else None

    res.steps = [{"step": render_step(s), "verdict": v, "score": (beam.scores[i] if i < len(beam.scores) else None)}
                 for i, (s, v) in enumerate(zip(beam.steps, beam.verdicts, strict=True))]
    if beam.answer_values:
        av = beam.answer_values[0]
        res.answer_value, res.answer_unit, res.answer_name = float(av.value), av.unit, av.name
    return res
