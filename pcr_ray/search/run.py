"""`run_search`: dispatch a batch of problems to the strategy its method names (pcr_ray.search.strategy)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pcr_ray.search.types import SearchConfig, SearchProblem, SearchResult


def run_search(problems: Sequence[SearchProblem], generator: Any, scorer: Any | None,
               cfg: SearchConfig) -> list[SearchResult]:
    """Search every problem (lock-step, so generator and PRM calls are batched across problems).

    `generator` has .propose(requests); `scorer` has .score(pairs) (None only for a method without a PRM).
    """
    if cfg.uses_prm and scorer is None:
        raise ValueError(f"method {cfg.method!r} needs a PRM scorer (only a method registered with uses_prm=False, "
                         f"such as verifier_only, runs without one)")
    if not problems:
        return []
    return cfg.strategy.run(list(problems), generator, scorer, cfg)
