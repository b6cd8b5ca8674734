"""Shared benchmark helpers (pcr_ray.bench.records, pcr_ray.bench.dry_run): the machine, the summary JSON (command,
git revision) in the cache and, asked, in the checkout's benchmarks/results/, the --dry-run; puts the checkout first
on sys.path."""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "results"
sys.path.insert(0, str(ROOT))

from pcr_ray.bench import records  # noqa: E402
from pcr_ray.bench.dry_run import add_dry_run, dry_run  # noqa: E402
from pcr_ray.bench.records import git_revision, machine_info, records_path  # noqa: E402

__all__ = ["RESULTS", "ROOT", "add_dry_run", "dry_run", "git_revision", "machine_info", "records_path", "write_result"]


def write_result(name: str, result: dict, commit: bool | None = None) -> Path:
    """Write the summary JSON to <cache>/bench/NAME.json: a run's record.

    commit=True, or commit=None with PCR_RAY_BENCH_RESULTS=1 in the environment, also writes
    benchmarks/results/NAME.json, the committed copy: only for a record the docs cite.
    """
    if commit is None:
        commit = os.environ.get("PCR_RAY_BENCH_RESULTS") == "1"
    return records.write_result(name, result, RESULTS if commit else None)
