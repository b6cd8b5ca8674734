"""One memory-heavy test at a time across both suites: a file lock `make test`'s two pytest processes share.

On a 24 GB machine the suites' peaks can meet: two Ray Train workers fine-tuning SmolLM2 (about 4 and 2 GB) beside a
second vLLM engine (about 2.5 GB with its engine core) beside both suites' own processes. Ray's memory monitor then
kills workers, the session's own Ray actors among them, and later tests fail for it. A test that needs several GB
of its own holds this lock, so at most one such peak runs at a time.
"""

from __future__ import annotations

import os
import tempfile
from contextlib import AbstractContextManager
from pathlib import Path

from pcr_ray.paths import file_lock

LOCK_FILE = "pcr-ray-tests-heavy-memory.lock"


def lock_path() -> Path:
    """The lock both suites use: in PCR_RAY_TEST_LOCK_DIR, else the system's temporary folder."""
    return Path(os.environ.get("PCR_RAY_TEST_LOCK_DIR") or tempfile.gettempdir()) / LOCK_FILE


def heavy_memory() -> AbstractContextManager[None]:
    """Hold the lock for a block (waits while another test holds it)."""
    return file_lock(lock_path())
