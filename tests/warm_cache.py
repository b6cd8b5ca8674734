"""Build the trained artifacts both suites share before they start: `python -m tests.warm_cache [DURATIONS]`.

On a fresh machine the quick CSP PRM (about 9 minutes on 2 cores), the SmolLM2 model folders and the tests'
fine-tune `sft:test` (about 2 minutes) are made here, once, on both cores, instead of inside whichever test asks
first, where the build counted against that test's timeout while the other suite waited on its lock. With the
per-user cache warm each finds its folder and returns at once. Each build's seconds go to DURATIONS (the JSON
lines tests/budget.py reads) as `warm-cache::<name>`.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

from tests import conftest  # noqa: F401 - the suites' environment: offline hub, the data folder beside the checkout


def _quick_prm() -> Path:
    from pcr_ray.prm.checkpoints import ensure_checkpoint

    return ensure_checkpoint("csp")


def _sft_test() -> Path:
    from pcr_ray.generators.model_folder import resolve_model

    return Path(resolve_model("sft:test"))


def _half_model() -> Path:
    from pcr_ray.generators.model_folder import ensure_half_model

    return ensure_half_model()


ARTIFACTS: dict[str, Callable[[], Path]] = {
    "quick CSP PRM": _quick_prm,
    "sft:test (with the SmolLM2 folder)": _sft_test,
    "SmolLM2 cut to half its layers": _half_model,
}


def warm(durations: Path | None = None) -> int:
    """Build each artifact that is missing; 1 if any failed (the tests that need it then say why), else 0."""
    rc = 0
    for name, build in ARTIFACTS.items():
        t0 = time.time()
        try:
            folder = build()
        except Exception as exc:  # noqa: BLE001 - reported; the suites still run and the tests name the failure
            print(f"warm-cache: {name} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
            rc = 1
            continue
        seconds = time.time() - t0
        print(f"warm-cache: {name}: {folder} ({seconds:.0f} s)")
        if durations is not None:
            with durations.open("a") as f:
                f.write(json.dumps({"test": f"warm-cache::{name}", "seconds": round(seconds, 2)}) + "\n")
    return rc


if __name__ == "__main__":
    if len(sys.argv) > 2 or (len(sys.argv) == 2 and sys.argv[1] in ("-h", "--help")):
        sys.exit(__doc__)
    sys.exit(warm(Path(sys.argv[1]) if len(sys.argv) == 2 else None))
