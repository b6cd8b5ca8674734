"""Verifier-first search: shared types (`types`), one strategy per file (`beam`, `best_of_n`, `dvts`), `run_search`.

`from pcr_ray.search import SearchConfig, SearchProblem, run_search` is the public surface. Importing the package
imports every module of its folder, which registers each strategy (pcr_ray.search.strategy.STRATEGIES).
"""

import sys

from pcr_ray.registry import import_submodules
from pcr_ray.search.run import run_search
from pcr_ray.search.strategy import STRATEGIES, Strategy, search_strategy
from pcr_ray.search.types import (
    AGGREGATES,
    SearchConfig,
    SearchProblem,
    SearchResult,
    aggregate,
    public_desc,
    target_unit_of,
)

import_submodules(sys.modules[__name__])
METHODS: tuple[str, ...] = STRATEGIES.names()  # the built-in methods: nsprm, prm_only, verifier_only, greedy, ...

__all__ = ["AGGREGATES", "METHODS", "STRATEGIES", "SearchConfig", "SearchProblem", "SearchResult", "Strategy",
           "aggregate", "public_desc", "run_search", "search_strategy", "target_unit_of"]
