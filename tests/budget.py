"""The test suite's budget: `python -m tests.budget DURATIONS START` prints the wall time since START (epoch
seconds) against the budgets and the fifteen slowest tests and builds recorded in DURATIONS (JSON lines written by
tests/conftest.py and tests/warm_cache.py). It never fails the run: time is measured, not asserted."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

FRESH_BUDGET_S = 25 * 60  # a fresh machine: set-up, the test artifacts' builds, both suites (docs/development.md)
WARM_BUDGET_S = 12 * 60  # the per-user cache and the environments warm: nothing to build, train or convert


def report(durations: Path, start: float, now: float | None = None, top: int = 15) -> str:
    """The budget lines: wall time, both budgets, and the `top` slowest tests."""
    wall = (time.time() if now is None else now) - start
    rows = [json.loads(line) for line in durations.read_text().splitlines() if line.strip()] \
        if durations.exists() else []
    lines = [f"make test: {wall / 60:.1f} min wall, {sum(r['seconds'] for r in rows) / 60:.1f} min in "
             f"{len(rows)} tests (budget: {FRESH_BUDGET_S // 60} min on a fresh machine, {WARM_BUDGET_S // 60} "
             f"min with the cache warm; docs/development.md)"]
    if wall > FRESH_BUDGET_S:
        lines.append(f"warning: over the fresh-machine budget by {(wall - FRESH_BUDGET_S) / 60:.1f} min")
    lines.append(f"the {min(top, len(rows))} slowest tests and builds:")
    for r in sorted(rows, key=lambda r: -r["seconds"])[:top]:
        lines.append(f"  {r['seconds']:8.1f} s  {r['test']}")
    cpu = [r for r in rows if "cpu_s" in r]
    if cpu:  # what each test cost the machine: its process tree's CPU seconds, whatever ran beside it
        lines.append(f"the {min(top, len(cpu))} tests that used the most CPU ({sum(r['cpu_s'] for r in cpu) / 60:.1f} "
                     f"CPU-min in {len(cpu)} tests):")
        for r in sorted(cpu, key=lambda r: -r["cpu_s"])[:top]:
            lines.append(f"  {r['cpu_s']:8.1f} CPU-s  {r['test']}")
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python -m tests.budget DURATIONS_JSONL START_EPOCH_SECONDS")
    print(report(Path(sys.argv[1]), float(sys.argv[2])))
