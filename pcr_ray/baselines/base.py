"""The baseline registry: a method name -> the function that runs that baseline over a batch of problems."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import fields
from typing import TYPE_CHECKING, Any, Protocol

from pcr_ray.configs import BaselineOptions, frozen_view
from pcr_ray.registry import Registry

if TYPE_CHECKING:
    from pcr_ray.search.types import SearchProblem, SearchResult


class BaselineRun(Protocol):
    """A baseline: answer a batch of SearchProblems with the generator alone (no search, no PRM).

    `generator` offers `propose(requests)` (pcr_ray.generators.base.Generator); `cfg` is the `baseline`
    mapping of the method config (its own keys, e.g. pyexec's sandbox limits; None for the defaults). Returns one
    SearchResult per problem, in order, with `method` set to the baseline's name.
    """

    def __call__(self, problems: Sequence[SearchProblem], generator: Any,
                 cfg: Mapping[str, Any] | None = None) -> list[SearchResult]: ...


class BaselineConfig(frozen_view(BaselineOptions, "BaselineFields")):
    """A baseline's options as it reads them: the checked `baselines` (or `method.baseline`) config, frozen."""

    @classmethod
    def from_mapping(cls, cfg: Mapping[str, Any] | None) -> BaselineConfig:
        """The options from a config mapping (None or a missing key: the default); an unknown key is an error."""
        cfg = dict(cfg or {})
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(cfg) - known)
        if unknown:
            raise ValueError(f"unknown baseline option(s) {unknown}; known: {sorted(known)}")
        return cls(**cfg)


# a module of pcr_ray/baselines/ registers its run function with `@BASELINES.register(name)`
BASELINES: Registry[BaselineRun] = Registry("baseline")
