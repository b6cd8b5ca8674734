"""Baselines on the same problems and budget: direct answer and ToRA-style Python execution (sandboxed)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

BASELINES = ("direct", "pyexec")


def run_baseline(method: str, problems: Sequence[Any], generator: Any,
                 cfg: Mapping[str, Any] | None = None) -> list[Any]:
    """Run baseline `method` ('direct' | 'pyexec') on SearchProblems; returns SearchResults."""
    if method == "direct":
        from pcr_ray.baselines.direct import run_direct

        return run_direct(problems, generator, cfg)
    if method == "pyexec":
        from pcr_ray.baselines.pyexec import run_pyexec

        return run_pyexec(problems, generator, cfg)
    raise ValueError(f"unknown baseline {method!r}; expected one of {BASELINES}")


__all__ = ["BASELINES", "run_baseline"]
