"""A recipe: commands run in order, each in its own process, a step skipped when the file marking it done exists.

`pcr-ray listwise-rounds` and `pcr-ray reproduce` are recipes; a rerun resumes where the last one stopped.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class RecipeStep:
    """One command of the recipe, and the file whose presence says it has finished."""

    name: str
    argv: tuple[str, ...]
    done_when: Path
    mkdirs: tuple[Path, ...] = ()

    def shell(self) -> str:
        """The command as one line to paste into a shell."""
        return shlex.join(self.argv)


def run_recipe(steps: Sequence[RecipeStep], dry_run: bool = False, label: str = "recipe") -> int:
    """Run the steps in order, skipping finished ones; stops at the first failure (its exit status).
    `label` names the command in the progress lines."""
    for i, step in enumerate(steps, 1):
        head = f"[{label} {i}/{len(steps)}] {step.name}"
        if step.done_when.exists():
            print(f"{head}: done ({step.done_when} exists), skipped", flush=True)
            continue
        print(f"{head}:\n  {step.shell()}", flush=True)
        if dry_run:
            continue
        for d in step.mkdirs:
            d.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        rc = subprocess.call(list(step.argv))
        if rc != 0:
            print(f"{head}: failed with exit status {rc} after {time.perf_counter() - t0:.0f} s; fix it and rerun "
                  f"the same command: finished steps are skipped", file=sys.stderr, flush=True)
            return rc
        if not step.done_when.exists():
            print(f"{head}: exited 0 but wrote no {step.done_when}", file=sys.stderr, flush=True)
            return 1
        print(f"{head}: done in {time.perf_counter() - t0:.0f} s", flush=True)
    return 0
