"""Provenance of a reliability benchmark's JSON: command, git revision, machine; written to the cache and results/."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from _machine import git_revision, machine_info, write_result

REPO = Path(__file__).resolve().parent.parent


def provenance() -> dict:
    """The command line, git revision (`+dirty` when the tree had changes), machine and time of this run."""
    return {"command": " ".join(["python", *sys.argv]), "git_revision": git_revision(),
            "machine": machine_info(), "utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "note": "other engineers' jobs shared this 2-core machine; compare ratios measured in the same run"}


def save(name: str, result: dict, to_results: bool) -> Path:
    """Write `result` (with provenance) to <cache>/bench/<name>.json, and to benchmarks/results/ when asked."""
    return write_result(name, {**result, **provenance()}, commit=True if to_results else None)
