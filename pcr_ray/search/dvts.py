"""Diverse verifier tree search (DVTS, as in search-and-learn): N/B independent greedy subtrees per problem.

N = n_samples, B = beam_width. The first search step expands each problem's root as the beam search does
(candidates parsed, verified, the survivors scored by the PRM) and keeps the n = max(1, N // B) best distinct
first steps; each becomes the root of a subtree that goes on alone as a greedy search (beam width 1: per step the
verified candidates are scored and the best one is kept; answers compete with steps, a dead subtree backtracks
within itself). Every subtree of every problem runs lock-step, so generator and PRM calls stay batched. Each
subtree ends with at most one answered trace; `answer_selection` picks among them (`best`, or `vote`: the answer
with the most summed score). Distinct first steps make the subtrees differ even with a deterministic generator
(the enumerator), where search-and-learn relies on sampling; with an LLM each subtree also samples with seeds of
its own. Fewer than n valid first steps give fewer subtrees.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import replace
from typing import Any

from pcr_ray.search.beam import SearchRun, finish_run, run_result, search_runs, start_runs
from pcr_ray.search.strategy import search_strategy
from pcr_ray.search.types import SearchConfig, SearchProblem, SearchResult

SEED_STRIDE = 7919  # subtree j samples with seed offset j * SEED_STRIDE (LLM generators)


def n_subtrees(cfg: SearchConfig) -> int:
    """How many subtrees a problem grows: n_samples // beam_width, at least one."""
    return max(1, cfg.n_samples // cfg.beam_width)


@search_strategy("dvts")
def run_dvts(problems: list[SearchProblem], generator: Any, scorer: Any | None,
             cfg: SearchConfig) -> list[SearchResult]:
    """DVTS over a batch of problems; see the module docstring."""
    t0 = time.perf_counter()
    roots = start_runs(problems, cfg)
    search_runs(roots, generator, scorer, replace(cfg, beam_width=n_subtrees(cfg)), iterations=1)
    subs: list[SearchRun] = []
    owners: list[int] = []
    for r in roots:
        if r.done:
            continue
        for j, beam in enumerate(r.beams):
            subs.append(SearchRun(len(subs), r.problem, [beam], seed_offset=(j + 1) * SEED_STRIDE))
            owners.append(r.idx)
    search_runs(subs, generator, scorer, replace(cfg, beam_width=1, n_complete=1), first_iter=1)
    for s in subs:
        if not s.done:
            finish_run(s, "max_steps")
    return [run_result(_merge(r, [s for s, o in zip(subs, owners, strict=True) if o == r.idx]), cfg, t0)
            for r in roots]


def _merge(root: SearchRun, subs: list[SearchRun]) -> SearchRun:
    """One run per problem: the root step's and every subtree's counts, logs and answered traces."""
    merged = SearchRun(root.idx, root.problem, [])
    merged.counts = sum((s.counts for s in subs), Counter(root.counts))
    merged.counts["iterations"] = root.counts["iterations"] + max((s.counts["iterations"] for s in subs), default=0)
    merged.counts["subtrees"] = len(subs)
    merged.rejects = sum((s.rejects for s in subs), Counter(root.rejects))
    merged.log = list(root.log)
    for j, s in enumerate(subs):
        merged.log += [{**entry, "subtree": j} for entry in s.log]
    merged.completed = [c for s in subs for c in s.completed]
    merged.gen_s = root.gen_s + sum(s.gen_s for s in subs)
    merged.verify_s = root.verify_s + sum(s.verify_s for s in subs)
    merged.prm_s = root.prm_s + sum(s.prm_s for s in subs)
    merged.error = root.error or next((s.error for s in subs if s.error), "")
    merged.done = True
    merged.t_done = max([root.t_done] + [s.t_done for s in subs])
    if root.done:  # the root step ended the problem (no givens, bad givens, no valid first step, an error)
        merged.stop_reason = root.stop_reason
    elif merged.completed:
        merged.stop_reason = "answered"
    else:
        reasons = {s.stop_reason for s in subs}
        merged.stop_reason = "error" if "error" in reasons else "max_steps" if "max_steps" in reasons else "dead_end"
    return merged
