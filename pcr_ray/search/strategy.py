"""The search-strategy registry: a method name -> the function that runs it and what it needs (PRM, verifier).

A strategy is a module of pcr_ray/search/ whose run function carries `@search_strategy(name, ...)`; the package
imports every module of its folder (pcr_ray.registry.import_submodules), so the file is all there is to add.
`STRATEGIES.names()` is the one list of search methods (`pcr_ray.search.METHODS`, the configs' checks, the docs).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from pcr_ray.registry import Registry

if TYPE_CHECKING:
    from pcr_ray.search.types import SearchConfig, SearchProblem, SearchResult


class StrategyRun(Protocol):
    """What a strategy is: search a batch of problems lock-step and return one SearchResult per problem, in order.

    `generator` offers `propose(requests)` (pcr_ray.generators.base.Generator; `propose_counted` when it counts
    tokens, pcr_ray.search.usage); `scorer` offers `score(pairs)` (pcr_ray.prm.base.StepScorer) and is None only
    for a strategy registered with uses_prm=False. `cfg.method` is the strategy's name; run_search has checked that
    `problems` is not empty and that a PRM is there when the strategy needs one.
    """

    def __call__(self, problems: list[SearchProblem], generator: Any, scorer: Any | None,
                 cfg: SearchConfig) -> list[SearchResult]: ...


@dataclass(frozen=True)
class Strategy:
    """A registered search method: its run function and the parts of the pipeline it uses.

    uses_prm: needs a PRM scorer (the pipeline starts one); uses_verifier: candidates pass the verifier (and a
    retry carries its diagnostics); beam_width: a width the method fixes (greedy: 1), None to take the config's.
    """

    name: str
    run: StrategyRun
    uses_prm: bool = True
    uses_verifier: bool = True
    beam_width: int | None = None


STRATEGIES: Registry[Strategy] = Registry("search method")


def search_strategy(name: str, *, uses_prm: bool = True, uses_verifier: bool = True,
                    beam_width: int | None = None) -> Callable[[StrategyRun], StrategyRun]:
    """Decorator: register the decorated run function as search method `name` (stackable: one function, many)."""

    def deco(run: StrategyRun) -> StrategyRun:
        STRATEGIES.add(name, Strategy(name, run, uses_prm, uses_verifier, beam_width))
        return run

    return deco
