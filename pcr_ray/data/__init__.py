"""Data sets: the Problem record, readers, GSM8K gold traces, procedural physics, givens extraction.

Nothing here imports Ray except `pcr_ray.data.ray_dataset`.
"""

from pcr_ray.data.problem import Problem
from pcr_ray.data.readers import DATASETS, DataMissingError, iter_dataset, load_dataset

__all__ = ["DATASETS", "DataMissingError", "Problem", "iter_dataset", "load_dataset"]
