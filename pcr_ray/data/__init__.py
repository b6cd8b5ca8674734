"""Data sets: the Problem record, readers, GSM8K gold traces, procedural physics, givens extraction.

Nothing here imports Ray except `pcr_ray.data.ray_dataset`. Importing the package imports every module of its
folder, so each reader's `@data_source(name)` runs (pcr_ray.data.sources): a new data source is one new module.
"""

import sys

from pcr_ray.data.problem import Problem
from pcr_ray.data.readers import DataMissingError, iter_dataset, load_dataset
from pcr_ray.data.sources import DATA_SOURCES, DataSource, data_source
from pcr_ray.registry import import_submodules

import_submodules(sys.modules[__name__])
DATASETS: tuple[str, ...] = DATA_SOURCES.names()  # gsm8k_train, gsm8k_test, math500, math, scibench, file, ...

__all__ = ["DATASETS", "DATA_SOURCES", "DataMissingError", "DataSource", "Problem", "data_source", "iter_dataset",
           "load_dataset"]
