"""Verifier-first search: shared types (`types`), one strategy per file (`beam`, `best_of_n`, `dvts`), `run_search`.

`from pcr_ray.search import SearchConfig, SearchProblem, run_search` is the public surface.
"""

from pcr_ray.search.run import run_search
from pcr_ray.search.types import (
    AGGREGATES,
    METHODS,
    SearchConfig,
    SearchProblem,
    SearchResult,
    aggregate,
    public_desc,
    target_unit_of,
)

__all__ = ["AGGREGATES", "METHODS", "SearchConfig", "SearchProblem", "SearchResult", "aggregate", "public_desc",
           "run_search", "target_unit_of"]
