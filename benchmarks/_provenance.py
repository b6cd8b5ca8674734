"""Provenance of a reliability benchmark's JSON: command, git revision, machine; written to the cache and results/."""

from __future__ import annotations

import json
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
    from pcr_ray.paths import cache_dir

    result = {**result, **provenance()}
    path = cache_dir() / "bench" / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2, sort_keys=True, default=str) + "\n")
    print(f"wrote {path}")
    if to_results:
        write_result(name, result)
    return path
