"""Where things live: the Hydra config folder, the data folder, the cache folder, the run folders.

Each has an environment variable that overrides it; an empty variable counts as unset.
- configs: $PCR_RAY_CONF, else `conf/` at the top of a checkout, which the wheel ships as `pcr_ray/conf/`.
- data sets: $PCR_RAY_DATA, else `$XDG_DATA_HOME/pcr_ray/data` (`~/.local/share/pcr_ray/data`); docs/data.md
  says what goes there.
- cache (problem parquets, pairs, PRM checkpoints, model folders): $PCR_RAY_CACHE, else
  `$XDG_CACHE_HOME/pcr_ray` (`~/.cache/pcr_ray`).
- run folders (evaluate's results, sweeps, reproduce): $PCR_RAY_RUNS, else `./outputs` (`./multirun` for sweeps).

Checkpoints and training storage may also be URIs (`s3://`, `gs://`, ...: anything pyarrow.fs reads):
`local_path` copies one into the cache once, `put_folder` writes a folder to one.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent


def _env_path(var: str) -> Path | None:
    v = os.environ.get(var)
    return Path(v).expanduser() if v else None


def conf_dir() -> Path:
    """Hydra config folder: $PCR_RAY_CONF, else the installed package's conf/, else the checkout's conf/ (a
    pcr_ray/conf/ folder without the configs, left over in a checkout, does not count)."""
    installed = PACKAGE_DIR / "conf"
    found = installed if (installed / "evaluate.yaml").is_file() else PACKAGE_DIR.parent / "conf"
    return (_env_path("PCR_RAY_CONF") or found).resolve()


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
    """Where a run without an explicit run_dir writes: $PCR_RAY_RUNS, else ./outputs in the working directory.

    A Ray job's working directory is a temporary copy that goes with the job: on a cluster set PCR_RAY_RUNS to
    shared storage (cluster/runtime_env.yaml does)."""
    return (_env_path("PCR_RAY_RUNS") or Path.cwd() / "outputs").resolve()


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on the file `path` (made with its folder if missing) for the block; other processes
    asking for it wait."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def build_once(folder: Path, is_complete: Callable[[Path], bool], make: Callable[[Path], object]) -> Path:
    """`folder`, made by `make(tmp)` in a temporary folder beside it and renamed into place, unless complete.

    A file lock beside it keeps concurrent first users (actors starting together) from building it twice; the
    folder appears whole or not at all.
    """
    if is_complete(folder):
        return folder
    with file_lock(folder.parent / f".{folder.name}.lock"):
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


def is_uri(location: str | os.PathLike[str]) -> bool:
    """Whether `location` is a URI (`s3://`, `gs://`, `hdfs://`, `file://`, ...) rather than a plain path."""
    return "://" in str(location)


def local_path(location: str | os.PathLike[str]) -> Path:
    """A local folder holding `location`: the path itself, or a URI's content copied once into
    cache_dir()/remote/<digest of the URI> (pyarrow.fs: s3://, gs://, hdfs://, file://, whatever it reads)."""
    text = str(location)
    if not is_uri(text):
        return Path(text).expanduser()

    def fetch(tmp: Path) -> None:
        import pyarrow.fs as pafs  # heavy: pyarrow

        src, root = pafs.FileSystem.from_uri(text)
        pafs.copy_files(root, str(tmp), source_filesystem=src, destination_filesystem=pafs.LocalFileSystem())

    folder = cache_dir() / "remote" / hashlib.sha256(text.encode()).hexdigest()[:20]
    return build_once(folder, lambda f: f.is_dir() and any(f.iterdir()), fetch)


def put_folder(src: Path, dest: str | os.PathLike[str]) -> str:
    """Copy the local folder `src` to `dest`, a local path or a URI (pyarrow.fs); returns `dest` as given."""
    text = str(dest)
    if not is_uri(text):
        target = local_path(text)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(src, target)
        return str(target)
    import pyarrow.fs as pafs  # heavy: pyarrow

    fs, root = pafs.FileSystem.from_uri(text)
    fs.create_dir(root, recursive=True)
    pafs.copy_files(str(src), root, source_filesystem=pafs.LocalFileSystem(), destination_filesystem=fs)
    return text
