"""Batched PRM scoring with a per-problem cache of (context, step) scores and per-problem call and token accounting."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pcr_ray.core.render import render_candidate, render_context
from pcr_ray.core.trace import Given, Step
from pcr_ray.search.usage import score_counted


def pair_for(problem_text: str, givens: Sequence[Given], prefix: Sequence[Step], step: Step,
             *, with_values: bool = True) -> tuple[str, str]:
    """The (context, step) text pair the PRM scores; the rendering is pcr_ray.core.render's, shared with training."""
    if not with_values:
        prefix = [Step(s.op, s.args, s.out, None) for s in prefix]
        step = Step(step.op, step.args, step.out, None)
    return render_context(problem_text, givens, prefix), render_candidate(givens, prefix, step)


@dataclass
class ScoreBatch:
    """Pairs requested by many problems in one search step; `run` makes one scorer call for the uncached ones."""

    caches: dict[int, dict[tuple[str, str], float]]
    requests: list[tuple[int, tuple[str, str]]] = field(default_factory=list)
    seconds: float = 0.0
    tokens: list[int] = field(default_factory=list)  # after run: PRM tokens per request (0: cached or repeated)

    def add(self, owner: int, pair: tuple[str, str]) -> int:
        """Queue a pair for problem `owner`; returns its index into the results of `run`."""
        self.requests.append((owner, pair))
        return len(self.requests) - 1

    def run(self, scorer: Any) -> tuple[list[float], dict[int, dict[str, int]]]:
        """Scores for every queued pair, and per owner {'scored', 'prm_calls', 'cache_hits', 'prm_tokens'}.

        prm_tokens: the tokens the PRM encodes for the pairs this owner sent it (pcr_ray.search.usage; 0 from a
        scorer that does not count); a pair answered from the cache costs none.
        """
        acct: dict[int, dict[str, int]] = {}
        self.tokens = [0] * len(self.requests)
        todo: dict[tuple[str, str], list[int]] = {}
        out: list[float | None] = [None] * len(self.requests)
        for i, (owner, pair) in enumerate(self.requests):
            a = acct.setdefault(owner, {"scored": 0, "prm_calls": 0, "cache_hits": 0, "prm_tokens": 0})
            a["scored"] += 1
            cache = self.caches.setdefault(owner, {})
            if pair in cache:
                out[i] = cache[pair]
                a["cache_hits"] += 1
                continue
            if pair not in todo:
                todo[pair] = []
                a["prm_calls"] += 1
            else:
                a["cache_hits"] += 1
            todo[pair].append(i)
        if todo:
            pairs = list(todo)
            t0 = time.perf_counter()
            scores, tokens = score_counted(scorer, pairs)
            self.seconds += time.perf_counter() - t0
            if len(scores) != len(pairs) or len(tokens) != len(pairs):
                raise RuntimeError(f"scorer returned {len(scores)} scores and {len(tokens)} token counts for "
                                   f"{len(pairs)} pairs")
            for pair, n in zip(pairs, tokens, strict=True):
                first = todo[pair][0]
                acct[self.requests[first][0]]["prm_tokens"] += n
                self.tokens[first] = n
            for pair, s in zip(pairs, scores, strict=True):
                for i in todo[pair]:
                    out[i] = float(s)
                    self.caches.setdefault(self.requests[i][0], {})[pair] = float(s)
        return [float(x) for x in out], acct  # type: ignore[arg-type]
