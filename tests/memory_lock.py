"""One memory-heavy test at a time across both suites: a file lock `make test`'s two pytest processes share.

On a 24 GB machine the suites' peaks can meet: two Ray Train workers fine-tuning SmolLM2 (about 4 and 2 GB) beside a
second vLLM engine (about 2.5 GB with its engine core) beside both suites' own processes. Ray's memory monitor then
kills workers, the session's own Ray actors among them, and later tests fail for it. A test that needs several GB
of its own holds this lock, so at most one such peak runs at a time.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

LOCK_FILE = "pcr-ray-tests-heavy-memory.lock"


def lock_path() -> Path:
    """The lock both suites use: in PCR_RAY_TEST_LOCK_DIR, else the system's temporary folder."""
    return Path(os.environ.get("PCR_RAY_TEST_LOCK_DIR") or tempfile.gettempdir()) / LOCK_FILE


@contextmanager
def heavy_memory() -> Iterator[None]:
    """Hold the lock for the block (waits while another test holds it)."""
    path = lock_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
