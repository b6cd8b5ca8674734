"""Baselines on the same problems and budget: direct answer and ToRA-style Python execution (sandboxed).

Importing the package imports every module of its folder; each baseline registers itself in `BASELINES`
(pcr_ray.baselines.base), so a new baseline is one new module.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any

from pcr_ray.baselines.base import BASELINES, BaselineRun
from pcr_ray.registry import import_submodules

import_submodules(sys.modules[__name__])


def run_baseline(method: str, problems: Sequence[Any], generator: Any,
                 cfg: Mapping[str, Any] | None = None) -> list[Any]:
    """Run the baseline registered as `method` (direct, pyexec, ...) on SearchProblems; returns SearchResults."""
    return BASELINES.get(method)(problems, generator, cfg)


__all__ = ["BASELINES", "BaselineRun", "run_baseline"]
