"""Problems -> Ray Dataset (the only module of pcr_ray.data that imports Ray)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from pcr_ray.data.problem import Problem

if TYPE_CHECKING:
    import ray.data


def problems_to_dataset(problems: Iterable[Problem]) -> ray.data.Dataset:
    """A ray.data.Dataset of Problem.to_dict() rows (gold_trace as a JSON string)."""
    import ray.data  # heavy: ray

    rows = [p.to_dict() for p in problems]
    if not rows:
        raise ValueError("problems_to_dataset: no problems given")
    return ray.data.from_items(rows)


def dataset_to_problems(ds: ray.data.Dataset) -> list[Problem]:
    """Back from a Dataset of Problem rows (e.g. after a map stage) to Problem records."""
    return [Problem.from_dict(dict(r)) for r in ds.iter_rows()]


def read_problems_parquet(path: str) -> ray.data.Dataset:
    """A Dataset over a problems parquet written by `pcr-ray data build`."""
    import ray.data  # heavy: ray

    return ray.data.read_parquet(path)
