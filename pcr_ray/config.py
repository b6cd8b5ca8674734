"""Where things live: the Hydra config folder, the shared data folder, the cache folder. Env vars override."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def conf_dir() -> Path:
    """Hydra config folder: $PCR_RAY_CONF, else conf/ at the repository root."""
    return Path(os.environ.get("PCR_RAY_CONF", REPO_ROOT / "conf")).resolve()


def data_dir() -> Path:
    """Raw data sets: $PCR_RAY_DATA, else ../shared/data next to the repository."""
    return Path(os.environ.get("PCR_RAY_DATA") or REPO_ROOT.parent / "shared" / "data").resolve()


def cache_dir() -> Path:
    """Built artifacts (parquet problems, pairs, PRM checkpoints): $PCR_RAY_CACHE, else .cache/ in the repo
    (an empty variable counts as unset, not as the working directory)."""
    p = Path(os.environ.get("PCR_RAY_CACHE") or REPO_ROOT / ".cache").resolve()
    p.mkdir(parents=True, exist_ok=True)
    return p
