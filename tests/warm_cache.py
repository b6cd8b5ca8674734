"""Build the trained artifacts both suites share: `python -m tests.warm_cache [DURATIONS]`.

`make test` runs this in the background as the main suite starts. On a fresh machine it makes the test-size PRM
(tests/prm_helpers.py), the SmolLM2 model folder and the tests' fine-tune `sft:test`, once, on both cores. Each is
built under a file lock, so a test that needs one before it is ready waits for that build alone, and a test that asks
first builds it itself; nothing is built twice. With the per-user cache warm each finds its folder and returns at
once. Each build's seconds go to DURATIONS (the JSON lines tests/budget.py reads) as `warm-cache::<name>`.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

from tests import conftest  # noqa: F401 - the suites' environment: offline hub, the data folder beside the checkout
from tests.prm_helpers import small_prm_checkpoint


def _sft_test() -> Path:
    from pcr_ray.generators.model_folder import resolve_model

    return Path(resolve_model("sft:test"))


ARTIFACTS: dict[str, Callable[[], Path]] = {
    "test-size PRM": small_prm_checkpoint,
    "sft:test (with the SmolLM2 folder)": _sft_test,
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
