"""`run_search`: dispatch a batch of problems to the strategy its method names (beam, best-of-N or DVTS)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pcr_ray.search.beam import run_beam_search
from pcr_ray.search.best_of_n import run_best_of_n
from pcr_ray.search.dvts import run_dvts
from pcr_ray.search.types import SearchConfig, SearchProblem, SearchResult


def run_search(problems: Sequence[SearchProblem], generator: Any, scorer: Any | None,
               cfg: SearchConfig) -> list[SearchResult]:
    """Search every problem (lock-step, so generator and PRM calls are batched across problems).

    `generator` has .propose(requests); `scorer` has .score(pairs) (None only for verifier_only).
    """
    if cfg.uses_prm and scorer is None:
        raise ValueError(f"method {cfg.method!r} needs a PRM scorer (only verifier_only runs without one)")
    if not problems:
        return []
    if cfg.method == "best_of_n":
        return run_best_of_n(list(problems), generator, scorer, cfg)
    if cfg.method == "dvts":
        return run_dvts(list(problems), generator, scorer, cfg)
    return run_beam_search(list(problems), generator, scorer, cfg)
