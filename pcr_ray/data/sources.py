"""The data-source registry: a name (`sources: [{name: ...}]`, `datasets=`) -> the reader that yields its problems."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from pcr_ray.data.problem import Problem
from pcr_ray.registry import Registry


class SourceReader(Protocol):
    """A data source: the problems of one data set, read from the data folder (or generated).

    Called with keywords only. `data_dir` is the data folder (None: pcr_ray.paths.data_dir()); the others are the
    source's `kwargs` in a dataset config (e.g. physics' n and seed); an unknown one is a TypeError naming it. A
    file the source needs and the folder lacks is a DataMissingError (pcr_ray.data.readers) saying where to put it.
    """

    def __call__(self, data_dir: str | Path | None = None, **kwargs: Any) -> Iterator[Problem]: ...


@dataclass(frozen=True)
class DataSource:
    """A registered data set: its reader and the files it reads (a glob under the data folder; '' when generated)."""

    name: str
    read: SourceReader
    files: str = ""


DATA_SOURCES: Registry[DataSource] = Registry("data set")


def data_source(name: str, *, files: str = "") -> Callable[[SourceReader], SourceReader]:
    """Decorator: register the decorated reader as data set `name`, reading `files` (a glob in the data folder)."""

    def deco(read: SourceReader) -> SourceReader:
        DATA_SOURCES.add(name, DataSource(name, read, files))
        return read

    return deco
