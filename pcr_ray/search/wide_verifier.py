"""`wide_verifier`: the verifier-only beam search with 16 beams (a scratch strategy for the walkthrough)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from pcr_ray.search.beam import run_beam_search
from pcr_ray.search.strategy import search_strategy
from pcr_ray.search.types import SearchConfig, SearchProblem, SearchResult


@search_strategy("wide_verifier", uses_prm=False)
def run_wide_verifier(problems: list[SearchProblem], generator: Any, scorer: Any | None,
                      cfg: SearchConfig) -> list[SearchResult]:
    """16 beams kept in generator order, no PRM."""
    return run_beam_search(problems, generator, scorer, replace(cfg, beam_width=16))
