"""The direct baseline: the model answers in free text (no tools); the answer is extracted for grading."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from pcr_ray.baselines.base import BASELINES, BaselineConfig
from pcr_ray.core.answers import extract_answer
from pcr_ray.generators.base import ProposalRequest
from pcr_ray.search import SearchProblem, SearchResult
from pcr_ray.search.usage import propose_counted


@BASELINES.register("direct")
def run_direct(problems: Sequence[SearchProblem], generator: Any, cfg: Mapping[str, Any] | None = None,
               ) -> list[SearchResult]:
    """One batched propose() in mode 'direct'; the first sample's extracted answer is the answer."""
    seed = BaselineConfig.from_mapping(cfg).seed
    t0 = time.perf_counter()
    reqs = [ProposalRequest(p.id, p.text, p.givens, k=1, mode="direct", target_unit=p.target_unit, seed=seed)
            for p in problems]
    results = [SearchResult.for_problem(p, "direct") for p in problems]
    try:
        outs, usage = propose_counted(generator, reqs)
    except Exception as exc:
        for r in results:
            r.error, r.stop_reason = f"generator failed: {type(exc).__name__}: {exc}"[:500], "error"
        return results
    wall = time.perf_counter() - t0
    for res, cands, (n_in, n_out) in zip(results, outs, usage, strict=True):
        res.prompt_tokens, res.output_tokens = n_in, n_out
        text = cands[0] if cands else ""
        res.n_proposed = len(cands)
        res.iterations = 1
        res.gen_s = res.wall_s = round(wall / max(1, len(problems)), 4)
        res.candidates = [{"kind": "direct", "candidate": text[-600:]}]
        hit = extract_answer(text)
        if hit is None:
            res.stop_reason = "no_answer"
            continue
        res.n_parsed = 1
        res.answer_value, res.answer_unit, res.stop_reason = hit.value, hit.unit, "answered"
    return results
