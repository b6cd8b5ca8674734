"""Where things live: the Hydra config folder (inside the package), the data folder, the cache folder.

Each has an environment variable that overrides it; an empty variable counts as unset.
- configs: $PCR_RAY_CONF, else `pcr_ray/conf/` inside the installed package.
- data sets: $PCR_RAY_DATA, else `$XDG_DATA_HOME/pcr_ray/data` (`~/.local/share/pcr_ray/data`); docs/data.md
  says what goes there.
- cache (problem parquets, pairs, PRM checkpoints, model folders): $PCR_RAY_CACHE, else
  `$XDG_CACHE_HOME/pcr_ray` (`~/.cache/pcr_ray`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent


def _env_path(var: str) -> Path | None:
    v = os.environ.get(var)
    return Path(v).expanduser() if v else None


def conf_dir() -> Path:
    """Hydra config folder: $PCR_RAY_CONF, else the package's own conf/ (so an installed wheel has it)."""
    return (_env_path("PCR_RAY_CONF") or PACKAGE_DIR / "conf").resolve()


def data_dir() -> Path:
    """Raw data sets: $PCR_RAY_DATA, else $XDG_DATA_HOME/pcr_ray/data (~/.local/share/pcr_ray/data)."""
    base = _env_path("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return (_env_path("PCR_RAY_DATA") or base / "pcr_ray" / "data").resolve()


def cache_dir() -> Path:
    """Built artifacts (parquet problems, pairs, PRM checkpoints): $PCR_RAY_CACHE, else ~/.cache/pcr_ray."""
    base = _env_path("XDG_CACHE_HOME") or Path.home() / ".cache"
    p = (_env_path("PCR_RAY_CACHE") or base / "pcr_ray").resolve()
    p.mkdir(parents=True, exist_ok=True)
    return p


def runs_dir() -> Path:
    """Where a run without an explicit run_dir writes: ./outputs in the working directory."""
    return Path.cwd() / "outputs"


def build_once(folder: Path, is_complete: Callable[[Path], bool], make: Callable[[Path], object]) -> Path:
    """`folder`, made by `make(tmp)` in a temporary folder beside it and renamed into place, unless complete.

    A file lock beside it keeps concurrent first users (actors starting together) from building it twice; the
    folder appears whole or not at all.
    """
    import fcntl
    import shutil
    import tempfile

    if is_complete(folder):
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f".{folder.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if is_complete(folder):
            return folder
        tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.tmp-", dir=folder.parent))
        try:
            make(tmp)
            shutil.rmtree(folder, ignore_errors=True)
            os.replace(tmp, folder)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return folder
